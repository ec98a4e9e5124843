"""log_check takes the scheduler a run configured (RunStarted) for liveness; settings that do not make a
Scheduler are an error naming the offset, not a silent fallback to the default scheduler (issue 19)."""

from __future__ import annotations

from typing import Any

import pytest
from builders import Log, node_template, pod

from dralab.core.checks.log_check import LogCheckError, RunChecks, check_records
from dralab.core.log.events import Record, RunStarted
from dralab.core.state.cluster import ClusterState


def started(config: dict[str, Any]) -> list[tuple[int, Record]]:
    log = Log()
    log.append(RunStarted(scenario="s", seed=0, config=config), t=0)
    log.node("n1", template=node_template(gpu=8), t=0)
    log.pod(pod("p", gpu=1), t=0)
    return list(enumerate(log.records, start=1))


@pytest.mark.parametrize("settings", [{"no_such_setting": 1}, {"score": "no-such-strategy"}, "most-allocated"])
def test_invalid_scheduler_settings_are_an_error_naming_the_offset(settings: object) -> None:
    with pytest.raises(LogCheckError, match=r"offset 1: cannot check: RunStarted's scheduler settings") as info:
        check_records(started({"scheduler": settings}))
    assert info.value.offset == 1
    # the other invariants alone do not need the scheduler: no error
    assert check_records(started({"scheduler": settings}), only=["claim-allocated-once"]).records == 3


def test_the_run_checks_say_so_too() -> None:
    checks, state = RunChecks(liveness_bound_ms=600_000), ClusterState()
    (offset, record), *_ = started({"scheduler": {"no_such_setting": 1}})
    checks.before(offset, record, state)
    state.apply(offset, record)
    with pytest.raises(LogCheckError, match="scheduler settings are invalid"):
        checks.after(offset, record, state)


@pytest.mark.parametrize("config", [{}, {"scheduler": None}, {"scheduler": {"score": "least-allocated"}}])
def test_valid_or_absent_settings_are_checked(config: dict[str, Any]) -> None:
    result = check_records(started(config))
    assert result.records == 3 and result.ok

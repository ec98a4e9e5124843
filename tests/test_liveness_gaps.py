"""Liveness sampled on cluster time between records (issue 18, item 7).

A scheduler stopped for longer than the bound writes nothing; if no other reactor writes either, the
log has a gap, and a pod that fits throughout it and is bound by the record that ends it used to pass:
liveness was sampled only at records. The state that held through a gap is now sampled too.
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import Log, node_template, pod

from dralab.core.checks.log_check import RunChecks, check_records
from dralab.core.log.events import NodeReady, PodBound, Record
from dralab.core.state.cluster import ClusterState


def stalled_log(*, gap_s: int, records_before: int = 0) -> Log:
    """A Ready 8-GPU node and a 1-GPU pod at t=0 (it fits), `records_before` records a minute apart, then
    nothing for `gap_s` seconds, then the scheduler binds the pod (it restarted)."""
    log = Log()
    log.node("n1", template=node_template(gpu=8), t=0)
    waiting = log.pod(pod("stalled", gpu=1), t=0)
    t = 0
    for _ in range(records_before):
        t += 60_000
        log.append(NodeReady(name="n1"), t=t)
    log.append(PodBound(pod=waiting, node="n1"), t=t + gap_s * 1000, source="scheduler")
    return log


def numbered(log: Log) -> list[tuple[int, Record]]:
    return list(enumerate(log.records, start=1))


def test_a_pod_bound_only_after_a_gap_longer_than_the_bound_is_a_violation() -> None:
    # The live run: a stopped scheduler, pods waiting 711 s of cluster time against 600 s.
    records = numbered(stalled_log(gap_s=711))
    result = check_records(records, only=["liveness"])
    assert [(v.invariant, v.offset, v.t) for v in result.violations] == [("liveness", len(records) - 1, 600_000)]
    assert result.violations[0].message == (
        "pod pod/default/stalled could be scheduled since offset 2 (t=0s) and was still pending 600s later, "
        "at t=600s, in a gap with no record from t=0s to t=711s (bound 600s)")


def test_the_time_before_the_gap_counts() -> None:
    # records each minute to 5m, then 500 s of nothing: the pod is seen fitting from the sample at 3m (samples
    # are a quarter of the bound apart), and pending until 13m20s: overdue at 13m
    records = numbered(stalled_log(gap_s=500, records_before=5))
    result = check_records(records, only=["liveness"])
    assert [(v.offset, v.t) for v in result.violations] == [(len(records) - 1, 780_000)]
    assert "since offset 5 (t=180s)" in result.violations[0].message


@pytest.mark.parametrize("kwargs", [{"gap_s": 599}, {"gap_s": 240, "records_before": 5}])
def test_a_gap_within_the_bound_is_fine(kwargs: dict[str, Any]) -> None:
    assert check_records(numbered(stalled_log(**kwargs)), only=["liveness"]).ok


def test_a_pod_that_does_not_fit_in_the_gap_is_fine() -> None:
    log = Log()
    log.node("n1", template=node_template(gpu=8), t=0)
    waiting = log.pod(pod("big", gpu=16), t=0)  # never fits on an 8-GPU node
    log.append(PodBound(pod=waiting, node="n1"), t=900_000, source="scheduler")
    assert check_records(numbered(log), only=["liveness"]).ok


def test_the_run_checks_see_the_gap_too() -> None:
    # the simulator's and the live driver's incremental checks (RunChecks with a liveness bound)
    checks = RunChecks(liveness_bound_ms=600_000)
    state = ClusterState()
    for offset, record in numbered(stalled_log(gap_s=711)):
        checks.before(offset, record, state)
        state.apply(offset, record)
        checks.after(offset, record, state)
    checks.finish(state)
    assert [v.invariant for v in checks.violations] == ["liveness"]
    assert "in a gap with no record from t=0s to t=711s" in checks.violations[0].message

"""One home for each default (issue 19): the scenario's settings, the autoscaler reactor, its timeouts and
scale-down, and the scheduler's queue all take their defaults from core/kube/defaults.py."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from dralab.core.autoscaler.disruption.scale_down import ScaleDown
from dralab.core.autoscaler.provisioning.backoff import Timeouts
from dralab.core.autoscaler.reactor import Autoscaler
from dralab.core.kube import defaults as d
from dralab.core.scenario.model import AutoscalerSettings, ScaleDownSettings, SchedulerSettings
from dralab.core.scheduler import queue

CORE = Path(__file__).resolve().parent.parent / "core"


def _field_defaults(cls: type) -> dict[str, object]:
    return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}


# The scenario's settings, the reactor's dataclass whose fields share their names, and the defaults they take.
ONE_HOME = [
    (AutoscalerSettings(), Autoscaler, {"expander": d.EXPANDER, "scan_interval_ms": d.SCAN_INTERVAL_MS,
                                        "max_node_provision_time_ms": d.MAX_NODE_PROVISION_TIME_MS,
                                        "max_node_startup_time_ms": d.MAX_NODE_STARTUP_TIME_MS}),
    (ScaleDownSettings(), ScaleDown, {"utilization_threshold": d.SCALE_DOWN_UTILIZATION_THRESHOLD,
                                      "unneeded_time_ms": d.SCALE_DOWN_UNNEEDED_TIME_MS,
                                      "delay_after_add_ms": d.SCALE_DOWN_DELAY_AFTER_ADD_MS,
                                      "delete_delay_after_taint_ms": d.NODE_DELETE_DELAY_AFTER_TAINT_MS}),
]


@pytest.mark.parametrize(("settings", "reactor", "expected"), ONE_HOME, ids=["autoscaler", "scale-down"])
def test_autoscaler_defaults_have_one_home(settings: object, reactor: type, expected: dict[str, object]) -> None:
    defaults = _field_defaults(reactor)
    assert {name: (getattr(settings, name), defaults[name]) for name in expected} == {
        name: (value, value) for name, value in expected.items()}


def test_the_timeouts_have_the_autoscalers_defaults() -> None:
    assert _field_defaults(Timeouts) == {"max_node_provision_time_ms": d.MAX_NODE_PROVISION_TIME_MS,
                                         "max_node_startup_time_ms": d.MAX_NODE_STARTUP_TIME_MS}


def test_scheduler_defaults_have_one_home() -> None:
    assert SchedulerSettings().gang_timeout_ms == d.GANG_SCHEDULING_TIMEOUT_MS
    assert queue.backoff_ms(1) == d.POD_INITIAL_BACKOFF_MS and queue.backoff_ms(30) == d.POD_MAX_BACKOFF_MS


def test_upstream_values() -> None:
    """The values upstream documents (cluster-autoscaler flags.go, kube-scheduler's queue)."""
    minute = 60_000
    values = {name: getattr(d, name) for name in (
        "SCAN_INTERVAL_MS", "MAX_NODE_PROVISION_TIME_MS", "MAX_NODE_STARTUP_TIME_MS", "SCALE_DOWN_UNNEEDED_TIME_MS",
        "SCALE_DOWN_DELAY_AFTER_ADD_MS", "INITIAL_NODE_GROUP_BACKOFF_MS", "MAX_NODE_GROUP_BACKOFF_MS",
        "NODE_GROUP_BACKOFF_RESET_TIMEOUT_MS", "POD_INITIAL_BACKOFF_MS", "POD_MAX_BACKOFF_MS")}
    assert values == {
        "SCAN_INTERVAL_MS": 10_000, "MAX_NODE_PROVISION_TIME_MS": 15 * minute, "MAX_NODE_STARTUP_TIME_MS": 15 * minute,
        "SCALE_DOWN_UNNEEDED_TIME_MS": 10 * minute, "SCALE_DOWN_DELAY_AFTER_ADD_MS": 10 * minute,
        "INITIAL_NODE_GROUP_BACKOFF_MS": 5 * minute, "MAX_NODE_GROUP_BACKOFF_MS": 30 * minute,
        "NODE_GROUP_BACKOFF_RESET_TIMEOUT_MS": 180 * minute, "POD_INITIAL_BACKOFF_MS": 1_000,
        "POD_MAX_BACKOFF_MS": 10_000,
    }


def test_each_default_is_defined_once() -> None:
    """No module of core/ but defaults.py assigns a literal to a name defaults.py owns under its own name."""
    names = [n for n in vars(d) if n.isupper() and n != "MINUTE_MS"]
    pattern = re.compile(rf"^\s*({'|'.join(names)})\s*(:[^=]*)?=\s*[0-9]", re.MULTILINE)
    found = [f"{p.relative_to(CORE)}: {m.group(1)}" for p in CORE.rglob("*.py") if p.name != "defaults.py"
             for m in pattern.finditer(p.read_text())]
    assert found == []


def test_the_cli_spells_the_liveness_bound_that_core_defaults_to() -> None:
    """`dralab check --liveness-bound` keeps its spelled default (`10m`, in --help): it must be core's."""
    from dralab.cli import build_parser
    from dralab.core.checks.liveness import DEFAULT_BOUND_MS
    from dralab.core.kube.durations import parse_duration

    args = build_parser().parse_args(["check", "some.dralog"])
    assert parse_duration(args.liveness_bound) == DEFAULT_BOUND_MS

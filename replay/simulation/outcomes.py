"""Targets of `dralab shrink`: what must still happen in a run for a smaller run to count as failing.

A target is either an invariant (a name of `core.invariants.INVARIANTS`, seen by the simulator's
monitor after every record; or, when `core/checks/log_check.py` exists, one of its `ALL_INVARIANTS`, checked
over the finished log) or a named *outcome*, a function of the simulated log:

- ``double-scale-up``: a `ScaleUpRequested` event names (in its `pods`) a pod that an earlier
  `ScaleUpRequested` event of the log, in any group, already named: the autoscaler scaled up twice for
  the same pod (late-resourceslices' count policy does this when new nodes turn Ready before their
  drivers publish). It happens at the record holding the second request.
- ``scale-up-without-pod``: some scale-up none of whose nodes ever had a pod bound, as
  `core.metrics` attributes nodes to scale-ups (`RunMetrics.scale_ups_without_pod > 0`), judged at the
  end of the run (a node may still get a pod until then).
- ``pod-pending``: some pod is still Pending at the end of the run.

A target that can be seen as records are appended (`early`) lets the shrinker stop a trial as soon as
it happens, the big speed-up of shrinking: most trials of a long run end early. The others are judged
once the run is over (`final`), and then "where" is the end of the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dralab.core.analysis.metrics import metrics_from_entries
from dralab.core.checks.invariants import INVARIANTS
from dralab.core.log.events import Record, ScaleUpRequested, decode_record
from dralab.core.state.cluster import ClusterState


class Watch:
    """One trial's incremental view of a target: `step` after every appended record returns True once
    the target has happened; `final` judges the finished run (only called if `step` never said so) and
    may say where it happened (`where`: offset and t; else the end of the run)."""

    where: tuple[int, int] | None = None

    def step(self, offset: int, record: Record, state: ClusterState, violations: list[Any]) -> bool:
        return False

    def final(self, entries: list[tuple[int, bytes]], state: ClusterState, violations: list[Any],
              end_ms: int) -> bool:
        return False


@dataclass(frozen=True)
class Target:
    name: str
    kind: str  # "invariant" | "outcome"
    early: bool  # seen as records are appended (a trial may stop there)
    watch: Callable[[], Watch]
    help: str


class _DoubleScaleUp(Watch):
    def __init__(self) -> None:
        self.named: set[str] = set()

    def step(self, offset: int, record: Record, state: ClusterState, violations: list[Any]) -> bool:
        hit = False
        for event in record.events:
            if isinstance(event, ScaleUpRequested):
                hit = hit or any(pod in self.named for pod in event.pods)
                self.named.update(event.pods)
        return hit


class _ScaleUpWithoutPod(Watch):
    def final(self, entries: list[tuple[int, bytes]], state: ClusterState, violations: list[Any],
              end_ms: int) -> bool:
        if not state.scale_ups:
            return False
        return bool(metrics_from_entries(entries, end_ms=end_ms).scale_ups_without_pod > 0)


class _PodPending(Watch):
    def final(self, entries: list[tuple[int, bytes]], state: ClusterState, violations: list[Any],
              end_ms: int) -> bool:
        return bool(state.pods_by_phase["Pending"])


class _MonitorInvariant(Watch):
    """An invariant of core/checks/invariants.py: the simulator's monitor reports it as soon as it breaks."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seen = 0

    def step(self, offset: int, record: Record, state: ClusterState, violations: list[Any]) -> bool:
        if len(violations) == self.seen:
            return False
        new, self.seen = violations[self.seen:], len(violations)
        return any(v.invariant == self.name for v in new)


class _LogCheckInvariant(Watch):
    """An invariant of core/checks/log_check.py (if present): checked over the finished log, where = its first
    violation."""

    def __init__(self, name: str) -> None:
        self.name = name

    def final(self, entries: list[tuple[int, bytes]], state: ClusterState, violations: list[Any],
              end_ms: int) -> bool:
        module = _log_check()
        if module is None:
            return False
        records = [(offset, decode_record(payload, offset)) for offset, payload in entries]
        found = [v for v in module.check_records(records, only=[self.name]).violations if v.invariant == self.name]
        if found:
            self.where = (int(found[0].offset), int(getattr(found[0], "t", end_ms)))
        return bool(found)


OUTCOMES: dict[str, Target] = {
    "double-scale-up": Target("double-scale-up", "outcome", True, _DoubleScaleUp,
                              "a ScaleUpRequested names a pod an earlier ScaleUpRequested already named"),
    "scale-up-without-pod": Target("scale-up-without-pod", "outcome", False, _ScaleUpWithoutPod,
                                   "at the end, a scale-up none of whose nodes ever had a pod (core.metrics)"),
    "pod-pending": Target("pod-pending", "outcome", False, _PodPending, "at the end, some pod is still Pending"),
}


def _log_check() -> Any:
    """core/checks/log_check.py, if this checkout has it (its invariants are accepted as targets too)."""
    try:
        from dralab.core.checks import log_check  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return None
    return log_check


def target_names() -> list[str]:
    names = list(INVARIANTS) + list(OUTCOMES)
    module = _log_check()
    extra = list(getattr(module, "ALL_INVARIANTS", ())) if module is not None else []
    return names + [n for n in extra if n not in names]


def resolve_target(name: str) -> Target:
    """The target called `name`; KeyError (with the valid names) for an unknown one."""
    if name in OUTCOMES:
        return OUTCOMES[name]
    if name in INVARIANTS:
        return Target(name, "invariant", True, lambda: _MonitorInvariant(name),
                      (INVARIANTS[name].__doc__ or "").strip().split("\n")[0])
    if name in target_names():
        return Target(name, "invariant", False, lambda: _LogCheckInvariant(name),
                      "an invariant of core/checks/log_check.py")
    raise KeyError(name)

"""The metrics of one run (:class:`RunMetrics`) as the summary and `dralab report` show them: the numbers
the fold (:mod:`.metrics_fold`) produces, their contract keys and rounding. The definitions are in
:mod:`.metrics`' docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SERIES_POINTS = 500  # the allocation-ratio series is sampled down to this many points
NO_GROUP = ""  # gpu_hours_paid_by_group key of nodes outside any group
def sample(series: list[tuple[float, float | None]], points: int = SERIES_POINTS) -> list[list[float | None]]:
    """At most `points` of the series, uniformly spaced by index, first and last kept."""
    n = len(series)
    if n <= points:
        return [list(p) for p in series]
    picks = sorted({round(i * (n - 1) / (points - 1)) for i in range(points)})
    return [list(series[i]) for i in picks]


@dataclass
class RunMetrics:
    """The metrics of one run (hours and seconds of cluster time). See the module docstring."""

    end_s: float = 0.0
    time_to_schedule_s: dict[str, float | None] = field(default_factory=lambda: {"p50": None, "p99": None})
    pending_pod_seconds_by_reason: dict[str, float] = field(default_factory=dict)
    node_hours_paid: float = 0.0
    gpu_hours_paid: float = 0.0
    gpu_hours_paid_by_group: dict[str, float] = field(default_factory=dict)
    gpu_hours_used: float = 0.0
    gpu_hours_idle: float = 0.0
    gpu_hours_held: float = 0.0  # part of idle: held by gang members waiting at Permit
    gpu_hours_used_share: float = 0.0  # used GPU-hours with partitions counted by the share they consume
    gpu_fragmentation_mean: float | None = None  # share of free GPUs no pending pod could use, while pods wait
    gpu_fragmentation_s: float = 0.0  # the time that mean is over
    gpu_hours_unready: float = 0.0
    gpu_allocation_ratio_mean: float | None = None
    gpu_allocation_ratio_series: list[list[float | None]] = field(default_factory=list)  # [t_s, ratio]
    scale_ups: int = 0
    scale_ups_without_pod: int = 0
    nodes_never_used: int = 0
    nodes_added: dict[str, int] = field(default_factory=dict)
    # free GPUs of Ready nodes while a rejected PodGroup waits (1.36+): the wrong-shape cost gpu_hours_idle does
    # not count (each of the group's pods could use those GPUs alone; the group cannot)
    gpu_hours_free_while_groups_wait: float = 0.0
    # free GPUs of Ready nodes no pending pod could use where they are, judged by the scheduler's filters and
    # allocator per node (core/analysis/stranded.py), by the nearest pending pod's cause; and those some could
    gpu_hours_stranded: float = 0.0
    gpu_hours_stranded_by_cause: dict[str, float] = field(default_factory=dict)
    gpu_hours_wanted: float = 0.0

    def contract(self) -> dict[str, Any]:
        """The top-level summary keys (a contract: these names, numbers rounded to 3 decimals; issue 22 added the
        stranded ones)."""
        return {
            "gpu_hours_paid": round(self.gpu_hours_paid, 3),
            "gpu_hours_idle": round(self.gpu_hours_idle, 3),
            "scale_ups_without_pod": self.scale_ups_without_pod,
            "pending_pod_seconds_by_reason": {k: round(v, 3) for k, v in sorted(
                self.pending_pod_seconds_by_reason.items())},
            "gpu_hours_stranded": round(self.gpu_hours_stranded, 3),
            "gpu_hours_stranded_by_cause": {k: round(v, 3) for k, v in sorted(
                self.gpu_hours_stranded_by_cause.items())},
        }

    def details(self) -> dict[str, Any]:
        """The rest, for the summary's `metrics` object."""
        ratio = self.gpu_allocation_ratio_mean
        return {
            "end_s": round(self.end_s, 3),
            "node_hours_paid": round(self.node_hours_paid, 3),
            "gpu_hours_paid_by_group": {k: round(v, 3) for k, v in sorted(self.gpu_hours_paid_by_group.items())},
            "gpu_hours_used": round(self.gpu_hours_used, 3),
            "gpu_hours_unready": round(self.gpu_hours_unready, 3),
            "gpu_hours_held_at_permit": round(self.gpu_hours_held, 3),
            "gpu_hours_used_by_share": round(self.gpu_hours_used_share, 3),
            "gpu_fragmentation": {
                "mean": None if self.gpu_fragmentation_mean is None else round(self.gpu_fragmentation_mean, 4),
                "over_s": round(self.gpu_fragmentation_s, 3)},
            "gpu_allocation_ratio": {"mean": None if ratio is None else round(ratio, 4),
                                     "series": self.gpu_allocation_ratio_series},
            "scale_ups": self.scale_ups,
            "nodes_never_used": self.nodes_never_used,
            "gpu_hours_wanted": round(self.gpu_hours_wanted, 3),
            **({"gpu_hours_free_while_groups_wait": round(self.gpu_hours_free_while_groups_wait, 3)}
               if self.gpu_hours_free_while_groups_wait else {}),
        }



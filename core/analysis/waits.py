"""How long pods waited to be scheduled, and why the pending ones still wait: one definition for the
end-of-run summary (summary.py) and the metrics over a log (metrics.py), apart from both so that neither
imports the other."""

from __future__ import annotations

import math

from ..state.cluster import ClusterState, PodState


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (no interpolation: the value a pod really saw)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def pending_cause(state: ClusterState, pod: PodState) -> str:
    """dralab's pending reason of a pod: `gang` while it waits at Permit for the rest of its gang
    (its PodScheduled condition is left as it was, as upstream leaves it), `binding-conditions` while it waits in
    PreBind for its devices' binding conditions, else its condition's cause, else
    `other-scheduler` for a pod another scheduler is to place, else `not-yet-tried`."""
    if pod.key in state.gang.reservations:
        return "gang"
    if pod.key in state.dra.binding:
        return "binding-conditions"  # waiting in PreBind (core/scheduler/plugins/dra_binding.py)
    if pod.condition and pod.condition.cause:
        return pod.condition.cause
    if pod.manifest.get("spec", {}).get("schedulerName", "default-scheduler") != "default-scheduler":
        return "other-scheduler"  # spec.schedulerName names a scheduler dralab does not run: nobody will try it
    return "not-yet-tried"


def schedule_waits(state: ClusterState) -> list[float]:
    """Seconds from arrival to binding of every pod ever bound (one definition for summary and metrics)."""
    return [(p.bound_t - p.created_t) / 1000 for p in state.pods.values() if p.bound_t >= 0]


def time_to_schedule(waits: list[float]) -> dict[str, float | None]:
    return {"p50": percentile(waits, 50), "p99": percentile(waits, 99)}

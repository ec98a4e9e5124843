"""The fold of graceful pod deletion (`PodTerminating`): a preemption victim, or a pod the device taint eviction
controller deletes, keeps its node until its grace period is over.

Upstream, deleting a pod with a grace period sets `metadata.deletionTimestamp` (the time by which it must be
gone: now + grace), `metadata.deletionGracePeriodSeconds`, and, for the scheduler's preemption victims, the
`DisruptionTarget` condition (reason PreemptionByScheduler, pkg/scheduler/framework/preemption/executor.go);
the kubelet stops the pod and only then does it leave the node, its resources and its claims (the
resourceclaim controller deallocates a claim once its pods are gone). Here the manifest is replaced (never
changed in place: it may be the log event's) with those fields, and the end of the grace period is put on the
run-deadline heap the lifecycle reactor reads (`ClusterIndexes.finishing`), which ends the pod then
(controllers/lifecycle.py: PodEvicted, Failed). Nothing else changes: the pod still runs and holds its node.

Apart from cluster.py, which is at its size limit: cluster.py's dispatch table names `on_pod_terminating`.
"""

from __future__ import annotations

import heapq
from typing import Any, Protocol

from ..log.events import PodDeleted as PodDeleted  # re-exported: cluster.py names it with its handler
from ..log.events import PodFinished
from ..log.events import PodTerminating as PodTerminating  # re-exported: cluster.py names it with its handler
from .objects import FAILED, PENDING, RUNNING, PodState

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
DEFAULT_GRACE_SECONDS = 30  # core/v1 terminationGracePeriodSeconds' default


class _Fold(Protocol):
    """What of the cluster state this fold touches (cluster.py imports this module: no import back)."""

    pods: dict[str, PodState]
    anomalies: list[str]
    run_deadlines: list[tuple[int, int, str]]
    runs: int

    def _touch(self, node: str, pod: str = "") -> None: ...


def grace_ms(manifest: dict[str, Any]) -> int:
    """The pod's own `spec.terminationGracePeriodSeconds` (default 30 s) in ms: the scheduler deletes a victim
    with it (DeleteOptions from the victim pod)."""
    seconds = (manifest.get("spec") or {}).get("terminationGracePeriodSeconds")
    return int(seconds if isinstance(seconds, int) and seconds >= 0 else DEFAULT_GRACE_SECONDS) * 1000


def terminating(manifest: dict[str, Any]) -> bool:
    """The pod is being deleted (a deletionTimestamp, from a PodTerminating or from a dump)."""
    return bool((manifest.get("metadata") or {}).get("deletionTimestamp"))


def timestamp(ms: int) -> str:
    """Cluster time (ms since the run's start, read as the Unix epoch) as an RFC 3339 time, as the API server
    writes one (no datetime in core: the civil date from the day count, proleptic Gregorian)."""
    days, rest = divmod(ms // 1000, 86400)
    z = days + 719468
    era, doe = divmod(z, 146097)
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day, month = doy - (153 * mp + 2) // 5 + 1, mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    return f"{year:04d}-{month:02d}-{day:02d}T{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}Z"


def on_pod_terminating(state: _Fold, offset: int, t: int, event: PodTerminating) -> None:
    """Mark the pod deleted with its grace period (the handler of `PodTerminating` in cluster.py's table). A pod
    already terminating keeps its first deadline (a second deletion does not extend it, as upstream)."""
    pod = state.pods.get(event.pod)
    if pod is None or pod.phase != RUNNING or pod.node is None:
        state.anomalies.append(f"offset {offset}: {event.pod} terminating but was not running")
        return
    if terminating(pod.manifest):
        return
    meta = dict(pod.manifest.get("metadata") or {})
    meta["deletionTimestamp"] = timestamp(t + event.grace_ms)
    meta["deletionGracePeriodSeconds"] = event.grace_ms // 1000
    status = dict(pod.manifest.get("status") or {})
    conditions = [c for c in status.get("conditions") or [] if not (isinstance(c, dict)
                                                                     and c.get("type") == DISRUPTION_TARGET)]
    reason = event.condition or PREEMPTION_BY_SCHEDULER
    conditions.append({"type": DISRUPTION_TARGET, "status": "True", "reason": reason, "message": event.reason})
    status["conditions"] = conditions
    pod.manifest = {**pod.manifest, "metadata": meta, "status": status}
    state.runs += 1
    heapq.heappush(state.run_deadlines, (t + event.grace_ms, state.runs, pod.key))
    state._touch(pod.node, pod.key)


class _DeleteFold(Protocol):
    """What of the cluster state a deletion at once touches."""

    pods: dict[str, PodState]
    anomalies: list[str]
    pods_by_phase: dict[str, dict[str, None]]

    def _pod_finished(self, offset: int, t: int, event: PodFinished) -> None: ...


def on_pod_deleted(state: _DeleteFold, offset: int, t: int, event: PodDeleted) -> None:
    """A pod deleted at once (`PodDeleted`, Kueue stopping a Workload): a running pod ends Failed as an evicted one
    does (its node, resources and run deadline freed); a pending one leaves the pending set and ends Failed."""
    pod = state.pods.get(event.pod)
    if pod is None or pod.phase not in (PENDING, RUNNING):
        state.anomalies.append(f"offset {offset}: {event.pod} deleted but was not pending or running")
        return
    if pod.phase == RUNNING:
        state._pod_finished(offset, t, PodFinished(pod=event.pod, phase=FAILED))
        return
    del state.pods_by_phase[PENDING][pod.key]
    state.pods_by_phase[FAILED][pod.key] = None
    pod.phase, pod.finished_t = FAILED, t

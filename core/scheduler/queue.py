"""The scheduling queue's timing, as kube-scheduler's (pkg/scheduler/backend/queue/scheduling_queue.go).

A pod that failed an attempt waits in the unschedulable pool until an event that can make it
schedulable happens (room appearing anywhere; for a gang member, another member arriving), or until it
has waited `podMaxInUnschedulablePodsDuration` (5 min; flushUnschedulablePodsLeftover). Moved out of the
pool, it is tried again once its backoff has passed: 1 s after its first failed attempt, doubling with
each attempt up to 10 s (podInitialBackoffSeconds, podMaxBackoffSeconds; calculateBackoffDuration),
counted from its last attempt.

dralab writes the PodScheduled condition on every failed attempt (its offset records the view the
attempt saw, its time when it was made), which is what lets these rules be a function of the log.
PreEnqueue rejections (`NotReadyForScheduling`) are not attempts: they have no backoff.
"""

from __future__ import annotations

from ..kube.defaults import POD_INITIAL_BACKOFF_MS, POD_MAX_BACKOFF_MS, POD_MAX_IN_UNSCHEDULABLE_PODS_MS
from ..state.cluster import ClusterState, PodState

NOT_READY = "NotReadyForScheduling"  # v1.PodReasonNotReadyForScheduling (KEP-5501)
PARKED = ("Unschedulable", NOT_READY)  # conditions of pods in the unschedulable pool
# podInitialBackoffSeconds, podMaxBackoffSeconds, DefaultPodMaxInUnschedulablePodsDuration (core/kube/defaults.py)
INITIAL_BACKOFF_MS = POD_INITIAL_BACKOFF_MS
MAX_BACKOFF_MS = POD_MAX_BACKOFF_MS
MAX_IN_UNSCHEDULABLE_MS = POD_MAX_IN_UNSCHEDULABLE_PODS_MS


def backoff_ms(attempts: int) -> int:
    """calculateBackoffDuration: 1 s, 2 s, 4 s, 8 s, then 10 s."""
    duration = INITIAL_BACKOFF_MS
    for _ in range(1, attempts):
        duration *= 2
        if duration > MAX_BACKOFF_MS:
            return MAX_BACKOFF_MS
    return duration


def retry_offset(view: ClusterState, pod: PodState) -> int:
    """The last offset at which something happened that can make this parked pod schedulable: room
    appearing anywhere, or (for a gang member) another member of its gang arriving (upstream's
    GangScheduling queueing hint on Pod/Add)."""
    group = view.gang.group_of.get(pod.key)
    if group is not None:  # a PodGroup member (1.36+): its group's arrival or a new member is news too
        return max(view.room_offset, view.gang.group_offset.get(group, 0))
    ref = view.gang.refs.get(pod.key)
    if ref is None:
        return view.room_offset
    return max(view.room_offset, view.gang.member_offset.get(ref.key, 0))


def due(view: ClusterState, pod: PodState, now: int) -> tuple[bool, int | None]:
    """Whether the pod is tried in a decision at `now`; if not, when it may be (None: on an event)."""
    cond = pod.condition
    if cond is None or cond.reason not in PARKED:
        return True, None
    flush_at = cond.t + MAX_IN_UNSCHEDULABLE_MS
    moved = cond.offset < retry_offset(view, pod) or now >= flush_at
    if not moved:
        return False, flush_at
    ready_at = cond.t + backoff_ms(pod.attempts) if cond.reason == "Unschedulable" and pod.attempts else cond.t
    return (True, None) if now >= ready_at else (False, ready_at)


def group_due(view: ClusterState, members: list[PodState], now: int) -> int | None:
    """A PodGroup's queue entry (QueuedPodGroupInfo): None when the group is tried now (any of its pods is due:
    a new pod, or a retry after its backoff); else when it may be (-1: on an event)."""
    wake = -1
    for pod in members:
        ready, later = due(view, pod, now)
        if ready:
            return None
        if later is not None and (wake < 0 or later < wake):
            wake = later
    return wake


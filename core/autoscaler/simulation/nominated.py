"""cluster-autoscaler and the pods preemption nominated (core/static_autoscaler.go RunOnce, utils/pod
FilterOutExpendableAndSplit, --expendable-pods-priority-cutoff default -10).

Each loop CA splits the unschedulable pods: an expendable pod (priority below the cutoff) is dropped (it never
triggers a scale-up, and scale-down neither protects nor moves it); a pod with `status.nominatedNodeName` and a
priority at or above the cutoff is "waiting for lower priority pods preemption": not provisioned for, but
force-added to its nominated node in the snapshot (ClusterSnapshot.ForceAddPod), so that its room is not offered
to others. Known limitation with DRA (autoscaler#7683, open): the force-added pod's claims are not allocated in
the snapshot, so the devices it will take look free; dralab reproduces it (no allocations are placed with it).

Only in release profiles (the reactor's `kubernetes`): legacy logs replay as they were made.
"""

from __future__ import annotations

from ...state.cluster import ClusterState, PodState
from ...state.gangs import Reservation

EXPENDABLE_PODS_PRIORITY_CUTOFF = -10


def expendable(pod: PodState) -> bool:
    return pod.priority < EXPENDABLE_PODS_PRIORITY_CUTOFF


def waiting_for_preemption(view: ClusterState, known: dict[str, Reservation]) -> dict[str, Reservation]:
    """The pending single pods nominated to a node (not gang members already reserved), as reservations without
    allocations (autoscaler#7683), for the snapshot and to keep them out of the scale-up."""
    out: dict[str, Reservation] = {}
    for key, node in view.gang.nominated.items():
        pod = view.pods.get(key)
        if key in known or pod is None or pod.node is not None or expendable(pod):
            continue
        out[key] = Reservation(key, node, "", {}, -1, pod.requests)
    return out

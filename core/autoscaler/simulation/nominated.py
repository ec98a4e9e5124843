"""cluster-autoscaler and the pods preemption nominated (core/static_autoscaler.go RunOnce, utils/pod
FilterOutExpendableAndSplit, --expendable-pods-priority-cutoff default -10).

Each loop CA splits the unschedulable pods: an expendable pod (priority below the cutoff) is dropped (it never
triggers a scale-up, and scale-down neither protects nor moves it); a pod with `status.nominatedNodeName` and a
priority at or above the cutoff is "waiting for lower priority pods preemption": not provisioned for, but
force-added to its nominated node in the snapshot (ClusterSnapshot.ForceAddPod), so that its room is not offered
to others. Known limitation with DRA (autoscaler#7683, open; core/kube/bugs.py, on in every release): the
force-added pod's claims are not allocated in the snapshot, so the devices it will take look free; dralab reproduces
it (no allocations are placed with it). With the switch off (`spec.kubernetes.bugs: {autoscaler#7683: false}`), the
first step the issue proposes: the pod's claims are allocated on its nominated node in the snapshot when they fit
there (`with_claims`; DRA devices are not preemptible in 1.34-1.37, so a nominated pod's devices are free there).

Only in release profiles (the reactor's `kubernetes`): legacy logs replay as they were made.
"""

from __future__ import annotations

from typing import Any

from ...state.cluster import ClusterState, PodState
from ...state.gangs import Reservation
from .capacity import SimNode, Simulation

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


def with_claims(sim: Simulation, pod: PodState, node: SimNode, reservation: Reservation) -> dict[str, dict[str, Any]]:
    """The allocations to force-add a nominated pod with: a gang member's own (made at Permit), else, for a pod
    waiting for preemption, its unallocated claims allocated on the node when they fit (autoscaler#7683 fixed)."""
    if reservation.allocations or reservation.gang:
        return reservation.allocations
    claims = sim.claims(pod)
    if not claims.to_allocate or claims.missing or claims.waiting:
        return {}
    return sim.allocate(claims.to_allocate, node) or {}

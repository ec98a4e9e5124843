"""One cluster snapshot per loop, shared by scale-up and scale-down (release profiles).

cluster-autoscaler's RunOnce (core/static_autoscaler.go) builds one ClusterSnapshot; FilterOutSchedulable
(processors/pods/filter_out_schedulable.go) adds to it the pending pods that fit existing nodes, and scale-down's
planner (scaleDownPlanner.UpdateClusterState) then computes unneeded nodes on that same snapshot: a node that took
a pending pod in this loop is needed. dralab's reactor made a fresh snapshot for scale-down, without those pods, so
a pending pod that fit an empty node was left to it while the same loop marked the node for deletion, and the
next loop bought a new node for the pod (issue 22). `absorb_placing` is FilterOutSchedulable on the ready nodes
(simulation/nodes.py `absorb`) that also says which nodes took pods, for scale-down to leave them.
"""

from __future__ import annotations

from ...state.cluster import ClusterState, PodState
from ...state.gangs import Reservation
from .capacity import FitMemo, SimNode, Simulation
from .nodes import absorb


def absorb_placing(sim: Simulation, nodes: list[SimNode], pods: list[PodState], memo: FitMemo | None,
                   placed: set[str]) -> list[PodState]:
    """`absorb`: place each pod on the first node that takes it; the pods no node takes. The names of the nodes
    that took one are added to `placed`."""
    return absorb(sim, nodes, pods, memo, placed)


def unschedulable_only(view: ClusterState, nominated: dict[str, Reservation]) -> dict[str, Reservation]:
    """autoscaler#9607 (core/kube/bugs.py): before PR #9607 the pods with status.nominatedNodeName reached the snapshot
    only through the FilterOutExpendable pod-list processor, whose input is the pods marked PodScheduled=False/
    Unschedulable (podlistprocessor/filter_out_expendable.go addPreemptingPodsToSnapshot). A pod nominated for its
    binding cycle (a gang member at Permit, a pod in PreBind) is there only if an earlier attempt failed."""
    return {k: r for k, r in nominated.items()
            if (pod := view.pods.get(k)) is not None and pod.condition is not None
            and pod.condition.reason == "Unschedulable"}

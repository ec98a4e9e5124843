"""The simulated cluster's nodes: the ready ones (with nominated pods force-placed), the upcoming ones as
template nodes, and FilterOutSchedulable (`absorb`: pods that existing or upcoming capacity takes).

As cluster-autoscaler builds its ClusterSnapshot before each loop (static_autoscaler.go: ready nodes, then
upcoming nodes from getUpcomingNodeInfos) and runs processors/pods/filter_out_schedulable.go on it; the
reactor (reactor.py) absorbs pods here first and scales up only for what is left. Which nodes count as
ready depends on the policy (`node_ready_for`: DRA policies wait for the drivers' slices).
"""

from __future__ import annotations

from ...state.cluster import ClusterState, NodeState, PodState
from ...state.gangs import Reservation
from .capacity import FirstFit, FitMemo, SimNode, Simulation, devices_unready
from .nominated import with_claims


def node_ready_for(view: ClusterState, policy: str, node: NodeState, release: bool = False) -> bool:
    """Whether the policy counts the node as ready (DRA policies wait for its drivers' slices; `release`: as
    upstream's DRA processor compares them, readiness.py)."""
    return node.ready and (policy == "count" or not devices_unready(view, node, release))


def sim_ready_nodes(view: ClusterState, sim: Simulation, nominated: dict[str, Reservation],
                    nominated_claims: bool = False, plain_ready: bool = False) -> list[SimNode]:
    """The snapshot's ready nodes, with the pods bound there and those nominated to them (CA
    force-places nominated pods into its snapshot). `nominated_claims`: a pod waiting for preemption takes its claims'
    devices there too, where they fit (autoscaler#7683 fixed, nominated.py); else it is placed without them.
    `plain_ready`: a Ready node is ready whether or not its drivers have published (autoscaler#7780, before the DRA
    custom resources processor: core/kube/bugs.py)."""
    if sim.policy == "count":  # sim.ready and sim.existing, inlined: a loop over every node, every loop
        if not nominated:
            return [SimNode(node, node.used, False) for node in view.nodes.values() if node.ready]
        nodes = {name: SimNode(node, node.used, False) for name, node in view.nodes.items() if node.ready}
    else:
        nodes = {name: sim.existing(node, node.used) for name, node in view.nodes.items()
                 if (node.ready if plain_ready else sim.ready(node))}
    for reservation in nominated.values():
        node = nodes.get(reservation.node)
        if node is not None:
            pod = view.pods[reservation.pod]
            allocations = with_claims(sim, pod, node, reservation) if nominated_claims else reservation.allocations
            sim.place(pod, node, allocations)
    return list(nodes.values())


def sim_upcoming_nodes(view: ClusterState, sim: Simulation, given_up: set[str], blocked: set[str],
                       plain_ready: bool = False) -> list[SimNode]:
    """Upcoming nodes (not ready yet, or not created yet), each as a template node of its group; not
    those of a group in backoff, nor nodes given up on. `plain_ready`: as sim_ready_nodes'."""
    upcoming: list[SimNode] = []
    live = set(view.node_groups) - blocked
    plain_ready = plain_ready or sim.policy == "count"
    for node in view.nodes.values():
        if node.ready if plain_ready else sim.ready(node):  # (sim.ready inlined for `count`: most nodes)
            continue
        group = view.node_groups.get(node.group)
        if (node.group in live and group is not None
                and node.name not in group.timed_out and node.name not in given_up):
            upcoming.append(sim.template(group, f"upcoming-{node.name}"))
    for name in sorted(live):
        group = view.node_groups[name]
        coming = [n for n, vm in view.provisioning_nodes.items()
                  if vm.group == name and n not in group.timed_out and n not in given_up]
        count = len(coming) + group.unserved_nodes()
        upcoming.extend(sim.template(group, f"upcoming-{name}-{i}") for i in range(count))
    return upcoming


def absorb(sim: Simulation, nodes: list[SimNode], pods: list[PodState],
           memo: FitMemo | None = None, placed: set[str] | None = None) -> list[PodState]:
    """Place each pod on the first node that takes it (FilterOutSchedulable on ready nodes, then the
    upcoming ones); the pods no node takes. `memo`: the autoscaler's, synced to the view. `placed`: the names of
    the nodes that took a pod are added to it (one snapshot per loop: loop_snapshot.py)."""
    remaining = []
    first_fit = FirstFit(sim, nodes, memo)
    for pod in pods:
        spot = first_fit.find(pod)
        if spot is None:
            remaining.append(pod)
        else:
            sim.place(pod, spot[0], spot[1])
            if placed is not None:
                placed.add(spot[0].node.name)
    return remaining


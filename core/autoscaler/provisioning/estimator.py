"""The binpacking estimator: how many new nodes of a group the pending pods need, as cluster-autoscaler's
estimator/binpacking_estimator.go (first-fit onto template nodes, within the group's room).

It runs in the autoscaler's simulation (simulation/capacity.py decides what a template node holds, per
policy); with the atomic policy a gang is placed whole or not at all. The waste it returns is the
least-waste expander's score (expanders.py).
"""

from __future__ import annotations

from ...state.cluster import NodeGroupState, PodState
from ..simulation.capacity import FirstFit, Savepoint, SimNode, Simulation


def binpack(pods: list[PodState], group: NodeGroupState, limit: int, sim: Simulation,
            gangs: dict[str, list[PodState]] | None = None,
            needs: dict[str, int] | None = None) -> tuple[int, list[str], float]:
    """First-fit onto new template nodes, at most `limit` of them (CA's binpacking estimator).

    With `gangs` (the atomic policy: gang key -> its pods among `pods`), a gang's pods are placed together
    or not at all: all of them, or with `needs` (gang key -> how many must fit: a PodGroup's minCount less
    what existing room already takes, scale_up.py) at least that many, the others left out. Returns the
    node count, the pods placed, and the waste: mean unused fraction of each resource the pods ask for,
    over the new nodes (the least-waste expander's score)."""
    nodes: list[SimNode] = []
    first_fit = FirstFit(sim, nodes)
    placed: list[str] = []
    done: set[str] = set()
    gang_of = {p.key: g for g, members in (gangs or {}).items() for p in members}
    for pod in pods:
        if pod.key in done:
            continue
        gang = gang_of.get(pod.key)
        unit = gangs[gang] if gangs and gang is not None else [pod]
        need = len(unit) if gang is None or needs is None else needs.get(gang, len(unit))
        done.update(p.key for p in unit)
        saved = (Savepoint(sim, nodes), len(nodes)) if gang is not None else None
        fitted: list[str] = []
        for i, member in enumerate(unit):
            spot = first_fit.find(member)
            if spot is None and len(nodes) < limit:
                fresh = sim.template(group, f"template-{group.name}-{len(nodes)}")
                allocations = sim.fits(member, fresh)
                if allocations is not None:
                    nodes.append(fresh)
                    spot = (fresh, allocations)
            if spot is None:
                if len(fitted) + len(unit) - i - 1 < need:
                    break  # the unit can no longer reach its count
                continue  # a member left out of a unit that still reaches its count
            sim.place(member, spot[0], spot[1])
            fitted.append(member.key)
        if len(fitted) >= need:
            placed.extend(fitted)
            continue
        if saved is None:
            continue  # a single pod that fits nowhere: nothing was placed
        savepoint, count = saved  # roll the gang back: no partial scale-up
        savepoint.restore()
        del nodes[count:]
        first_fit.reset()
    resources = sorted({r for p in pods if p.key in placed for r in p.requests if group.allocatable.get(r)})
    if not nodes or not resources:
        return len(nodes), placed, 1.0
    waste = sum(
        1 - sum(n.used.get(r, 0) for n in nodes) / (group.allocatable[r] * len(nodes)) for r in resources
    ) / len(resources)
    return len(nodes), placed, waste

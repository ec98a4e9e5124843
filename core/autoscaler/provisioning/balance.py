"""`--balance-similar-node-groups`: a scale-up split across node groups of the same kind, as cluster-autoscaler's
ScaleUpOrchestrator.balanceScaleUps does (sigs.k8s.io/cluster-autoscaler pkg/core/scaleup/orchestrator,
pkg/processors/nodegroupset: compare_nodegroups.go, balancing_processor.go).

Similar groups (ComputeSimilarNodeGroups, IsCloudProviderNodeInfoSimilar): the other groups, not skipped (backoff,
max size), whose template node has the same capacity (memory within --memory-difference-ratio, 1.5 %, allocatable
within --max-allocatable-difference-ratio, 5 %, of the smaller) and the same labels except the ignored ones
(hostname, zone and region, kops' instance group), and which can take the same pods (matchingSchedulablePodGroups:
here, their own option takes the same pods). dralab's template nodes have no capacity apart from allocatable and
no pods (free = allocatable), so one comparison of allocatable stands for upstream's three; ResourceSlice templates
are not compared (upstream compares the Node objects only).

The split (BalanceScaleUpBetweenGroups): the groups sorted by current size, one node at a time to the smallest
that has room, capped by their total room.
"""

from __future__ import annotations

from ...kube.defaults import MAX_ALLOCATABLE_DIFFERENCE_RATIO, MAX_CAPACITY_MEMORY_DIFFERENCE_RATIO
from ...state.cluster import NodeGroupState, PodState
from ..simulation.capacity import FirstFit, Savepoint, SimNode, Simulation, template_node
from .expanders import Option

# compare_nodegroups.go BasicIgnoredLabels
IGNORED_LABELS = frozenset({
    "kubernetes.io/hostname", "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "beta.kubernetes.io/fluentd-ds-ready",
    "kops.k8s.io/instancegroup",
})


def _within(a: int, b: int, ratio: float) -> bool:
    """resourceListWithinTolerance: the larger is at most `ratio` above the smaller."""
    low, high = min(a, b), max(a, b)
    return high - low <= low * ratio


def similar(a: NodeGroupState, b: NodeGroupState) -> bool:
    """IsCloudProviderNodeInfoSimilar on the two groups' template nodes."""
    if set(a.allocatable) != set(b.allocatable):
        return False
    for resource, qa in a.allocatable.items():
        qb = b.allocatable[resource]
        ratio = MAX_CAPACITY_MEMORY_DIFFERENCE_RATIO if resource == "memory" else MAX_ALLOCATABLE_DIFFERENCE_RATIO
        if resource != "memory" and qa != qb:  # capacity: an exact match except memory
            return False
        if not _within(qa, qb, ratio):
            return False
    la = {k: v for k, v in template_node(a).labels.items() if k not in IGNORED_LABELS}
    lb = {k: v for k, v in template_node(b).labels.items() if k not in IGNORED_LABELS}
    return la == lb


def similar_groups(best: Option, options: list[Option]) -> list[NodeGroupState]:
    """The groups a scale-up of `best` is balanced with: those of the other options taking the same pods, whose
    templates are similar (options exist only for groups that were not skipped)."""
    pods = set(best.pods)
    return [o.group for o in options if o.group.name != best.group.name and not o.atomic
            and set(o.pods) == pods and similar(best.group, o.group)]


def balance(groups: list[NodeGroupState], new_nodes: int) -> dict[str, int]:
    """BalanceScaleUpBetweenGroups: group name -> nodes to add (groups that get none left out), in the order of
    `groups` once sorted by current size (a stable sort, as Go's sort.Slice on equal sizes is not: dralab keeps
    the expander's group first)."""
    sizes = {g.name: g.target_size for g in groups if g.target_size < g.max}
    room = sum(g.max - g.target_size for g in groups if g.name in sizes)
    new_nodes = min(new_nodes, room)
    order = sorted((g for g in groups if g.name in sizes), key=lambda g: g.target_size)
    added = dict.fromkeys(sizes, 0)
    while new_nodes > 0:
        open_groups = [g for g in order if sizes[g.name] < g.max]
        smallest = min(sizes[g.name] for g in open_groups)
        for g in open_groups:
            if new_nodes == 0:
                break
            if sizes[g.name] == smallest:
                sizes[g.name] += 1
                added[g.name] += 1
                new_nodes -= 1
    return {name: n for name, n in added.items() if n}


def joint_estimate(pods: list[PodState], groups: list[NodeGroupState], sim: Simulation, limit: int) -> dict[str, int]:
    """autoscaler#9150 switched off (core/kube/bugs.py; upstream has no fix yet): the binpacking estimator run over
    the similar groups at once, a new node going to the group with the fewest nodes (current and new) that can
    take the pod, so that a zone-spread workload gets its nodes in every zone in one loop, as the issue's reporter
    expected. With the bug (every release) the estimate is the expander's group alone, which a spread constraint
    stops at one node, and balancing splits that one node. Group name -> new nodes (groups with none left out)."""
    savepoint = Savepoint(sim, ())
    nodes: list[SimNode] = []
    first_fit = FirstFit(sim, nodes)
    added = {g.name: 0 for g in groups}
    for pod in pods:
        spot = first_fit.find(pod)
        if spot is None:
            for g in sorted(groups, key=lambda g: g.target_size + added[g.name]):  # stable: the expander's first
                if added[g.name] >= min(g.max - g.target_size, limit):
                    continue
                fresh = sim.template(g, f"template-{g.name}-{added[g.name]}")
                allocations = sim.fits(pod, fresh)
                if allocations is not None:
                    nodes.append(fresh)
                    added[g.name] += 1
                    spot = (fresh, allocations)
                    break
        if spot is not None:
            sim.place(pod, spot[0], spot[1])
    savepoint.restore()
    return {name: n for name, n in added.items() if n}

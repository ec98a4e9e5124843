"""Scale-up options: what each node group would add for the pending pods, as cluster-autoscaler's
core/scaleup/orchestrator (ScaleUp computes an expansion option per node group, skipping groups in
backoff or at their max, and asks the expander to pick one).

The reactor (reactor.py) calls these on the pods left after FilterOutSchedulable (simulation/nodes.py);
ProvisioningRequests' best-effort-atomic scale-ups (provreq_broker.py) take an option only if it holds
all their pods. With the atomic policy, pods of a 1.35 Workload gang are binpacked together
(`pending_gangs`), and a 1.36+ PodGroup is placed as one unit (`podgroup_units`, `place_units`): a gang
short of its minCount, and a group with a topology constraint, kept inside one topology domain.

The PodGroup units are what no cluster-autoscaler does upstream: CA 1.37 simulates pods one by one, its
scheduler framework runs no group cycle, and it reads neither minCount nor topology constraints
(kubernetes/autoscaler#8783, closed stale; #9570, open; KEP-4671 and KEP-5732 leave autoscaler integration
to later work, with "autoscalers understand topology constraints" among KEP-5732's beta criteria). The
`count` and `dra` policies keep that blindness; `atomic` is what a group-aware autoscaler would do.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ...kube.defaults import MAX_NODES_PER_SCALE_UP
from ...state.cluster import RUNNING, ClusterState, NodeGroupState, PodState
from ..simulation.capacity import FitMemo, Savepoint, SimNode, Simulation, template_node
from ..simulation.nodes import absorb
from .estimator import binpack
from .expanders import Option, expand


def atomic_option(view: ClusterState, sim: Simulation, pods: list[PodState], rng: random.Random, blocked: set[str],
                  expander: str, priorities: dict[str, int], regexes: tuple[tuple[int, tuple[str, ...]], ...] = (),
                  limit: int = MAX_NODES_PER_SCALE_UP) -> tuple[str, int] | None:
    """One node group that takes all `pods` on new nodes within its room (best-effort-atomic), as the
    expander picks among such groups."""
    options = [o for o in scale_up_options(view, sim, pods, blocked, limit=limit) if len(o.pods) == len(pods)]
    if not options:
        return None
    best = expand(expander, priorities, options, rng, regexes)
    return best.group.name, best.count


def scale_up_options(view: ClusterState, sim: Simulation, pods: list[PodState], blocked: set[str],
                     gangs: dict[str, list[PodState]] | None = None, *,
                     limit: int = MAX_NODES_PER_SCALE_UP,
                     template_of: Callable[[NodeGroupState], NodeGroupState] | None = None) -> list[Option]:
    """Each node group's scale-up for `pods` (binpacked within the group's room, at most `limit` new nodes:
    --max-nodes-per-scaleup, the estimator's threshold limiter), where it helps; `blocked` groups (in backoff) are
    skipped. `template_of`: the group as its template node is built (template_source.py), if not itself."""
    options = []
    for name in sorted(view.node_groups):
        group = view.node_groups[name]
        room = group.max - group.target_size
        if room <= 0 or name in blocked:
            continue
        shape = group if template_of is None else template_of(group)
        count, placed, waste = binpack(pods, shape, min(room, limit), sim, gangs)
        if count:
            options.append(Option(group, count, tuple(placed), waste))
    return options


def pending_gangs(view: ClusterState, pods: list[PodState]) -> dict[str, list[PodState]]:
    """The gangs among `pods` (gang key -> its pods here; gangs with a minimum count only): the atomic
    policy binpacks each gang whole."""
    out: dict[str, list[PodState]] = {}
    for pod in pods:
        ref = view.gang.refs.get(pod.key)
        if ref is not None and view.gang.min_count(ref) is not None:
            out.setdefault(ref.key, []).append(pod)
    return out


@dataclass(frozen=True)
class GroupUnit:
    """A PodGroup the atomic policy places as one unit (`podgroup_units`)."""

    key: str  # "ns/name"
    pods: tuple[PodState, ...]  # its pods pending Unschedulable, in the loop's order
    need: int  # how many of them must fit at once
    atomic: bool  # a gang short of its minCount: its new nodes all or none
    topology: str | None  # the node label key all its pods must share a value of (gate on), else None
    held: frozenset[str]  # the values of that label where its running pods are (the domain is theirs)


def podgroup_units(view: ClusterState, pods: list[PodState], topology: bool) -> dict[str, GroupUnit]:
    """The PodGroups among `pods` that the atomic policy places as units (group key -> unit).

    A gang short of its minCount needs minCount less its running pods at once (upstream's feasibility check
    counts the group's scheduled pods, KEP-4671); a group with a topology constraint (`topology`: the
    TopologyAwareWorkloadScheduling gate is on) needs one pod at least, in one domain (a basic group, or a
    gang at its minCount, binds what fits, KEP-5732). Any other group's pods go pod by pod, as any pod."""
    members: dict[str, list[PodState]] = {}
    for pod in pods:
        key = view.gang.group_of.get(pod.key)
        if key is not None and key in view.gang.podgroups:
            members.setdefault(key, []).append(pod)
    running = view.pods_by_phase[RUNNING]
    out: dict[str, GroupUnit] = {}
    for key, mine in members.items():
        group = view.gang.podgroups[key]
        label = group.topology_key if topology else None
        nodes = [view.nodes.get(view.pods[k].node or "") for k in view.gang.group_members.get(key, ()) if k in running]
        need = (group.min_count or 0) - len(nodes)
        if need <= 0 and label is None:
            continue
        held = frozenset(str(n.labels.get(label)) for n in nodes if n is not None) if label else frozenset()
        out[key] = GroupUnit(key, tuple(mine), max(need, 1), need > 0, label, held)
    return out


# per value of a label: the ready nodes, the upcoming nodes, the growing groups
_Index = tuple[dict[str, list[SimNode]], dict[str, list[SimNode]], dict[str, list[NodeGroupState]]]


class Domains:
    """One loop's snapshot nodes (ready, upcoming) and the node groups that can grow, by the value of a node
    label (a topology domain), indexed once per label key: every PodGroup of the loop walks the same."""

    def __init__(self, view: ClusterState, ready: list[SimNode], upcoming: list[SimNode], blocked: set[str]) -> None:
        self.ready, self.upcoming = ready, upcoming
        self.growing = [g for name, g in sorted(view.node_groups.items())
                        if name not in blocked and g.max > g.target_size]
        self._by: dict[str, _Index] = {}

    def values(self, label: str) -> list[str]:
        """The label's values on the snapshot's nodes and on the growing groups' templates, sorted."""
        ready, upcoming, groups = self._index(label)
        return sorted(set(ready) | set(upcoming) | set(groups))

    def nodes(self, label: str | None, value: str | None) -> tuple[list[SimNode], list[SimNode]]:
        """The ready and the upcoming nodes of one domain (all of them without a label)."""
        if label is None or value is None:
            return self.ready, self.upcoming
        ready, upcoming, _ = self._index(label)
        return ready.get(value, []), upcoming.get(value, [])

    def groups(self, label: str | None, value: str | None) -> list[NodeGroupState]:
        """The growing groups whose new nodes join the domain (their template carries its value)."""
        if label is None or value is None:
            return self.growing
        return self._index(label)[2].get(value, [])

    def _index(self, label: str) -> _Index:
        hit = self._by.get(label)
        if hit is None:
            ready: dict[str, list[SimNode]] = {}
            upcoming: dict[str, list[SimNode]] = {}
            groups: dict[str, list[NodeGroupState]] = {}
            for nodes, into in ((self.ready, ready), (self.upcoming, upcoming)):
                for n in nodes:
                    value = n.node.labels.get(label)
                    if value is not None:
                        into.setdefault(str(value), []).append(n)
            for g in self.growing:
                value = template_node(g).labels.get(label)
                if value is not None:
                    groups.setdefault(str(value), []).append(g)
            hit = self._by[label] = (ready, upcoming, groups)
        return hit


def place_units(view: ClusterState, sim: Simulation, ready: list[SimNode], upcoming: list[SimNode],
                pods: list[PodState], units: dict[str, GroupUnit], blocked: set[str],
                memo: FitMemo | None) -> tuple[list[PodState], list[Option]]:
    """FilterOutSchedulable with PodGroups as units: `pods` in their order, the pods of no unit absorbed as
    `absorb` does (ready nodes, then upcoming ones), each unit where its first pod comes (`plan_unit`).
    Returns the pods of no unit that are left (for the regular scale-up) and the units' scale-up options."""
    unit_of = {p.key: unit for unit in units.values() for p in unit.pods}
    domains = Domains(view, ready, upcoming, blocked)
    left: list[PodState] = []
    options: list[Option] = []
    run: list[PodState] = []  # pods of no unit since the last unit, absorbed together
    for pod in pods:
        unit = unit_of.get(pod.key)
        if unit is None:
            run.append(pod)
        elif pod.key == unit.pods[0].key:
            left += absorb(sim, upcoming, absorb(sim, ready, run, memo), memo)
            run = []
            options += plan_unit(sim, domains, unit)
    return left + absorb(sim, upcoming, absorb(sim, ready, run, memo), memo), options


def plan_unit(sim: Simulation, domains: Domains, unit: GroupUnit) -> list[Option]:
    """One PodGroup: where the snapshot's nodes (ready, then upcoming) already hold `unit.need` of its pods in
    one domain, those placements are kept and no scale-up is needed (the domain that holds the most); else
    one option per domain and per node group whose template carries that domain's label value (any group
    without a topology constraint): the nodes that, with the domain's existing room, hold at least
    `unit.need` pods. None (nothing added for the group) when no domain can.

    A domain's new nodes come from one node group, as each scale-up of cluster-autoscaler's orchestrator
    goes to one group (an atomic request, AtomicIncreaseSize, is per group). The domains are the label's
    values on ready and upcoming nodes and on the templates of groups that can grow (the scheduler sees a
    domain once a node of it is Ready), or only the one of the group's running pods."""
    label = unit.topology
    values: list[str | None]
    if label is None:
        values = [None]
    elif unit.held:
        values = [*sorted(unit.held)] if len(unit.held) == 1 else []  # running pods in two domains: none fits
    else:
        values = [*domains.values(label)]
    pods = list(unit.pods)
    if len(pods) < unit.need:
        return []  # minCount out of reach with the pods there are
    kept: tuple[int, str | None] | None = None  # (pods held, domain) of the best domain with room enough
    options: list[Option] = []
    for value in values:
        ready, upcoming = domains.nodes(label, value)
        savepoint = Savepoint(sim, ready + upcoming)
        rest = absorb(sim, upcoming, absorb(sim, ready, pods))
        held = len(pods) - len(rest)
        if held >= unit.need:
            if kept is None or held > kept[0]:
                kept = (held, value)
        elif kept is None:
            outside = {p.key for p in rest}
            existing = tuple(p.key for p in pods if p.key not in outside)
            for group in domains.groups(label, value):
                scratch = Savepoint(sim, ())
                count, placed, waste = binpack(rest, group, group.max - group.target_size, sim, {unit.key: rest},
                                               {unit.key: unit.need - held})
                scratch.restore()
                if count:
                    options.append(Option(group, count, existing + tuple(placed), waste, unit.atomic))
        savepoint.restore()
    if kept is not None:  # no scale-up: the pods take their room in the snapshot, as absorbed pods do
        ready, upcoming = domains.nodes(label, kept[1])
        absorb(sim, upcoming, absorb(sim, ready, pods))
        return []
    return options

"""The autoscaler's simulated cluster: would this pod fit on that node (real or template), per policy.

Cluster-autoscaler forks a snapshot of the cluster (ClusterSnapshot) and runs the scheduler's filters on
it, both to drop pods that fit existing nodes (FilterOutSchedulable) and to binpack pods onto template
nodes of each node group (the binpacking estimator). What the snapshot knows about devices is what the
policies differ in:

- `count`: devices are integer counts, as extended resources are. A pod's DRA claims become a number of
  devices (the sum of its requests' counts), a node's devices are how many its ResourceSlices list (for
  a template node, the group's slice templates), whatever their attributes: topology constraints,
  selectors and partitions are invisible. A node that is Ready counts as ready even if its drivers have
  not published their slices yet. This is the failure mode dralab exists to show.
- `dra`: the pod's claims go through the very allocator the scheduler uses, on the node's published
  slices, or on the template node's slices rendered as its drivers would publish them (CA's
  TemplateNodeInfo with sanitized ResourceSlices). A Ready node whose drivers have not published every
  slice of its group is not ready (upstream's FilterOutNodesWithUnreadyResources, DRA part): it is
  counted as an upcoming template node instead.
- `atomic`: `dra`, and a gang or a PodGroup is scaled up for whole (provisioning/scale_up.py).

Pure: a scratch copy of usage and device allocations per simulation, nothing written back.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from ...dra.allocated import AllocatedState
from ...dra.allocator import AllocationError, Allocator
from ...dra.cel import SelectorError
from ...dra.convert import convert_slice
from ...dra.model import Claim, Slice
from ...dra.pools import SliceIndex
from ...scenario.dra import render_slice_templates, slice_names
from ...scheduler.filters import ShapeMemo
from ...scheduler.plugins.dynamic_resources import DraPlugin, PodClaims, dra_node
from ...scheduler.plugins.fragmentation import claim_demand
from ...scheduler.plugins.node_resources_fit import lacking
from ...scheduler.plugins.pod_topology_spread import HOSTNAME
from ...scheduler.reactor import FILTERS, fits_resources, node_ready
from ...state.cluster import ClusterState, NodeGroupState, NodeState, PodState
from .readiness import dra_resources_ready
from .shared_claims import SimClaims
from .sim_pods import SimPlacement
from .virtual_claims import materialize, node_pod

TEMPLATE_FILTERS = tuple(f for f in FILTERS if f is not node_ready)
STATIC_TEMPLATE_FILTERS = tuple(f for f in TEMPLATE_FILTERS if f is not fits_resources)
POLICIES = ("count", "dra", "atomic")
ANTI_MEMO = "\x00anti-affinity"  # the static memo's entry for sim_pods.py (no static shape is spelled so)
StaticMemo = dict[str, dict[str, tuple[dict[str, Any], bool]]]


def template_node(group: NodeGroupState, name: str | None = None) -> NodeState:
    """What a new node of the group will look like (CA's TemplateNodeInfo; FreshNodeInfoFromTemplateNodeInfo
    names it and sets its hostname label to that name: hostname spreading and anti-affinity see one node)."""
    name = name or f"template-{group.name}"
    meta = group.template.get("metadata") or {}
    labels = {**(meta.get("labels") or {}), HOSTNAME: name}
    manifest = {**group.template, "metadata": {**meta, "name": name, "labels": labels}}
    return NodeState(name=name, group=group.name, manifest=manifest, allocatable=group.allocatable, created_t=0,
                     ready_at=0, ready=True)


def devices_unpublished(view: ClusterState, node: NodeState) -> bool:
    """A node whose group's drivers have not published all of its ResourceSlices yet."""
    group = view.node_groups.get(node.group)
    if group is None or not group.resource_slices:
        return False
    return any(name not in view.dra.slices for name in slice_names(group.resource_slices, node.name))


def devices_unready(view: ClusterState, node: NodeState, release: bool = False) -> bool:
    """Release profiles: upstream's DRA readiness check (readiness.py); legacy: `devices_unpublished`."""
    return not dra_resources_ready(view, node) if release else devices_unpublished(view, node)


_NODE, _NAME, _MANIFEST = attrgetter("node"), attrgetter("name"), attrgetter("manifest")  # (FitMemo.sync)
_NO_CLAIMS = PodClaims().shape()  # the claims shape of a pod with no claims (most pods): made once
_NO_PODS: list[PodState] = []  # shared until a pod is placed (copy on write)
_NO_SLICES: list[Slice] = []  # shared by the existing nodes (only template nodes have slices of their own)


class SimNode:
    """A node of the simulation: its usage so far, and for a template node, its own rendered slices.
    A slotted class, not a dataclass: a loop makes one for every ready node."""

    __slots__ = ("devices_used", "index", "node", "own", "pods", "slices", "used")

    def __init__(self, node: NodeState, used: dict[str, int], own: bool = True) -> None:
        self.node = node
        self.used = used
        self.own = own  # False: `used` is the node's own dict, copied on the first placement (copy on write)
        self.slices: list[Slice] = _NO_SLICES  # template nodes only
        self.index: SliceIndex | None = None  # template nodes only
        self.devices_used = 0  # count policy: devices taken by pods placed in the simulation
        self.pods: list[PodState] = _NO_PODS  # placed here in the simulation (spread, affinity: sim_pods.py)


class Simulation:
    """One autoscaler loop's forked snapshot."""

    def __init__(self, view: ClusterState, policy: str, dra: DraPlugin, templates: dict[tuple[str, str], list[Slice]],
                 statics: StaticMemo | None = None, *, virtual_claims: bool = True,
                 shapes: ShapeMemo | None = None, release: bool = False,
                 daemon_set_pods: dict[str, list[dict[str, Any]]] | None = None):
        self.view = view
        self.virtual_claims = virtual_claims  # claims of virtual pods made in memory (virtual_claims.py)
        self.policy = policy
        self.dra = dra
        self._templates = templates  # (group, node name) -> converted slices, a cache kept by the autoscaler
        self.allocated: AllocatedState = view.dra.allocated.copy()
        self._claims: dict[str, PodClaims] = {}
        self._static: dict[str, dict[str, bool]] = {}  # static shape -> sim node name -> static filters pass
        # Across loops (the autoscaler's, optional): static shape -> node name -> (manifest, pass). A node's
        # answer depends on its name and manifest only (the fold replaces a manifest, never changes it).
        self._statics: StaticMemo = {} if statics is None else statics
        if len(self._statics) > 1024:
            self._statics.clear()
        # pod key -> its shape's entries of _static and _statics, and its requests in NodeResourcesFit's order
        self._pod_fit: dict[str, tuple[dict[str, bool], dict[str, tuple[dict[str, Any], bool]],
                                       list[tuple[str, int]]]] = {}
        self._shapes: dict[str, tuple[object, ...]] = {}  # pod key -> shape(pod)
        self._static_shape = ShapeMemo() if shapes is None else shapes  # static_shape, kept across loops or not
        # PodTopologySpread, InterPodAffinity (sim_pods.py); its anti-affinity memo kept with the static memo
        self.placement = SimPlacement(view, self.ready, self._statics.setdefault(ANTI_MEMO, {}), release)
        self.release = release
        # release profiles: a claim allocated here is allocated for every pod sharing it (shared_claims.py)
        self.shared = SimClaims() if release else None
        self._daemon_set_pods = daemon_set_pods or {}  # group -> pods every new node runs (template_pods.py)

    # ------------------------------------------------------------------ nodes

    def existing(self, node: NodeState, used: dict[str, int]) -> SimNode:
        """A ready node as it is; its usage is copied only if the simulation places a pod there (most
        nodes of a loop's snapshot never get one)."""
        sim = SimNode(node, used, own=False)
        self.placement.register(sim)
        return sim

    def template(self, group: NodeGroupState, name: str) -> SimNode:
        node = template_node(group, name)
        sim = SimNode(node, {})
        if group.resource_slices:
            key = (group.name, name)
            slices = self._templates.get(key)
            if slices is None:
                slices = [convert_slice(m, "") for m in render_slice_templates(list(group.resource_slices), name)]
                self._templates[key] = slices
            sim.slices, sim.index = slices, SliceIndex.build(slices)
        self.placement.register(sim)
        for manifest in self._daemon_set_pods.get(group.name, ()):
            pod = node_pod(manifest, name)
            if not self.static_ok(pod, sim):
                continue  # a DaemonSet pod that would not run there (selector, taints): not on the template
            claims = materialize(self.view, pod, self.dra.prefilter(self.view, pod, {}))
            self._claims[pod.key] = self.shared.resolve(pod.key, claims) if self.shared is not None else claims
            self.place(pod, sim, self.fits(pod, sim) or {})  # there from the start, devices or not
        return sim

    def ready(self, node: NodeState) -> bool:
        """Whether the autoscaler treats the node as ready (else it is an upcoming node)."""
        if not node.ready:
            return False
        return self.policy == "count" or not devices_unready(self.view, node, self.release)

    # ------------------------------------------------------------------ pods

    def claims(self, pod: PodState) -> PodClaims:
        hit = self._claims.get(pod.key)
        if hit is None:
            hit = (self.dra.prefilter(self.view, pod, {}) if pod.manifest.get("spec", {}).get("resourceClaims")
                   else PodClaims())
            if hit.waiting and self.virtual_claims and pod.key not in self.view.pods:  # a virtual pod
                hit = materialize(self.view, pod, hit)
            if self.shared is not None:
                hit = self.shared.resolve(pod.key, hit)
            self._claims[pod.key] = hit
        return hit

    def forget_claims(self) -> None:
        """Drop every pod's cached claims and shape (the simulation's shared claims changed)."""
        self._claims.clear()
        self._shapes.clear()

    def set_claims(self, pod: PodState, claims: PodClaims) -> None:
        """What the pod's claims are in this snapshot from now on (a drain deallocates a moving pod's
        own claims, to allocate them again where it goes)."""
        self._claims[pod.key] = claims
        self._shapes.pop(pod.key, None)

    def shape(self, pod: PodState) -> tuple[object, ...]:
        """What `fits` depends on, names aside: pods of one shape fit the same nodes."""
        hit = self._shapes.get(pod.key)
        if hit is None:
            claims = self.claims(pod)
            hit = self._shapes[pod.key] = (self._static_shape(pod), tuple(sorted(pod.requests.items())),
                                           claims.shape() if claims.any else _NO_CLAIMS, claims.missing,
                                           claims.waiting)
        return hit

    def _fit_of(self, pod: PodState) -> tuple[dict[str, bool], dict[str, tuple[dict[str, Any], bool]],
                                             list[tuple[str, int]]]:
        fit = self._pod_fit.get(pod.key)
        if fit is None:
            shape = self._static_shape(pod)
            fit = self._pod_fit[pod.key] = (self._static.setdefault(shape, {}), self._statics.setdefault(shape, {}),
                                            sorted(pod.requests.items()))
        return fit

    def eligible(self, pod: PodState, nodes: list[SimNode]) -> list[SimNode]:
        """The nodes passing the pod's static filters, in order: `static_ok` for each, its memo lookups
        inlined (a loop makes such a list per pod shape over every ready node)."""
        static, kept, _ = self._fit_of(pod)
        out = []
        for sim in nodes:
            node = sim.node
            ok = static.get(node.name)
            if ok is None:
                hit = kept.get(node.name)
                if hit is not None and hit[0] is node.manifest:
                    ok = static[node.name] = hit[1]
                else:
                    ok = self.static_ok(pod, sim)
            if ok:
                out.append(sim)
        return out

    def plain(self, pod: PodState) -> tuple[tuple[str, int], ...] | None:
        """The pod's requests in NodeResourcesFit's order if `fits` asks nothing more of a node that passes
        its static filters (no claims to allocate, none missing or waiting: `fits` answers {} or None
        on the resources alone), else None."""
        claims = self.claims(pod)
        if claims.missing or claims.waiting or claims.to_allocate or (self.shared is not None and claims.allocated):
            return None
        return tuple(self._fit_of(pod)[2])

    def static_ok(self, pod: PodState, sim: SimNode) -> bool:
        """Whether the node passes the pod's static filters (selector, taints): memoised per shape, per
        loop and across loops."""
        static, kept, _ = self._fit_of(pod)
        node = sim.node
        ok = static.get(node.name)
        if ok is None:
            hit = kept.get(node.name)
            if hit is not None and hit[0] is node.manifest:
                ok = hit[1]
            else:
                ok = all(f(pod, node, sim.used) is None for f in STATIC_TEMPLATE_FILTERS)
                kept[node.name] = (node.manifest, ok)
            static[node.name] = ok
        return ok

    def fits(self, pod: PodState, sim: SimNode) -> dict[str, dict[str, Any]] | None:
        """The pod's device allocations on this node if it fits there ({} without claims), else None."""
        static, _, checks = self._fit_of(pod)
        node, used = sim.node, sim.used
        ok = static.get(node.name)
        if ok is None:
            ok = self.static_ok(pod, sim)
        if not ok:
            return None
        if not resources_fit(checks, used, node.allocatable) or self.placement.rejects(pod, node):
            return None
        claims = self.claims(pod)
        if claims.missing or claims.waiting:
            return None
        if self.shared is not None and not self.shared.reachable(claims, node):  # claims allocated here, elsewhere
            return None
        if not claims.to_allocate:
            return {}
        if self.policy == "count":
            demand = sum(claim_demand(c) for c in claims.to_allocate)
            return {} if demand <= self._device_count(sim) - sim.devices_used - self._in_use(sim) else None
        return self.allocate(claims.to_allocate, sim)

    def allocate(self, claims: list[Claim], sim: SimNode) -> dict[str, dict[str, Any]] | None:
        """The claims' allocations on the node in this snapshot (the scheduler's allocator), or None."""
        allocator = Allocator(sim.slices, self.view.dra.classes, self.allocated, self.dra.matcher,
                              features=self.dra.features,
                              # the slices as published: CA ignores DeviceTaintRules (kubernetes/autoscaler#7947)
                              index=sim.index if sim.index is not None else self.view.dra.slice_index())
        try:
            outcome = allocator.allocate(dra_node(sim.node), claims, explain=False)
        except (AllocationError, SelectorError):
            return None
        return dict(outcome.allocations) if outcome.outcome == "allocated" else None

    def place(self, pod: PodState, sim: SimNode, allocations: dict[str, dict[str, Any]]) -> None:
        if not sim.own:
            sim.used, sim.own = dict(sim.used), True
        for resource, amount in pod.requests.items():
            sim.used[resource] = sim.used.get(resource, 0) + amount
        sim.used["pods"] = sim.used.get("pods", 0) + 1
        sim.pods = [*sim.pods, pod]
        self.placement.placed(pod, sim)
        if self.policy == "count":
            sim.devices_used += sum(claim_demand(c) for c in self.claims(pod).to_allocate)
        for allocation in allocations.values():
            self.allocated.add_allocation(allocation)
        if self.shared is not None and allocations:
            for stale in self.shared.record(pod.key, allocations):  # pods sharing a claim just allocated
                self._claims.pop(stale, None)
                self._shapes.pop(stale, None)

    # ------------------------------------------------------------------ count policy

    def _device_count(self, sim: SimNode) -> int:
        if sim.index is not None:
            return sum(len(s.devices) for s in sim.slices)
        return sum(len(slc.devices) for _, slc in self.view.dra.slice_index().by_node.get(sim.node.name, ()))

    def _in_use(self, sim: SimNode) -> int:
        if sim.index is not None:
            return 0
        return sum(1 for _, slc in self.view.dra.slice_index().by_node.get(sim.node.name, ())
                   for d in slc.devices if d.id in self.allocated.devices)


class Savepoint:
    """Some nodes' usage and the snapshot's device allocations as they are now, to take placements back: a
    gang the estimator could not place whole, a PodGroup's trial in one topology domain (the atomic policy,
    provisioning/scale_up.py). `restore` may be called more than once."""

    __slots__ = ("_allocated", "_nodes", "_shared", "_sim")

    def __init__(self, sim: Simulation, nodes: Sequence[SimNode]) -> None:
        self._sim = sim
        # a node still sharing the view's own usage dict (not `own`) is kept as that very dict: the fit memo
        # recognises it (FirstFit: `sim_node.used is node.used`)
        self._nodes = [(n, dict(n.used) if n.own else n.used, n.own, n.devices_used, n.pods) for n in nodes]
        self._allocated = sim.allocated.copy()
        self._shared = sim.shared.copy() if sim.shared is not None else None

    def restore(self) -> None:
        for node, used, own, devices, pods in self._nodes:
            node.used, node.own, node.devices_used, node.pods = (dict(used) if own else used), own, devices, pods
        self._sim.placement.changed()
        self._sim.allocated = self._allocated.copy()
        shared = self._sim.shared
        if shared is not None and self._shared is not None and shared.allocations != self._shared:
            shared.allocations = dict(self._shared)  # claims the rolled-back pods allocated: unallocated again
            self._sim.forget_claims()


def resources_fit(checks: Sequence[tuple[str, int]], used: dict[str, int], alloc: dict[str, int]) -> bool:
    """NodeResourcesFit (scheduler/plugins/node_resources_fit.py) without its reason: a pod slot, then each
    request in `checks` (the pod's requests sorted, the filter's order)."""
    return not lacking(checks, used, alloc)


class FitMemo:
    """Whether pods asking for given requests fit each node at the view's usage (NodeResourcesFit
    only), and which of the loop's ready nodes pass each static shape's filters, kept by the autoscaler
    across its loops.

    Why: every loop (10 s) first-fits the same unschedulable pods over the same ready nodes, most of
    which no pod was bound to or left since the last loop; a pod that fits nowhere walks every node of
    its shape each time. The fold's journal (`ClusterState.usage_changes`) names the nodes whose usage
    changed (or that were created or deleted) since the last loop: only their answers are dropped. A
    node's answer depends on its allocatable (fixed for a node; a node made again is in the journal)
    and its usage, nothing else. Answers are only read and written for a simulated node whose usage is
    the view's own dict (nothing placed on it in the loop). Another view (another journal) drops all:
    a cache only, it never changes an answer.

    The static filters' answer on a node depends on its name and manifest only (`Simulation.static_ok`),
    so while the loop's ready nodes are the same names with the same manifests (the fold replaces a
    manifest, never changes it) as in the last loop, each static shape's list of passing nodes is the
    same too: kept as positions in that list (`eligible`).
    """

    def __init__(self) -> None:
        self._journal: list[str] | None = None
        self._pos = 0
        self._fit: dict[tuple[tuple[str, int], ...], dict[str, bool]] = {}
        self.nodes: list[SimNode] | None = None  # this loop's ready nodes (see `sync`)
        self._sig: tuple[list[str], list[dict[str, Any]]] = ([], [])
        self._eligible: dict[str, list[int]] = {}  # static shape -> positions in `nodes` that pass

    def sync(self, view: ClusterState, nodes: list[SimNode]) -> None:
        """Drop what the records applied since the last loop may have changed; `nodes`: the loop's ready
        nodes, the list whose static answers are kept."""
        states = list(map(_NODE, nodes))
        sig = (list(map(_NAME, states)), list(map(_MANIFEST, states)))
        if sig != self._sig:
            self._sig = sig
            self._eligible.clear()
        self.nodes = nodes
        journal = view.usage_changes
        if journal is not self._journal or len(journal) < self._pos or len(self._fit) > 256:
            self._fit.clear()
            self._journal = journal
        elif len(journal) > self._pos:
            changed = set(journal[self._pos:])
            for answers in self._fit.values():
                for name in changed:
                    answers.pop(name, None)
        self._pos = len(journal)

    def eligible(self, sim: Simulation, pod: PodState, shape: str, nodes: list[SimNode]) -> list[SimNode]:
        """`sim.eligible(pod, nodes)`, from the last loops' answer when `nodes` is this loop's list."""
        if nodes is not self.nodes:
            return sim.eligible(pod, nodes)
        kept = self._eligible.get(shape)
        if kept is None:
            out = sim.eligible(pod, nodes)
            if len(self._eligible) > 1024:
                self._eligible.clear()
            positions: list[int] = []  # `out` keeps the order of `nodes`: their positions in one walk
            j = 0
            for i, n in enumerate(nodes):
                if j < len(out) and out[j] is n:
                    positions.append(i)
                    j += 1
            self._eligible[shape] = positions
            return out
        return [nodes[i] for i in kept]

    def answers(self, checks: tuple[tuple[str, int], ...]) -> dict[str, bool]:
        """node name -> whether requests `checks` fit its usage in the view (filled in by the caller)."""
        known = self._fit.get(checks)
        if known is None:
            known = self._fit[checks] = {}
        return known


class FirstFit:
    """First fit over nodes that only fill up during a pass: a pod shape that did not fit node i will
    not fit it later in the pass, so each shape resumes where the last pod of its shape stopped
    (cluster-autoscaler's estimator and FilterOutSchedulable group equivalent pods the same way). Call
    `reset` after taking placements back."""

    def __init__(self, sim: Simulation, nodes: list[SimNode], memo: FitMemo | None = None) -> None:
        self.sim = sim
        self.nodes = nodes
        self.memo = memo  # resource-fit answers on the view's usage, across loops (see FitMemo)
        self._start: dict[tuple[object, ...], int] = {}
        # static shape -> the nodes passing its static filters, in order: a pod never fits the others, so
        # a pass walks only these (GPU pods skip the CPU nodes once per loop, not once per shape)
        # (binpacking appends template nodes as it goes: a list made for fewer nodes is extended with the
        # new ones, in order, so a scale-up of n nodes costs n static checks per shape, not n^2 / 2)
        self._eligible: dict[object, tuple[int, list[SimNode]]] = {}
        # shape -> its requests and the memo's answers for them if `fits` asks nothing more of a node
        # passing the static filters (Simulation.plain: a function of the shape), else None
        self._plain: dict[tuple[object, ...], tuple[tuple[tuple[str, int], ...], dict[str, bool]] | None] = {}

    def find(self, pod: PodState) -> tuple[SimNode, dict[str, dict[str, Any]]] | None:
        if self.sim.placement.depends(pod):  # spread/affinity: a node refused may take it later, no resume
            fits = self.sim.fits
            return next(((n, a) for n in self.sim.eligible(pod, self.nodes) if (a := fits(pod, n)) is not None), None)
        key = self.sim.shape(pod)
        seen = self._eligible.get(key[0])
        if seen is None or seen[0] > len(self.nodes):
            passing = (self.sim.eligible(pod, self.nodes) if self.memo is None
                       else self.memo.eligible(self.sim, pod, str(key[0]), self.nodes))
            seen = self._eligible[key[0]] = (len(self.nodes), passing)
        elif seen[0] < len(self.nodes):  # nodes appended since: only they are checked
            seen[1].extend(self.sim.eligible(pod, self.nodes[seen[0]:]))
            seen = self._eligible[key[0]] = (len(self.nodes), seen[1])
        nodes = seen[1]
        i = self._start.get(key, 0)
        if i >= len(nodes):
            return None  # the shape found no room on these nodes earlier in the pass (most pods of a loop)
        if self.memo is None:
            plain = None
        elif key in self._plain:
            plain = self._plain[key]
        else:
            checks = self.sim.plain(pod)
            plain = self._plain[key] = None if checks is None else (checks, self.memo.answers(checks))
        if plain is not None:  # `fits` on the resources alone: the memo's answers where usage is the view's
            checks, known = plain
            while i < len(nodes):
                sim_node = nodes[i]
                node = sim_node.node
                if sim_node.used is node.used:  # nothing placed there in this loop
                    ok = known.get(node.name)
                    if ok is None:
                        ok = known[node.name] = resources_fit(checks, node.used, node.allocatable)
                else:
                    ok = resources_fit(checks, sim_node.used, node.allocatable)
                if ok:
                    self._start[key] = i
                    return sim_node, {}
                i += 1
            self._start[key] = i
            return None
        while i < len(nodes):
            allocations = self.sim.fits(pod, nodes[i])
            if allocations is not None:
                self._start[key] = i
                return nodes[i], allocations
            i += 1
        self._start[key] = i
        return None

    def reset(self) -> None:
        self._start.clear()
        self._eligible.clear()

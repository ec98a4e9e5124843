"""GatherPools: which resource pools, slices and devices a node can allocate from.

Upstream: `k8s.io/dynamic-resource-allocation/structured/internal/experimental/pools_experimental.go`
(1.35), run on every `Allocate`, i.e. once per node. The rules, in order:

1. without the partitionable-devices feature, slices with `perDeviceNodeSelection` or `sharedCounters`
   are ignored;
2. a slice with `sharedCounters` is always relevant (its counters matter whatever the node);
3. a slice with `nodeName`, `allNodes` or `nodeSelector` is relevant when it matches the node;
4. a `perDeviceNodeSelection` slice is relevant when at least one of its devices matches the node (each
   device is checked again when it is a candidate);
5. anything else (a future node-selection field) is ignored;
6. slices are grouped by (driver, pool name); only the highest generation among the relevant slices
   counts;
7. a pool with fewer relevant slices than `resourceSliceCount` is looked at again with *all* slices: a
   newer generation anywhere makes it obsolete (dropped silently); otherwise, if the slices of this
   generation are still fewer than the count, the pool is *incomplete* (never allocated from; a request
   for `All` devices is an error); else it is complete and its slices that do not target the node are
   kept, because their devices consume the pool's counters;
8. a pool is *invalid* when two relevant device slices publish the same device name, two counter sets
   share a name, or a device consumes a counter set or counter that does not exist (checked on the
   slices that do not target the node too).

Order (dralab's choice, the rule of Kubernetes 1.36, PR #136641): pools sorted by (driver, pool), slices
of a pool by name, devices in slice order, and pools holding a device with binding conditions after all
the others. In 1.35 the pool order comes from a Go map and is random, so any fixed order is one that
1.35 can produce.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from ..kube.nodeselector import node_selector_matches
from .model import Device, Node, NodeSelection, Slice

PoolKey = tuple[str, str]  # (driver, pool name)


def node_matches(selection: NodeSelection | None, node: Node) -> bool:
    """Upstream `NodeMatches`: nodeName equality, allNodes, or the v1 node selector; nothing set: no."""
    if selection is None:
        return False
    if selection.node_name:
        return selection.node_name == node.name
    if selection.all_nodes:
        return True
    if selection.node_selector is not None:
        return node_selector_matches(selection.node_selector, node.labels, node.name)
    return False


def device_matches_node(slc: Slice, device: Device, node: Node) -> bool:
    """Per-device node selection (only for `perDeviceNodeSelection` slices; others match by slice)."""
    if not slc.per_device_node_selection:
        return True
    return node_matches(device.node_selection, node)


@dataclass
class Pool:
    driver: str
    name: str
    generation: int
    resource_slice_count: int
    device_slices: list[Slice] = field(default_factory=list)  # relevant for the node, sorted by name
    other_slices: list[Slice] = field(default_factory=list)  # same generation, not targeting the node
    counter_sets: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    published: int = 0  # slices of this generation seen (all nodes)
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    has_binding_conditions: bool = False

    @property
    def key(self) -> PoolKey:
        return (self.driver, self.name)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"

    def devices(self) -> Iterable[tuple[Slice, Device]]:
        for slc in self.device_slices:
            for device in slc.devices:
                yield slc, device


@dataclass
class SliceIndex:
    """All slices of the cluster, indexed so that a node only looks at its own node-local slices plus the
    shared ones (network-attached, per-device, counter slices).

    Built once from a list (`build`), or kept by the fold as the slices change (`put`, `drop`: the cost of
    one change is that of the slice's node and pool, not of every slice; issue 24). Positions are the
    slices' order in the fold's `slices` dict: a new name takes the next one, a republished name keeps
    its own, so a kept index equals `build(list(slices.values()))` after every change
    (tests/test_incremental_drivers.py)."""

    by_node: dict[str, list[tuple[int, Slice]]]
    shared: list[tuple[int, Slice]]
    by_pool: dict[PoolKey, list[Slice]]
    # slice name -> (position, slice); every slice whose nodeName is a node, by node (for node deletion)
    positions: dict[str, tuple[int, Slice]] = field(default_factory=dict)
    named: dict[str, dict[str, None]] = field(default_factory=dict)
    next_pos: int = 0

    @classmethod
    def build(cls, slices: Sequence[Slice]) -> SliceIndex:
        index = cls({}, [], {})
        for slc in slices:
            index._add(slc, index.next_pos)
            index.next_pos += 1
        return index

    def put(self, slc: Slice) -> SliceIndex:
        """The index with `slc` published (new, or replacing the slice of its name in place). Changes this
        index's maps and returns a new object sharing them, so that readers that keep what they derived
        from an index while it is the same object (by identity) see that it changed."""
        old = self.positions.get(slc.name)
        if old is None:
            pos = self.next_pos
            self.next_pos += 1
        else:
            pos = old[0]
            self._remove(old[1])
        self._add(slc, pos)
        return self._renewed()

    def drop(self, name: str) -> SliceIndex:
        """The index without the slice `name` (see `put`)."""
        old = self.positions.pop(name, None)
        if old is not None:
            self._remove(old[1])
        return self._renewed()

    def _renewed(self) -> SliceIndex:
        return SliceIndex(self.by_node, self.shared, self.by_pool, self.positions, self.named, self.next_pos)

    def _add(self, slc: Slice, pos: int) -> None:
        """File `slc` at `pos` (appending when `pos` is past every position, as `build` does)."""
        self.positions[slc.name] = (pos, slc)
        sel = slc.node_selection
        entry = (pos, slc)
        if sel is not None and sel.node_name:
            self.named.setdefault(sel.node_name, {})[slc.name] = None
        if sel is not None and sel.node_name and not slc.shared_counters and not slc.per_device_node_selection:
            _insert(self.by_node.setdefault(sel.node_name, []), entry)
        else:
            _insert(self.shared, entry)
        pool = self.by_pool.setdefault((slc.driver, slc.pool), [])
        if not pool or self.positions[pool[-1].name][0] <= pos:  # (<=: a name listed twice in `build`)
            pool.append(slc)
        else:
            at = next(i for i, s in enumerate(pool) if self.positions[s.name][0] > pos)
            pool.insert(at, slc)

    def _remove(self, slc: Slice) -> None:
        sel = slc.node_selection
        if sel is not None and sel.node_name:
            names = self.named.get(sel.node_name)
            if names is not None:
                names.pop(slc.name, None)
                if not names:
                    del self.named[sel.node_name]
        if sel is not None and sel.node_name and not slc.shared_counters and not slc.per_device_node_selection:
            local = self.by_node.get(sel.node_name, [])
            _discard(local, slc)
            if not local:
                self.by_node.pop(sel.node_name, None)
        else:
            _discard(self.shared, slc)
        key = (slc.driver, slc.pool)
        pool = self.by_pool.get(key, [])
        for i, s in enumerate(pool):
            if s is slc:
                del pool[i]
                break
        if not pool:
            self.by_pool.pop(key, None)

    def for_node(self, node: Node) -> list[Slice]:
        """The slices GatherPools looks at for this node, in input order (the others cannot match)."""
        local = self.by_node.get(node.name, [])
        if not local or not self.shared:
            return [s for _, s in (local or self.shared)]
        return [s for _, s in sorted(local + self.shared, key=lambda ps: ps[0])]


def _insert(entries: list[tuple[int, Slice]], entry: tuple[int, Slice]) -> None:
    """Insert into a list sorted by position (the common case, a new slice, appends)."""
    if not entries or entries[-1][0] < entry[0]:
        entries.append(entry)
    else:
        entries.insert(bisect.bisect_left(entries, entry[0], key=lambda e: e[0]), entry)


def _discard(entries: list[tuple[int, Slice]], slc: Slice) -> None:
    for i, (_, s) in enumerate(entries):
        if s is slc:
            del entries[i]
            return


def _relevant(slc: Slice, node: Node, partitionable: bool) -> bool:
    if not partitionable and (slc.per_device_node_selection or slc.shared_counters):
        return False
    if slc.shared_counters:
        return True
    sel = slc.node_selection
    if sel is not None and (sel.node_name or sel.all_nodes or sel.node_selector is not None):
        return node_matches(sel, node)
    if slc.per_device_node_selection:
        return any(node_matches(d.node_selection, node) for d in slc.devices)
    return False


def gather_pools(index: SliceIndex, node: Node, partitionable: bool = True) -> list[Pool]:
    """The pools of `index` relevant for `node`, in allocation order (see the module docstring)."""
    grouped: dict[PoolKey, list[Slice]] = {}
    for slc in index.for_node(node):
        if not _relevant(slc, node, partitionable):
            continue
        key = (slc.driver, slc.pool)
        have = grouped.get(key)
        if have is None or slc.generation > have[0].generation:
            grouped[key] = [slc]
        elif slc.generation == have[0].generation:
            have.append(slc)
    pools: list[Pool] = []
    for key in sorted(grouped):
        relevant = grouped[key]
        gen, count = relevant[0].generation, relevant[0].resource_slice_count
        if len(relevant) == count:
            pools.append(_build_pool(key, relevant, None, partitionable))
            continue
        all_at_gen: list[Slice] = []
        obsolete = False
        for slc in index.by_pool.get(key, []):
            if slc.generation > gen:
                obsolete = True
                break
            if slc.generation == gen:
                all_at_gen.append(slc)
        if obsolete:
            continue
        if len(all_at_gen) != count:
            pool = Pool(key[0], key[1], gen, count, incomplete=True, published=len(all_at_gen))
            pool.device_slices = sorted((s for s in relevant if not s.shared_counters), key=lambda s: s.name)
            pools.append(pool)
            continue
        pools.append(_build_pool(key, relevant, all_at_gen, partitionable))
    # Pools with binding conditions go last (stable: each part stays sorted by pool id).
    return [p for p in pools if not p.has_binding_conditions] + [p for p in pools if p.has_binding_conditions]


def _build_pool(key: PoolKey, relevant: list[Slice], all_at_gen: list[Slice] | None, partitionable: bool) -> Pool:
    relevant = sorted(relevant, key=lambda s: s.name)
    gen, count = relevant[0].generation, relevant[0].resource_slice_count
    pool = Pool(key[0], key[1], gen, count, published=len(all_at_gen) if all_at_gen is not None else len(relevant))
    if partitionable:
        device_slices = [s for s in relevant if not s.shared_counters]
        counter_slices = [s for s in relevant if s.shared_counters]
    else:
        device_slices, counter_slices = relevant, []
    pool.device_slices = device_slices
    pool.has_binding_conditions = any(d.binding_conditions for s in device_slices for d in s.devices)
    seen: set[str] = set()
    for slc in device_slices:
        for device in slc.devices:
            if device.id.device in seen:
                return _invalid(pool, f"duplicate device name {device.id.device}")
            seen.add(device.id.device)
    if not partitionable:
        return pool
    for slc in counter_slices:
        for name, counters in slc.shared_counters.items():
            if name in pool.counter_sets:
                return _invalid(pool, f"duplicate counter set name {name}")
            pool.counter_sets[name] = dict(counters)
    reason = _check_consumption(pool.counter_sets, relevant)
    if reason:
        return _invalid(pool, reason)
    if all_at_gen is None or len(all_at_gen) == len(relevant):
        return pool
    names = {s.name for s in relevant}
    others = sorted((s for s in all_at_gen if s.name not in names), key=lambda s: s.name)
    reason = _check_consumption(pool.counter_sets, others)
    if reason:
        return _invalid(pool, reason)
    pool.other_slices = others
    return pool


def _invalid(pool: Pool, reason: str) -> Pool:
    pool.invalid = True
    pool.invalid_reason = reason
    return pool


def _check_consumption(counter_sets: dict[str, dict[str, Fraction]], slices: Iterable[Slice]) -> str:
    for slc in slices:
        for device in slc.devices:
            for use in device.consumes_counters:
                known = counter_sets.get(use.counter_set)
                if known is None:
                    return f"counter set {use.counter_set} not found"
                for counter in use.counters:
                    if counter not in known:
                        return f"counter {counter} not found in counter set {use.counter_set}"
    return ""

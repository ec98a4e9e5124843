"""The structured allocator: DRA claims to devices on one node, as Kubernetes 1.35 allocates them.

Mirrors `k8s.io/dynamic-resource-allocation/structured` (the `experimental` variant, a superset of what
1.35 runs with its default feature gates), called the way the scheduler's DynamicResources plugin calls
it: one `Allocator` per scheduling cycle (slices, classes, devices in use), one `allocate(node, claims)`
per candidate node with all the unallocated claims of the pod, all-or-nothing.

Steps (see `pools`, `prepare`, `search`, `result`, `explain`):

1. the classes every request names must exist (the scheduler's PreFilter: a missing class makes the pod
   unschedulable, it is not an allocator error) -> `unsatisfiable` with a `no-class` explanation;
2. GatherPools for the node (`pools.gather_pools`);
3. validation in upstream order (errors -> outcome `error`, message naming claim, request, pool);
4. the depth-first search (`search.Search`): the same first solution as upstream, found without
   exploring permutations;
5. on success the `status.allocation` of every claim (`result.allocation`); on failure, if an invalid
   pool was seen, upstream's error "invalid resource pools were encountered" (the scheduler treats it as
   "unschedulable on this node"), else `unsatisfiable`; either way with explanations.

Deliberate differences from 1.35 (each is what upstream fixed later, or a choice 1.35 leaves open):
pool and slice order (the 1.36 rule); counters reserved for a rejected candidate are released;
`distinctAttribute` holds within one request; counters of devices shared via `allowMultipleAllocations`
count as consumed while a share is committed (fixed for 1.37); counter availability is keyed by
(driver, pool), not by pool name alone; a claim config that names several requests is copied once;
`shareID` is derived, not random; the Filter timeout is a budget of allocate-one calls, not wall time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from .allocated import AllocatedState
from .explain import Explainer, Explanation, Relax
from .explain_errors import selector_error
from .model import Claim, Device, DeviceClass, Node, Slice
from .pools import SliceIndex
from .prepare import AllocationError, Features, NodeContext, Preparer, SelectorFailed, SelectorMatcher
from .result import AllocationOutcome, allocation
from .search import Search, SearchBudgetExceeded, SearchOptions

__all__ = [
    "AllocatedState",
    "AllocationError",
    "AllocationOutcome",
    "Allocator",
    "Explanation",
    "Features",
    "SelectorMatcher",
]

DEFAULT_MAX_CALLS = 1_000_000  # the emulated Filter timeout (upstream: 10 s of wall time)
EXPLAIN_MAX_CALLS = 20_000  # per search run while explaining a failure


class Allocator:
    def __init__(
        self,
        slices: Sequence[Slice],
        classes: Mapping[str, DeviceClass],
        allocated: AllocatedState,
        matcher: SelectorMatcher,
        *,
        features: Features | None = None,
        max_allocate_one_calls: int | None = DEFAULT_MAX_CALLS,
        index: SliceIndex | None = None,
    ) -> None:
        # `index`: a SliceIndex.build(slices) the caller keeps while the slices do not change
        # (the scheduler builds one per slice generation instead of one per pod).
        self._index = index if index is not None else SliceIndex.build(slices)
        self._classes = dict(classes)
        self._allocated = allocated
        self._shared = allocated.shared_devices()
        self._matcher = matcher
        self._cache: dict[tuple[str, Device], bool] = {}  # (expression, device) -> match, for all nodes
        self.features = features or Features()
        self.max_calls = max_allocate_one_calls

    def allocate(self, node: Node, claims: Sequence[Claim], *, explain: bool = True) -> AllocationOutcome:
        """Allocate all unallocated `claims` for `node` together (all-or-nothing). Claims that already
        have `status.allocation` are skipped: their devices are in the AllocatedState. `explain=False`
        skips the explanations of a failure (they cost a few more searches), for callers that try many
        nodes and only need the outcome."""
        pending = [c for c in claims if c.allocation is None]
        stats: dict[str, int] = {"allocate_one_calls": 0, "candidates_tried": 0}
        if not pending:
            return AllocationOutcome("allocated", "no claims to allocate", {}, [], stats)
        missing = self._missing_classes(pending)
        if missing:
            return AllocationOutcome("unsatisfiable", missing[0].message, {}, missing, stats)
        ctx = NodeContext.build(self._index, node, self._allocated, self._shared, self.features)
        prep = Preparer(ctx, self._classes, self._matcher, self._cache, self.features)
        search: Search | None = None
        try:
            cds = prep.prepare(pending)
            search = Search(ctx, cds, prep, self.features, SearchOptions(max_calls=self.max_calls))
            found = search.run()
            if found:
                allocations = {
                    cd.claim.key: allocation(cd.claim, search.picks[cd.index],
                                             [search.selected[(cd.index, ri)] for ri in range(len(cd.choices))],
                                             node, self.features.binding_conditions)
                    for cd in cds
                }
                n = len(allocations)
                return AllocationOutcome("allocated", f"allocated {n} claim{'s' if n != 1 else ''} on node {node.name}",
                                         allocations, [], self._stats(search))
        except SelectorFailed as exc:  # a selector that fails to evaluate: upstream's error, explained
            return AllocationOutcome("error", str(exc), {}, [selector_error(exc, pending[0].key)], self._stats(search))
        except AllocationError as exc:
            return AllocationOutcome("error", str(exc), {}, [], self._stats(search))
        except SearchBudgetExceeded:
            return AllocationOutcome(
                "unsatisfiable",
                f"timed out trying to allocate devices (more than {self.max_calls} allocate-one calls)",
                {}, [], self._stats(search))
        stats = self._stats(search)
        explanations = self._explain(ctx, pending, stats) if explain else []
        invalid = [p for p in ctx.pools if p.invalid]
        if invalid:
            reasons = "; ".join(f"{p.id}: {p.invalid_reason}" for p in invalid)
            pool_notes = [Explanation(pending[0].key, None, "invalid-pool",
                                      f"resource pool {p.id} is invalid ({p.invalid_reason}); its devices are not "
                                      "allocated until the driver republishes it", 0, 0) for p in invalid]
            return AllocationOutcome("error", f"invalid resource pools were encountered: {reasons}", {},
                                     pool_notes + explanations, stats)
        message = "cannot allocate all claims"
        if explanations:
            message += ": " + explanations[0].message
        return AllocationOutcome("unsatisfiable", message, {}, explanations, stats)

    # ------------------------------------------------------------------ helpers

    def _missing_classes(self, claims: Sequence[Claim]) -> list[Explanation]:
        out: list[Explanation] = []
        for claim in claims:
            for request in claim.requests:
                subs = request.choices()
                for sub in subs:
                    if sub.device_class and sub.device_class not in self._classes:
                        name = request.name if request.exactly is not None else f"{request.name}/{sub.name}"
                        out.append(Explanation(
                            claim.key, name, "no-class",
                            f"request {name} of claim {claim.key} asks for device class {sub.device_class}, "
                            "which does not exist", 0, 0))
        return out

    @staticmethod
    def _stats(search: Search | None) -> dict[str, int]:
        if search is None:
            return {"allocate_one_calls": 0, "candidates_tried": 0}
        return search.stats.as_dict()

    def _explain(self, ctx: NodeContext, claims: list[Claim], stats: dict[str, int]) -> list[Explanation]:
        stats["explain_allocate_one_calls"] = 0

        def feasible(subset: list[Claim], relax: Relax) -> bool:
            features = dataclasses.replace(self.features, device_taints=False) if relax.ignore_taints else self.features
            prep = Preparer(ctx, self._classes, self._matcher, self._cache, features)
            options = SearchOptions(ignore_counters=relax.ignore_counters, ignore_capacity=relax.ignore_capacity,
                                    max_calls=EXPLAIN_MAX_CALLS)
            search: Search | None = None
            try:
                search = Search(ctx, prep.prepare(subset), prep, features, options)
                return search.run()
            except (AllocationError, SearchBudgetExceeded):
                return False
            finally:
                if search is not None:
                    stats["explain_allocate_one_calls"] += search.stats.allocate_one_calls

        prep = Preparer(ctx, self._classes, self._matcher, self._cache, self.features)
        prep.prepare(claims)
        return Explainer(ctx, prep, feasible).explain(claims)

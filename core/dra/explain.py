"""Why a claim cannot be allocated on a node, in terms a user can act on.

Run only when the search found nothing. For each claim that cannot be allocated:

1. if the claim fits on its own, it is the claims together that do not fit: `capacity` ("can be
   allocated alone, not together with ...");
2. else each request (each subrequest of a `firstAvailable` request) is tried alone, without
   constraints; one that fails is explained by counting: devices that match its selectors
   (`matching`), how many of them are free (`free`), whether taints are not tolerated (`taint`), whether
   an incomplete pool holds matching devices (`incomplete-pool`), else which of shared counters
   (`counters`) or consumable capacity (`consumable-capacity`) is exhausted (searches that ignore one or
   the other tell which);
3. if every request fits alone, the requests together without constraints may not fit (`capacity`);
   otherwise the constraints are added back one by one and the first that makes the claim fail is the
   answer: `topology`, with the constraint and the attribute, and the largest group of free devices
   sharing one value (matchAttribute) or the number of distinct values (distinctAttribute).

This is what tells "out of capacity" (more devices would help) from "topology mismatch" (enough devices,
wrong shape).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..kube.quantity import format_quantity
from .consumable import published_capacity
from .model import Claim, Request
from .pools import device_matches_node
from .prepare import AllocationError, Cand, NodeContext, Preparer, ReqData, untolerated


@dataclass
class Explanation:
    claim: str
    request: str | None
    # capacity | topology | counters | consumable-capacity | taint | incomplete-pool | invalid-pool | no-class
    kind: str
    message: str
    matching: int
    free: int
    constraint: str | None = None
    attribute: str | None = None


@dataclass(frozen=True)
class Relax:
    ignore_counters: bool = False
    ignore_capacity: bool = False
    ignore_taints: bool = False  # devices' NoSchedule/NoExecute taints (DRADeviceTaints) not checked


# What keeps requests that each fit alone from fitting together, tried in this order: the first relaxation
# under which they fit names the cause (issue 23: two one-GPU requests beside 7 tainted GPUs of 8 are a
# `taint` problem, as one request with count 2 already said; two MIG requests whose partitions overlap in
# the GPU's shared counters are `counters`). None fits under one: all of them together, then `capacity`.
RELAXATIONS = (("taint", Relax(ignore_taints=True)), ("counters", Relax(ignore_counters=True)),
               ("consumable-capacity", Relax(ignore_capacity=True)))
ALL_RELAXED = Relax(ignore_counters=True, ignore_capacity=True, ignore_taints=True)


Feasible = Callable[[list[Claim], Relax], bool]
# how far a request alone got, by the kind of its explanation (for firstAvailable's closest alternative)
PROGRESS = {"capacity": 1, "incomplete-pool": 2, "taint": 3, "consumable-capacity": 4, "counters": 4}


def _alone(claim: Claim, request: Request, sub_index: int | None) -> Claim:
    """The claim reduced to one request (one choice of it), without constraints or configs."""
    req = request if sub_index is None else Request(request.name, exactly=request.first_available[sub_index])
    return dataclasses.replace(claim, requests=(req,), constraints=(), config=())


class Explainer:
    def __init__(self, ctx: NodeContext, prep: Preparer, feasible: Feasible) -> None:
        self.ctx = ctx
        self.prep = prep
        self.feasible = feasible
        self._incomplete: list[Cand] = []
        n = 0
        for pool in ctx.pools:
            if pool.incomplete:
                for slc, device in pool.devices():
                    n += 1
                    self._incomplete.append(Cand(-n, device, slc, pool, device.allow_multiple_allocations,
                                                 device_matches_node(slc, device, ctx.node), (), False, False, None,
                                                 published_capacity(device)))

    # ------------------------------------------------------------------ counting

    def _matching(self, rd: ReqData, cands: Sequence[Cand]) -> list[Cand]:
        out = []
        for cand in cands:
            try:
                if self.prep.selectable(rd, cand):
                    out.append(cand)
            except AllocationError:
                continue
        return out

    @staticmethod
    def _free(rd: ReqData, cands: Sequence[Cand]) -> list[Cand]:
        return [c for c in cands if rd.admin or not c.committed_in_use]

    def _counts(self, rd: ReqData) -> tuple[list[Cand], list[Cand]]:
        matching = self._matching(rd, self.ctx.cands)
        return matching, self._free(rd, matching)

    # ------------------------------------------------------------------ per claim

    def explain(self, claims: Sequence[Claim]) -> list[Explanation]:
        out: list[Explanation] = []
        failing: list[Claim] = []
        for claim in claims:
            if not self.feasible([claim], Relax()):
                failing.append(claim)
                out.extend(self._claim(claim))
        if failing:
            return out
        # Every claim fits alone: find the first that does not fit with the ones before it (a longer
        # prefix of claims never fits when a shorter one does not, so bisect).
        low, high = 1, len(claims) - 1  # claims[:low] fits; the answer i is in [low, high]
        while low < high:
            mid = (low + high) // 2
            if self.feasible(list(claims[: mid + 1]), Relax()):
                low = mid + 1
            else:
                high = mid
        for i in range(low, len(claims)):
            if not self.feasible(list(claims[: i + 1]), Relax()):
                claim = claims[i]
                m, f = self._claim_counts(claim)
                others = ", ".join(c.key for c in claims[:i])
                kind, why = self._together(list(claims[: i + 1]), f, m)
                out.append(Explanation(
                    claim.key, None, kind,
                    f"claim {claim.key} can be allocated on node {self.ctx.node.name} on its own, but not together "
                    f"with {others}: {why}", m, f))
                return out
        return out

    def _claim_counts(self, claim: Claim) -> tuple[int, int]:
        cd = self.prep.prepare([claim])[0]
        matching: dict[int, None] = {}
        free: dict[int, None] = {}
        for choices in cd.choices:
            for rd in choices:
                m, f = self._counts(rd)
                matching.update((c.index, None) for c in m)
                free.update((c.index, None) for c in f)
        return len(matching), len(free)

    def _claim(self, claim: Claim) -> list[Explanation]:
        out: list[Explanation] = []
        cd = self.prep.prepare([claim])[0]
        for ri, request in enumerate(claim.requests):
            choices = cd.choices[ri]
            failed = []
            for rd in choices:
                if self.feasible([_alone(claim, request, rd.sub_index)], Relax()):
                    break
                failed.append(rd)
            else:
                out.append(self._closest(claim, request, failed))
        if out:
            return out
        bare = dataclasses.replace(claim, constraints=())
        if not self.feasible([bare], Relax()):
            m, f = self._claim_counts(claim)
            need = sum(min(rd.num for rd in ch) for ch in cd.choices)
            kind, why = self._together([bare], f, m, need)
            return [Explanation(claim.key, None, kind,
                                f"each request of claim {claim.key} fits on node {self.ctx.node.name} alone, but "
                                f"{why}", m, f)]
        for k in range(len(claim.constraints)):
            partial = dataclasses.replace(claim, constraints=claim.constraints[: k + 1])
            if not self.feasible([partial], Relax()):
                return [self._topology(claim, cd.choices, k)]
        return [Explanation(claim.key, None, "capacity",
                            f"claim {claim.key} cannot be allocated on node {self.ctx.node.name}", 0, 0)]

    def _closest(self, claim: Claim, request: Request, failed: list[ReqData]) -> Explanation:
        """The explanation of a request none of whose alternatives fits alone: for `firstAvailable`, the
        alternative that came closest (the furthest through matching < free < tolerated < counters and
        capacity; the first of equals), not the first one, which may simply match nothing."""
        found = [self._request(claim, request, rd) for rd in failed]
        if len(found) == 1:
            return found[0]
        best = max(range(len(found)), key=lambda i: (PROGRESS.get(found[i].kind, 0), found[i].matching > 0,
                                                      found[i].free, -i))
        chosen = found[best]
        others = "; ".join(f"{rd.name}: {'no device matches' if e.matching == 0 else e.kind}"
                           for rd, e in zip(failed, found, strict=True) if e is not chosen)
        return dataclasses.replace(chosen, message=f"{chosen.message} (the closest of {len(found)} alternatives of "
                                                   f"firstAvailable; the others: {others})")

    def _together(self, subset: list[Claim], free: int, matching: int, need: int | None = None) -> tuple[str, str]:
        """(kind, text) for claims or requests that each fit alone but not together: which check, once
        relaxed, lets them fit (RELAXATIONS)."""
        devices = f"{need} devices" if need is not None else "more devices than are free"
        counts = f"({free} free of {matching} matching)"
        candidates = [kind for kind, _ in RELAXATIONS if kind != "taint" or self.prep.features.device_taints]
        for kind, relax in RELAXATIONS:
            if kind in candidates and self.feasible(subset, relax):
                return kind, self._together_text(kind, subset, devices, counts)
        if self.feasible(subset, ALL_RELAXED):  # several checks at once: name the first that is involved
            pairs = self._free_matching(subset)
            involved = {"taint": any(untolerated(c.device, rd.sub.tolerations) for rd, c in pairs),
                        "counters": any(c.counters for _, c in pairs), "consumable-capacity": True}
            for kind in candidates:
                if involved[kind]:
                    return kind, self._together_text(kind, subset, devices, counts) + " (and other checks as well)"
        return "capacity", f"together they need {devices} and not enough are free {counts}"

    def _free_matching(self, subset: list[Claim]) -> list[tuple[ReqData, Cand]]:
        """(request, device) for every free device matching some request (any alternative) of the claims."""
        out: list[tuple[ReqData, Cand]] = []
        for cd in self.prep.prepare(subset):
            for choices in cd.choices:
                for rd in choices:
                    out.extend((rd, c) for c in self._counts(rd)[1])
        return out

    def _together_text(self, kind: str, subset: list[Claim], devices: str, counts: str) -> str:
        pairs = self._free_matching(subset)
        if kind == "taint":
            tainted = {c.index for rd, c in pairs if untolerated(c.device, rd.sub.tolerations)}
            taints = sorted({f"{t.key}={t.value}:{t.effect}" for rd, c in pairs
                             for t in untolerated(c.device, rd.sub.tolerations)})
            return (f"together they need {devices} {counts}: {len(tainted)} of the free ones have taints the "
                    f"requests do not tolerate ({', '.join(taints)})")
        if kind == "counters":
            return (f"together they need {devices} {counts}: the shared counters left in their pool "
                    f"({self._counters_short(c for _, c in pairs)}) cannot cover all of them")
        return (f"together they need {devices} {counts}: the devices' remaining consumable capacity cannot "
                "cover all of them")

    def _counters_short(self, cands: Iterable[Cand]) -> str:
        """The counters that keep some of these devices out (less left than the device consumes)."""
        need: dict[int, Fraction] = {}
        for c in cands:
            for k, amount in c.counters:
                need[k] = max(need.get(k, Fraction(0)), amount)
        avail = self.ctx.counter_available
        return ", ".join(f"{self.ctx.counter_names[k]}={format_quantity(max(avail[k], Fraction(0)))}"
                         for k in sorted(need, key=lambda k: self.ctx.counter_names[k]) if avail[k] < need[k]) or "none"

    def _request(self, claim: Claim, request: Request, rd: ReqData) -> Explanation:
        node = self.ctx.node.name
        cls = rd.device_class.name
        matching, free = self._counts(rd)
        m, f = len(matching), len(free)
        need = m if rd.all_mode else rd.num
        what = "all devices" if rd.all_mode else f"{need} device{'s' if need != 1 else ''}"
        head = f"request {rd.name} of claim {claim.key} needs {what} of class {cls}"

        def make(kind: str, text: str) -> Explanation:
            return Explanation(claim.key, rd.name, kind, f"{head}: {text}", m, f)

        pending = self._matching(rd, self._incomplete)
        pools = sorted({c.pool.id for c in pending})
        if rd.all_mode and m == 0 or m < need:
            if pending and (rd.all_mode or m + len(pending) >= need):
                return make("incomplete-pool", f"{m} match on node {node}; {len(pending)} more are in resource "
                            f"pool(s) {', '.join(pools)}, which are being updated (not all slices published)")
            return make("capacity", f"only {m} device{'s' if m != 1 else ''} on node {node} match its selectors")
        if f < need:
            return make("capacity", f"{m} devices on node {node} match, but only {f} are free ({m - f} in use)")
        tolerated = [c for c in free if not untolerated(c.device, rd.sub.tolerations)]
        if len(tolerated) < need and self.prep.features.device_taints:
            taints = sorted({f"{t.key}={t.value}:{t.effect}"
                             for c in free for t in untolerated(c.device, rd.sub.tolerations)})
            return make("taint", f"{f} matching devices are free, but {f - len(tolerated)} of them have taints "
                        f"the request does not tolerate ({', '.join(taints)})")
        alone = [_alone(claim, request, rd.sub_index)]
        with_capacity = self.feasible(alone, Relax(ignore_counters=True))
        with_counters = self.feasible(alone, Relax(ignore_capacity=True))
        counters = any(c.counters for c in free)
        if (with_capacity and not with_counters) or (not with_capacity and not with_counters and counters):
            left = self._counters_left(free)
            return Explanation(claim.key, rd.name, "counters",
                               f"{head}: {f} matching devices are free, but the shared counters left in their "
                               f"pool ({left}) cannot cover {what}", m, f)
        return Explanation(claim.key, rd.name, "consumable-capacity",
                           f"{head}: {f} matching devices are free, but their remaining consumable capacity "
                           f"cannot cover the request", m, f)

    def _counters_left(self, cands: Sequence[Cand]) -> str:
        keys = sorted({k for c in cands for k, _ in c.counters})
        avail = self.ctx.counter_available
        return ", ".join(f"{self.ctx.counter_names[k]}={format_quantity(max(avail[k], Fraction(0)))}"
                         for k in keys) or "none"

    def _topology(self, claim: Claim, choices: list[list[ReqData]], k: int) -> Explanation:
        constraint = claim.constraints[k]
        match = bool(constraint.match_attribute)
        attribute = (constraint.match_attribute if match else constraint.distinct_attribute) or ""
        covered = [rds for rds in choices if any(
            not constraint.requests or rd.base in constraint.requests or rd.name in constraint.requests for rd in rds)]
        need = sum(min(rd.num for rd in rds) for rds in covered)
        matching: dict[int, Cand] = {}
        free: dict[int, Cand] = {}
        for rds in covered:
            for rd in rds:
                mm, ff = self._counts(rd)
                matching.update((c.index, c) for c in mm)
                free.update((c.index, c) for c in ff)
        m, f = len(matching), len(free)
        groups: dict[str, int] = {}
        for c in free.values():
            attr = c.device.attributes.get(attribute)
            if attr is not None:
                label = str(attr.value).lower() if isinstance(attr.value, bool) else str(attr.value)
                groups[label] = groups.get(label, 0) + 1
        node = self.ctx.node.name
        if f and not groups:  # upstream's allocator: a device without the attribute never meets the constraint
            # (structured/allocator.go, match/distinctAttributeConstraint.add: lookupAttribute nil -> false)
            rule = "the same" if match else "pairwise different"
            text = (f"claim {claim.key} needs {need} devices with {rule} {attribute} "
                    f"({'matchAttribute' if match else 'distinctAttribute'}); on node {node} {m} devices match and "
                    f"{f} are free, but none of them has the attribute {attribute}")
            return Explanation(claim.key, None, "topology", text, m, f,
                               "matchAttribute" if match else "distinctAttribute", attribute)
        if match:
            best = max(groups.values(), default=0)
            spread = ", ".join(f"{v}: {n}" for v, n in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0])))
            text = (f"claim {claim.key} needs {need} devices with the same {attribute} (matchAttribute); "
                    f"on node {node} {m} devices match and {f} are free, "
                    f"but at most {best} free devices share one value"
                    + (f" ({spread})" if spread else ""))
            return Explanation(claim.key, None, "topology", text, m, f, "matchAttribute", attribute)
        text = (f"claim {claim.key} needs {need} devices with pairwise different {attribute} (distinctAttribute); on "
                f"node {node} {m} devices match and {f} are free, but they have only {len(groups)} distinct values")
        return Explanation(claim.key, None, "topology", text, m, f, "distinctAttribute", attribute)

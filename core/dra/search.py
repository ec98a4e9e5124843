"""The depth-first search of the structured allocator, without the exponential cliff.

Upstream (`allocateOne`, 1.35) fills claims in order, requests in spec order, the subrequests of a
`firstAvailable` request in order (the first that succeeds wins), then one device slot after the other,
and for every slot scans all devices from the start: it enumerates *ordered* selections (permutations),
which is exponential when there is no solution (kubernetes#131730). The first full solution wins.

This search returns the same first solution, with far less work:

- **Combinations, not permutations.** The slots of one request are interchangeable and everything that
  decides success (devices in use, counters, consumed capacity, constraint values) depends on the *set*
  of devices chosen, not on their order. So the first solution upstream finds is the lexicographically
  first sorted tuple, which is exactly the first solution of a search that only takes devices after the
  one in the previous slot (or the same device again, for one that allows multiple allocations). The
  results of a request come out in allocation order, as upstream lists them.
- **Count first** (sound pruning: only subtrees without a solution are cut). Before filling a slot, the
  devices still eligible for it are counted (free, selectable, tolerated, counters and capacity left,
  compatible with the claim's constraints); fewer than the slots left, or counters that cannot cover the
  cheapest devices left, stop the branch. A `matchAttribute` constraint whose value is not fixed yet is
  partitioned by attribute value, and only groups big enough for every request it covers are tried; a
  `distinctAttribute` constraint needs enough distinct values. At the root (and again at request
  boundaries once the search has backtracked), a bipartite matching of the requests still to fill onto
  the free devices refuses "n + 1 devices when n fit" across requests and claims.
- **Memo.** A failed (claim, request, state) is remembered; the state is everything later requests
  depend on (devices taken in this call, shares and capacity being allocated, constraint values, results
  so far for the claim). Failures never raise, so remembering them is always sound.

Upstream raises an error when an `All` request meets a constraint it cannot satisfy, and when a selector
fails to evaluate on a device it reaches. Pruning could skip such a point, so when a claim has an `All`
request under a constraint, or a selector failed on some device, the search runs without pruning (the
memo stays), which visits error points in upstream's order.

The search is depth-first over one device slot after the other, so its depth grows with the devices a
pod's claims ask for (up to 32 per claim, and a pod may have many claims): too deep for Python's call
stack. Its three steps (`_claim`, `_request`, `_fill`) are generators that yield the step they would
call and receive its result; `_drive` runs them on a list as the stack, so no limit of the interpreter
is met and none is changed (pure code leaves process-wide switches alone: tests/test_layering.py).

Known 1.35 bugs behave as fixed upstream: counters (and constraint and in-use marks) reserved for a
candidate that is then rejected are released; counters of a multi-allocatable device are released when
its last share in this call is rolled back; `distinctAttribute` holds within one request too.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeAlias

from .bounds import ConstraintState, counter_bound_ok, matching_ok
from .consumable import consumed_capacity, request_fits
from .prepare import MAX_RESULTS, AllocationError, Cand, ClaimData, Features, NodeContext, Preparer, ReqData

FAIL, OK, EXCEEDED = 0, 1, 2
MEMO_LIMIT = 200_000

# One step of the search: yields the steps it calls (each sends back its result), returns its own.
Step: TypeAlias = Generator["Step", int, int]


class SearchBudgetExceeded(Exception):
    """The search made more allocate-one calls than allowed (the emulated Filter timeout)."""


@dataclass(eq=False)
class Pick:
    rd: ReqData
    cand: Cand
    consumed: dict[str, Fraction] | None  # multi-allocatable devices: capacity consumed by this share
    counters_reserved: bool
    constraints: list[int]


@dataclass
class SearchOptions:
    ignore_counters: bool = False
    ignore_capacity: bool = False
    max_calls: int | None = None
    pruning: bool = True


@dataclass
class SearchStats:
    allocate_one_calls: int = 0
    candidates_tried: int = 0
    backtracks: int = 0
    memo_hits: int = 0
    pruned: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass(eq=False)
class Search:
    ctx: NodeContext
    claims: list[ClaimData]
    prep: Preparer
    features: Features
    options: SearchOptions = field(default_factory=SearchOptions)

    def __post_init__(self) -> None:
        self.stats = SearchStats()
        self.used = [Fraction(0)] * len(self.ctx.counter_available)
        self.dedicated: dict[int, list[int]] = {}  # cand index -> claims it is being allocated for
        self.shares: dict[int, int] = {}  # multi-allocatable cand index -> shares in this call
        self.alloc_cap: dict[int, dict[str, Fraction]] = {}
        self.picks: list[list[Pick]] = [[] for _ in self.claims]
        self.cstate = [[ConstraintState(c) for c in cd.constraints] for cd in self.claims]
        self.applies: dict[tuple[ReqData, int], bool] = {}
        self.selected: dict[tuple[int, int], ReqData] = {}
        self.memo: dict[tuple[Any, ...], int] = {}
        self.later: dict[tuple[int, int, int], tuple[int, list[tuple[ReqData, Cand]]]] = {}
        self.pruning = self.options.pruning
        for cd in self.claims:
            for choices in cd.choices:
                for rd in choices:
                    self.prep.build_cands(rd)
                    if rd.errors:
                        self.pruning = False
                    if rd.all_mode and any(self._applies(cd.index, rd, k) for k in range(len(cd.constraints))):
                        self.pruning = False

    # ------------------------------------------------------------------ driver

    def run(self) -> bool:
        if self.pruning and not self._matching_ok(0, 0):
            self.stats.pruned += 1
            return False
        return _drive(self._claim(0)) == OK

    def _applies(self, ci: int, rd: ReqData, k: int) -> bool:
        key = (rd, k)
        hit = self.applies.get(key)
        if hit is None:
            hit = self.applies[key] = self.cstate[ci][k].applies(rd)
        return hit

    def _tick(self) -> None:
        self.stats.allocate_one_calls += 1
        limit = self.options.max_calls
        if limit is not None and self.stats.allocate_one_calls > limit:
            raise SearchBudgetExceeded(limit)

    def _claim(self, ci: int) -> Step:
        if ci == len(self.claims):
            return OK
        result = yield self._request(ci, 0)
        return FAIL if result == EXCEEDED else result

    def _request(self, ci: int, ri: int) -> Step:
        cd = self.claims[ci]
        if ri == len(cd.choices):
            self._tick()
            return (yield self._claim(ci + 1))
        key = self._memo_key(ci, ri)
        hit = self.memo.get(key)
        if hit is not None:
            self.stats.memo_hits += 1
            return hit
        if self.pruning and self.stats.backtracks and not self._matching_ok(ci, ri):
            self.stats.pruned += 1
            result = FAIL
        elif cd.has_subs[ri]:
            all_exceeded = True
            result = FAIL
            for rd in cd.choices[ri]:
                r = yield self._fill(ci, ri, rd, 0, 0)
                if r == EXCEEDED:
                    continue
                all_exceeded = False
                if r == OK:
                    self.selected[(ci, ri)] = rd
                    return OK
            result = EXCEEDED if all_exceeded else FAIL
        else:
            result = yield self._fill(ci, ri, cd.choices[ri][0], 0, 0)
            if result == OK:
                self.selected[(ci, ri)] = cd.choices[ri][0]
                return OK
        if len(self.memo) < MEMO_LIMIT:
            self.memo[key] = result
        return result

    def _fill(self, ci: int, ri: int, rd: ReqData, slot: int, start: int) -> Step:
        self._tick()
        if rd.all_mode and rd.num == 0:
            return FAIL  # "All" means at least one
        if slot >= rd.num:
            return (yield self._request(ci, ri + 1))
        if len(self.picks[ci]) + rd.num - slot > MAX_RESULTS:
            return EXCEEDED
        if rd.all_mode:
            if not self._try_add(ci, rd, rd.cands[slot], True):
                return FAIL
            result = yield self._fill(ci, ri, rd, slot + 1, 0)
            if result != OK:
                self._undo(ci)
            return result
        cands = rd.cands
        positions: Iterable[int] = range(start, len(cands))
        if self.pruning:
            bound = self._bound(ci, ri, rd, slot, start)
            if bound is False:
                self.stats.pruned += 1
                return FAIL
            if bound is not True:
                positions = bound
        for pos in positions:
            cand = cands[pos]
            if self._blocked(ci, rd, cand):
                continue
            if rd.errors:
                err = rd.errors.get(cand.index)
                if err is not None:
                    raise err
            self.stats.candidates_tried += 1
            if not self._try_add(ci, rd, cand, False):
                continue
            result = yield self._fill(ci, ri, rd, slot + 1, pos if cand.multi else pos + 1)
            if result == OK:
                return OK
            self._undo(ci)
            self.stats.backtracks += 1
            if result == EXCEEDED:
                return EXCEEDED
        return FAIL

    # ------------------------------------------------------------------ one device

    def _blocked(self, ci: int, rd: ReqData, cand: Cand) -> bool:
        if rd.admin:
            return not cand.multi and ci in self.dedicated.get(cand.index, ())
        return cand.committed_in_use or bool(self.dedicated.get(cand.index))

    def _counters_needed(self, cand: Cand) -> bool:
        if not cand.counters or self.options.ignore_counters:
            return False
        return not (cand.multi and (cand.committed_shared or self.shares.get(cand.index)))

    def _counters_fit(self, cand: Cand) -> bool:
        if cand.overdrawn:
            return False
        avail, used = self.ctx.counter_available, self.used
        return all(used[k] + amount <= avail[k] for k, amount in cand.counters)

    def _capacity_fits(self, rd: ReqData, cand: Cand) -> bool:
        if not self.features.consumable_capacity or self.options.ignore_capacity:
            return True
        return request_fits(cand.caps, rd.sub.capacity_requests, cand.committed_capacity,
                            self.alloc_cap.get(cand.index)) is True

    def _try_add(self, ci: int, rd: ReqData, cand: Cand, must: bool) -> bool:
        """Upstream `allocateDevice`: in use, counters, taints (filtered earlier), constraints,
        consumable capacity; on success the device is recorded as being allocated."""
        if self._blocked(ci, rd, cand):
            return False
        if cand.device.consumes_counters and not self.features.partitionable_devices:
            return False
        reserve = self._counters_needed(cand)
        if reserve and not self._counters_fit(cand):
            return False
        if rd.all_mode and not self.prep.statically_usable(rd, cand):
            return False  # a taint not tolerated ("All" lists are not filtered by taints)
        added: list[int] = []
        device = cand.device
        for k, cs in enumerate(self.cstate[ci]):
            if not self._applies(ci, rd, k):
                continue
            if not cs.accepts(device.attributes.get(cs.attribute)):
                if must:
                    raise AllocationError(
                        f"claim {self.claims[ci].claim.key}, request {rd.sub.name}: cannot add device {device.id} "
                        "because a claim constraint would not be satisfied")
                return False
            added.append(k)
        if not self._capacity_fits(rd, cand):
            return False
        # Commit.
        for k in added:
            cs = self.cstate[ci][k]
            attr = device.attributes[cs.attribute]
            cs.values.append(attr)
        if reserve:
            used = self.used
            for k, amount in cand.counters:
                used[k] += amount
        consumed: dict[str, Fraction] | None = None
        if cand.multi:
            self.shares[cand.index] = self.shares.get(cand.index, 0) + 1
            if self.features.consumable_capacity and not self.options.ignore_capacity:
                consumed = consumed_capacity(cand.caps, rd.sub.capacity_requests)
                agg = self.alloc_cap.setdefault(cand.index, {})
                for name, amount in consumed.items():
                    agg[name] = agg.get(name, Fraction(0)) + amount
        else:
            self.dedicated.setdefault(cand.index, []).append(ci)
        self.picks[ci].append(Pick(rd, cand, consumed, reserve, added))
        return True

    def _undo(self, ci: int) -> None:
        pick = self.picks[ci].pop()
        cand = pick.cand
        for k in pick.constraints:
            self.cstate[ci][k].values.pop()
        if pick.counters_reserved:
            used = self.used
            for k, amount in cand.counters:
                used[k] -= amount
        if cand.multi:
            left = self.shares[cand.index] - 1
            if left:
                self.shares[cand.index] = left
            else:
                del self.shares[cand.index]
            if pick.consumed is not None:
                agg = self.alloc_cap[cand.index]
                for name, amount in pick.consumed.items():
                    agg[name] -= amount
                if not left:
                    del self.alloc_cap[cand.index]
        else:
            holders = self.dedicated[cand.index]
            holders.pop()
            if not holders:
                del self.dedicated[cand.index]

    # ------------------------------------------------------------------ memo

    def _memo_key(self, ci: int, ri: int) -> tuple[Any, ...]:
        dedicated = tuple(sorted((i, tuple(c)) for i, c in self.dedicated.items()))
        shares = tuple(sorted(self.shares.items()))
        cap = tuple(sorted((i, tuple(sorted(v.items()))) for i, v in self.alloc_cap.items()))
        cons = tuple(cs.key() for cs in self.cstate[ci])
        return (ci, ri, dedicated, shares, cap, cons, len(self.picks[ci]))

    # ------------------------------------------------------------------ bounds

    def _eligible(self, ci: int, rd: ReqData, cand: Cand) -> bool:
        """Could `cand` take one more slot of `rd` now (ignoring the other slots)?"""
        if self._blocked(ci, rd, cand) or (rd.errors and cand.index in rd.errors):
            return False
        if self._counters_needed(cand) and not self._counters_fit(cand):
            return False
        if not self._capacity_fits(rd, cand):
            return False
        attrs = cand.device.attributes
        for k, cs in enumerate(self.cstate[ci]):
            if self._applies(ci, rd, k) and not cs.accepts(attrs.get(cs.attribute)):
                return False
        return True

    def _counter_bound_ok(self, group: list[Cand], need: int) -> bool:
        if self.options.ignore_counters:
            return True
        return counter_bound_ok(group, need, self.ctx.counter_available, self.used)

    def _matching_ok(self, ci: int, ri: int) -> bool:
        remaining = [ch for cj in range(ci, len(self.claims))
                     for ch in self.claims[cj].choices[(ri if cj == ci else 0):]]
        return matching_ok(remaining, self.dedicated)

    def _later_need(self, ci: int, ri: int, k: int) -> tuple[int, list[tuple[ReqData, Cand]]]:
        """Devices the later requests of the claim covered by constraint k still need, and their
        candidates (a relaxation: a firstAvailable request counts its smallest covered choice).
        Static per (claim, request, constraint); callers filter out devices that are taken."""
        key = (ci, ri, k)
        hit = self.later.get(key)
        if hit is not None:
            return hit
        cd = self.claims[ci]
        total = 0
        pool: list[tuple[ReqData, Cand]] = []
        for rj in range(ri + 1, len(cd.choices)):
            need = None
            for rd in cd.choices[rj]:
                covered = self._applies(ci, rd, k)
                n = rd.num if covered else 0
                need = n if need is None else min(need, n)
                if covered:
                    pool.extend((rd, c) for c in rd.cands)
            total += need or 0
        self.later[key] = (total, pool)
        return total, pool

    def _bound(self, ci: int, ri: int, rd: ReqData, slot: int, start: int) -> bool | list[int]:
        """False: no solution below this point. True: no restriction. A list: the only positions in
        `rd.cands` worth trying for this slot (eligible now, in a big enough matchAttribute group)."""
        need = rd.num - slot
        cands = rd.cands
        elig: list[Cand] = []
        where: list[int] = []
        # Without an open constraint (an unfixed matchAttribute, a distinctAttribute) or counters, enough
        # eligible devices is all there is to know: stop counting there.
        simple = not any(self._applies(ci, rd, k) and not (cs.match and cs.fixed() is not None)
                         for k, cs in enumerate(self.cstate[ci]))
        for pos in range(start, len(cands)):
            cand = cands[pos]
            if not self._eligible(ci, rd, cand):
                continue
            if cand.multi:
                return True  # one device may fill several slots: no counting argument
            if cand.counters and not self.options.ignore_counters:
                simple = False
            elig.append(cand)
            where.append(pos)
            if simple and len(elig) >= need:
                return True
        if len(elig) < need:
            return False
        allowed: set[int] | None = None
        for k, cs in enumerate(self.cstate[ci]):
            if not self._applies(ci, rd, k):
                continue
            if cs.match and cs.fixed() is not None:
                continue  # already applied by _eligible
            later, later_static = self._later_need(ci, ri, k)
            later_pool = [c for r, c in later_static if not self._blocked(ci, r, c)] if later else []
            if cs.match:
                groups: dict[tuple[str, str], list[Cand]] = {}
                for cand in elig:
                    attr = cand.device.attributes[cs.attribute]
                    groups.setdefault((attr.kind, repr(attr.value)), []).append(cand)
                viable: set[int] = set()
                for value, group in groups.items():
                    if len(group) < need or not self._counter_bound_ok(group, need):
                        continue
                    if later:
                        if any(c.multi for c in later_pool):
                            viable.update(c.index for c in group)
                            continue
                        union = {c.index for c in group}
                        for c in later_pool:
                            a = c.device.attributes.get(cs.attribute)
                            if a is not None and (a.kind, repr(a.value)) == value:
                                union.add(c.index)
                        if len(union) < need + later:
                            continue
                    viable.update(c.index for c in group)
                if not viable:
                    return False
                allowed = viable if allowed is None else allowed & viable
                if not allowed:
                    return False
            else:
                values = {(c.device.attributes[cs.attribute].kind, repr(c.device.attributes[cs.attribute].value))
                          for c in elig}
                if len(values) < need:
                    return False
                if later and not any(c.multi for c in later_pool):
                    used = {(a.kind, repr(a.value)) for a in cs.values}
                    for c in later_pool:
                        a = c.device.attributes.get(cs.attribute)
                        if a is not None and (a.kind, repr(a.value)) not in used:
                            values.add((a.kind, repr(a.value)))
                    if len(values) < need + later:
                        return False
        if allowed is None:
            return where if self._counter_bound_ok(elig, need) else False
        kept = [(p, c) for p, c in zip(where, elig, strict=True) if c.index in allowed]
        if not self._counter_bound_ok([c for _, c in kept], need):
            return False
        return [p for p, _ in kept]


def _drive(root: Step) -> int:
    """Run a step and every step it calls, with a list for the call stack: the result of `root`, or the
    exception a step raised and none caught, raised here (as plain recursion would)."""
    stack = [root]
    result: int | None = None  # None: the step on top has not started
    error: BaseException | None = None
    while True:
        step = stack[-1]
        try:
            if error is not None:
                call = step.throw(error)
            elif result is None:
                call = next(step)
            else:
                call = step.send(result)
        except StopIteration as done:
            stack.pop()
            if not stack:
                return int(done.value)
            result, error = done.value, None
            continue
        except BaseException as exc:  # passed on to the calling step, as a raise would be
            stack.pop()
            if not stack:
                raise
            error = exc
            continue
        error = None
        stack.append(call)
        result = None

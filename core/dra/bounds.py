"""Pruning bounds of the search, and the constraint state: small, pure pieces of `search`.

Every bound is a relaxation: it only says "no solution below this point" when that is certain, so the
first solution found is unchanged (see `search`).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from .model import Attribute, Constraint
from .prepare import Cand, ReqData


class ConstraintState:
    """A claim's matchAttribute or distinctAttribute constraint during the search. Upstream's
    semantics, with `distinctAttribute` values kept per device (1.35 keeps one value per request name,
    so a request's third device may repeat its first one's value; fixed upstream)."""

    def __init__(self, constraint: Constraint) -> None:
        self.requests = constraint.requests
        self.match = constraint.match_attribute is not None and bool(constraint.match_attribute)
        self.attribute = (constraint.match_attribute if self.match else constraint.distinct_attribute) or ""
        self.values: list[Attribute] = []  # match: the first device's value, repeated; distinct: all values

    def applies(self, rd: ReqData) -> bool:
        if not self.requests:
            return True
        return rd.base in self.requests or (rd.sub_index is not None and rd.name in self.requests)

    def accepts(self, attr: Attribute | None) -> bool:
        if attr is None:
            return False
        if self.match:
            return not self.values or self.values[0] == attr
        return attr not in self.values

    def fixed(self) -> Attribute | None:
        return self.values[0] if self.match and self.values else None

    def key(self) -> tuple[Any, ...]:
        if self.match:
            return (self.values[0].kind, self.values[0].value) if self.values else ()
        return tuple(sorted((a.kind, str(a.value)) for a in self.values))


def counter_bound_ok(group: Sequence[Cand], need: int, available: Sequence[Fraction], used: Sequence[Fraction]) -> bool:
    """Can `need` devices of `group` fit the counters left? For each counter, the `need` cheapest
    devices of the group (a device that does not consume it costs 0) must fit what is left."""
    if need <= 0:
        return True
    keys: dict[int, None] = {}
    for cand in group:
        for k, _ in cand.counters:
            keys[k] = None
    for k in keys:
        amounts = sorted(dict(c.counters).get(k, Fraction(0)) for c in group)
        if sum(amounts[:need], Fraction(0)) > available[k] - used[k]:
            return False
    return True


def matching_ok(remaining: Sequence[Sequence[ReqData]], dedicated: dict[int, Any]) -> bool:
    """Can the requests still to fill (each a list of choices) get enough free devices each, all at
    once? A bipartite matching of request slots onto free devices; admin-access requests, devices that
    allow multiple allocations and firstAvailable choices are relaxed, so it is never too strict."""
    demands: list[tuple[int, list[int]]] = []
    for choices in remaining:
        if any(rd.admin for rd in choices):
            continue
        need = min(rd.num for rd in choices)
        if need <= 0:
            continue
        free: dict[int, None] = {}
        multi = False
        for rd in choices:
            for c in rd.cands:
                if c.multi:
                    multi = True
                    break
                if not c.committed_in_use and c.index not in dedicated:
                    free[c.index] = None
            if multi:
                break
        if multi:
            continue
        if len(free) < need:
            return False
        demands.append((need, list(free)))
    if not demands:
        return True
    total = sum(n for n, _ in demands)
    if len({d for _, devs in demands for d in devs}) < total:
        return False
    owner: dict[int, int] = {}  # device -> demand index
    missing: list[int] = []  # demand index, once per unit the greedy pass could not place
    for i, (need, devs) in enumerate(demands):
        placed = 0
        for d in devs:
            if placed == need:
                break
            if d not in owner:
                owner[d] = i
                placed += 1
        missing.extend([i] * (need - placed))

    def augment(i: int, seen: set[int]) -> bool:
        for d in demands[i][1]:
            if d in seen:
                continue
            seen.add(d)
            j = owner.get(d)
            if j is None or augment(j, seen):
                owner[d] = i
                return True
        return False

    return all(augment(i, set()) for i in missing)

"""Property test (issue 23): on small random inputs the allocator's explanation names the cause a brute-force
classification finds, by checking which devices fail which check.

An example is one node, one pool of 1-5 devices (an int attribute `numa`; some in use; some with the
NoSchedule taint `t`; with a shared counter set, devices consuming 1-2 of its counter `mem`) and one claim of
1-3 requests (exactly or firstAvailable with two alternatives; count 1-2; a selector on `numa`; a toleration
of `t`), maybe constrained to one `numa` (matchAttribute). It goes through `dralab allocate`'s path
(`parse_documents`, `allocate_inventory`).

The classifier is this file's own: a brute-force allocation (every assignment of devices to requests) under a
chosen set of checks (taints, counters, the constraint), and counting per request which devices pass the
selectors, which of those are free and which of those tolerated. The kind is

* none, if the claim can be allocated;
* else, for the first request (in order) that cannot be allocated alone without constraints: `capacity`
  (too few devices match, or too few of them are free), `taint` (too few of the free ones are tolerated),
  else `counters`; for firstAvailable, the alternative that came closest (capacity < taint < counters, then
  one that matches some device, then the most free, then the first);
* else, if the requests together without the constraint cannot: the first of `taint`, `counters` whose check,
  left out, lets them fit; if only leaving out both does, the first of them that some free matching device
  fails; else `capacity`;
* else `topology`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dralab.core.dra.allocate import allocate_inventory
from dralab.core.dra.api import parse_documents

DRIVER = "driver-a"
NODE = "node-1"
POOL = "pool-1"
NS = "default"


@dataclass(frozen=True)
class Dev:
    name: str
    numa: int
    in_use: bool
    tainted: bool
    consumes: int  # units of counter "mem" (0: none)


@dataclass(frozen=True)
class Sub:
    name: str
    count: int
    numa: int | None  # selector numa == n
    tolerates: bool


@dataclass(frozen=True)
class Req:
    name: str
    subs: tuple[Sub, ...]
    first_available: bool


@dataclass(frozen=True)
class Example:
    devices: tuple[Dev, ...]
    counter: int | None  # the counter set's `mem`; None: no counters
    requests: tuple[Req, ...]
    match_numa: bool


# ------------------------------------------------------------------ brute force

def matches(sub: Sub, dev: Dev) -> bool:
    return sub.numa is None or dev.numa == sub.numa


def tolerated(sub: Sub, dev: Dev) -> bool:
    return not dev.tainted or sub.tolerates


def counter_left(ex: Example) -> int:
    assert ex.counter is not None
    return ex.counter - sum(d.consumes for d in ex.devices if d.in_use)


def feasible(ex: Example, requests: tuple[Req, ...], *, taints: bool = True, counters: bool = True,
             constraint: bool = True) -> bool:
    """Whether some choice of alternative per request and of distinct free devices per request passes the
    checks asked for."""
    for subs in itertools.product(*(r.subs for r in requests)):
        if _assign(ex, list(subs), 0, set(), taints, counters, constraint):
            return True
    return False


def _assign(ex: Example, subs: list[Sub], i: int, taken: set[str], taints: bool, counters: bool,
            constraint: bool) -> bool:
    if i == len(subs):
        chosen = [d for d in ex.devices if d.name in taken]
        if counters and ex.counter is not None and sum(d.consumes for d in chosen) > counter_left(ex):
            return False
        return not (constraint and ex.match_numa and len({d.numa for d in chosen}) > 1)
    sub = subs[i]
    usable = [d for d in ex.devices if d.name not in taken and not d.in_use and matches(sub, d)
              and (not taints or tolerated(sub, d))]
    return any(_assign(ex, subs, i + 1, taken | {d.name for d in pick}, taints, counters, constraint)
               for pick in itertools.combinations(usable, sub.count))


PROGRESS = {"capacity": 1, "taint": 3, "counters": 4}


def alone_kind(ex: Example, sub: Sub) -> tuple[str, int, int]:
    """(kind, matching, free) of one alternative that cannot be allocated alone."""
    m = [d for d in ex.devices if matches(sub, d)]
    f = [d for d in m if not d.in_use]
    t = [d for d in f if tolerated(sub, d)]
    if len(m) < sub.count or len(f) < sub.count:
        return "capacity", len(m), len(f)
    if len(t) < sub.count:
        return "taint", len(m), len(f)
    return "counters", len(m), len(f)


def classify(ex: Example) -> str | None:
    if feasible(ex, ex.requests):
        return None
    for r in ex.requests:
        if feasible(ex, (r,), constraint=False):
            continue
        kinds = [alone_kind(ex, s) for s in r.subs]
        best = max(range(len(kinds)), key=lambda i: (PROGRESS[kinds[i][0]], kinds[i][1] > 0, kinds[i][2], -i))
        return kinds[best][0]
    if not feasible(ex, ex.requests, constraint=False):
        if feasible(ex, ex.requests, taints=False, constraint=False):
            return "taint"
        if feasible(ex, ex.requests, counters=False, constraint=False):
            return "counters"
        if feasible(ex, ex.requests, taints=False, counters=False, constraint=False):
            free = [(s, d) for r in ex.requests for s in r.subs for d in ex.devices if matches(s, d) and not d.in_use]
            if any(not tolerated(s, d) for s, d in free):
                return "taint"
            if any(d.consumes for _, d in free):
                return "counters"
        return "capacity"
    return "topology"


# ------------------------------------------------------------------ manifests

def manifests(ex: Example) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "class-a"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
    ]
    devices = []
    for d in ex.devices:
        dev: dict[str, Any] = {"name": d.name, "attributes": {"numa": {"int": d.numa}}}
        if d.tainted:
            dev["taints"] = [{"key": "t", "value": "v", "effect": "NoSchedule"}]
        if ex.counter is not None and d.consumes:
            dev["consumesCounters"] = [{"counterSet": "cs", "counters": {"mem": {"value": str(d.consumes)}}}]
        devices.append(dev)
    count = 2 if ex.counter is not None else 1
    docs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "devices"},
                 "spec": {"driver": DRIVER, "nodeName": NODE,
                          "pool": {"name": POOL, "generation": 1, "resourceSliceCount": count}, "devices": devices}})
    if ex.counter is not None:
        docs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "counters"},
                     "spec": {"driver": DRIVER, "nodeName": NODE,
                              "pool": {"name": POOL, "generation": 1, "resourceSliceCount": 2},
                              "sharedCounters": [{"name": "cs", "counters": {"mem": {"value": str(ex.counter)}}}]}})
    for i, d in enumerate(d for d in ex.devices if d.in_use):
        docs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": f"in-use-{i}", "namespace": NS},
                     "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "class-a"}}]}},
                     "status": {"allocation": {"devices": {"results": [
                         {"request": "r", "driver": DRIVER, "pool": POOL, "device": d.name}]}}}})

    def fields(sub: Sub) -> dict[str, Any]:
        out: dict[str, Any] = {"deviceClassName": "class-a", "count": sub.count}
        if sub.numa is not None:
            out["selectors"] = [{"cel": {"expression": f'device.attributes["{DRIVER}"].numa == {sub.numa}'}}]
        if sub.tolerates:
            out["tolerations"] = [{"key": "t", "operator": "Exists", "effect": "NoSchedule"}]
        return out

    requests = [{"name": r.name, "firstAvailable": [{"name": s.name, **fields(s)} for s in r.subs]}
                if r.first_available else {"name": r.name, "exactly": fields(r.subs[0])} for r in ex.requests]
    spec: dict[str, Any] = {"requests": requests}
    if ex.match_numa:
        spec["constraints"] = [{"matchAttribute": f"{DRIVER}/numa"}]
    docs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "claim", "namespace": NS}, "spec": {"devices": spec}})
    return docs


# ------------------------------------------------------------------ strategies

@st.composite
def sub_st(draw: st.DrawFn, name: str) -> Sub:
    return Sub(name, draw(st.integers(1, 2)), draw(st.one_of(st.none(), st.integers(0, 1))), draw(st.booleans()))


@st.composite
def example_st(draw: st.DrawFn) -> Example:
    counters = draw(st.booleans())
    n = draw(st.integers(1, 5))
    devices = tuple(Dev(f"dev-{i}", draw(st.integers(0, 1)), draw(st.booleans()), draw(st.booleans()),
                        draw(st.integers(1, 2)) if counters and draw(st.booleans()) else 0) for i in range(n))
    counter = draw(st.integers(1, 4)) if counters else None
    if counter is not None and counter < sum(d.consumes for d in devices if d.in_use):
        counter = sum(d.consumes for d in devices if d.in_use)  # in use never overdraws (an inconsistent state)
    requests = []
    for i in range(draw(st.integers(1, 3))):
        first = draw(st.booleans())
        subs = tuple(draw(sub_st(f"s{j}")) for j in range(2 if first else 1))
        requests.append(Req(f"req-{i}", subs, first))
    return Example(devices, counter, tuple(requests), draw(st.booleans()))


def describe(ex: Example) -> str:
    return "\n".join([f"counter={ex.counter} match_numa={ex.match_numa}", *map(str, ex.devices),
                      *map(str, ex.requests)])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(example_st())
def test_the_explanations_kind_agrees_with_brute_force(ex: Example) -> None:
    report = allocate_inventory(parse_documents(manifests(ex), "<property test>"), NODE).to_json()
    want = classify(ex)
    if want is None:
        assert report["outcome"] == "allocated", describe(ex) + "\n" + str(report)
        return
    assert report["outcome"] == "unsatisfiable", describe(ex) + "\n" + str(report)
    got = report["explanations"][0]["kind"]
    assert got == want, f"{describe(ex)}\nbrute force: {want}\nexplanation: {report['explanations']}"

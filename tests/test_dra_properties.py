"""Property tests for the DRA allocator, on small random inventories.

Each example is one node with at most 6 devices (dedicated or shareable, some already in use), an optional
shared counter set, consumable capacity with request policies, and one or two claims with at most 3
requests each (exactly or firstAvailable, selectors, capacity requests) and matchAttribute /
distinctAttribute constraints. The inventory is written as real resource.k8s.io/v1 manifests and goes
through the same path as `dralab allocate` (`dralab.core.dra.api.parse_documents`, then
`dralab.core.dra.allocate.allocate_inventory`, which drives `Allocator` and `AllocatedState`).

Properties:
* the outcome is never "error" (the inputs are valid);
* an allocation is valid: counts and request names right, every selector satisfied, no dedicated device
  given twice or taken while in use, counters and capacity never exceeded, shares consume what the
  request policy says, every constraint (including distinctAttribute within one request) holds;
* "unsatisfiable" is only said when a brute-force search (this file's own, independent of the
  allocator) finds no valid allocation either;
* the same input gives the same answer (shareIDs aside).

The semantics checked are Kubernetes 1.35 with the fixes dralab adopts (docs/allocator.md): counters of
shared in-use devices count; distinctAttribute compares every device, also within one request.
A shareable device may serve several slots, also of the same request (as upstream: shares are not
"in use"), each share consuming capacity.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DRIVER = "driver-a"
POOL = "pool-1"
NODE = "node-1"
NS = "default"

# --------------------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Dev:
    name: str
    numa: int
    color: str | None  # None: attribute absent
    memory: int  # capacity "memory"
    shared: bool  # allowMultipleAllocations
    policy: tuple[Any, ...] | None  # ("range", min, step|None, max|None) | ("values", (v1, v2, ...)); shared only
    consumes: int  # units of counter "mem" in counter set "cs" (0: no consumesCounters)
    in_use: int | None  # None: free; 0: dedicated in use; k>0: an in-use share consuming k memory (shared only)


@dataclass(frozen=True)
class Sub:
    name: str
    count: int
    selector: tuple[str, int] | None  # ("numa_eq"|"numa_ge"|"mem_ge", n)
    cap_req: int | None  # capacity request for "memory"


@dataclass(frozen=True)
class Req:
    name: str
    subs: tuple[Sub, ...]
    first_available: bool


@dataclass(frozen=True)
class Con:
    kind: str  # "match" | "distinct"
    attr: str  # "numa" | "color"
    requests: tuple[str, ...]  # () = all requests of the claim


@dataclass(frozen=True)
class ClaimSpec:
    name: str
    requests: tuple[Req, ...]
    constraints: tuple[Con, ...]


@dataclass(frozen=True)
class Scenario:
    devices: tuple[Dev, ...]
    counter: int | None  # value of counter "mem" in set "cs"; None: no counters at all
    claims: tuple[ClaimSpec, ...]


@dataclass
class Share:
    """One result: a device given to a (sub)request."""

    claim: str
    request: str  # "req" or "req/sub"
    device: str
    consumed: int | None = None  # for shares of shareable devices
    share_id: bool = False


# --------------------------------------------------------------------------------------------- semantics


def selects(sub: Sub, dev: Dev) -> bool:
    if sub.selector is None:
        return True
    kind, n = sub.selector
    if kind == "numa_eq":
        return dev.numa == n
    if kind == "numa_ge":
        return dev.numa >= n
    return dev.memory >= n  # mem_ge


def consumed_for(sub: Sub, dev: Dev) -> int | None:
    """Capacity a share of `dev` consumes for `sub` (upstream calculateConsumedCapacity); None: policy
    violated, the device cannot serve the request."""
    pol = dev.policy
    req = sub.cap_req
    if req is None:
        if pol is None:
            return dev.memory
        return pol[1] if pol[0] == "range" else pol[1][0]  # the default is min / first valid value
    if pol is None:
        value = req
    elif pol[0] == "range":
        _, lo, step, _hi = pol
        if req < lo:
            value = lo
        elif step is None:
            value = req
        else:
            value = lo + -(-(req - lo) // step) * step
    else:
        value = next((v for v in pol[1] if v >= req), req)
    if pol is not None:
        default = pol[1] if pol[0] == "range" else pol[1][0]
        if value != default:
            if pol[0] == "range":
                _, lo, step, hi = pol
                if hi is not None and value > hi:
                    return None
                if step is not None and (value - lo) % step:
                    return None
            elif value not in pol[1]:
                return None
    return value


def eligible(sub: Sub, dev: Dev) -> bool:
    """Selectors and the capacity request (a dedicated device only needs request <= capacity)."""
    if not selects(sub, dev):
        return False
    c = consumed_for(sub, dev)
    return c is not None and c <= dev.memory


def valid(scn: Scenario, shares: list[Share], complete: bool) -> str | None:
    """None if `shares` is a valid (partial, unless `complete`) allocation, else why not."""
    devs = {d.name: d for d in scn.devices}
    # dedicated devices: once, and not in use
    dedicated = Counter(s.device for s in shares if not devs[s.device].shared)
    for name, n in dedicated.items():
        if n > 1:
            return f"dedicated {name} given {n} times"
        if devs[name].in_use is not None:
            return f"dedicated {name} is in use"
    # capacity of shareable devices
    for name, d in devs.items():
        if not d.shared:
            continue
        total = (d.in_use or 0) + sum(s.consumed or 0 for s in shares if s.device == name)
        if total > d.memory:
            return f"{name}: memory {total} > {d.memory}"
    # counters: every device with a share or a dedicated allocation (in use or new) consumes once
    # (a shareable device with an in-use share already consumed them; a check only happens when some
    # newly used device consumes counters, as upstream checks per device taken)
    if scn.counter is not None:
        in_use = {d.name for d in scn.devices if d.in_use is not None}
        new = {s.device for s in shares if devs[s.device].consumes} - in_use
        total = sum(devs[n].consumes for n in in_use | new)
        if new and total > scn.counter:
            return f"counter mem: {total} > {scn.counter}"
    # per claim: selectors, counts, subrequest consistency, constraints
    for claim in scn.claims:
        mine = [s for s in shares if s.claim == claim.name]
        for req in claim.requests:
            got = [s for s in mine if s.request.split("/")[0] == req.name]
            if not got and not complete:
                continue
            names = {s.request for s in got}
            if len(names) != 1:
                return f"{claim.name}/{req.name}: results for {sorted(names)}"
            (rname,) = names
            sub = next((s for s in req.subs if (f"{req.name}/{s.name}" if req.first_available else req.name) == rname),
                       None)
            if sub is None:
                return f"{claim.name}: unknown request {rname}"
            if len(got) != sub.count:
                return f"{claim.name}/{rname}: {len(got)} devices, want {sub.count}"
            for s in got:
                d = devs[s.device]
                if not eligible(sub, d):
                    return f"{claim.name}/{rname}: {s.device} not eligible"
                if d.shared and s.consumed != consumed_for(sub, d):
                    return f"{claim.name}/{rname}: {s.device} consumed {s.consumed}, want {consumed_for(sub, d)}"
        for con in claim.constraints:
            covered = [s for s in mine if not con.requests or s.request.split("/")[0] in con.requests]
            values = [getattr(devs[s.device], con.attr) for s in covered]
            if any(v is None for v in values):
                return f"{claim.name}: {con.kind} {con.attr}: attribute missing"
            if con.kind == "match" and len(set(values)) > 1:
                return f"{claim.name}: matchAttribute {con.attr}: {values}"
            if con.kind == "distinct" and len(set(values)) != len(values):
                return f"{claim.name}: distinctAttribute {con.attr}: {values}"
    return None


def brute_force(scn: Scenario) -> list[Share] | None:
    """Any valid allocation of all claims, by exhaustive search (pruned by partial validity)."""
    slots: list[tuple[ClaimSpec, Req]] = [(c, r) for c in scn.claims for r in c.requests]

    def rec(i: int, acc: list[Share]) -> list[Share] | None:
        if i == len(slots):
            return acc if valid(scn, acc, complete=True) is None else None
        claim, req = slots[i]
        for sub in req.subs:
            rname = f"{req.name}/{sub.name}" if req.first_available else req.name
            cands = [d for d in scn.devices if eligible(sub, d)]
            for combo in itertools.combinations_with_replacement(cands, sub.count):
                if any(n > 1 and not d.shared for d, n in Counter(combo).items()):
                    continue
                new = [Share(claim.name, rname, d.name, consumed_for(sub, d) if d.shared else None) for d in combo]
                if valid(scn, acc + new, complete=False) is None:
                    found = rec(i + 1, acc + new)
                    if found is not None:
                        return found
        return None

    return rec(0, [])


# --------------------------------------------------------------------------------------------- manifests


def _q(n: int) -> str:
    return str(n)


def selector_cel(sel: tuple[str, int]) -> str:
    kind, n = sel
    if kind == "numa_eq":
        return f'device.attributes["{DRIVER}"].numa == {n}'
    if kind == "numa_ge":
        return f'device.attributes["{DRIVER}"].numa >= {n}'
    return f'device.capacity["{DRIVER}"].memory.compareTo(quantity("{n}")) >= 0'


def _sub_fields(sub: Sub) -> dict[str, Any]:
    out: dict[str, Any] = {"deviceClassName": "class-a", "count": sub.count}
    if sub.selector is not None:
        out["selectors"] = [{"cel": {"expression": selector_cel(sub.selector)}}]
    if sub.cap_req is not None:
        out["capacity"] = {"requests": {"memory": _q(sub.cap_req)}}
    return out


def manifests(scn: Scenario) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "class-a"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
    ]
    devices = []
    for d in scn.devices:
        attrs: dict[str, Any] = {"numa": {"int": d.numa}}
        if d.color is not None:
            attrs["color"] = {"string": d.color}
        cap: dict[str, Any] = {"value": _q(d.memory)}
        if d.policy is not None:
            if d.policy[0] == "range":
                _, lo, step, hi = d.policy
                rng: dict[str, str] = {"min": _q(lo)}
                if hi is not None:
                    rng["max"] = _q(hi)
                if step is not None:
                    rng["step"] = _q(step)
                cap["requestPolicy"] = {"default": _q(lo), "validRange": rng}
            else:
                cap["requestPolicy"] = {"default": _q(d.policy[1][0]), "validValues": [_q(v) for v in d.policy[1]]}
        dev: dict[str, Any] = {"name": d.name, "attributes": attrs, "capacity": {"memory": cap}}
        if scn.counter is not None and d.consumes:
            dev["consumesCounters"] = [{"counterSet": "cs", "counters": {"mem": {"value": _q(d.consumes)}}}]
        if d.shared:
            dev["allowMultipleAllocations"] = True
        devices.append(dev)
    count = 2 if scn.counter is not None else 1
    docs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "devices"},
                 "spec": {"driver": DRIVER, "nodeName": NODE,
                          "pool": {"name": POOL, "generation": 1, "resourceSliceCount": count}, "devices": devices}})
    if scn.counter is not None:
        docs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "counters"},
                     "spec": {"driver": DRIVER, "nodeName": NODE,
                              "pool": {"name": POOL, "generation": 1, "resourceSliceCount": 2},
                              "sharedCounters": [{"name": "cs", "counters": {"mem": {"value": _q(scn.counter)}}}]}})
    for i, d in enumerate(d for d in scn.devices if d.in_use is not None):
        exactly: dict[str, Any] = {"deviceClassName": "class-a"}
        result: dict[str, Any] = {"request": "req-0", "driver": DRIVER, "pool": POOL, "device": d.name}
        if d.in_use:
            exactly["capacity"] = {"requests": {"memory": _q(d.in_use)}}
            result["shareID"] = f"00000000-0000-4000-8000-{i:012d}"
            result["consumedCapacity"] = {"memory": _q(d.in_use)}
        docs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": f"in-use-{i}", "namespace": NS},
                     "spec": {"devices": {"requests": [{"name": "req-0", "exactly": exactly}]}},
                     "status": {"allocation": {"devices": {"results": [result]}}}})
    for c in scn.claims:
        reqs = []
        for r in c.requests:
            if r.first_available:
                reqs.append({"name": r.name, "firstAvailable": [{"name": s.name, **_sub_fields(s)} for s in r.subs]})
            else:
                reqs.append({"name": r.name, "exactly": _sub_fields(r.subs[0])})
        spec: dict[str, Any] = {"requests": reqs}
        if c.constraints:
            spec["constraints"] = [
                {**({"requests": list(k.requests)} if k.requests else {}),
                 ("matchAttribute" if k.kind == "match" else "distinctAttribute"): f"{DRIVER}/{k.attr}"}
                for k in c.constraints
            ]
        docs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": c.name, "namespace": NS}, "spec": {"devices": spec}})
    return docs


# --------------------------------------------------------------------------------------------- strategies


@st.composite
def devices_st(draw: st.DrawFn, counters: bool) -> tuple[Dev, ...]:
    n = draw(st.integers(1, 6))
    out = []
    for i in range(n):
        memory = draw(st.integers(1, 4))
        shared = draw(st.booleans())
        policy: tuple[Any, ...] | None = None
        if shared:
            kind = draw(st.sampled_from([None, "range", "values"]))
            if kind == "range":
                # API validation: min + step and max within the capacity, max on a step
                step = draw(st.sampled_from([None] + [x for x in (1, 2) if 1 + x <= memory]))
                highs = [v for v in range(1, memory + 1) if step is None or (v - 1) % step == 0]
                policy = ("range", 1, step, draw(st.one_of(st.none(), st.sampled_from(highs))))
            elif kind == "values":
                values = sorted(draw(st.sets(st.integers(1, memory), min_size=1, max_size=3)))
                policy = ("values", tuple(values))
        in_use: int | None = None
        if draw(st.integers(0, 3)) == 0:
            in_use = draw(st.integers(1, memory)) if shared else 0
        out.append(Dev(
            name=f"device-{i}", numa=draw(st.integers(0, 2)),
            color=draw(st.sampled_from(["red", "blue", "red", "blue", None])),
            memory=memory, shared=shared, policy=policy,
            consumes=draw(st.integers(0, 3)) if counters else 0, in_use=in_use,
        ))
    return tuple(out)


selector_st = st.one_of(
    st.none(),
    st.tuples(st.sampled_from(["numa_eq", "numa_ge"]), st.integers(0, 2)),
    st.tuples(st.just("mem_ge"), st.integers(1, 4)),
)


@st.composite
def sub_st(draw: st.DrawFn, name: str, max_count: int) -> Sub:
    return Sub(name, draw(st.integers(1, max_count)), draw(selector_st), draw(st.one_of(st.none(), st.integers(1, 4))))


@st.composite
def claims_st(draw: st.DrawFn) -> tuple[ClaimSpec, ...]:
    n_claims = draw(st.integers(1, 2))
    claims = []
    for ci in range(n_claims):
        budget = 6 // n_claims  # devices asked for per claim, at most (keeps the brute force small)
        reqs = []
        for ri in range(draw(st.integers(1, 3 if n_claims == 1 else 2))):
            if budget <= 0:
                break
            if draw(st.integers(0, 3)) == 0:
                subs = (draw(sub_st("sub-0", min(2, budget))), draw(sub_st("sub-1", min(2, budget))))
                reqs.append(Req(f"req-{ri}", subs, True))
                budget -= max(s.count for s in subs)
            else:
                sub = draw(sub_st("", min(3, budget)))
                reqs.append(Req(f"req-{ri}", (sub,), False))
                budget -= sub.count
        names = [r.name for r in reqs]
        cons = []
        for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
            subset = draw(st.one_of(st.just(()), st.lists(st.sampled_from(names), min_size=1, unique=True).map(tuple)))
            cons.append(Con(draw(st.sampled_from(["match", "distinct"])), draw(st.sampled_from(["numa", "color"])),
                            subset))
        claims.append(ClaimSpec(f"claim-{ci}", tuple(reqs), tuple(cons)))
    return tuple(claims)


@st.composite
def scenario_st(draw: st.DrawFn) -> Scenario:
    counters = draw(st.booleans())
    devs = draw(devices_st(counters))
    counter = draw(st.integers(1, 6)) if counters else None
    return Scenario(devs, counter, draw(claims_st()))


# --------------------------------------------------------------------------------------------- running


def run(scn: Scenario) -> dict[str, Any]:
    from dralab.core.dra.allocate import allocate_inventory
    from dralab.core.dra.api import parse_documents

    inventory = parse_documents(manifests(scn), "<property test>")
    return allocate_inventory(inventory, NODE).to_json()


def shares_from(report: dict[str, Any], scn: Scenario) -> list[Share]:
    shares = []
    for c in report["claims"]:
        alloc = c["allocation"]
        sel = alloc.get("nodeSelector")
        assert sel == {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}, sel
        for r in alloc["devices"]["results"]:
            assert (r["driver"], r["pool"]) == (DRIVER, POOL), r
            consumed = None
            cc = r.get("consumedCapacity") or {}
            if cc:
                from dralab.core.kube.quantity import parse_quantity

                (key, value), = cc.items()
                assert key.split("/")[-1] == "memory", r
                q = parse_quantity(str(value))
                assert q == Fraction(int(q)), r
                consumed = int(q)
            shares.append(Share(c["name"], r["request"], r["device"], consumed, bool(r.get("shareID"))))
    return shares


def describe(scn: Scenario) -> str:
    import yaml

    return yaml.safe_dump_all(manifests(scn), sort_keys=False)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_st())
def test_allocation_is_valid_and_unsatisfiable_is_true(scn: Scenario) -> None:
    report = run(scn)
    outcome = report["outcome"]
    assert outcome in ("allocated", "unsatisfiable"), f"{outcome}: {report.get('message')}\n{describe(scn)}"
    if outcome == "allocated":
        shares = shares_from(report, scn)
        assert {c["name"] for c in report["claims"]} == {c.name for c in scn.claims}
        devs = {d.name: d for d in scn.devices}
        for s in shares:
            assert s.share_id == devs[s.device].shared, f"shareID presence wrong for {s}\n{describe(scn)}"
            if not devs[s.device].shared:
                assert s.consumed is None, f"dedicated device with consumedCapacity: {s}\n{describe(scn)}"
        why = valid(scn, shares, complete=True)
        assert why is None, f"invalid allocation: {why}\n{shares}\n{describe(scn)}"
    else:
        found = brute_force(scn)
        assert found is None, f"allocator says unsatisfiable, but this works: {found}\n{describe(scn)}"


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_st())
def test_same_input_same_answer(scn: Scenario) -> None:
    def strip(report: dict[str, Any]) -> Any:
        out = []
        for c in report["claims"]:
            results = [{k: v for k, v in r.items() if k != "shareID"} for r in c["allocation"]["devices"]["results"]]
            out.append((c["name"], results))
        return report["outcome"], out

    assert strip(run(scn)) == strip(run(scn))


# --------------------------------------------------------------------------------------------- the checker itself


def test_brute_force_knows_the_1_35_bugs_are_bugs() -> None:
    """The reference semantics reject what 1.35 would accept (distinct within one request) and accept what
    1.35 would refuse (a device rejected by a constraint does not leak its counters)."""
    devs = (Dev("device-0", 0, "red", 1, False, None, 0, None), Dev("device-1", 1, "red", 1, False, None, 0, None),
            Dev("device-2", 0, "red", 1, False, None, 0, None))
    distinct = Scenario(devs, None, (ClaimSpec("claim-0", (Req("req-0", (Sub("", 3, None, None),), False),),
                                               (Con("distinct", "numa", ()),)),))
    assert brute_force(distinct) is None
    bad = [Share("claim-0", "req-0", d.name) for d in devs]
    assert valid(distinct, bad, complete=True) is not None
    leak = Scenario(
        (Dev("device-0", 0, None, 1, False, None, 4, None), Dev("device-1", 1, None, 1, False, None, 4, None),
         Dev("device-2", 0, None, 1, False, None, 4, None)), 8,
        (ClaimSpec("claim-0", (Req("req-0", (Sub("", 1, None, None),), False),
                               Req("req-1", (Sub("", 1, None, None),), False)), (Con("match", "numa", ()),)),))
    found = brute_force(leak)
    assert found is not None and {s.device for s in found} == {"device-0", "device-2"}


@pytest.mark.parametrize(("policy", "req", "want"), [
    (None, None, 4), (None, 3, 3),
    (("range", 1, 2, 4), None, 1), (("range", 1, 2, 4), 2, 3), (("range", 1, 2, 4), 4, None),
    (("range", 1, None, 3), 2, 2), (("range", 1, None, 3), 4, None),
    (("values", (1, 3)), 2, 3), (("values", (1, 3)), 4, None), (("values", (2, 3)), None, 2),
])
def test_consumed_for_follows_upstream_rounding(policy: Any, req: int | None, want: int | None) -> None:
    dev = Dev("d", 0, None, 4, True, policy, 0, None)
    assert consumed_for(Sub("", 1, None, req), dev) == want

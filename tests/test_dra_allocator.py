"""The structured allocator (core/dra/allocator.py and friends), on model objects built directly.

Selectors are evaluated by a table matcher (expression string -> Python predicate); the real CEL matcher
is tested elsewhere. Most cases restate the upstream test table
(k8s.io/dynamic-resource-allocation structured/internal/allocatortesting, v0.35) as facts: the same
slices, classes and claims, the same answer. Then dralab's own behaviours: fixed 1.35 bugs, determinism,
explanations, the speed workloads (asserted on allocate-one calls, not wall time), and a property test
that compares the search with a naive permutation search written the way upstream's `allocateOne` is.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dralab.core.dra.allocated import AllocatedState
from dralab.core.dra.allocator import AllocationOutcome, Allocator, Features
from dralab.core.dra.consumable import consumed_capacity, request_fits
from dralab.core.dra.model import (
    Attribute,
    Capacity,
    CapacityPolicy,
    Claim,
    Constraint,
    CounterConsumption,
    Device,
    DeviceClass,
    DeviceID,
    Node,
    NodeSelection,
    Request,
    Slice,
    SubRequest,
    Taint,
    Toleration,
)
from dralab.core.dra.result import share_id
from dralab.core.kube.quantity import format_quantity

GI = 2**30
A, B = "driver-a", "driver-b"
NODE1 = Node("node-1", {"region": "region-1", "planet": "earth"})
NODE2 = Node("node-2", {"region": "region-2", "planet": "earth"})


# ---------------------------------------------------------------------- builders


class Table:
    """expression -> predicate(device). Unknown expressions raise (like a CEL compile error)."""

    def __init__(self, extra: dict[str, Callable[[Device], bool]] | None = None) -> None:
        self.table: dict[str, Callable[[Device], bool]] = {
            A: lambda d: d.id.driver == A,
            B: lambda d: d.id.driver == B,
            "multi": lambda d: d.allow_multiple_allocations,
            "dedicated": lambda d: not d.allow_multiple_allocations,
        }
        for gi in (1, 2, 4, 6, 8):
            self.table[f"mem>={gi}Gi"] = (
                lambda d, gi=gi: d.capacity[f"{d.id.driver}/memory"].value >= gi * GI  # type: ignore[misc]
            )
        self.table.update(extra or {})
        self.calls = 0

    def matches(self, expression: str, device: Device, origin: str) -> bool:
        self.calls += 1
        if expression not in self.table:
            raise ValueError(f"undeclared reference to {expression!r} ({origin})")
        return self.table[expression](device)


def attrs(driver: str, **values: int | bool | str) -> dict[str, Attribute]:
    kinds = {bool: "bool", int: "int", str: "string"}
    out = {}
    for k, v in values.items():
        kind = "version" if k == "driverVersion" else kinds[type(v)]
        out[f"{driver}/{k}"] = Attribute(kind, v)
    return out


def dev(
    name: str,
    *,
    driver: str = A,
    memory: int | None = None,
    counters: dict[str, dict[str, int]] | None = None,
    taints: Sequence[Taint] = (),
    multi: bool = False,
    caps: dict[str, Capacity] | None = None,
    node: NodeSelection | None = None,
    binding: tuple[Sequence[str], Sequence[str]] | None = None,
    binds_to_node: bool = False,
    **attributes: int | bool | str,
) -> Device:
    capacity = dict(caps or {})
    if memory is not None:
        capacity[f"{driver}/memory"] = Capacity(Fraction(memory))
    return Device(
        id=DeviceID(driver, "?", name),
        slice_name="?",
        attributes=attrs(driver, **attributes),
        capacity=capacity,
        consumes_counters=tuple(
            CounterConsumption(s, {c: Fraction(v) for c, v in cs.items()}) for s, cs in (counters or {}).items()
        ),
        taints=tuple(taints),
        allow_multiple_allocations=multi,
        node_selection=node,
        binds_to_node=binds_to_node,
        binding_conditions=tuple(binding[0]) if binding else (),
        binding_failure_conditions=tuple(binding[1]) if binding else (),
    )


def sl(
    name: str,
    *devices: Device,
    node: str | None = "node-1",
    pool: str = "pool-1",
    driver: str = A,
    count: int = 1,
    gen: int = 1,
    selector: dict[str, Any] | None = None,
    all_nodes: bool = False,
    per_device: bool = False,
    counter_sets: dict[str, dict[str, int]] | None = None,
) -> Slice:
    if per_device:
        selection = None
    elif selector is not None:
        selection = NodeSelection(node_selector=selector)
    elif all_nodes:
        selection = NodeSelection(all_nodes=True)
    else:
        selection = NodeSelection(node_name=node)
    fixed = tuple(replace(d, id=DeviceID(driver, pool, d.id.device), slice_name=name) for d in devices)
    shared = {s: {c: Fraction(v) for c, v in cs.items()} for s, cs in (counter_sets or {}).items()}
    return Slice(name, driver, pool, gen, count, selection, per_device, fixed, shared)


def labels(key: str, *values: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]}


def local(node: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def cls(name: str, *selectors: str, config: Sequence[dict[str, Any]] = ()) -> DeviceClass:
    return DeviceClass(name, tuple(selectors), tuple(config))


CLASSES = {"class-a": cls("class-a", A), "class-b": cls("class-b", B)}


def sub(
    name: str,
    device_class: str = "class-a",
    count: int = 1,
    *selectors: str,
    mode: str = "ExactCount",
    admin: bool = False,
    tolerations: Sequence[Toleration] = (),
    capacity: dict[str, int] | None = None,
) -> SubRequest:
    return SubRequest(
        name,
        device_class,
        tuple(selectors),
        mode,
        count,
        admin,
        tuple(tolerations),
        {k: Fraction(v) for k, v in (capacity or {}).items()},
    )


def req(name: str, device_class: str = "class-a", count: int = 1, *selectors: str, **kw: Any) -> Request:
    return Request(name, exactly=sub(name, device_class, count, *selectors, **kw))


def first(name: str, *subs: SubRequest) -> Request:
    return Request(name, first_available=tuple(subs))


def claim(
    name: str,
    *requests: Request,
    constraints: Sequence[Constraint] = (),
    config: Sequence[dict[str, Any]] = (),
    namespace: str = "default",
    uid: str = "",
) -> Claim:
    return Claim(namespace, name, uid, tuple(requests), tuple(constraints), tuple(config))


def match(attribute: str, *requests: str) -> Constraint:
    return Constraint(tuple(requests), match_attribute=attribute)


def distinct(attribute: str, *requests: str) -> Constraint:
    return Constraint(tuple(requests), distinct_attribute=attribute)


def run(
    slices: Sequence[Slice],
    claims: Sequence[Claim],
    *,
    classes: dict[str, DeviceClass] | None = None,
    node: Node = NODE1,
    in_use: Iterable[tuple[str, str, str]] = (),
    shared: dict[tuple[str, str, str], dict[str, int]] | None = None,
    features: Features | None = None,
    matcher: Table | None = None,
    **kw: Any,
) -> AllocationOutcome:
    state = AllocatedState(devices={DeviceID(*d) for d in in_use})
    for d, consumed in (shared or {}).items():
        state.shared.add((DeviceID(*d), "share-" + d[2]))
        state.capacity[DeviceID(*d)] = {k: Fraction(v) for k, v in consumed.items()}
    allocator = Allocator(
        slices, CLASSES if classes is None else classes, state, matcher or Table(), features=features, **kw
    )
    return allocator.allocate(node, claims)


def picked(out: AllocationOutcome, name: str = "claim-0") -> list[tuple[str, str, str, str]]:
    assert out.outcome == "allocated", out.message
    results = out.allocations[f"default/{name}"]["devices"]["results"]
    return [(r["request"], r["driver"], r["pool"], r["device"]) for r in results]


def ok(out: AllocationOutcome, *expected: tuple[str, str, str, str] | tuple[str, str], name: str = "claim-0") -> None:
    got = picked(out, name)
    want = [e if len(e) == 4 else (e[0], A, "pool-1", e[1]) for e in expected]
    assert got == want, (got, want)


def unsat(out: AllocationOutcome) -> None:
    assert out.outcome == "unsatisfiable", (out.outcome, out.message)
    assert out.allocations == {}


def error(out: AllocationOutcome, *fragments: str) -> None:
    assert out.outcome == "error", (out.outcome, out.message)
    for fragment in fragments:
        assert fragment in out.message, out.message


def one_device_slice(name: str = "slice-1", **kw: Any) -> Slice:
    return sl(name, dev("device-1"), **kw)


# ---------------------------------------------------------------------- basics (upstream table)


def test_simple_allocation_and_local_node_selector() -> None:
    out = run([one_device_slice()], [claim("claim-0", req("req-0"))])
    ok(out, ("req-0", "device-1"))
    assert out.allocations["default/claim-0"] == {
        "devices": {"results": [{"request": "req-0", "driver": A, "pool": "pool-1", "device": "device-1"}]},
        "nodeSelector": local("node-1"),
    }


def test_other_node_and_no_slices_and_no_claims() -> None:
    slices = [one_device_slice(driver=B), sl("slice-2", dev("device-1"), node="node-2", pool="pool-2")]
    ok(run(slices, [claim("claim-0", req("req-0"))], node=NODE2), ("req-0", A, "pool-2", "device-1"))
    unsat(run([], [claim("claim-0", req("req-0"))]))
    out = run([one_device_slice()], [])
    assert out.outcome == "allocated" and out.allocations == {}


def test_small_and_large_backtrack_requests_and_claims() -> None:
    slices = [sl("slice-1", dev("device-2", memory=2 * GI), dev("device-1", memory=GI))]
    c = claim("claim-0", req("req-0", "class-a", 1, "mem>=1Gi"), req("req-1", "class-a", 1, "mem>=2Gi"))
    ok(run(slices, [c]), ("req-0", "device-1"), ("req-1", "device-2"))
    c0 = claim("claim-0", req("req-0", "class-a", 1, "mem>=1Gi"))
    c1 = claim("claim-1", req("req-1", "class-a", 1, "mem>=2Gi"))
    out = run(slices, [c0, c1])
    ok(out, ("req-0", "device-1"))
    ok(out, ("req-1", "device-2"), name="claim-1")


def test_devices_split_across_slices_and_several_drivers() -> None:
    slices = [one_device_slice(), sl("slice-2", dev("device-1"), pool="pool-2")]
    ok(
        run(slices, [claim("claim-0", req("req-0", count=2))]),
        ("req-0", A, "pool-1", "device-1"),
        ("req-0", A, "pool-2", "device-1"),
    )
    slices = [sl("slice-1", dev("device-1"), dev("device-2")), sl("slice-1", dev("device-1"), driver=B)]
    out = run(slices, [claim("claim-0", req("req-0")), claim("claim-1", req("req-0", "class-b"))])
    ok(out, ("req-0", "device-1"))
    ok(out, ("req-0", B, "pool-1", "device-1"), name="claim-1")


def test_not_enough_devices_and_already_allocated() -> None:
    unsat(run([one_device_slice()], [claim("claim-0", req("req-0")), claim("claim-1", req("req-1"))]))
    unsat(
        run(
            [one_device_slice()],
            [claim("claim-0", req("req-0"))],
            in_use=[(A, "pool-1", "device-1"), (A, "pool-1", "device-2")],
        )
    )


def test_obsolete_incomplete_and_duplicate_slices() -> None:
    old = sl("slice-1-obsolete", dev("device-1"), count=2)
    new = sl("slice-1-obsolete", dev("device-2"), count=2, gen=2)
    unsat(run([old, new], [claim("claim-0", req("req-0"))]))  # generation 2 is incomplete
    unsat(run([one_device_slice(count=2)], [claim("claim-0", req("req-0"))]))  # no allocation from incomplete
    dup = [one_device_slice(count=2), one_device_slice("slice-1-2", count=2)]
    out = run(dup, [claim("claim-0", req("req-0"))])
    error(out, "invalid resource pools were encountered", "duplicate device name device-1")
    assert [e.kind for e in out.explanations][0] == "invalid-pool"


def test_invalid_pool_is_fine_when_another_pool_serves() -> None:
    slices = [
        one_device_slice(count=2),
        one_device_slice("slice-2", count=2),
        sl("slice-3", dev("device-2"), pool="pool-2"),
    ]
    ok(run(slices, [claim("claim-0", req("req-0"))]), ("req-0", A, "pool-2", "device-2"))
    error(
        run(slices, [claim("claim-0", req("req-0"))], in_use=[(A, "pool-2", "device-2")]),
        "invalid resource pools were encountered",
    )


def test_classes_missing_empty_unknown() -> None:
    out = run([one_device_slice()], [claim("claim-0", req("req-0"))], classes={})
    unsat(out)
    assert [(e.kind, e.request) for e in out.explanations] == [("no-class", "req-0")]
    error(
        run([one_device_slice()], [claim("claim-0", req("req-0", ""))]),
        "claim default/claim-0, request req-0: missing device class name",
    )


def test_selector_errors_name_class_or_claim() -> None:
    error(
        run([one_device_slice()], [claim("claim-0", req("req-0", "class-a", 1, "noSuchVar"))]),
        "claim default/claim-0: selector #0",
        "undeclared reference",
    )
    error(
        run([one_device_slice()], [claim("claim-0", req("req-0"))], classes={"class-a": cls("class-a", "noSuchVar")}),
        "class class-a: selector #0",
    )
    error(
        run([one_device_slice()], [claim("claim-0", req("req-0", "class-a", 1, "noSuchVar", mode="All"))]),
        "undeclared reference",
    )
    error(
        run([one_device_slice()], [claim("claim-0", req("req-0", "class-a", 1, " "))]),
        "CEL expression empty (unsupported selector type?)",
    )


def test_selector_error_only_when_reached() -> None:
    """Upstream evaluates selectors lazily: a device after the solution is never evaluated."""
    table = Table({"strict": lambda d: d.attributes[f"{A}/ok"].value is True})  # KeyError on device-2
    slices = [sl("slice-1", dev("device-1", ok=True), dev("device-2"))]
    ok(run(slices, [claim("claim-0", req("req-0", "class-a", 1, "strict"))], matcher=table), ("req-0", "device-1"))
    error(run(slices, [claim("claim-0", req("req-0", "class-a", 2, "strict"))], matcher=table), "selector #0")


def test_unknown_mode_and_empty_constraint() -> None:
    bad = claim("claim-0", req("req-0", mode="future-mode"))
    error(run([one_device_slice()], [bad]), "unsupported count mode future-mode")
    error(
        run([one_device_slice()], [claim("claim-0", req("req-0"), constraints=[Constraint()])]),
        "constraint #0: empty constraint (unsupported constraint type?)",
    )


def test_results_limit() -> None:
    error(run([], [claim("claim-0", req("req-0", count=500))]), "exceeds the claim limit of 32")
    many = sl("slice-1", *[dev(f"device-{i}") for i in range(33)])
    error(run([many], [claim("claim-0", req("req-0", count=32), req("req-1"))]), "exceeds the claim limit")
    out = run([many], [claim("claim-0", req("req-0", count=32))])
    assert [r[3] for r in picked(out)] == [f"device-{i}" for i in range(32)]


# ---------------------------------------------------------------------- All


def test_all_devices() -> None:
    ok(run([one_device_slice()], [claim("claim-0", req("req-0", mode="All"))]), ("req-0", "device-1"))
    two_pools = [one_device_slice(), one_device_slice(pool="pool-2")]
    ok(
        run(two_pools, [claim("claim-0", req("req-0", mode="All"))]),
        ("req-0", A, "pool-1", "device-1"),
        ("req-0", A, "pool-2", "device-1"),
    )
    unsat(run([sl("slice-1")], [claim("claim-0", req("req-0", mode="All"))]))  # at least one
    unsat(run([], [claim("claim-0", req("req-0", mode="All"))]))
    two = sl("slice-1", dev("device-1"), dev("device-2"))
    unsat(run([two], [claim("claim-0", req("req-0", mode="All"))], in_use=[(A, "pool-1", "device-1")]))


def test_all_devices_incomplete_pool_is_an_error() -> None:
    error(
        run([one_device_slice(count=2)], [claim("claim-0", req("req-0", mode="All"))]),
        "claim default/claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 "
        "is currently being updated",
    )


def test_all_devices_plus_another_in_both_orders() -> None:
    slices = [sl("slice-1", dev("device-1"), dev("device-2")), sl("slice-1", dev("device-1"), driver=B)]
    a_all = claim("claim-0", req("req-0", mode="All"))
    b_one = claim("claim-1", req("req-0", "class-b"))
    for claims in ([a_all, b_one], [b_one, a_all]):
        out = run(slices, claims)
        ok(out, ("req-0", "device-1"), ("req-0", "device-2"))
        ok(out, ("req-0", B, "pool-1", "device-1"), name="claim-1")
    one = [one_device_slice()]
    for claims in ([claim("claim-1", req("req-0")), a_all], [a_all, claim("claim-1", req("req-0"))]):
        unsat(run(one, claims))


def test_all_devices_with_constraint_is_an_error() -> None:
    slices = [sl("slice-1", dev("device-1", numa=1), dev("device-2", numa=2))]
    c = claim("claim-0", req("req-0", mode="All"), constraints=[match(f"{A}/numa")])
    error(
        run(slices, [c]),
        "claim default/claim-0, request req-0: cannot add device driver-a/pool-1/device-2 "
        "because a claim constraint would not be satisfied",
    )


def test_multi_host_pool_all_devices_and_stale_slices() -> None:
    slices = [sl("slice-1", dev("device-1"), count=2), sl("slice-2", dev("device-2"), node="node-2", count=2)]
    ok(run(slices, [claim("claim-0", req("req-0", mode="All"))]), ("req-0", "device-1"))
    stale = [sl("slice-1", dev("device-1"), count=2), sl("slice-2", dev("device-2"), node="node-2", count=2, gen=2)]
    unsat(run(stale, [claim("claim-0", req("req-0"))]))  # obsolete: a newer generation exists elsewhere
    moved = [
        sl("slice-1", dev("device-1"), count=2),
        sl("slice-1", dev("device-2"), count=2),
        sl("slice-2", dev("device-1"), node="node-2", count=2, gen=2),
    ]
    ok(run(moved, [claim("claim-0", req("req-0"))]), ("req-0", "device-1"))  # upstream keeps using gen 1 here
    back = [
        sl("slice-1", dev("device-1"), node="node-2", count=2),
        sl("slice-1", dev("device-2"), node="node-2", count=2),
        sl("slice-2", dev("device-1"), count=2, gen=2),
    ]
    unsat(run(back, [claim("claim-0", req("req-0"))]))  # generation 2 incomplete
    split = [sl("slice-1", dev("device-1"), node="node-2", count=2), sl("slice-2", dev("device-2"), count=2)]
    ok(run(split, [claim("claim-0", req("req-0"))]), ("req-0", "device-2"))


# ---------------------------------------------------------------------- admin access


def test_admin_access() -> None:
    one = [one_device_slice()]
    admin = claim("claim-0", req("req-0", admin=True))
    out = run(one, [admin], in_use=[(A, "pool-1", "device-1")])
    ok(out, ("req-0", "device-1"))
    assert out.allocations["default/claim-0"]["devices"]["results"][0]["adminAccess"] is True
    error(
        run(one, [admin], features=Features(admin_access=False)),
        "claim default/claim-0, request req-0: admin access is requested, but the feature is disabled",
    )
    two = [sl("slice-1", dev("device-1"), dev("device-2"))]
    ok(
        run(two, [claim("claim-0", req("req-0", mode="All", admin=True))], in_use=[(A, "pool-1", "device-1")]),
        ("req-0", "device-1"),
        ("req-0", "device-2"),
    )
    ok(
        run(two, [claim("claim-0", req("req-0", count=2, admin=True))], in_use=[(A, "pool-1", "device-1")]),
        ("req-0", "device-1"),
        ("req-0", "device-2"),
    )
    same_claim = claim("claim-0", req("req-0", admin=True), req("req-1", mode="All", admin=True))
    unsat(run(two, [same_claim]))  # a device twice in one claim, even with admin access
    out = run(two, [claim("claim-0", req("req-0", admin=True)), claim("claim-1", req("req-0", admin=True))])
    ok(out, ("req-0", "device-1"))
    ok(out, ("req-0", "device-1"), name="claim-1")
    out = run(two, [claim("claim-0", req("req-0")), claim("claim-1", req("req-0", admin=True))])
    ok(out, ("req-0", "device-1"))
    ok(out, ("req-0", "device-1"), name="claim-1")


def test_admin_results_are_not_in_use() -> None:
    c = Claim(
        "default",
        "done",
        allocation={
            "devices": {
                "results": [
                    {"request": "r", "driver": A, "pool": "pool-1", "device": "device-1", "adminAccess": True},
                    {"request": "r", "driver": A, "pool": "pool-1", "device": "device-2"},
                    {
                        "request": "r",
                        "driver": A,
                        "pool": "pool-1",
                        "device": "device-3",
                        "shareID": "x",
                        "consumedCapacity": {"memory": "2Gi"},
                    },
                    {
                        "request": "r",
                        "driver": A,
                        "pool": "pool-1",
                        "device": "device-3",
                        "shareID": "y",
                        "consumedCapacity": {"memory": "1Gi"},
                    },
                ]
            }
        },
    )
    state = AllocatedState.from_claims([c, Claim("default", "pending")])
    assert state.devices == {DeviceID(A, "pool-1", "device-2")}
    assert state.shared == {(DeviceID(A, "pool-1", "device-3"), "x"), (DeviceID(A, "pool-1", "device-3"), "y")}
    assert state.capacity == {DeviceID(A, "pool-1", "device-3"): {"memory": Fraction(3 * GI)}}


# ---------------------------------------------------------------------- node selection


def test_network_attached_devices_and_node_selector_union() -> None:
    region = one_device_slice(selector=labels("region", "region-1"))
    out = run([region], [claim("claim-0", req("req-0"))])
    assert out.allocations["default/claim-0"]["nodeSelector"] == labels("region", "region-1")
    unsat(run([region], [claim("claim-0", req("req-0"))], node=NODE2))
    slices = [
        region,
        one_device_slice(pool="pool-2", all_nodes=True),
        one_device_slice(pool="pool-3", selector=labels("planet", "earth")),
        one_device_slice(pool="pool-4", selector=local("node-1")),
    ]
    out = run(slices, [claim("claim-0", req("req-0", count=4))])
    assert [r[2] for r in picked(out)] == ["pool-1", "pool-2", "pool-3", "pool-4"]
    assert out.allocations["default/claim-0"]["nodeSelector"] == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "region", "operator": "In", "values": ["region-1"]},
                    {"key": "planet", "operator": "In", "values": ["earth"]},
                ],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}],
            }
        ]
    }
    out = run([one_device_slice(all_nodes=True)], [claim("claim-0", req("req-0"))])
    assert "nodeSelector" not in out.allocations["default/claim-0"]


def test_local_device_wins_and_binds_to_node() -> None:
    slices = [one_device_slice(selector=labels("region", "region-1")), one_device_slice(pool="pool-2")]
    out = run(slices, [claim("claim-0", req("req-0", count=2))])
    assert out.allocations["default/claim-0"]["nodeSelector"] == local("node-1")
    binds = [sl("slice-1", dev("device-1", binds_to_node=True), selector=labels("planet", "earth"))]
    assert run(binds, [claim("claim-0", req("req-0"))]).allocations["default/claim-0"]["nodeSelector"] == local(
        "node-1"
    )


def test_per_device_node_selection() -> None:
    counters = sl("slice-2", per_device=True, count=2, counter_sets={"cs": {"memory": 18 * GI}})
    devices = sl(
        "slice-1",
        dev("device-1", memory=4 * GI, counters={"cs": {"memory": 4 * GI}}, node=NodeSelection("node-1")),
        dev("device-2", memory=6 * GI, counters={"cs": {"memory": 6 * GI}}, node=NodeSelection("node-2")),
        per_device=True,
        count=2,
    )
    c = claim(
        "claim-0", first("req-0", sub("subReq-0", "class-a", 1, "mem>=6Gi"), sub("subReq-1", "class-a", 1, "mem>=4Gi"))
    )
    out = run([devices, counters], [c])
    ok(out, ("req-0/subReq-1", "device-1"))
    assert out.allocations["default/claim-0"]["nodeSelector"] == local("node-1")
    by_label = sl(
        "slice-1",
        dev(
            "device-1",
            counters={"cs": {"memory": 4 * GI}},
            node=NodeSelection(node_selector=labels("region", "region-1")),
        ),
        per_device=True,
        count=2,
    )
    out = run([by_label, counters], [claim("claim-0", req("req-0"))])
    assert out.allocations["default/claim-0"]["nodeSelector"] == labels("region", "region-1")
    unsat(run([devices], [claim("claim-0", req("req-0"))], features=Features(partitionable_devices=False)))


def test_per_device_selection_mixed_with_local_pool() -> None:
    pool1 = sl(
        "slice-1",
        dev(
            "device-1",
            counters={"cs1": {"memory": 4 * GI}},
            node=NodeSelection(node_selector=labels("region", "region-1")),
        ),
        dev("device-2", counters={"cs1": {"memory": 4 * GI}}, node=NodeSelection("node-1")),
        dev("device-3", counters={"cs1": {"memory": 4 * GI}}, node=NodeSelection(all_nodes=True)),
        per_device=True,
        count=2,
    )
    pool1c = sl("slice-2", per_device=True, count=2, counter_sets={"cs1": {"memory": 18 * GI}})
    pool2 = sl(
        "slice-3",
        *[dev(f"device-{i}", counters={"cs2": {"memory": 4 * GI}}) for i in (1, 2, 3)],
        pool="pool-2",
        driver=B,
        count=2,
    )
    pool2c = sl("slice-4", pool="pool-2", driver=B, count=2, counter_sets={"cs2": {"memory": 12 * GI}})
    out = run([pool1, pool1c, pool2, pool2c], [claim("claim-0", req("req-0", count=3), req("req-1", "class-b", 3))])
    assert [r[3] for r in picked(out)] == ["device-1", "device-2", "device-3"] * 2
    assert out.allocations["default/claim-0"]["nodeSelector"] == local("node-1")


# ---------------------------------------------------------------------- constraints


def test_match_attribute_all_kinds() -> None:
    same: dict[str, Any] = dict(driverVersion="1.0.0", numa=1, stringAttribute="v", boolAttribute=True)
    slices = [sl("slice-1", dev("device-1", **same), dev("device-2", **same))]
    cons = [match(f"{A}/{k}") for k in ("numa", "driverVersion", "stringAttribute", "boolAttribute")]
    ok(
        run(slices, [claim("claim-0", req("req-0"), req("req-1"), constraints=cons)]),
        ("req-0", "device-1"),
        ("req-1", "device-2"),
    )
    cases: list[tuple[str, Any, Any]] = [
        ("numa", 1, 2),
        ("stringAttribute", "a", "b"),
        ("boolAttribute", True, False),
        ("driverVersion", "1.0.0", "2.0.0"),
    ]
    for key, v1, v2 in cases:
        differ = [sl("slice-1", dev("device-1", **{key: v1}), dev("device-2", **{key: v2}))]
        unsat(run(differ, [claim("claim-0", req("req-0", count=2), constraints=[match(f"{A}/{key}")])]))
    unsat(run([one_device_slice()], [claim("claim-0", req("req-0"), constraints=[match(f"{A}/NonExistent")])]))


def test_match_attribute_bool_is_not_int() -> None:
    slices = [sl("slice-1", dev("device-1", x=True), dev("device-2", x=1))]
    unsat(run(slices, [claim("claim-0", req("req-0", count=2), constraints=[match(f"{A}/x")])]))


def test_constraint_for_some_requests_and_retry() -> None:
    slices = [sl("slice-1", dev("device-1", driverVersion="1.0.0"), dev("device-2", driverVersion="2.0.0"))]
    c = claim("claim-0", req("req-0"), req("req-1"), constraints=[match(f"{A}/driverVersion", "req-0")])
    ok(run(slices, [c]), ("req-0", "device-1"), ("req-1", "device-2"))
    slices = [
        sl(
            "slice-1",
            dev("device-1", driverVersion="1.0.0", stringAttribute="a"),
            dev("device-2", driverVersion="2.0.0", stringAttribute="b"),
            dev("device-3", driverVersion="3.0.0", stringAttribute="b"),
        )
    ]
    c = claim(
        "claim-0",
        req("req-0"),
        req("req-1"),
        constraints=[match(f"{A}/driverVersion", "req-0"), match(f"{A}/stringAttribute")],
    )
    ok(run(slices, [c]), ("req-0", "device-2"), ("req-1", "device-3"))


def test_distinct_attribute() -> None:
    devices = [
        dev("device-1", driverVersion="1.0.0", numa=0, boolAttribute=True, multi=True),
        dev("device-2", driverVersion="1.0.1", numa=1, boolAttribute=False, multi=True),
        dev("device-3", driverVersion="1.0.2", numa=2, boolAttribute=True, multi=True),
        dev("device-4", driverVersion="1.0.0", numa=3, boolAttribute=True, multi=True),
    ]
    c = claim(
        "claim-0",
        req("req-0"),
        req("req-1"),
        req("req-2"),
        req("req-3"),
        constraints=[
            distinct(f"{A}/boolAttribute", "req-0", "req-1"),
            distinct(f"{A}/driverVersion", "req-0", "req-1", "req-2"),
            distinct(f"{A}/numa", "req-0", "req-1", "req-2", "req-3"),
        ],
    )
    out = run([sl("slice-1", *devices)], [c])
    ok(out, ("req-0", "device-1"), ("req-1", "device-2"), ("req-2", "device-3"), ("req-3", "device-4"))
    assert all("shareID" in r for r in out.allocations["default/claim-0"]["devices"]["results"])
    unsat(
        run(
            [sl("slice-1", dev("device-1", multi=True))],
            [claim("claim-0", req("req-0"), constraints=[distinct(f"{A}/boolAttribute", "req-0")])],
        )
    )


def test_distinct_with_subrequests() -> None:
    table = Table({"bool": lambda d: d.attributes[f"{A}/boolAttribute"].value is True})
    devices = sl(
        "slice-1", dev("device-1", boolAttribute=True, multi=True), dev("device-2", boolAttribute=False, multi=True)
    )
    reqs = [first(f"req-{i}", sub("subReq-0", "class-a", 1, "bool"), sub("subReq-1")) for i in range(3)]
    c = claim("claim-0", *reqs, constraints=[distinct(f"{A}/boolAttribute", "req-0", "req-1")])
    ok(
        run([devices], [c], matcher=table),
        ("req-0/subReq-0", "device-1"),
        ("req-1/subReq-1", "device-2"),
        ("req-2/subReq-0", "device-1"),
    )


def test_distinct_on_one_shared_device_fails_on_two_succeeds() -> None:
    policy = CapacityPolicy(Fraction(2), (), (Fraction(2), Fraction(4), Fraction(2)))
    one = sl(
        "slice-1",
        dev("device-1", multi=True, stringAttribute="v", caps={f"{A}/capacity-0": Capacity(Fraction(2), policy)}),
    )
    c = claim(
        "claim-0",
        req("req-0", capacity={"driver-a/capacity-0": 1}),
        req("req-1", capacity={"driver-a/capacity-0": 1}),
        constraints=[distinct(f"{A}/stringAttribute")],
    )
    unsat(run([one], [c]))
    wide = Capacity(Fraction(4), policy)
    two = [
        sl("slice-1", dev("device-1", multi=True, stringAttribute="v1", caps={f"{A}/capacity-0": wide}), count=2),
        sl("slice-1", dev("device-2", multi=True, stringAttribute="v2", caps={f"{A}/capacity-0": wide}), count=2),
    ]
    c = claim(
        "claim-0",
        req("req-0", capacity={"driver-a/capacity-0": 2}),
        req("req-1", capacity={"driver-a/capacity-0": 2}),
        constraints=[distinct(f"{A}/stringAttribute")],
    )
    ok(run(two, [c]), ("req-0", "device-1"), ("req-1", "device-2"))


def test_distinct_holds_within_one_request() -> None:
    """Fixed behaviour: 1.35 keys distinct values by request name, so a third device of one request
    could repeat the first one's value (it would pick device-3 here)."""
    slices = [
        sl(
            "slice-1",
            dev("device-1", numa=0),
            dev("device-2", numa=1),
            dev("device-3", numa=0),
            dev("device-4", numa=2),
        )
    ]
    c = claim("claim-0", req("req-0", count=3), constraints=[distinct(f"{A}/numa")])
    ok(run(slices, [c]), ("req-0", "device-1"), ("req-0", "device-2"), ("req-0", "device-4"))


# ---------------------------------------------------------------------- config


def test_class_and_claim_config() -> None:
    opaque = {"opaque": {"driver": A, "parameters": {"classAttribute": "classAttributeValue"}}}
    out = run(
        [one_device_slice()], [claim("claim-0", req("req-0"))], classes={"class-a": cls("class-a", A, config=[opaque])}
    )
    assert out.allocations["default/claim-0"]["devices"]["config"] == [
        {"source": "FromClass", "requests": ["req-0"], **opaque}
    ]
    classes = {
        "class-a": cls("class-a", A, config=[{"opaque": {"driver": A, "parameters": {"a": 1}}}]),
        "class-b": cls("class-b", B, config=[{"opaque": {"driver": B, "parameters": {"b": 1}}}]),
    }
    slices = [sl("slice-1", dev("device-0"), dev("device-1")), sl("slice-2", dev("device-1"), driver=B)]
    out = run(slices, [claim("claim-0", req("req-0"), req("req-1"), req("req-2", "class-b"))], classes=classes)
    assert out.allocations["default/claim-0"]["devices"]["config"] == [
        {"source": "FromClass", "requests": ["req-0", "req-1"], "opaque": {"driver": A, "parameters": {"a": 1}}},
        {"source": "FromClass", "requests": ["req-2"], "opaque": {"driver": B, "parameters": {"b": 1}}},
    ]
    cfg = {"opaque": {"driver": A, "parameters": {"deviceAttribute": "deviceAttributeValue"}}}
    out = run([one_device_slice()], [claim("claim-0", req("req-0"), config=[cfg])])
    assert out.allocations["default/claim-0"]["devices"]["config"] == [{"source": "FromClaim", **cfg}]


def test_claim_config_naming_several_requests_is_copied_once() -> None:
    cfg = {"requests": ["req-0", "req-1"], "opaque": {"driver": A, "parameters": {}}}
    out = run(
        [sl("slice-1", dev("device-1"), dev("device-2"))], [claim("claim-0", req("req-0"), req("req-1"), config=[cfg])]
    )
    assert out.allocations["default/claim-0"]["devices"]["config"] == [{"source": "FromClaim", **cfg}]


def test_prioritized_list_configs() -> None:
    slices = [sl("slice-1", dev("device-1"), dev("device-2"), driver=B)]
    cfg_a = {"requests": ["req-0/subReq-0"], "opaque": {"driver": A, "parameters": {"foo": 1}}}
    cfg_b = {"requests": ["req-0/subReq-1"], "opaque": {"driver": B, "parameters": {"bar": 1}}}
    c = claim("claim-0", first("req-0", sub("subReq-0"), sub("subReq-1", "class-b", 2)), config=[cfg_a, cfg_b])
    out = run(slices, [c])
    ok(out, ("req-0/subReq-1", B, "pool-1", "device-1"), ("req-0/subReq-1", B, "pool-1", "device-2"))
    assert out.allocations["default/claim-0"]["devices"]["config"] == [{"source": "FromClaim", **cfg_b}]
    classes = {
        "class-a": cls("class-a", A, config=[{"opaque": {"driver": A, "parameters": {"foo": 1}}}]),
        "class-b": cls("class-b", B, config=[{"opaque": {"driver": B, "parameters": {"bar": 1}}}]),
    }
    slices = [sl("slice-1", dev("device-1"), dev("device-2"), driver=B), sl("slice-2", dev("device-3"), pool="pool-2")]
    out = run(
        slices,
        [claim("claim-0", first("req-0", sub("subReq-0", "class-a", 2), sub("subReq-1", "class-b", 2)))],
        classes=classes,
    )
    assert out.allocations["default/claim-0"]["devices"]["config"] == [
        {"source": "FromClass", "requests": ["req-0/subReq-1"], "opaque": {"driver": B, "parameters": {"bar": 1}}}
    ]


# ---------------------------------------------------------------------- firstAvailable


def test_prioritized_list_basics() -> None:
    one = [one_device_slice()]
    ok(
        run(one, [claim("claim-0", first("req-0", sub("subReq-0", "class-b"), sub("subReq-1")))]),
        ("req-0/subReq-1", "device-1"),
    )
    both = [one_device_slice(), sl("slice-2", dev("device-1"), pool="pool-2", driver=B)]
    unsat(run(both, [claim("claim-0", first("req-0", sub("subReq-0", "class-b", 2), sub("subReq-1", "class-a", 2)))]))
    error(
        run(one, [claim("claim-0", first("req-0", sub("subReq-0")))], features=Features(prioritized_list=False)),
        "claim default/claim-0, request req-0: has subrequests, but the DRAPrioritizedList feature is disabled",
    )
    ok(
        run(one, [claim("claim-0", first("req-0", sub("subReq-0", "class-b", 500), sub("subReq-1")))]),
        ("req-0/subReq-1", "device-1"),
    )


def test_prioritized_list_with_expressions_and_backtracking() -> None:
    slices = [sl("slice-1", dev("device-1", memory=2 * GI), dev("device-2", memory=2 * GI), dev("device-3", memory=GI))]
    c = claim(
        "claim-0",
        req("req-0", "class-a", 1, "mem>=1Gi"),
        first("req-1", sub("subReq-0", "class-a", 1, "mem>=4Gi"), sub("subReq-1", "class-a", 2, "mem>=2Gi")),
    )
    ok(run(slices, [c]), ("req-0", "device-3"), ("req-1/subReq-1", "device-1"), ("req-1/subReq-1", "device-2"))
    slices = [
        sl("slice-1", dev("device-1", memory=8 * GI)),
        sl("slice-2", dev("device-2", memory=4 * GI), pool="pool-2"),
    ]
    c = claim(
        "claim-0",
        first("req-0", sub("subReq-0", "class-a", 1, "mem>=8Gi"), sub("subReq-1", "class-a", 1, "mem>=4Gi")),
        req("req-1", "class-a", 1, "mem>=8Gi"),
    )
    ok(run(slices, [c]), ("req-0/subReq-1", A, "pool-2", "device-2"), ("req-1", A, "pool-1", "device-1"))
    c = claim(
        "claim-0",
        req("req-1", "class-a", 1, "mem>=8Gi"),
        first("req-0", sub("subReq-0", "class-a", 1, "mem>=8Gi"), sub("subReq-1", "class-a", 1, "mem>=4Gi")),
    )
    ok(run(slices, [c]), ("req-1", A, "pool-1", "device-1"), ("req-0/subReq-1", A, "pool-2", "device-2"))


def test_prioritized_list_constraints_on_parent_or_subrequest() -> None:
    slices = [
        sl("slice-1", dev("device-1", memory=8 * GI, driverVersion="1.0.0")),
        sl(
            "slice-2",
            dev("device-2", memory=2 * GI, driverVersion="2.0.0"),
            dev("device-3", memory=GI, driverVersion="1.0.0"),
            pool="pool-2",
        ),
    ]
    subs = first("req-1", sub("subReq-0", "class-a", 1, "mem>=2Gi"), sub("subReq-1", "class-a", 1, "mem>=1Gi"))
    c = claim(
        "claim-0",
        req("req-0", "class-a", 1, "mem>=8Gi"),
        subs,
        constraints=[match(f"{A}/driverVersion", "req-0", "req-1")],
    )
    ok(run(slices, [c]), ("req-0", A, "pool-1", "device-1"), ("req-1/subReq-1", A, "pool-2", "device-3"))
    slices = slices[:1] + [sl("slice-2", dev("device-2", memory=2 * GI, driverVersion="2.0.0"), pool="pool-2")]
    c = replace(c, constraints=(match(f"{A}/driverVersion", "req-0", "req-1/subReq-0"),))
    ok(run(slices, [c]), ("req-0", A, "pool-1", "device-1"), ("req-1/subReq-1", A, "pool-2", "device-2"))


def test_prioritized_list_with_all_mode() -> None:
    two = [sl("slice-1", dev("device-1"), dev("device-2"))]
    c = claim("claim-0", first("req-0", sub("subReq-0", mode="All", count=0), sub("subReq-1")))
    ok(run(two, [c], in_use=[(A, "pool-1", "device-1")]), ("req-0/subReq-1", "device-2"))
    c = claim("claim-0", req("req-0"), first("req-1", sub("subReq-0", mode="All", count=0), sub("subReq-1")))
    ok(run(two, [c]), ("req-0", "device-1"), ("req-1/subReq-1", "device-2"))
    empty_a = [sl("slice-1"), sl("slice-2", dev("device-1"), pool="pool-2", driver=B)]
    c = claim("claim-0", first("req-0", sub("subReq-0", mode="All", count=0), sub("subReq-1", "class-b")))
    ok(run(empty_a, [c]), ("req-0/subReq-1", B, "pool-2", "device-1"))


def test_prioritized_list_result_limit_backtracking() -> None:
    many = sl("slice-1", *[dev(f"device-{i}") for i in range(64)])
    c = claim(
        "claim-0",
        first("req-0", sub("subReq-0", count=32), sub("subReq-1", count=16)),
        first("req-1", sub("subReq-0", count=32), sub("subReq-1", count=16)),
    )
    out = run([many], [c])
    assert [r[0] for r in picked(out)] == ["req-0/subReq-1"] * 16 + ["req-1/subReq-1"] * 16
    assert [r[3] for r in picked(out)] == [f"device-{i}" for i in range(32)]
    assert out.stats["allocate_one_calls"] < 200  # upstream: 75
    slices = [
        sl("slice-1", *[dev(f"device-{i}") for i in range(31)]),
        sl("slice-2", dev("device-0"), dev("device-1"), pool="pool-2", driver=B),
    ]
    c = claim(
        "claim-0",
        first("req-0", sub("subReq-0", mode="All", count=0), sub("subReq-1", count=2)),
        req("req-1", "class-b", 2),
    )
    out = run(slices, [c])
    assert picked(out) == [
        ("req-0/subReq-1", A, "pool-1", "device-0"),
        ("req-0/subReq-1", A, "pool-1", "device-1"),
        ("req-1", B, "pool-2", "device-0"),
        ("req-1", B, "pool-2", "device-1"),
    ]


# ---------------------------------------------------------------------- partitionable devices


def counters_pool(
    *devices: Device, sets: dict[str, dict[str, int]], pool: str = "pool-1", driver: str = A, node: str = "node-1"
) -> list[Slice]:
    return [
        sl("slice-1", *devices, count=2, pool=pool, driver=driver, node=node),
        sl("slice-2", count=2, pool=pool, driver=driver, node=node, counter_sets=sets),
    ]


def test_partitionable_single_and_all() -> None:
    slices = counters_pool(dev("device-1", counters={"cs": {"memory": 4 * GI}}), sets={"cs": {"memory": 8 * GI}})
    ok(run(slices, [claim("claim-0", req("req-0"))]), ("req-0", "device-1"))
    ok(run(slices, [claim("claim-0", req("req-0", mode="All"))]), ("req-0", "device-1"))


def test_partitionable_multiple_devices_and_prioritized_list() -> None:
    devices = [
        dev("device-1", memory=4 * GI, counters={"cs": {"memory": 4 * GI}}),
        dev("device-2", memory=6 * GI, counters={"cs": {"memory": 6 * GI}}),
        dev("device-3", memory=4 * GI, counters={"cs": {"memory": 4 * GI}}),
    ]
    slices = counters_pool(*devices, sets={"cs": {"memory": 8 * GI}})
    ok(run(slices, [claim("claim-0", req("req-0"), req("req-1"))]), ("req-0", "device-1"), ("req-1", "device-3"))
    c = claim(
        "claim-0",
        req("req-0"),
        first("req-1", sub("subReq-0", "class-a", 1, "mem>=6Gi"), sub("subReq-1", "class-a", 1, "mem>=4Gi")),
    )
    ok(run(slices, [c]), ("req-0", "device-1"), ("req-1/subReq-1", "device-3"))


def test_partitionable_multiple_counter_sets_and_counters() -> None:
    devices = [
        dev("device-1", counters={"cs1": {"memory": 4 * GI, "cpus": 6}, "cs2": {"cpus": 4, "memory": 2 * GI}}),
        dev("device-2", counters={"cs1": {"memory": 6 * GI, "cpus": 4}, "cs2": {"cpus": 6, "memory": 6 * GI}}),
        dev("device-3", counters={"cs1": {"memory": 4 * GI, "cpus": 4}, "cs2": {"cpus": 4, "memory": 4 * GI}}),
    ]
    slices = counters_pool(
        *devices, sets={"cs1": {"cpus": 8, "memory": 18 * GI}, "cs2": {"cpus": 12, "memory": 18 * GI}}
    )
    ok(run(slices, [claim("claim-0", req("req-0"), req("req-1"))]), ("req-0", "device-2"), ("req-1", "device-3"))


def test_partitionable_multiple_pools_with_devices_in_use() -> None:
    p1 = counters_pool(
        dev("device-1", counters={"cs": {"cpus": 6, "memory": 4 * GI}}),
        dev("device-2", counters={"cs": {"cpus": 4, "memory": 6 * GI}}),
        dev("device-3", counters={"cs": {"cpus": 4, "memory": 4 * GI}}),
        sets={"cs": {"cpus": 8, "memory": 18 * GI}},
    )
    p2 = counters_pool(
        dev("device-1", counters={"cs": {"cpus": 6, "memory": 4 * GI}}),
        dev("device-2", counters={"cs": {"cpus": 1, "memory": 7 * GI}}),
        dev("device-3", counters={"cs": {"cpus": 1, "memory": 7 * GI}}),
        sets={"cs": {"cpus": 8, "memory": 18 * GI}},
        pool="pool-2",
    )
    p2 = [replace(p2[0], name="slice-3"), replace(p2[1], name="slice-4")]
    out = run(
        p1 + p2,
        [claim("claim-0", req("req-0"), req("req-1"))],
        in_use=[(A, "pool-1", "device-2"), (A, "pool-1", "device-3"), (A, "pool-2", "device-1")],
    )
    ok(out, ("req-0", A, "pool-2", "device-2"), ("req-1", A, "pool-2", "device-3"))


def test_partitionable_exhausted_and_overallocated() -> None:
    devices = [
        dev("device-1", counters={"cs": {"memory": 4 * GI}}),
        dev("device-2", counters={"cs": {"memory": 16 * GI}}),
    ]
    slices = [sl("slice-1", *devices), sl("slice-2", counter_sets={"cs": {"memory": 18 * GI}})]
    unsat(run(slices, [claim("claim-0", req("req-0"))], in_use=[(A, "pool-1", "device-2")]))
    devices = [
        dev("device-1", counters={"cs": {"memory": 4 * GI}}),
        dev("device-2", counters={"cs": {"memory": 20 * GI}}),
    ]
    slices = [sl("slice-1", *devices), sl("slice-2", counter_sets={"cs": {"memory": 18 * GI}})]
    unsat(run(slices, [claim("claim-0", req("req-0"))], in_use=[(A, "pool-1", "device-2")]))


def test_overdrawn_pool_blocks_every_counter_consumer() -> None:
    """Upstream compares every counter of the pool: committed devices that overdraw one counter leave
    no room for any counter-consuming device of the pool, whatever counter it uses."""
    devices = [
        dev("device-1", counters={"cs1": {"memory": 4 * GI}}),
        dev("device-2", counters={"cs2": {"memory": 20 * GI}}),
        dev("device-3"),
    ]
    slices = counters_pool(*devices, sets={"cs1": {"memory": 8 * GI}, "cs2": {"memory": 18 * GI}})
    ok(run(slices, [claim("claim-0", req("req-0"))], in_use=[(A, "pool-1", "device-2")]), ("req-0", "device-3"))
    unsat(run(slices, [claim("claim-0", req("req-0", count=2))], in_use=[(A, "pool-1", "device-2")]))


def test_explain_can_be_skipped() -> None:
    allocator = Allocator([one_device_slice()], CLASSES, AllocatedState(), Table())
    out = allocator.allocate(NODE1, [claim("claim-0", req("req-0", count=2))], explain=False)
    assert out.outcome == "unsatisfiable" and out.explanations == [] and out.message == "cannot allocate all claims"


def test_partitionable_unused_counter_and_attribute_selector() -> None:
    devices = [
        dev("device-1", counters={"cs": {"memory": 5 * GI}}),
        dev("device-2", counters={"cs": {"memory": 4 * GI}}),
        dev("device-3", counters={"cs": {"memory": 4 * GI}}),
    ]
    ok(
        run(
            counters_pool(*devices, sets={"cs": {"memory": 8 * GI, "unused": GI}}),
            [claim("claim-0", req("req-0", count=2))],
        ),
        ("req-0", "device-2"),
        ("req-0", "device-3"),
    )
    table = Table({"special": lambda d: d.attributes[f"{A}/special"].value is True})
    devices = [
        dev(f"device-{i}", special=i == 1, counters={"cs1": {f"cpu{i}": 1}, "cs2": {"mem": 10 * GI}}) for i in (1, 2, 3)
    ]
    slices = counters_pool(*devices, sets={"cs1": {"cpu1": 1, "cpu2": 1, "cpu3": 1}, "cs2": {"mem": 30 * GI}})
    ok(
        run(slices, [claim("claim-0", req("req-0", count=2), req("req-1", "class-a", 1, "special"))], matcher=table),
        ("req-0", "device-2"),
        ("req-0", "device-3"),
        ("req-1", "device-1"),
    )


def test_partitionable_disabled() -> None:
    slices = [
        sl("slice-1", dev("device-1", counters={"cs": {"memory": 4 * GI}})),
        sl("slice-2", counter_sets={"cs": {"memory": 18 * GI}}),
    ]
    unsat(run(slices, [claim("claim-0", req("req-0"))], features=Features(partitionable_devices=False)))
    slices = counters_pool(
        dev("device-1", counters={"cs": {"memory": 4 * GI}}), dev("device-2"), sets={"cs": {"memory": 18 * GI}}
    )
    ok(
        run(slices, [claim("claim-0", req("req-0"))], features=Features(partitionable_devices=False)),
        ("req-0", "device-2"),
    )


def test_partitionable_invalid_pools() -> None:
    same_name = [
        sl("slice-1", dev("device-1"), count=4),
        sl("slice-2", count=4, counter_sets={"cs": {}}),
        sl("slice-3", dev("device-2"), count=4),
        sl("slice-4", count=4, counter_sets={"cs": {}}),
    ]
    error(run(same_name, [claim("claim-0", req("req-0"))]), "duplicate counter set name cs")
    unknown_set = counters_pool(dev("device-1", counters={"cs2": {}}), sets={"cs1": {}})
    error(run(unknown_set, [claim("claim-0", req("req-0"))]), "counter set cs2 not found")
    unknown_counter = counters_pool(
        dev("device-1", counters={"cs": {"memory": 8 * GI}}), sets={"cs": {"other": 8 * GI}}
    )
    error(run(unknown_counter, [claim("claim-0", req("req-0"))]), "counter memory not found in counter set cs")
    other_pool = [
        sl("slice-1", dev("device-1", counters={"cs": {"memory": 8 * GI}})),
        sl("slice-2", pool="pool-2", counter_sets={"cs": {"memory": 8 * GI}}),
    ]
    error(run(other_pool, [claim("claim-0", req("req-0"))]), "invalid resource pools were encountered")
    off_node = [
        sl("slice-1", count=3, counter_sets={"cs": {"memory": 8 * GI}}),
        sl("slice-2", dev("device-1", counters={"cs": {"memory": 6 * GI}}), count=3),
        sl("slice-3", dev("device-3", counters={"cs2": {"memory": 6 * GI}}), node="node-2", count=3),
    ]
    error(run(off_node, [claim("claim-0", req("req-0"))]), "counter set cs2 not found")


def test_partitionable_devices_on_other_nodes_consume_counters() -> None:
    slices = [
        sl("slice-1", count=3, counter_sets={"cs": {"memory": 8 * GI}}),
        sl(
            "slice-2",
            dev("device-1", memory=6 * GI, counters={"cs": {"memory": 6 * GI}}),
            dev("device-2", memory=2 * GI, counters={"cs": {"memory": 2 * GI}}),
            count=3,
        ),
        sl("slice-3", dev("device-3", counters={"cs": {"memory": 6 * GI}}), node="node-2", count=3),
    ]
    c = claim(
        "claim-0", first("req-0", sub("subReq-0", "class-a", 1, "mem>=6Gi"), sub("subReq-1", "class-a", 1, "mem>=2Gi"))
    )
    ok(run(slices, [c], in_use=[(A, "pool-1", "device-3")]), ("req-0/subReq-1", "device-2"))
    # and the other way around: node-2 sees device-1 (node-1) consuming the shared counters
    slices = [
        sl("slice-1", count=3, counter_sets={"cs": {"memory": 8 * GI}}),
        sl("slice-2", dev("device-1", counters={"cs": {"memory": 6 * GI}}), count=3),
        sl(
            "slice-3",
            dev("device-2", counters={"cs": {"memory": 6 * GI}}),
            dev("device-3", counters={"cs": {"memory": 2 * GI}}),
            node="node-2",
            count=3,
        ),
    ]
    ok(
        run(slices, [claim("claim-0", req("req-0"))], node=NODE2, in_use=[(A, "pool-1", "device-1")]),
        ("req-0", "device-3"),
    )


def test_counters_of_rejected_candidates_are_released() -> None:
    """Fixed behaviour: 1.35 keeps the counters reserved for device-1 after its taint (or a constraint)
    rejects it, and then finds no room for device-2."""
    tainted = dev("device-1", counters={"cs": {"memory": 8 * GI}}, taints=[Taint("k", "v", "NoSchedule")], numa=0)
    plain = dev("device-2", counters={"cs": {"memory": 4 * GI}}, numa=1)
    slices = counters_pool(tainted, plain, sets={"cs": {"memory": 8 * GI}})
    ok(run(slices, [claim("claim-0", req("req-0"))]), ("req-0", "device-2"))
    untainted = replace(tainted, taints=())
    slices = counters_pool(untainted, plain, sets={"cs": {"memory": 8 * GI}})
    c = claim("claim-0", req("req-0"), constraints=[match(f"{A}/numa")])
    ok(run(slices, [c], in_use=[]), ("req-0", "device-1"))
    slices = counters_pool(dev("device-0", numa=1), untainted, plain, sets={"cs": {"memory": 8 * GI}})
    c = claim("claim-0", req("req-0"), req("req-1"), constraints=[match(f"{A}/numa")])
    ok(run(slices, [c]), ("req-0", "device-0"), ("req-1", "device-2"))


# ---------------------------------------------------------------------- taints


NO_SCHEDULE = Taint("taint-key", "taint-value", "NoSchedule")
NO_EXECUTE = Taint("taint-key", "taint-value-2", "NoExecute")
TOL_NO_SCHEDULE = Toleration("taint-key", "Exists", "", "NoSchedule")
TOL_NO_EXECUTE = Toleration("taint-key", "Equal", "taint-value-2", "NoExecute")


def test_taints() -> None:
    two = [sl("slice-1", dev("device-1", taints=[NO_SCHEDULE]), dev("device-2", taints=[NO_EXECUTE]))]
    unsat(run(two, [claim("claim-0", req("req-0"))]))
    out = run(two, [claim("claim-0", req("req-0", tolerations=[TOL_NO_EXECUTE]))])
    ok(out, ("req-0", "device-2"))
    assert out.allocations["default/claim-0"]["devices"]["results"][0]["tolerations"] == [
        {"key": "taint-key", "operator": "Equal", "value": "taint-value-2", "effect": "NoExecute"}
    ]
    c = claim("claim-0", first("req-0", sub("subReq-0"), sub("subReq-1", tolerations=[TOL_NO_EXECUTE])))
    ok(run(two, [c]), ("req-0/subReq-1", "device-2"))
    both = [sl("slice-1", dev("device-1", taints=[NO_SCHEDULE, NO_EXECUTE]))]
    unsat(run(both, [claim("claim-0", req("req-0"))]))
    ok(
        run(both, [claim("claim-0", req("req-0", tolerations=[TOL_NO_SCHEDULE, TOL_NO_EXECUTE]))]),
        ("req-0", "device-1"),
    )
    ok(run(both, [claim("claim-0", req("req-0"))], features=Features(device_taints=False)), ("req-0", "device-1"))
    for effect in ("None", "SomethingNew"):
        ok(
            run([sl("slice-1", dev("device-1", taints=[Taint("k", "v", effect)]))], [claim("claim-0", req("req-0"))]),
            ("req-0", "device-1"),
        )


def test_taints_apply_to_admin_access_and_all() -> None:
    tainted = [sl("slice-1", dev("device-1", taints=[NO_SCHEDULE]))]
    unsat(run(tainted, [claim("claim-0", req("req-0", admin=True))], in_use=[(A, "pool-1", "device-1")]))
    ok(
        run(
            tainted,
            [claim("claim-0", req("req-0", admin=True))],
            in_use=[(A, "pool-1", "device-1")],
            features=Features(device_taints=False),
        ),
        ("req-0", "device-1"),
    )
    unsat(run(tainted, [claim("claim-0", req("req-0", mode="All"))]))
    c = claim("claim-0", first("req-0", sub("subReq-0", "class-b"), sub("subReq-1")))
    unsat(run(tainted, [c]))


# ---------------------------------------------------------------------- binding conditions


def test_binding_conditions() -> None:
    slices = [sl("slice-1", dev("device-1", binding=(["IsPrepare"], ["BindingFailed"])))]
    out = run(slices, [claim("claim-0", req("req-0"))])
    assert out.allocations["default/claim-0"]["devices"]["results"] == [
        {
            "request": "req-0",
            "driver": A,
            "pool": "pool-1",
            "device": "device-1",
            "bindingConditions": ["IsPrepare"],
            "bindingFailureConditions": ["BindingFailed"],
        }
    ]
    unsat(run(slices, [claim("claim-0", req("req-0"))], features=Features(binding_conditions=False)))
    mixed = [sl("slice-1", dev("device-1"), dev("device-2", binding=(["IsPrepare"], ["BindingFailed"])))]
    out = run(mixed, [claim("claim-0", req("req-0"), req("req-1"))])
    results = out.allocations["default/claim-0"]["devices"]["results"]
    assert "bindingConditions" not in results[0] and results[1]["bindingConditions"] == ["IsPrepare"]


def test_binding_condition_pools_come_last() -> None:
    slices = [
        sl(
            "slice-1",
            dev("device-1", counters={"cs1": {"memory": 4 * GI}}, binding=(["IsPrepare"], ["BindingFailed"])),
            count=4,
        ),
        sl("slice-2", count=4, counter_sets={"cs1": {"memory": 8 * GI}}),
        sl("slice-3", dev("device-2", counters={"cs2": {"memory": 4 * GI}}), count=4),
        sl("slice-4", count=4, counter_sets={"cs2": {"memory": 8 * GI}}),
    ]
    # one pool: slices by name, so device-1 (slice-1) comes first even though it has binding conditions
    ok(run(slices, [claim("claim-0", req("req-0", count=2))]), ("req-0", "device-1"), ("req-0", "device-2"))
    pools = [sl("slice-1", dev("device-1", binding=(["IsPrepare"], []))), sl("slice-2", dev("device-2"), pool="pool-2")]
    ok(run(pools, [claim("claim-0", req("req-0"))]), ("req-0", A, "pool-2", "device-2"))


def test_binding_conditions_with_taints() -> None:
    taint = Taint("key1", "value1", "NoSchedule")
    slices = counters_pool(
        dev(
            "device-1", counters={"cs": {"memory": 4 * GI}}, binding=(["IsPrepare"], ["BindingFailed"]), taints=[taint]
        ),
        dev("device-2", counters={"cs": {"memory": 4 * GI}}),
        sets={"cs": {"memory": 8 * GI}},
    )
    unsat(run(slices, [claim("claim-0", req("req-0", count=2))]))
    tol = Toleration("key1", "Exists", "", "NoSchedule")
    out = run(slices, [claim("claim-0", req("req-0", count=2, tolerations=[tol]))])
    ok(out, ("req-0", "device-1"), ("req-0", "device-2"))


# ---------------------------------------------------------------------- consumable capacity


C0 = f"{A}/capacity-0"
C1 = f"{A}/capacity-1"
RANGE = CapacityPolicy(Fraction(2), (), (Fraction(2), Fraction(4), Fraction(2)))  # default 2, min 2, max 4, step 2


def ranged(value: int) -> dict[str, Capacity]:
    return {C0: Capacity(Fraction(value), RANGE)}


def shares(out: AllocationOutcome, name: str = "claim-0") -> list[dict[str, str] | None]:
    results = out.allocations[f"default/{name}"]["devices"]["results"]
    for r in results:
        assert len(r["shareID"]) == 36 and r["shareID"][14] == "4"
    return [r.get("consumedCapacity") for r in results]


MULTI = {"class-a": cls("class-a", A, "multi"), "class-b": cls("class-b", B)}
DEDICATED = {"class-a": cls("class-a", A, "dedicated")}


def test_consumable_capacity_feature_off_is_an_error() -> None:
    one = [one_device_slice()]
    error(
        run(one, [claim("claim-0", req("req-0", capacity={C0: 1}))], features=Features(consumable_capacity=False)),
        "claim default/claim-0, request req-0: has capacity requests,",
        "but the DRAConsumableCapacity feature is disabled",
    )
    c = claim("claim-0", first("req-0", sub("subReq-0", capacity={C0: 1}), sub("subReq-1", capacity={C0: 1})))
    error(run(one, [c], features=Features(consumable_capacity=False)), "claim default/claim-0, subrequest subReq-0")


def test_consumable_capacity_sharing_and_defaults() -> None:
    missing = [sl("slice-1", dev("device-1", multi=True, caps={C1: Capacity(Fraction(1))}))]
    unsat(run(missing, [claim("claim-0", req("req-0", capacity={C0: 1}))]))
    unsat(run(missing, [claim("claim-0", req("req-0", mode="All", capacity={C0: 1}))], classes=MULTI))
    no_caps = [sl("slice-1", dev("device-1", multi=True))]
    out = run(no_caps, [claim("claim-0", req("req-0")), claim("claim-1", req("req-0"))], classes=MULTI)
    assert shares(out) == [None] and shares(out, "claim-1") == [None]
    full = [
        sl(
            "slice-1",
            dev("device-1", multi=True, caps={C0: Capacity(Fraction(1))}),
            dev("device-2", multi=True, caps={C0: Capacity(Fraction(1))}),
        )
    ]
    out = run(full, [claim("claim-0", req("req-0")), claim("claim-1", req("req-0"))], classes=MULTI)
    ok(out, ("req-0", "device-1"))
    ok(out, ("req-0", "device-2"), name="claim-1")  # no request: the full value is consumed
    assert shares(out) == [{C0: "1"}]
    out = run(full[:1], [claim("claim-0", req("req-0", capacity={C0: 1}))], classes=MULTI)
    assert shares(out) == [{C0: "1"}]
    out = run(
        [sl("slice-1", dev("device-1", multi=True, caps=ranged(4)))],
        [claim("claim-0", req("req-0")), claim("claim-1", req("req-0"))],
        classes=MULTI,
    )
    assert shares(out) == [{C0: "2"}] and shares(out, "claim-1") == [{C0: "2"}]


def test_consumable_capacity_policies() -> None:
    zero = CapacityPolicy(Fraction(0), (Fraction(0),))
    dev0 = [sl("slice-1", dev("device-1", multi=True, caps={C0: Capacity(Fraction(1), zero)}))]
    out = run(dev0, [claim("claim-0", req("req-0")), claim("claim-1", req("req-0"))], classes=MULTI)
    assert shares(out) == [{C0: "0"}]
    unsat(run(dev0, [claim("claim-0", req("req-0", capacity={C0: 1}))], classes=MULTI))
    four = [sl("slice-1", dev("device-1", multi=True, caps=ranged(4)))]
    out = run(
        four,
        [claim("claim-0", req("req-0", capacity={C0: 1})), claim("claim-1", req("req-0", capacity={C0: 1}))],
        classes=MULTI,
    )
    assert shares(out) == [{C0: "2"}] and shares(out, "claim-1") == [{C0: "2"}]  # rounded up to min
    assert shares(run(four, [claim("claim-0", req("req-0", capacity={C0: 3}))], classes=MULTI)) == [{C0: "4"}]  # step
    values = CapacityPolicy(Fraction(1), (Fraction(1), Fraction(2)))
    out = run(
        [sl("slice-1", dev("device-1", multi=True, caps={C0: Capacity(Fraction(4), values)}))],
        [claim("claim-0", req("req-0", capacity={C0: 2}))],
        classes=MULTI,
    )
    assert shares(out) == [{C0: "2"}]
    values = CapacityPolicy(Fraction(1), (Fraction(1), Fraction(3)))
    out = run(
        [sl("slice-1", dev("device-1", multi=True, caps={C0: Capacity(Fraction(3), values)}))],
        [claim("claim-0", req("req-0", capacity={C0: 2}))],
        classes=MULTI,
    )
    assert shares(out) == [{C0: "3"}]  # rounded up to the next valid value
    two = [sl("slice-1", dev("device-1", multi=True, caps=ranged(2)))]
    unsat(
        run(
            two,
            [claim("claim-0", req("req-0", capacity={C0: 1})), claim("claim-1", req("req-0", capacity={C0: 2}))],
            classes=MULTI,
        )
    )
    ten = [sl("slice-1", dev("device-1", multi=True, caps=ranged(10)))]
    unsat(run(ten, [claim("claim-0", req("req-0", capacity={C0: 6}))], classes=MULTI))  # above max 4


def test_consumable_capacity_committed_shares() -> None:
    four = [sl("slice-1", dev("device-1", multi=True, caps=ranged(4)))]
    committed = {(A, "pool-1", "device-1"): {C0: 2}}
    out = run(four, [claim("claim-0", req("req-0", capacity={C0: 2}))], classes=MULTI, shared=committed)
    assert shares(out) == [{C0: "2"}]
    two = [sl("slice-1", dev("device-1", multi=True, caps=ranged(2)), dev("device-2", multi=True, caps=ranged(2)))]
    ok(
        run(two, [claim("claim-0", req("req-0", capacity={C0: 2}))], classes=MULTI, shared=committed),
        ("req-0", "device-2"),
    )
    only = [sl("slice-1", dev("device-1", multi=True, caps=ranged(2)))]
    unsat(run(only, [claim("claim-0", req("req-0", capacity={C0: 2}))], classes=MULTI, shared=committed))


def test_consumable_capacity_backtrack_and_subrequests() -> None:
    slices = [
        sl(
            "slice-1",
            dev("device-2", multi=True, stringAttribute="v1", caps=ranged(2)),
            dev("device-1", multi=True, stringAttribute="v2", caps=ranged(4)),
        )
    ]
    c0 = claim(
        "claim-0",
        req("req-0", capacity={C0: 2}),
        req("req-1", capacity={C0: 2}),
        constraints=[match(f"{A}/stringAttribute")],
    )
    out = run(slices, [c0, claim("claim-1", req("req-0", capacity={C0: 2}))])
    ok(out, ("req-0", "device-1"), ("req-1", "device-1"))
    ok(out, ("req-0", "device-2"), name="claim-1")
    c = claim(
        "claim-0", first("req-0", sub("subReq-0", capacity={C0: 4}), sub("subReq-1", capacity={C0: 2}), sub("subReq-1"))
    )
    out = run([sl("slice-1", dev("device-1", multi=True, caps=ranged(2)))], [c], classes=MULTI)
    ok(out, ("req-0/subReq-1", "device-1"))
    unsat(
        run(
            [sl("slice-1", dev("device-1", multi=True, caps=ranged(2)))],
            [claim("claim-0", req("req-0", capacity={C0: 2}))],
            classes=MULTI,
            shared={(A, "pool-1", "device-1"): {C0: 2}},
        )
    )


def test_consumable_capacity_all_mode() -> None:
    d1 = dev("device-1", multi=True, caps={C0: Capacity(Fraction(2))})
    out = run(
        [sl("slice-1", d1, dev("device-2", multi=True))],
        [claim("claim-0", req("req-0", mode="All", capacity={C0: 2}))],
        classes=MULTI,
    )
    ok(out, ("req-0", "device-1"))
    small = dev("device-2", multi=True, caps={C0: Capacity(Fraction(1))})
    ok(
        run([sl("slice-1", d1, small)], [claim("claim-0", req("req-0", mode="All", capacity={C0: 2}))], classes=MULTI),
        ("req-0", "device-1"),
    )
    c = claim("claim-0", req("req-0", capacity={C0: 1}), req("req-1", mode="All", capacity={C0: 1}))
    out = run([sl("slice-1", d1, small)], [c])
    ok(out, ("req-0", "device-1"), ("req-1", "device-1"), ("req-1", "device-2"))
    out = run(
        [sl("slice-1", d1, small)],
        [claim("claim-0", req("req-0", mode="All", capacity={C0: 1}))],
        shared={(A, "pool-1", "device-1"): {C0: 1}},
    )
    ok(out, ("req-0", "device-1"), ("req-0", "device-2"))
    tiny = dev("device-1", multi=True, caps={C0: Capacity(Fraction(1))})
    unsat(run([sl("slice-1", tiny, small)], [c]))
    ok(
        run(
            [sl("slice-1", tiny, small)],
            [claim("claim-0", req("req-0", mode="All", capacity={C0: 1}))],
            shared={(A, "pool-1", "device-1"): {C0: 1}},
        ),
        ("req-0", "device-2"),
    )


def test_consumable_capacity_dedicated_devices() -> None:
    out = run(
        [sl("slice-1", dev("device-1", caps={C0: Capacity(Fraction(1))}))],
        [claim("claim-0", req("req-0", capacity={C0: 1}))],
        classes=DEDICATED,
    )
    assert out.allocations["default/claim-0"]["devices"]["results"] == [
        {"request": "req-0", "driver": A, "pool": "pool-1", "device": "device-1"}
    ]
    policy_dev = [sl("slice-1", dev("device-1", caps=ranged(2)))]
    unsat(
        run(
            policy_dev,
            [claim("claim-0", req("req-0", capacity={C0: 1})), claim("claim-1", req("req-0", capacity={C0: 1}))],
            classes=DEDICATED,
        )
    )
    unsat(
        run(
            [sl("slice-1", dev("device-1", multi=True, caps={C0: Capacity(Fraction(1))}))],
            [claim("claim-0", req("req-0", capacity={C0: 1}))],
            classes=DEDICATED,
        )
    )
    unsat(
        run(
            [sl("slice-1", dev("device-1", multi=True, caps=ranged(2)))],
            [claim("claim-0", req("req-0", capacity={C0: 1}))],
            classes=MULTI,
            in_use=[(A, "pool-1", "device-1")],
        )
    )  # already allocated as dedicated
    unsat(
        run(
            policy_dev,
            [claim("claim-0", req("req-0", capacity={C0: 1}))],
            classes=MULTI,
            shared={(A, "pool-1", "device-1"): {C0: 1}},
        )
    )


def test_consumable_capacity_with_partitionable_devices() -> None:
    devices = [
        dev(f"device-{i}", memory=m, counters={"cs": {"memory": m}}, multi=True)
        for i, m in ((1, 4 * GI), (2, 6 * GI), (3, 4 * GI))
    ]
    c = claim(
        "claim-0",
        req("req-0"),
        first("req-1", sub("subReq-0", "class-a", 1, "mem>=6Gi"), sub("subReq-1", "class-a", 1, "mem>=4Gi")),
    )
    out = run(counters_pool(*devices, sets={"cs": {"memory": 8 * GI}}), [c], classes=MULTI)
    ok(out, ("req-0", "device-1"), ("req-1/subReq-1", "device-3"))
    assert shares(out) == [{f"{A}/memory": "4Gi"}, {f"{A}/memory": "4Gi"}]
    table = Table({"c0>=4": lambda d: d.capacity[C0].value >= 4, "c0>=2": lambda d: d.capacity[C0].value >= 2})
    devices = [
        dev(
            f"device-{i}",
            multi=True,
            counters={"cs1": {C0: c0}, "cs2": {C1: 4}},
            caps={C0: Capacity(Fraction(c0)), C1: Capacity(Fraction(4), RANGE)},
        )
        for i, c0 in ((1, 2), (2, 4), (3, 2))
    ]
    c = claim(
        "claim-0",
        req("req-0", capacity={C0: 1}),
        req("req-2", capacity={C0: 2}),
        first(
            "req-1",
            sub("subReq-0", "class-a", 1, "c0>=4", capacity={C0: 1}),
            sub("subReq-1", "class-a", 1, "c0>=2", capacity={C0: 1}),
        ),
    )
    out = run(counters_pool(*devices, sets={"cs1": {C0: 4}, "cs2": {C1: 8}}), [c], matcher=table)
    ok(out, ("req-0", "device-1"), ("req-2", "device-3"), ("req-1/subReq-1", "device-1"))
    assert shares(out) == [{C0: "1", C1: "2"}, {C0: "2", C1: "2"}, {C0: "1", C1: "2"}]


def test_committed_shares_consume_counters() -> None:
    """Fixed behaviour (1.37): a multi-allocatable device with a committed share holds its counters."""
    devices = [
        dev("device-1", multi=True, counters={"cs": {"memory": 6 * GI}}),
        dev("device-2", counters={"cs": {"memory": 4 * GI}}),
    ]
    slices = counters_pool(*devices, sets={"cs": {"memory": 8 * GI}})
    unsat(
        run(
            slices,
            [claim("claim-0", req("req-0", "class-a", 1, "dedicated"))],
            classes={"class-a": cls("class-a", A)},
            shared={(A, "pool-1", "device-1"): {}},
        )
    )
    out = run(slices, [claim("claim-0", req("req-0", "class-a", 1, "multi"))], shared={(A, "pool-1", "device-1"): {}})
    ok(out, ("req-0", "device-1"))  # sharing it again needs no more counters


def test_share_ids_are_deterministic() -> None:
    c = claim("claim-0", req("req-0"), uid="1234")
    a = run([sl("slice-1", dev("device-1", multi=True))], [c], classes=MULTI)
    b = run([sl("slice-1", dev("device-1", multi=True))], [c], classes=MULTI)
    assert a.allocations == b.allocations
    sid = a.allocations["default/claim-0"]["devices"]["results"][0]["shareID"]
    assert sid == share_id(c, "req-0", "driver-a/pool-1/device-1", 0)
    assert sid != share_id(replace(c, uid="5678"), "req-0", "driver-a/pool-1/device-1", 0)


def test_format_quantity() -> None:
    assert [format_quantity(Fraction(v)) for v in (0, 2, 1000, 1500, 2000, 1024, 40 * GI, 10**10)] == [
        "0",
        "2",
        "1k",
        "1500",
        "2k",
        "1Ki",
        "40Gi",
        "10G",
    ]
    assert format_quantity(Fraction(1, 2)) == "500m"


# ---------------------------------------------------------------------- all-or-nothing, determinism


def test_all_or_nothing_across_claims() -> None:
    two = [sl("slice-1", dev("device-1"), dev("device-2"))]
    claims = [claim("claim-0", req("req-0")), claim("claim-1", req("req-0")), claim("claim-2", req("req-0"))]
    out = run(two, claims)
    unsat(out)
    assert [(e.claim, e.kind) for e in out.explanations] == [("default/claim-2", "capacity")]
    assert "not together with default/claim-0, default/claim-1" in out.explanations[0].message
    out = run(two, claims[:2])
    assert sorted(out.allocations) == ["default/claim-0", "default/claim-1"]


def test_allocated_claims_are_skipped() -> None:
    done = Claim("default", "done", requests=(req("r"),), allocation={"devices": {"results": []}})
    out = run([one_device_slice()], [done, claim("claim-0", req("req-0"))])
    assert list(out.allocations) == ["default/claim-0"]


def test_deterministic_order_pools_and_slices() -> None:
    slices = [
        sl("slice-b", dev("device-1"), pool="pool-b", driver=A),
        sl("slice-a2", dev("device-9"), pool="pool-a", count=2),
        sl("slice-a1", dev("device-5"), pool="pool-a", count=2),
        sl("slice-x", dev("device-0"), pool="pool-0", driver=B),
    ]
    c = claim("claim-0", req("req-0", count=3))
    expect = [
        ("req-0", A, "pool-a", "device-5"),
        ("req-0", A, "pool-a", "device-9"),
        ("req-0", A, "pool-b", "device-1"),
    ]
    for perm in itertools.permutations(slices):
        assert picked(run(list(perm), [c])) == expect


# ---------------------------------------------------------------------- speed (allocate-one calls, not time)


def backtracking_workload() -> tuple[list[Slice], Claim]:
    devices = [dev(f"device-{i}", counters={"cs": {"memory": (20 if i == 1 else 10) * GI}}) for i in range(1, 9)]
    return counters_pool(*devices, sets={"cs": {"memory": 70 * GI}}), claim("claim-0", req("req-0", count=7))


def test_upstream_backtracking_workload() -> None:
    slices, c = backtracking_workload()
    out = run(slices, [c])
    assert [r[3] for r in picked(out)] == [f"device-{i}" for i in range(2, 9)]
    assert out.stats["allocate_one_calls"] <= 20


def nvlink_node(in_use: int) -> tuple[list[Slice], list[tuple[str, str, str]]]:
    """8 GPUs, 2 NUMA nodes, 4 PCIe roots, 2 NVLink domains of 4; `in_use` GPUs taken in each domain."""
    gpus = [dev(f"gpu-{i}", numa=i // 4, pcieRoot=f"pci{i // 2}", nvlink=f"nv{i // 4}") for i in range(8)]
    return [sl("slice-1", *gpus)], [(A, "pool-1", f"gpu-{d * 4 + j}") for d in range(2) for j in range(in_use)]


@pytest.mark.parametrize("separate", [False, True])
def test_nvlink_workload(separate: bool) -> None:
    reqs = [req(f"r{i}") for i in range(4)] if separate else [req("r", count=4)]
    c = claim("claim-0", *reqs, constraints=[match(f"{A}/nvlink")])
    slices, _ = nvlink_node(0)
    out = run(slices, [c])
    assert [r[3] for r in picked(out)] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert out.stats["allocate_one_calls"] <= 10
    slices, used = nvlink_node(1)
    out = run(slices, [c], in_use=used)
    unsat(out)
    assert out.stats["allocate_one_calls"] <= 2
    [e] = out.explanations
    assert (e.kind, e.constraint, e.attribute, e.matching, e.free) == (
        "topology",
        "matchAttribute",
        f"{A}/nvlink",
        8,
        6,
    )
    assert "at most 3 free devices share one value" in e.message
    slices, used = nvlink_node(0)
    used = [(A, "pool-1", "gpu-0"), (A, "pool-1", "gpu-5")]
    out = run(slices, [c], in_use=used)
    unsat(out)
    assert out.stats["allocate_one_calls"] <= 2


def test_n_plus_one_is_refused_without_search() -> None:
    five = [sl("slice-1", *[dev(f"device-{i}") for i in range(1, 6)])]
    out = run(five, [claim("claim-0", req("req-0", count=6))])
    unsat(out)
    assert out.stats["allocate_one_calls"] == 0
    many = [sl("slice-1", *[dev(f"device-{i}") for i in range(31)])]
    out = run(many, [claim("claim-0", req("req-0", count=16), req("req-1", count=16))])
    unsat(out)
    assert out.stats["allocate_one_calls"] == 0
    singles = [req(f"r{i}") for i in range(12)]
    out = run([sl("slice-1", *[dev(f"device-{i}") for i in range(11)])], [claim("claim-0", *singles)])
    unsat(out)
    assert out.stats["allocate_one_calls"] == 0


def test_many_claims_of_many_devices() -> None:
    """1020 of 1152 devices for 34 claims: deeper than Python's default recursion limit, linear work."""
    slices = [sl(f"s{j}", *[dev(f"d{128 * j + i}") for i in range(128)], pool=f"p{j}") for j in range(9)]
    claims = [claim(f"c{i}", req("r", count=30)) for i in range(34)]
    out = run(slices, claims)
    assert out.outcome == "allocated" and out.stats["backtracks"] == 0
    assert picked(out, "c33")[-1][2:] == ("p7", "d1019")
    out = run(slices, [*claims, *[claim(f"x{i}", req("r", count=30)) for i in range(5)]])  # 1170 > 1152
    unsat(out)
    assert out.stats["allocate_one_calls"] == 0
    assert [(e.claim, e.kind) for e in out.explanations] == [("default/x4", "capacity")]


def test_topology_across_many_single_requests_is_cut_early() -> None:
    gpus = [dev(f"gpu-{i}", nvlink=f"nv{i // 4}") for i in range(16)]
    c = claim("claim-0", *[req(f"r{i}") for i in range(8)], constraints=[match(f"{A}/nvlink")])
    out = run([sl("slice-1", *gpus)], [c])
    unsat(out)
    assert out.stats["allocate_one_calls"] <= 5
    assert out.explanations[0].kind == "topology"


def test_distinct_needs_enough_values() -> None:
    gpus = [dev(f"gpu-{i}", numa=i % 3) for i in range(12)]
    c = claim("claim-0", req("r", count=4), constraints=[distinct(f"{A}/numa")])
    out = run([sl("slice-1", *gpus)], [c])
    unsat(out)
    assert out.stats["allocate_one_calls"] <= 5
    assert (out.explanations[0].kind, out.explanations[0].constraint) == ("topology", "distinctAttribute")


def test_budget_is_the_filter_timeout() -> None:
    """An `All` request under a constraint turns pruning off (upstream may raise an error there); the
    memo alone cannot save this search, and the budget stops it."""
    devices = [dev(f"device-{i}", numa=i % 2) for i in range(16)]
    c = claim(
        "claim-0",
        *[req(f"r{i}") for i in range(9)],
        req("all", "class-b", mode="All"),
        constraints=[match(f"{A}/numa")],
    )
    slices = [sl("slice-1", *devices), sl("slice-2", dev("device-0", numa=0), driver=B)]
    out = run(slices, [c], max_allocate_one_calls=50)
    assert out.outcome == "unsatisfiable" and "timed out" in out.message
    assert out.stats["allocate_one_calls"] == 51


# ---------------------------------------------------------------------- explanations


def test_explanations_capacity_taint_incomplete() -> None:
    two = [sl("slice-1", dev("device-1"), dev("device-2"))]
    [e] = run(two, [claim("claim-0", req("req-0", count=3))]).explanations
    assert (e.kind, e.request, e.matching, e.free) == ("capacity", "req-0", 2, 2)
    [e] = run(two, [claim("claim-0", req("req-0", count=2))], in_use=[(A, "pool-1", "device-1")]).explanations
    assert (e.kind, e.matching, e.free) == ("capacity", 2, 1) and "only 1 are free" in e.message
    tainted = [sl("slice-1", dev("device-1", taints=[NO_SCHEDULE]), dev("device-2"))]
    [e] = run(tainted, [claim("claim-0", req("req-0", count=2))]).explanations
    assert (e.kind, e.matching, e.free) == ("taint", 2, 2) and "taint-key=taint-value:NoSchedule" in e.message
    incomplete = [sl("slice-1", dev("device-1")), sl("slice-2", dev("device-2"), pool="pool-2", count=2)]
    [e] = run(incomplete, [claim("claim-0", req("req-0", count=2))]).explanations
    assert (e.kind, e.matching) == ("incomplete-pool", 1) and "driver-a/pool-2" in e.message


def test_explanations_counters_and_consumable_capacity() -> None:
    slices, c = backtracking_workload()
    out = run(slices, [replace(c, requests=(req("req-0", count=8),))])
    [e] = out.explanations
    assert (e.kind, e.matching, e.free) == ("counters", 8, 8) and "driver-a/pool-1/cs/memory=70Gi" in e.message
    four = [sl("slice-1", dev("device-1", multi=True, caps=ranged(4)))]
    out = run(
        four,
        [claim("claim-0", req("req-0", capacity={C0: 4}))],
        classes=MULTI,
        shared={(A, "pool-1", "device-1"): {C0: 2}},
    )
    assert [e.kind for e in out.explanations] == ["consumable-capacity"]


def test_explanations_for_prioritized_lists_and_requests_together() -> None:
    one = [one_device_slice()]
    out = run(one, [claim("claim-0", first("req-0", sub("subReq-0", count=2), sub("subReq-1", "class-b")))])
    # issue 23: the alternative that came closest (one device matches subReq-0, none subReq-1), not each one
    assert [(e.request, e.kind, e.matching) for e in out.explanations] == [("req-0/subReq-0", "capacity", 1)]
    assert "the others: req-0/subReq-1: no device matches" in out.explanations[0].message
    out = run(one, [claim("claim-0", req("req-0"), req("req-1"))])
    [e] = out.explanations
    assert (e.kind, e.request) == ("capacity", None) and "together they need 2 devices" in e.message


def test_outcome_message_and_stats() -> None:
    out = run([one_device_slice()], [claim("claim-0", req("req-0", count=2))])
    assert out.message.startswith("cannot allocate all claims: request req-0 of claim default/claim-0 needs 2 devices")
    assert {"allocate_one_calls", "candidates_tried", "explain_allocate_one_calls"} <= set(out.stats)


def test_selector_results_are_cached_across_nodes() -> None:
    table = Table()
    slices = [sl(f"slice-{n}", dev("device-1"), node=n) for n in ("node-1", "node-2")]
    allocator = Allocator(slices, CLASSES, AllocatedState(), table)
    for _ in range(3):
        for node in (NODE1, NODE2):
            assert allocator.allocate(node, [claim("claim-0", req("req-0"))]).outcome == "allocated"
    assert table.calls == 2


# ---------------------------------------------------------------------- property: same first solution as upstream


def reference(
    slices: list[Slice], classes: dict[str, DeviceClass], claims: list[Claim], in_use: set[DeviceID], matcher: Table
) -> list[list[tuple[str, str]]] | None | str:
    """A naive transcription of upstream's allocateOne (permutations, no pruning) for one complete pool
    on node-1, with the fixed counter and distinct semantics, and devices that allow multiple
    allocations (consumable capacity). None: no solution; "error": an error."""
    devices = [d for s in sorted(slices, key=lambda s: s.name) for d in s.devices]
    counters = {(s_, c): v for s in slices for s_, cs in s.shared_counters.items() for c, v in cs.items()}
    for d in devices:
        if d.id in in_use:
            for u in d.consumes_counters:
                for c, v in u.counters.items():
                    counters[(u.counter_set, c)] -= v
    used: dict[tuple[str, str], Fraction] = {}
    allocating: dict[DeviceID, list[int]] = {}
    shares: dict[DeviceID, int] = {}
    alloc_cap: dict[DeviceID, dict[str, Fraction]] = {}
    undo_info: list[tuple[SubRequest, bool]] = []
    results: list[list[tuple[str, str]]] = [[] for _ in claims]
    chosen: list[list[Device]] = [[] for _ in claims]

    def selectable(s: SubRequest, d: Device) -> bool:
        return all(matcher.matches(e, d, "") for e in classes[s.device_class].selectors + s.selectors)

    def applies(con: Constraint, base: str, name: str) -> bool:
        return not con.requests or base in con.requests or name in con.requests

    def constraints_ok(ci: int, base: str, name: str, d: Device) -> bool:
        for con in claims[ci].constraints:
            if not applies(con, base, name):
                continue
            key = con.match_attribute or con.distinct_attribute or ""
            a = d.attributes.get(key)
            if a is None:
                return False
            others = [
                o.attributes[key]
                for o, (b, n) in zip(chosen[ci], results[ci], strict=True)
                if applies(con, b.split("/")[0], b)
            ]
            if con.match_attribute and others and others[0] != a:
                return False
            if con.distinct_attribute and a in others:
                return False
        return True

    def try_device(ci: int, s: SubRequest, base: str, name: str, d: Device, must: bool) -> bool:
        multi = d.allow_multiple_allocations
        if s.admin_access:
            if not multi and ci in allocating.get(d.id, []):
                return False
        elif d.id in in_use or allocating.get(d.id):
            return False
        need = [((u.counter_set, c), v) for u in d.consumes_counters for c, v in u.counters.items()]
        reserve = not (multi and shares.get(d.id))
        if reserve and any(used.get(k, Fraction(0)) + v > counters[k] for k, v in need):
            return False
        if any(t.effect in ("NoSchedule", "NoExecute") and not s.tolerations for t in d.taints):
            return False
        if not constraints_ok(ci, base, name, d):
            if must:
                raise ValueError("constraint")
            return False
        if request_fits(d.capacity, s.capacity_requests, None, alloc_cap.get(d.id)) is not True:
            return False
        if reserve:
            for k, v in need:
                used[k] = used.get(k, Fraction(0)) + v
        if multi:
            shares[d.id] = shares.get(d.id, 0) + 1
            agg = alloc_cap.setdefault(d.id, {})
            for cap_name, amount in consumed_capacity(d.capacity, s.capacity_requests).items():
                agg[cap_name] = agg.get(cap_name, Fraction(0)) + amount
        else:
            allocating.setdefault(d.id, []).append(ci)
        results[ci].append((name, d.id.device))
        chosen[ci].append(d)
        undo_info.append((s, reserve))
        return True

    def undo(ci: int, d: Device) -> None:
        s, reserve = undo_info.pop()
        if reserve:
            for u in d.consumes_counters:
                for c, v in u.counters.items():
                    used[(u.counter_set, c)] -= v
        if d.allow_multiple_allocations:
            shares[d.id] -= 1
            agg = alloc_cap[d.id]
            for cap_name, amount in consumed_capacity(d.capacity, s.capacity_requests).items():
                agg[cap_name] -= amount
        else:
            allocating[d.id].pop()
        results[ci].pop()
        chosen[ci].pop()

    def one(ci: int, ri: int, s: SubRequest | None, slot: int) -> bool:
        if ci == len(claims):
            return True
        if ri == len(claims[ci].requests):
            return one(ci + 1, 0, None, 0)
        request = claims[ci].requests[ri]
        if s is None:
            if request.exactly is not None:
                return one(ci, ri, request.exactly, 0)
            return any(one(ci, ri, choice, 0) for choice in request.first_available)
        base = request.name
        name = base if request.exactly is not None else f"{base}/{s.name}"
        if s.allocation_mode == "All":
            everything = [
                d
                for d in devices
                if selectable(s, d) and request_fits(d.capacity, s.capacity_requests, None, None) is True
            ]
            if not everything:
                return False
            if slot == len(everything):
                return one(ci, ri + 1, None, 0)
            d = everything[slot]
            if not try_device(ci, s, base, name, d, True):
                return False
            if one(ci, ri, s, slot + 1):
                return True
            undo(ci, d)
            return False
        if slot == s.count:
            return one(ci, ri + 1, None, 0)
        for d in devices:
            if not selectable(s, d):
                continue
            if try_device(ci, s, base, name, d, False):
                if one(ci, ri, s, slot + 1):
                    return True
                undo(ci, d)
        return False

    try:
        return results if one(0, 0, None, 0) else None
    except ValueError:
        return "error"


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[Slice], list[Claim], set[DeviceID]]:
    n = draw(st.integers(2, 8))
    with_counters = draw(st.booleans())
    devices = []
    for i in range(n):
        devices.append(
            dev(
                f"d{i}",
                numa=draw(st.integers(0, 2)),
                big=draw(st.booleans()),
                counters={"cs": {"mem": draw(st.integers(1, 3))}} if with_counters else None,
                taints=[NO_SCHEDULE] if draw(st.integers(0, 5)) == 0 else [],
                multi=(multi := draw(st.integers(0, 3)) == 0),
                caps={C0: Capacity(Fraction(draw(st.integers(1, 4))), RANGE if draw(st.booleans()) else None)}
                if multi or draw(st.integers(0, 3)) == 0
                else None,
            )
        )
    slices = [sl("s1", *devices, count=2 if with_counters else 1)]
    if with_counters:
        slices.append(sl("s2", count=2, counter_sets={"cs": {"mem": draw(st.integers(2, 12))}}))
    in_use = {DeviceID(A, "pool-1", f"d{i}") for i in range(n) if draw(st.integers(0, 6)) == 0}
    claims = []
    for ci in range(draw(st.integers(1, 2))):
        requests = []
        for ri in range(draw(st.sampled_from([1, 1, 2, 2, 3]))):

            def one_sub(name: str) -> SubRequest:
                mode = "All" if draw(st.integers(0, 6)) == 0 else "ExactCount"
                count = draw(st.sampled_from([1, 1, 1, 2, 2, 3]))
                selectors = ["big"] if draw(st.integers(0, 3)) == 0 else []
                return sub(
                    name,
                    "class-a",
                    count,
                    *selectors,
                    mode=mode,
                    tolerations=[TOL_NO_SCHEDULE] if draw(st.booleans()) else [],
                    capacity={C0: draw(st.integers(0, 3))} if draw(st.integers(0, 3)) == 0 else None,
                )

            if draw(st.integers(0, 3)) == 0:
                requests.append(first(f"r{ri}", one_sub("a"), one_sub("b")))
            else:
                s = one_sub(f"r{ri}")
                requests.append(Request(f"r{ri}", exactly=replace(s, admin_access=draw(st.integers(0, 5)) == 0)))
        cons = []
        for _ in range(draw(st.integers(0, 2))):
            names = tuple(r.name for r in requests if draw(st.booleans()))
            attr = f"{A}/{draw(st.sampled_from(['numa', 'big']))}"
            cons.append(match(attr, *names) if draw(st.booleans()) else distinct(attr, *names))
        claims.append(claim(f"c{ci}", *requests, constraints=cons))
    return slices, claims, in_use


@settings(max_examples=400, deadline=None)
@given(instances())
def test_same_first_solution_as_upstream_permutation_search(
    inst: tuple[list[Slice], list[Claim], set[DeviceID]],
) -> None:
    slices, claims, in_use = inst
    table = Table({"big": lambda d: d.attributes[f"{A}/big"].value is True})
    want = reference(slices, CLASSES, claims, in_use, table)
    state = AllocatedState(devices=set(in_use))
    out = Allocator(slices, CLASSES, state, table).allocate(NODE1, claims)
    if want == "error":
        assert out.outcome == "error", out.message
    elif want is None:
        assert out.outcome == "unsatisfiable", out.allocations
    else:
        assert out.outcome == "allocated", out.message
        got = [
            [(r["request"], r["device"]) for r in out.allocations[f"default/{c.name}"]["devices"]["results"]]
            for c in claims
        ]
        assert got == want

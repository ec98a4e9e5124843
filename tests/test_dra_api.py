"""resource.k8s.io/v1 manifests: loading, conversion to the DRA model, validation at 1.35 limits, round trip.

Every refusal names the file, the path of the field and what was expected, with the API server's words
(k8s.io/kubernetes pkg/apis/resource/validation at 1.35).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.core.dra.api import (
    MAX_FILE_BYTES,
    ManifestError,
    claim_from_template,
    dump_objects,
    load_objects,
    parse_documents,
    read_documents,
)
from dralab.core.dra.model import Attribute, Capacity, CapacityPolicy, DeviceID, NodeSelection, Taint, Toleration
from dralab.core.kube.quantity import ERR_FORMAT_WRONG
from dralab.core.scenario.load import ScenarioError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dra"
V1 = "resource.k8s.io/v1"
GI = Fraction(1 << 30)
G = Fraction(10**9)


def fixture(name: str) -> Path:
    return FIXTURES / name


def documents(path: Path) -> list[dict[str, Any]]:
    """The objects of a fixture as plain YAML, Lists flattened (what dump_objects should give back)."""
    out: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(path.read_text()):
        if doc is None:
            continue
        out.extend(doc["items"] if doc["kind"] == "List" else [doc])
    return out


# --- builders for valid objects that each invalid case breaks in one place ----------------------------------


def device(name: str = "gpu-0", **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


def a_slice(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "driver": "gpu.example.com",
        "nodeName": "node-a",
        "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
        "devices": [device()],
    }
    body.update(spec)
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": body}


def exactly(**fields: Any) -> dict[str, Any]:
    return {"deviceClassName": "gpu.example.com", **fields}


def a_claim(requests: list[dict[str, Any]] | None = None, **devices: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": exactly()}] if requests is None else requests}
    body.update(devices)
    return {
        "apiVersion": V1,
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {"devices": body},
    }


def a_class(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"}, "spec": spec}


def a_pod(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "main", "image": "trainer"}]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": body}


def refusal(*docs: object, file: str = "in.yaml") -> ManifestError:
    with pytest.raises(ManifestError) as info:
        parse_documents(list(docs), file)
    return info.value


def with_status(status: dict[str, Any], claim: dict[str, Any] | None = None) -> dict[str, Any]:
    out = a_claim() if claim is None else claim
    out["status"] = status
    return out


def result(**fields: Any) -> dict[str, Any]:
    return {"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0", **fields}


# --- valid fixtures -----------------------------------------------------------------------------------------


def test_node_local_gpu_slice() -> None:
    inv = load_objects([fixture("node-local-gpu.yaml")])
    assert list(inv.nodes) == ["node-a"]
    assert inv.nodes["node-a"].labels == {"kubernetes.io/hostname": "node-a", "example.com/rack": "7"}
    s = inv.slices["node-a-gpu.example.com-7qk2p"]
    assert (s.driver, s.pool, s.generation, s.resource_slice_count) == ("gpu.example.com", "node-a", 1, 1)
    assert s.node_selection == NodeSelection(node_name="node-a")
    assert not s.per_device_node_selection and s.shared_counters == {}
    gpu0, gpu1 = s.devices
    assert gpu0.id == DeviceID("gpu.example.com", "node-a", "gpu-0") and gpu0.slice_name == s.name
    assert gpu0.attributes == {
        "gpu.example.com/type": Attribute("string", "gpu"),
        "gpu.example.com/model": Attribute("string", "A100-SXM4-40GB"),
        "gpu.example.com/index": Attribute("int", 0),
        "gpu.example.com/driverVersion": Attribute("version", "550.54.15"),
        "resource.kubernetes.io/pcieRoot": Attribute("string", "pci0000:00"),
    }
    assert gpu0.capacity == {"gpu.example.com/memory": Capacity(40 * GI)}
    assert gpu0.published_capacity_names == {"gpu.example.com/memory": "memory"}
    assert gpu1.attributes["gpu.example.com/index"] == Attribute("int", 1)
    assert (gpu0.taints, gpu0.consumes_counters, gpu0.node_selection) == ((), (), None)
    assert not (gpu0.allow_multiple_allocations or gpu0.binds_to_node or gpu0.binding_conditions)
    cls = inv.classes["gpu.example.com"]
    assert cls.selectors == (
        'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].type == "gpu"',
    )
    claim = inv.claims["ml/one-gpu"]
    assert (claim.namespace, claim.name, claim.key, claim.allocation, claim.reserved_for) == (
        "ml",
        "one-gpu",
        "ml/one-gpu",
        None,
        (),
    )
    (request,) = claim.requests
    assert request.name == "gpu" and request.first_available == ()
    sub = request.exactly
    assert sub is not None and request.choices() == (sub,)
    assert (sub.name, sub.device_class, sub.allocation_mode, sub.count, sub.admin_access) == (
        "gpu",
        "gpu.example.com",
        "ExactCount",
        1,
        False,
    )


def test_partitionable_layout_with_a_counters_only_slice() -> None:
    inv = load_objects([fixture("partitionable.yaml")])
    counters, devices = inv.slices["node-b-gpu-counters"], inv.slices["node-b-gpu-devices"]
    assert counters.devices == ()
    assert counters.shared_counters == {"gpu-0-counters": {"memory": 40 * GI, "compute-slices": Fraction(7)}}
    assert (counters.pool, counters.generation, counters.resource_slice_count) == ("node-b", 3, 2)
    assert devices.shared_counters == {} and len(devices.devices) == 3
    full, part_a, _ = devices.devices
    (consumption,) = full.consumes_counters
    assert consumption.counter_set == "gpu-0-counters"
    assert consumption.counters == {"memory": 40 * GI, "compute-slices": Fraction(7)}
    assert part_a.consumes_counters[0].counters == {"memory": 20 * GI, "compute-slices": Fraction(3)}
    assert part_a.taints == (Taint(key="example.com/degraded", value="ecc", effect="NoSchedule"),)
    assert full.taints == ()


def test_consumable_capacity_nic_and_binding_conditions() -> None:
    inv = load_objects([fixture("consumable-nic.yaml")])
    fabric = inv.slices["rack-7-fabric"]
    assert fabric.node_selection is not None and fabric.node_selection.node_selector == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "example.com/rack", "operator": "In", "values": ["7"]}]}]
    }
    vnic, composable = fabric.devices
    assert vnic.allow_multiple_allocations
    assert vnic.capacity["fabric.example.com/bandwidth"] == Capacity(
        100 * G, CapacityPolicy(default=10 * G, valid_range=(1 * G, 50 * G, 1 * G))
    )
    assert vnic.capacity["fabric.example.com/queues"] == Capacity(
        Fraction(64), CapacityPolicy(default=Fraction(4), valid_values=tuple(Fraction(v) for v in (1, 2, 4, 8, 16)))
    )
    assert vnic.published_capacity_names == {
        "fabric.example.com/bandwidth": "bandwidth",
        "fabric.example.com/queues": "queues",
    }
    assert composable.binds_to_node and not composable.allow_multiple_allocations
    assert composable.binding_conditions == ("FabricAttached",)
    assert composable.binding_failure_conditions == ("FabricAttachFailed",)
    claim = inv.claims["default/fast-net"]
    nic, queues = claim.requests
    assert nic.exactly is not None and nic.exactly.capacity_requests == {"bandwidth": 25 * G}
    assert queues.exactly is not None and (queues.exactly.allocation_mode, queues.exactly.count) == ("All", 0)
    (constraint,) = claim.constraints
    assert (constraint.requests, constraint.match_attribute, constraint.distinct_attribute) == (
        ("nic", "shared-queues"),
        None,
        "fabric.example.com/type",
    )


def test_multi_slice_pool_and_per_device_node_selection() -> None:
    inv = load_objects([fixture("multi-slice-pool.yaml")])
    part0, part1 = inv.slices["fpga-pool-part-0"], inv.slices["fpga-pool-part-1"]
    for s in (part0, part1):
        assert (s.pool, s.generation, s.resource_slice_count) == ("datacenter-1/fpgas", 4, 2)
        assert s.node_selection == NodeSelection(all_nodes=True)
    assert [d.id.device for d in part0.devices + part1.devices] == ["fpga-0", "fpga-1", "fpga-2"]
    assert part0.devices[0].attributes == {
        "fpga.example.com/family": Attribute("string", "agilex"),
        "fpga.example.com/slot": Attribute("int", 0),
    }
    pinned = inv.slices["fpga-pool-per-device"]
    assert pinned.per_device_node_selection and pinned.node_selection is None
    assert [d.node_selection for d in pinned.devices] == [
        NodeSelection(node_name="node-a"),
        NodeSelection(all_nodes=True),
        NodeSelection(
            node_selector={
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}
                ]
            }
        ),
    ]


def test_kubectl_get_list() -> None:
    inv = load_objects([fixture("kubectl-list.yaml")])
    assert list(inv.nodes) == ["node-a"] and list(inv.classes) == ["gpu.example.com"]
    assert [o["kind"] for o in inv.other] == ["Deployment", "DeviceTaintRule"]
    assert inv.classes["gpu.example.com"].extended_resource_name == "example.com/gpu"
    gpu0 = inv.slices["node-a-gpu.example.com-7qk2p"].devices[0]
    # `model` and `gpu.example.com/model` name the same attribute: the explicit form wins (deterministic).
    assert gpu0.attributes["gpu.example.com/model"] == Attribute("string", "A100-SXM4-40GB-explicit")
    claim = inv.claims["ml/trainer-0-accel-x8f2q"]
    assert claim.uid == "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c44"
    assert claim.allocation is not None
    assert claim.allocation["devices"]["results"] == [
        {"device": "gpu-0", "driver": "gpu.example.com", "pool": "node-a", "request": "gpus"}
    ]
    assert claim.reserved_for == (
        {"name": "trainer-0", "resource": "pods", "uid": "4d1c8f0e-2c9b-4f6a-8b1e-7a9c0d1e2f33"},
    )
    assert claim.manifest["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]


def test_examples_of_the_dra_reference() -> None:
    inv = load_objects([fixture("dra-md-examples.yaml")])
    assert sorted(inv.slices) == [
        "node-a-gpu.example.com-7qk2p",
        "node-b-gpu-counters",
        "node-b-gpu-devices",
        "rack-7-fabric",
    ]
    assert list(inv.templates) == ["ml/two-gpus-near-nic"] and list(inv.pods) == ["ml/trainer-0"]
    cls = inv.classes["gpu.example.com"]
    assert cls.config == (
        {
            "opaque": {
                "driver": "gpu.example.com",
                "parameters": {
                    "apiVersion": "gpu.example.com/v1",
                    "kind": "GpuConfig",
                    "sharing": {"strategy": "TimeSlicing"},
                },
            }
        },
    )
    claim = inv.claims["ml/trainer-0-accel-x8f2q"]
    gpus, nic = claim.requests
    assert gpus.exactly is not None and gpus.exactly.count == 2
    assert [s.name for s in nic.first_available] == ["rdma", "plain"]
    assert nic.first_available[1].tolerations == (
        Toleration(key="example.com/degraded", operator="Exists", effect="NoSchedule"),
    )
    template_claim = claim_from_template(inv.templates["ml/two-gpus-near-nic"], "trainer-0-accel-abcde", uid="u-1")
    assert (template_claim.key, template_claim.uid) == ("ml/trainer-0-accel-abcde", "u-1")
    assert template_claim.manifest["metadata"]["labels"] == {"team": "ml"}
    assert [r.name for r in template_claim.requests] == ["gpus", "nic"]
    (constraint,) = template_claim.constraints
    assert constraint.match_attribute == "resource.kubernetes.io/pcieRoot"
    assert template_claim.config == (
        {
            "requests": ["gpus"],
            "opaque": {
                "driver": "gpu.example.com",
                "parameters": {"apiVersion": "gpu.example.com/v1", "kind": "GpuConfig", "mps": True},
            },
        },
    )
    exact = template_claim.requests[0].exactly
    assert exact is not None
    assert exact.selectors == ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',)


def test_the_reference_counter_name_is_refused_as_upstream_refuses_it() -> None:
    text = fixture("partitionable.yaml").read_text().replace("compute-slices", "computeSlices")
    err = refusal(*yaml.safe_load_all(text), file="dra.md")
    assert err.path == "documents[0].spec.sharedCounters[0].counters.computeSlices"
    assert err.message.startswith("`computeSlices` is not a valid name: expected an RFC 1123 label")


def test_defaults_are_filled() -> None:
    claim = parse_documents(
        [
            a_claim(
                [
                    {"name": "zero", "exactly": exactly(count=0, tolerations=[{"key": "k", "value": "v"}])},
                    {"name": "all", "exactly": exactly(allocationMode="All")},
                ]
            )
        ]
    ).claims["ml/c"]
    zero, every = (r.exactly for r in claim.requests)
    assert zero is not None and every is not None
    assert (zero.allocation_mode, zero.count) == ("ExactCount", 1)  # count 0 is "unset": defaulted to 1
    assert zero.tolerations == (Toleration(key="k", operator="Equal", value="v"),)
    assert (every.allocation_mode, every.count) == ("All", 0)
    namespaced = parse_documents([{**a_claim(), "metadata": {"name": "c"}}]).claims
    assert list(namespaced) == ["default/c"]


def test_driver_names_are_compared_without_case_as_upstream() -> None:
    inv = parse_documents([a_slice(driver="GPU.Example.com")])
    assert inv.slices["s"].devices[0].id.driver == "GPU.Example.com"


# --- round trip ---------------------------------------------------------------------------------------------

FIXTURE_FILES = sorted(p.name for p in FIXTURES.glob("*.yaml"))


def kind_order(doc: dict[str, Any]) -> int:
    order = ["Node", "DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "ResourceClaim", "Pod"]
    is_ours = doc["apiVersion"] in ("v1", V1) and doc["kind"] in order
    return order.index(doc["kind"]) if is_ours else len(order)


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_round_trip_gives_back_the_manifests(name: str, tmp_path: Path) -> None:
    inv = load_objects([fixture(name)])
    dumped = dump_objects(inv)
    expected = sorted(documents(fixture(name)), key=kind_order)  # stable: each kind keeps its input order
    assert dumped == expected
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump_all(dumped, sort_keys=False))
    assert dump_objects(load_objects([again])) == dumped


def test_unknown_fields_round_trip_and_dumps_are_copies() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n", "labels": {"a": "b"}, "managedFields": [{"manager": "x"}]},
        "spec": {"providerID": "aws:///i-1"},
        "status": {"nodeInfo": {"kubeletVersion": "v1.35.0"}},
    }
    slice_ = a_slice()
    slice_["metadata"]["ownerReferences"] = [{"kind": "Node", "name": "n"}]
    slice_["spec"]["devices"][0]["taints"] = [{"key": "k", "effect": "None", "timeAdded": "2025-12-20T10:00:00Z"}]
    claim = with_status(
        {
            "allocation": {"devices": {"results": [result(shareID="0b6c2b7e-4a57-4f0a-9e0e-1f2f4b8f2e11")]}},
            "devices": [
                {
                    "driver": "gpu.example.com",
                    "pool": "node-a",
                    "device": "gpu-0",
                    "shareID": "0b6c2b7e-4a57-4f0a-9e0e-1f2f4b8f2e11",
                    "networkData": {"interfaceName": "net1", "ips": ["10.0.0.1/24"]},
                }
            ],
        }
    )
    claim["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [
        {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
    ]
    docs = [node, slice_, claim]
    inv = parse_documents(copy.deepcopy(docs))
    dumped = dump_objects(inv)
    assert dumped == docs
    dumped[0]["metadata"]["name"] = "changed"
    assert inv.nodes["n"].manifest["metadata"]["name"] == "n"


def test_typed_lists_give_their_items_a_type() -> None:
    item = a_slice()
    del item["apiVersion"], item["kind"]  # the API's typed lists omit the type of their items
    inv = parse_documents([{"apiVersion": V1, "kind": "ResourceSliceList", "metadata": {}, "items": [item]}])
    assert inv.slices["s"].manifest["kind"] == "ResourceSlice"
    assert inv.slices["s"].manifest["apiVersion"] == V1


# --- refusals: ResourceSlice --------------------------------------------------------------------------------

SEMVER_65 = "1.0.0-" + "a" * 59

Case = tuple[str, Callable[[], dict[str, Any]], str, str]


def many_devices(n: int, **fields: Any) -> list[dict[str, Any]]:
    return [device(f"d-{i}", **(fields if i == 0 else {})) for i in range(n)]


def counter_map(n: int) -> dict[str, Any]:
    return {f"c-{i}": {"value": "1"} for i in range(n)}


def policy_slice(policy: dict[str, Any], value: str = "100G") -> dict[str, Any]:
    return a_slice(
        devices=[device(allowMultipleAllocations=True, capacity={"bw": {"value": value, "requestPolicy": policy}})]
    )


SLICE_CASES: list[Case] = [
    ("spec missing", lambda: {**a_slice(), "spec": None}, "spec", "Required value"),
    (
        "name missing",
        lambda: {**a_slice(), "metadata": {}},
        "metadata.name",
        "Required value: name or generateName is required",
    ),
    (
        "namespace on a cluster-scoped object",
        lambda: {**a_slice(), "metadata": {"name": "s", "namespace": "x"}},
        "metadata.namespace",
        "Forbidden: not allowed on this type",
    ),
    ("driver missing", lambda: a_slice(driver=None), "spec.driver", "Required value"),
    ("driver too long", lambda: a_slice(driver="a" * 64), "spec.driver", "Too long: may not be more than 63 bytes"),
    (
        "driver not a DNS subdomain",
        lambda: a_slice(driver="gpu_example"),
        "spec.driver",
        "Invalid value: \"gpu_example\": a driver name must be a DNS subdomain: alphanumeric characters, '-' or '.', "
        "starting and ending with an alphanumeric character (e.g. 'gpu.example.com')",
    ),
    ("pool missing", lambda: a_slice(pool=None), "spec.pool", "Required value"),
    ("pool name missing", lambda: a_slice(pool={"resourceSliceCount": 1}), "spec.pool.name", "Required value"),
    (
        "pool name with an empty part",
        lambda: a_slice(pool={"name": "a//b", "resourceSliceCount": 1}),
        "spec.pool.name",
        "Invalid value: \"a//b\": a pool name is one or more DNS subdomains separated by '/' (a part is empty)",
    ),
    (
        "pool name too long",
        lambda: a_slice(pool={"name": "a" * 254, "resourceSliceCount": 1}),
        "spec.pool.name",
        "Too long: may not be more than 253 bytes",
    ),
    (
        "resourceSliceCount 0",
        lambda: a_slice(pool={"name": "p", "generation": 1, "resourceSliceCount": 0}),
        "spec.pool.resourceSliceCount",
        "Invalid value: 0: must be greater than zero",
    ),
    (
        "negative generation",
        lambda: a_slice(pool={"name": "p", "generation": -1, "resourceSliceCount": 1}),
        "spec.pool.generation",
        "Invalid value: -1: must be greater than or equal to zero",
    ),
    (
        "no node selection",
        lambda: a_slice(nodeName=None),
        "spec",
        "Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
    ),
    (
        "two node selections",
        lambda: a_slice(allNodes=True),
        "spec",
        'Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, `nodeSelector`, `allNodes`, '
        "`perDeviceNodeSelection` is required, but multiple fields are set",
    ),
    (
        "allNodes false",
        lambda: a_slice(nodeName=None, allNodes=False),
        "spec.allNodes",
        "Invalid value: false: must be either unset or set to true",
    ),
    (
        "empty nodeName",
        lambda: a_slice(nodeName=""),
        "spec.nodeName",
        'Invalid value: "": must be either unset or set to a non-empty string',
    ),
    (
        "node selector with two terms",
        lambda: a_slice(
            nodeName=None,
            nodeSelector={"nodeSelectorTerms": [{"matchExpressions": []}, {"matchExpressions": []}]},
        ),
        "spec.nodeSelector.nodeSelectorTerms",
        "Invalid value: must have exactly one node selector term",
    ),
    (
        "node selector without terms",
        lambda: a_slice(nodeName=None, nodeSelector={"nodeSelectorTerms": []}),
        "spec.nodeSelector.nodeSelectorTerms",
        "Required value: must have at least one node selector term",
    ),
    (
        "node selector operator",
        lambda: a_slice(
            nodeName=None,
            nodeSelector={
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Has", "values": ["b"]}]}]
            },
        ),
        "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator",
        'Invalid value: "Has": not a valid selector operator',
    ),
    (
        "node selector In without values",
        lambda: a_slice(
            nodeName=None, nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In"}]}]}
        ),
        "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values",
        "Required value: must be specified when `operator` is 'In' or 'NotIn'",
    ),
    (
        "node field selector key",
        lambda: a_slice(
            nodeName=None,
            nodeSelector={
                "nodeSelectorTerms": [{"matchFields": [{"key": "spec.x", "operator": "In", "values": ["n"]}]}]
            },
        ),
        "spec.nodeSelector.nodeSelectorTerms[0].matchFields[0].key",
        'Invalid value: "spec.x": not a valid field selector key',
    ),
    (
        "devices and sharedCounters in one slice",
        lambda: a_slice(sharedCounters=[{"name": "s", "counters": counter_map(1)}]),
        "spec",
        "Invalid value: only one of `sharedCounters` or `devices` is allowed",
    ),
    (
        "129 devices",
        lambda: a_slice(devices=many_devices(129)),
        "spec.devices",
        "Too many: 129: must have at most 128 items",
    ),
    (
        "65 devices when one has taints",
        lambda: a_slice(devices=many_devices(65, taints=[{"key": "k", "effect": "NoSchedule"}])),
        "spec.devices",
        "Too many: 65: must have at most 64 items",
    ),
    (
        "65 devices when one consumes counters",
        lambda: a_slice(devices=many_devices(65, consumesCounters=[{"counterSet": "s", "counters": counter_map(1)}])),
        "spec.devices",
        "Too many: 65: must have at most 64 items",
    ),
    ("duplicate device", lambda: a_slice(devices=[device(), device()]), "spec.devices[1]", 'Duplicate value: "gpu-0"'),
    ("device name missing", lambda: a_slice(devices=[{"attributes": {}}]), "spec.devices[0].name", "Required value"),
    (
        "device name not a DNS label",
        lambda: a_slice(devices=[device("GPU-0")]),
        "spec.devices[0].name",
        "`GPU-0` is not a valid name: expected an RFC 1123 label (at most 63 lower case alphanumeric characters or "
        "'-', starting and ending with an alphanumeric character)",
    ),
    (
        "33 attributes and capacities",
        lambda: a_slice(
            devices=[
                device(
                    attributes={f"a{i}": {"int": i} for i in range(20)},
                    capacity={f"c{i}": {"value": "1"} for i in range(13)},
                )
            ]
        ),
        "spec.devices[0]",
        "Invalid value: 33: the total number of attributes and capacities must not exceed 32",
    ),
    (
        "string attribute of 65 bytes",
        lambda: a_slice(devices=[device(attributes={"model": {"string": "x" * 65}})]),
        "spec.devices[0].attributes.model.string",
        "Too long: may not be more than 64 bytes",
    ),
    (
        "version not semver",
        lambda: a_slice(devices=[device(attributes={"driverVersion": {"version": "v1.2"}})]),
        "spec.devices[0].attributes.driverVersion.version",
        'Invalid value: "v1.2": must be a string compatible with semver.org spec 2.0.0',
    ),
    (
        "version of 65 bytes",
        lambda: a_slice(devices=[device(attributes={"v": {"version": SEMVER_65}})]),
        "spec.devices[0].attributes.v.version",
        "Too long: may not be more than 64 bytes",
    ),
    (
        "attribute with two values",
        lambda: a_slice(devices=[device(attributes={"x": {"int": 1, "string": "a"}})]),
        "spec.devices[0].attributes.x",
        'Invalid value: {"int":1,"string":"a"}: exactly one value must be specified',
    ),
    (
        "attribute without a value",
        lambda: a_slice(devices=[device(attributes={"x": {}})]),
        "spec.devices[0].attributes.x",
        'Invalid value: "": exactly one value must be specified',
    ),
    (
        "int attribute given a string",
        lambda: a_slice(devices=[device(attributes={"x": {"int": "1"}})]),
        "spec.devices[0].attributes.x.int",
        "expected int, got str",
    ),
    (
        "attribute name not a C identifier",
        lambda: a_slice(devices=[device(attributes={"my-attr": {"int": 1}})]),
        "spec.devices[0].attributes.my-attr",
        "Invalid value: \"my-attr\": a valid C identifier must start with alphabetic character or '_', followed by a "
        "string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
        "validation is '[A-Za-z_][A-Za-z0-9_]*')",
    ),
    (
        "attribute id of 33 characters",
        lambda: a_slice(devices=[device(attributes={"example.com/" + "a" * 33: {"int": 1}})]),
        "spec.devices[0].attributes.example.com/" + "a" * 33,
        "Too long: may not be more than 32 bytes",
    ),
    (
        "attribute name with two slashes",
        lambda: a_slice(devices=[device(attributes={"a.com/b/c": {"int": 1}})]),
        "spec.devices[0].attributes.a.com/b/c",
        'Invalid value: "a.com/b/c": must not contain more than one slash',
    ),
    (
        "attribute name with an empty domain",
        lambda: a_slice(devices=[device(capacity={"/mem": {"value": "1"}})]),
        "spec.devices[0].capacity./mem",
        'Invalid value: "": the domain must not be empty',
    ),
    (
        "list attribute (1.36)",
        lambda: a_slice(devices=[device(attributes={"x": {"ints": [1]}})]),
        "spec.devices[0].attributes.x.ints",
        "unknown field `ints`: list-type attributes (`ints`, `bools`, `strings`, `versions`) are Kubernetes 1.36+ "
        "(DRAListTypeAttributes); 1.35 has `int`, `bool`, `string` and `version`",
    ),
    (
        "v1beta1 basic",
        lambda: a_slice(devices=[device(basic={"attributes": {}})]),
        "spec.devices[0].basic",
        "unknown field `basic`: resource.k8s.io/v1beta1 shape; in resource.k8s.io/v1 the fields of `basic` sit in "
        "the device itself",
    ),
    (
        "capacity value missing",
        lambda: a_slice(devices=[device(capacity={"memory": {}})]),
        "spec.devices[0].capacity.memory.value",
        "Required value",
    ),
    (
        "capacity value not a quantity",
        lambda: a_slice(devices=[device(capacity={"memory": {"value": "4 GB"}})]),
        "spec.devices[0].capacity.memory.value",
        f"invalid quantity `4 GB`: {ERR_FORMAT_WRONG}",
    ),
    (
        "17 taints",
        lambda: a_slice(devices=[device(taints=[{"key": f"k{i}", "effect": "NoSchedule"} for i in range(17)])]),
        "spec.devices[0].taints",
        "Too many: 17: must have at most 16 items",
    ),
    (
        "taint effect of a node",
        lambda: a_slice(devices=[device(taints=[{"key": "k", "effect": "PreferNoSchedule"}])]),
        "spec.devices[0].taints[0].effect",
        'Unsupported value: "PreferNoSchedule": supported values: "NoExecute", "NoSchedule", "None"',
    ),
    (
        "taint without effect",
        lambda: a_slice(devices=[device(taints=[{"key": "k"}])]),
        "spec.devices[0].taints[0].effect",
        "Required value",
    ),
    (
        "3 counter consumptions",
        lambda: a_slice(
            devices=[device(consumesCounters=[{"counterSet": f"s{i}", "counters": counter_map(1)} for i in range(3)])]
        ),
        "spec.devices[0].consumesCounters",
        "Too many: 3: must have at most 2 items",
    ),
    (
        "33 counters in a consumption",
        lambda: a_slice(devices=[device(consumesCounters=[{"counterSet": "s", "counters": counter_map(33)}])]),
        "spec.devices[0].consumesCounters[0].counters",
        "Too many: 33: must have at most 32 items",
    ),
    (
        "a consumption without counters",
        lambda: a_slice(devices=[device(consumesCounters=[{"counterSet": "s", "counters": {}}])]),
        "spec.devices[0].consumesCounters[0].counters",
        "Required value",
    ),
    (
        "the same counter set twice",
        lambda: a_slice(devices=[device(consumesCounters=[{"counterSet": "s", "counters": counter_map(1)}] * 2)]),
        "spec.devices[0].consumesCounters[1]",
        'Duplicate value: "s"',
    ),
    (
        "9 counter sets",
        lambda: a_slice(devices=None, sharedCounters=[{"name": f"s{i}", "counters": counter_map(1)} for i in range(9)]),
        "spec.sharedCounters",
        "Too many: 9: must have at most 8 items",
    ),
    (
        "33 counters in a set",
        lambda: a_slice(devices=None, sharedCounters=[{"name": "s", "counters": counter_map(33)}]),
        "spec.sharedCounters[0].counters",
        "Too many: 33: must have at most 32 items",
    ),
    (
        "counter without value",
        lambda: a_slice(devices=None, sharedCounters=[{"name": "s", "counters": {"mem": {}}}]),
        "spec.sharedCounters[0].counters.mem.value",
        "Required value",
    ),
    (
        "duplicate counter set",
        lambda: a_slice(devices=None, sharedCounters=[{"name": "s", "counters": counter_map(1)}] * 2),
        "spec.sharedCounters[1]",
        'Duplicate value: "s"',
    ),
    (
        "device node selection without perDeviceNodeSelection",
        lambda: a_slice(devices=[device(nodeName="node-a")]),
        "spec.devices[0]",
        "Invalid value: `nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set "
        "to true in the ResourceSlice spec",
    ),
    (
        "device without node selection under perDeviceNodeSelection",
        lambda: a_slice(nodeName=None, perDeviceNodeSelection=True),
        "spec.devices[0]",
        "Required value: exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
        "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
    ),
    (
        "device with two node selections",
        lambda: a_slice(nodeName=None, perDeviceNodeSelection=True, devices=[device(nodeName="n", allNodes=True)]),
        "spec.devices[0]",
        'Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, `nodeSelector`, or `allNodes` is '
        "required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
    ),
    (
        "requestPolicy without allowMultipleAllocations",
        lambda: a_slice(devices=[device(capacity={"bw": {"value": "1", "requestPolicy": {"default": "1"}}})]),
        "spec.devices[0].capacity.bw.requestPolicy",
        "Forbidden: allowMultipleAllocations must be true",
    ),
    (
        "validValues and validRange",
        lambda: policy_slice({"default": "1", "validValues": ["1"], "validRange": {"min": "1"}}),
        "spec.devices[0].capacity.bw.requestPolicy",
        'Forbidden: exactly one policy can be specified, cannot specify "validValues" and "validRange" '
        "at the same time",
    ),
    (
        "validValues without default",
        lambda: policy_slice({"validValues": ["1"]}),
        "spec.devices[0].capacity.bw.requestPolicy.default",
        "Required value: required when validValues is defined",
    ),
    (
        "validValues descending",
        lambda: policy_slice({"default": "2", "validValues": ["2", "1"]}),
        "spec.devices[0].capacity.bw.requestPolicy.validValues[1]",
        'Invalid value: "1": values must be sorted in ascending order',
    ),
    (
        "11 validValues",
        lambda: policy_slice({"default": "1", "validValues": [str(i) for i in range(1, 12)]}),
        "spec.devices[0].capacity.bw.requestPolicy.validValues",
        "Too many: 11: must have at most 10 items",
    ),
    (
        "validValues without the default",
        lambda: policy_slice({"default": "3", "validValues": ["1", "2"]}),
        "spec.devices[0].capacity.bw.requestPolicy.validValues",
        'Invalid value: "3": default value is not valid according to the requestPolicy',
    ),
    (
        "validValue above the capacity",
        lambda: policy_slice({"default": "1", "validValues": ["1", "200G"]}),
        "spec.devices[0].capacity.bw.requestPolicy.validValues[1]",
        'Invalid value: "200G": option is larger than capacity value: 100G',
    ),
    (
        "validRange without min",
        lambda: policy_slice({"default": "1G", "validRange": {"max": "2G"}}),
        "spec.devices[0].capacity.bw.requestPolicy.validRange.min",
        "Required value: required when validRange is defined",
    ),
    (
        "default below min",
        lambda: policy_slice({"default": "1G", "validRange": {"min": "2G"}}),
        "spec.devices[0].capacity.bw.requestPolicy.default",
        'Invalid value: "1G": default is less than min: 2G',
    ),
    (
        "default not on a step",
        lambda: policy_slice({"default": "15G", "validRange": {"min": "5G", "step": "20G"}}),
        "spec.devices[0].capacity.bw.requestPolicy.validRange.step",
        'Invalid value: "15G": value is not a multiple of a given step (20G) from (5G)',
    ),
    (
        "max above the capacity",
        lambda: policy_slice({"default": "1G", "validRange": {"min": "1G", "max": "200G"}}),
        "spec.devices[0].capacity.bw.requestPolicy.validRange.max",
        'Invalid value: "200G": max is larger than capacity value: 100G',
    ),
    (
        "bindingFailureConditions alone",
        lambda: a_slice(devices=[device(bindingFailureConditions=["Failed"])]),
        "spec.devices[0].bindingConditions",
        "Invalid value: []: bindingConditions are required to use bindingFailureConditions",
    ),
    (
        "bindingConditions alone",
        lambda: a_slice(devices=[device(bindingConditions=["Attached"])]),
        "spec.devices[0].bindingFailureConditions",
        "Invalid value: []: bindingFailureConditions are required to use bindingConditions",
    ),
    (
        "5 binding conditions",
        lambda: a_slice(
            devices=[device(bindingConditions=[f"c{i}" for i in range(5)], bindingFailureConditions=["f"])]
        ),
        "spec.devices[0].bindingConditions",
        "Too many: 5: must have at most 4 items",
    ),
    (
        "overlapping binding conditions",
        lambda: a_slice(devices=[device(bindingConditions=["A"], bindingFailureConditions=["A"])]),
        "spec.devices[0].bindingFailureConditions[0]",
        'Invalid value: "A": bindingFailureConditions must not overlap with bindingConditions',
    ),
]


@pytest.mark.parametrize("case", SLICE_CASES, ids=[c[0] for c in SLICE_CASES])
def test_slice_refusals(case: Case) -> None:
    _, build, path, message = case
    err = refusal(build())
    assert (err.path, err.message) == (path, message)
    assert str(err) == f"in.yaml: {path}: {message}"


def test_limits_are_inclusive() -> None:
    parse_documents([a_slice(devices=many_devices(128))])
    parse_documents([a_slice(devices=many_devices(64, taints=[{"key": "k", "effect": "NoSchedule"}]))])
    parse_documents([a_slice(devices=[device(attributes={f"a{i}": {"int": i} for i in range(32)})])])
    parse_documents([a_slice(devices=[device(attributes={"s": {"string": "é" * 32}})])])  # 64 bytes
    parse_documents(
        [a_slice(devices=None, sharedCounters=[{"name": f"s{i}", "counters": counter_map(32)} for i in range(8)])]
    )


def test_unknown_field_names_the_field_and_suggests() -> None:
    err = refusal(a_slice(devices=[device(atributes={})]))
    assert err.path == "spec.devices[0].atributes"
    assert err.message.startswith("unknown field `atributes`; expected one of `name`, `attributes`")
    assert err.message.endswith("(did you mean `attributes`?)")


# --- refusals: ResourceClaim, DeviceClass, templates, pods ----------------------------------------------------

SUB_RDMA = {"name": "rdma", "deviceClassName": "nic.example.com"}


def status_claim(status: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    return lambda: with_status(status)


CLAIM_CASES: list[Case] = [
    (
        "33 requests",
        lambda: a_claim([{"name": f"r{i}", "exactly": exactly()} for i in range(33)]),
        "spec.devices.requests",
        "Too many: 33: must have at most 32 items",
    ),
    (
        "duplicate request",
        lambda: a_claim([{"name": "gpu", "exactly": exactly()}] * 2),
        "spec.devices.requests[1]",
        'Duplicate value: "gpu"',
    ),
    (
        "request name not a DNS label",
        lambda: a_claim([{"name": "GPU", "exactly": exactly()}]),
        "spec.devices.requests[0].name",
        "`GPU` is not a valid name: expected an RFC 1123 label (at most 63 lower case alphanumeric characters or '-', "
        "starting and ending with an alphanumeric character)",
    ),
    (
        "neither exactly nor firstAvailable",
        lambda: a_claim([{"name": "gpu"}]),
        "spec.devices.requests[0]",
        "Required value: exactly one of `exactly` or `firstAvailable` is required",
    ),
    (
        "both exactly and firstAvailable",
        lambda: a_claim([{"name": "gpu", "exactly": exactly(), "firstAvailable": [SUB_RDMA]}]),
        "spec.devices.requests[0]",
        "Invalid value: exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
    ),
    (
        "v1beta1 flattened request",
        lambda: a_claim([{"name": "gpu", "deviceClassName": "gpu.example.com"}]),
        "spec.devices.requests[0].deviceClassName",
        "unknown field `deviceClassName`: in resource.k8s.io/v1 this field belongs under `exactly` (v1beta1 put it in "
        "the request itself)",
    ),
    (
        "9 firstAvailable entries",
        lambda: a_claim([{"name": "nic", "firstAvailable": [{**SUB_RDMA, "name": f"s{i}"} for i in range(9)]}]),
        "spec.devices.requests[0].firstAvailable",
        "Too many: 9: must have at most 8 items",
    ),
    (
        "adminAccess inside firstAvailable",
        lambda: a_claim([{"name": "nic", "firstAvailable": [{**SUB_RDMA, "adminAccess": True}]}]),
        "spec.devices.requests[0].firstAvailable[0].adminAccess",
        "unknown field `adminAccess`: adminAccess is only allowed in `exactly`, not in firstAvailable",
    ),
    (
        "duplicate subrequest",
        lambda: a_claim([{"name": "nic", "firstAvailable": [SUB_RDMA, SUB_RDMA]}]),
        "spec.devices.requests[0].firstAvailable[1]",
        'Duplicate value: "rdma"',
    ),
    (
        "deviceClassName missing",
        lambda: a_claim([{"name": "gpu", "exactly": {}}]),
        "spec.devices.requests[0].exactly.deviceClassName",
        "Required value",
    ),
    (
        "negative count",
        lambda: a_claim([{"name": "gpu", "exactly": exactly(count=-1)}]),
        "spec.devices.requests[0].exactly.count",
        "Invalid value: -1: must be greater than zero",
    ),
    (
        "count with allocationMode All",
        lambda: a_claim([{"name": "gpu", "exactly": exactly(allocationMode="All", count=2)}]),
        "spec.devices.requests[0].exactly.count",
        "Invalid value: 2: must not be specified when allocationMode is 'All'",
    ),
    (
        "unknown allocationMode",
        lambda: a_claim([{"name": "gpu", "exactly": exactly(allocationMode="Some")}]),
        "spec.devices.requests[0].exactly.allocationMode",
        'Unsupported value: "Some": supported values: "All", "ExactCount"',
    ),
    (
        "33 selectors",
        lambda: a_claim([{"name": "gpu", "exactly": exactly(selectors=[{"cel": {"expression": "true"}}] * 33)}]),
        "spec.devices.requests[0].exactly.selectors",
        "Too many: 33: must have at most 32 items",
    ),
    (
        "selector without cel",
        lambda: a_claim([{"name": "gpu", "exactly": exactly(selectors=[{}])}]),
        "spec.devices.requests[0].exactly.selectors[0].cel",
        "Required value",
    ),
    (
        "expression longer than 10 KiB",
        lambda: a_claim([{"name": "gpu", "exactly": exactly(selectors=[{"cel": {"expression": "t" * 10241}}])}]),
        "spec.devices.requests[0].exactly.selectors[0].cel.expression",
        "Too long: may not be more than 10240 bytes",
    ),
    (
        "17 tolerations",
        lambda: a_claim([{"name": "gpu", "exactly": exactly(tolerations=[{"operator": "Exists"}] * 17)}]),
        "spec.devices.requests[0].exactly.tolerations",
        "Too many: 17: must have at most 16 items",
    ),
    (
        "Exists toleration with a value",
        lambda: a_claim(
            [{"name": "gpu", "exactly": exactly(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}])}]
        ),
        "spec.devices.requests[0].exactly.tolerations[0].value",
        'Invalid value: "v": must be empty for operator `Exists`',
    ),
    (
        "toleration operator",
        lambda: a_claim([{"name": "gpu", "exactly": exactly(tolerations=[{"key": "k", "operator": "In"}])}]),
        "spec.devices.requests[0].exactly.tolerations[0].operator",
        'Unsupported value: "In": supported values: "Equal", "Exists"',
    ),
    (
        "toleration effect",
        lambda: a_claim(
            [{"name": "nic", "firstAvailable": [{**SUB_RDMA, "tolerations": [{"effect": "PreferNoSchedule"}]}]}]
        ),
        "spec.devices.requests[0].firstAvailable[0].tolerations[0].effect",
        'Unsupported value: "PreferNoSchedule": supported values: "NoExecute", "NoSchedule", "None"',
    ),
    (
        "capacity request name",
        lambda: a_claim([{"name": "gpu", "exactly": exactly(capacity={"requests": {"bad-name": "1"}})}]),
        "spec.devices.requests[0].exactly.capacity.requests.bad-name",
        "Invalid value: \"bad-name\": a valid C identifier must start with alphabetic character or '_', followed by a "
        "string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
        "validation is '[A-Za-z_][A-Za-z0-9_]*')",
    ),
    (
        "33 constraints",
        lambda: a_claim(constraints=[{"matchAttribute": "a.com/b"}] * 33),
        "spec.devices.constraints",
        "Too many: 33: must have at most 32 items",
    ),
    (
        "constraint with both attributes",
        lambda: a_claim(constraints=[{"matchAttribute": "a.com/b", "distinctAttribute": "a.com/b"}]),
        "spec.devices.constraints[0]",
        "Invalid value: exactly one of `matchAttribute` or `distinctAttribute` is required, "
        "but multiple fields are set",
    ),
    (
        "constraint without attribute",
        lambda: a_claim(constraints=[{"requests": ["gpu"]}]),
        "spec.devices.constraints[0]",
        "Required value: exactly one of `matchAttribute` or `distinctAttribute` is required",
    ),
    (
        "constraint on a bare attribute name",
        lambda: a_claim(constraints=[{"matchAttribute": "model"}]),
        "spec.devices.constraints[0].matchAttribute",
        'Invalid value: "model": a fully qualified name must be a domain and a name separated by a slash',
    ),
    (
        "constraint on an unknown request",
        lambda: a_claim(constraints=[{"requests": ["nope"], "matchAttribute": "a.com/b"}]),
        "spec.devices.constraints[0].requests[0]",
        'Invalid value: "nope": must be the name of a request in the claim or the name of a request and a subrequest '
        "separated by '/'",
    ),
    (
        "constraint on a subrequest of an exactly request",
        lambda: a_claim(constraints=[{"requests": ["gpu/x"], "distinctAttribute": "a.com/b"}]),
        "spec.devices.constraints[0].requests[0]",
        'Invalid value: "gpu/x": must be the name of a request in the claim or the name of a request and a subrequest '
        "separated by '/'",
    ),
    (
        "constraint naming a request twice",
        lambda: a_claim(constraints=[{"requests": ["gpu", "gpu"], "matchAttribute": "a.com/b"}]),
        "spec.devices.constraints[0].requests[1]",
        'Duplicate value: "gpu"',
    ),
    (
        "33 config entries",
        lambda: a_claim(config=[{"opaque": {"driver": "d.com", "parameters": {}}}] * 33),
        "spec.devices.config",
        "Too many: 33: must have at most 32 items",
    ),
    (
        "config without opaque",
        lambda: a_claim(config=[{"requests": ["gpu"]}]),
        "spec.devices.config[0].opaque",
        "Required value",
    ),
    (
        "config parameters not an object",
        lambda: a_claim(config=[{"opaque": {"driver": "d.com", "parameters": [1]}}]),
        "spec.devices.config[0].opaque.parameters",
        "Invalid value: must be a valid JSON object",
    ),
    (
        "config parameters over 10 KiB",
        lambda: a_claim(config=[{"opaque": {"driver": "d.com", "parameters": {"x": "y" * 10240}}}]),
        "spec.devices.config[0].opaque.parameters",
        "Too long: may not be more than 10240 bytes",
    ),
    (
        "reservedFor without allocation",
        status_claim({"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}),
        "status.reservedFor",
        "Forbidden: may not be specified when `allocated` is not set",
    ),
    (
        "reservedFor without uid",
        status_claim(
            {"allocation": {"devices": {"results": [result()]}}, "reservedFor": [{"resource": "pods", "name": "p"}]}
        ),
        "status.reservedFor[0].uid",
        "Required value",
    ),
    (
        "allocation result for an unknown request",
        status_claim({"allocation": {"devices": {"results": [result(request="nic")]}}}),
        "status.allocation.devices.results[0].request",
        'Invalid value: "nic": must be the name of a request in the claim or the name of a request and a subrequest '
        "separated by '/'",
    ),
    (
        "allocation result shareID",
        status_claim({"allocation": {"devices": {"results": [result(shareID="ABC")]}}}),
        "status.allocation.devices.results[0].shareID",
        'Invalid value: "ABC": uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with '
        "lowercase hexadecimal characters",
    ),
    (
        "allocation config source",
        status_claim(
            {
                "allocation": {
                    "devices": {"config": [{"source": "FromPod", "opaque": {"driver": "d.com", "parameters": {}}}]}
                }
            }
        ),
        "status.allocation.devices.config[0].source",
        'Unsupported value: "FromPod": supported values: "FromClaim", "FromClass"',
    ),
    (
        "device status for a device not allocated",
        status_claim(
            {
                "allocation": {"devices": {"results": [result()]}},
                "devices": [{"driver": "gpu.example.com", "pool": "node-a", "device": "gpu-9"}],
            }
        ),
        "status.devices[0]",
        'Invalid value: "gpu.example.com/node-a/gpu-9": must be an allocated device in the claim',
    ),
    (
        "status field of another kind",
        status_claim({"conditions": []}),
        "status.conditions",
        "unknown field `conditions`; expected one of `allocation`, `reservedFor`, `devices`",
    ),
    (
        "DeviceClass: extended resource name",
        lambda: a_class(extendedResourceName="gpu"),
        "spec.extendedResourceName",
        'Invalid value: "gpu": must be a valid extended resource name',
    ),
    (
        "DeviceClass: 33 selectors",
        lambda: a_class(selectors=[{"cel": {"expression": "true"}}] * 33),
        "spec.selectors",
        "Too many: 33: must have at most 32 items",
    ),
    (
        "DeviceClass: config driver",
        lambda: a_class(config=[{"opaque": {"driver": "", "parameters": {}}}]),
        "spec.config[0].opaque.driver",
        "Required value",
    ),
    (
        "DeviceClass: empty expression",
        lambda: a_class(selectors=[{"cel": {"expression": ""}}]),
        "spec.selectors[0].cel.expression",
        "Required value",
    ),
    (
        "template: metadata beyond labels and annotations",
        lambda: {
            "apiVersion": V1,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t"},
            "spec": {"metadata": {"name": "x"}, "spec": {}},
        },
        "spec.metadata.name",
        "Forbidden: cannot be set for a template",
    ),
    (
        "template: the claim spec is checked",
        lambda: {
            "apiVersion": V1,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly(count=-2)}]}}},
        },
        "spec.spec.devices.requests[0].exactly.count",
        "Invalid value: -2: must be greater than zero",
    ),
    (
        "pod: claim by name and by template",
        lambda: a_pod(resourceClaims=[{"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}]),
        "spec.resourceClaims[0]",
        "Invalid value: at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
    ),
    (
        "pod: claim by neither",
        lambda: a_pod(resourceClaims=[{"name": "gpu"}]),
        "spec.resourceClaims[0]",
        "Invalid value: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
    ),
    (
        "pod: duplicate claim name",
        lambda: a_pod(resourceClaims=[{"name": "gpu", "resourceClaimName": "a"}] * 2),
        "spec.resourceClaims[1].name",
        'Duplicate value: "gpu"',
    ),
    (
        "pod: container uses an unknown claim",
        lambda: a_pod(
            resourceClaims=[{"name": "gpu", "resourceClaimName": "a"}],
            containers=[{"name": "main", "resources": {"claims": [{"name": "nic"}]}}],
        ),
        "spec.containers[0].resources.claims[0].name",
        'Not found: "nic": must be one of the names in pod.spec.resourceClaims',
    ),
    (
        "pod: checked as every pod",
        lambda: a_pod(containers=[]),
        "spec.containers",
        "missing required field: a Pod needs at least one container",
    ),
    (
        "node: taint",
        lambda: {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "spec": {"taints": [{"key": "k"}]}},
        "spec.taints[0].effect",
        "missing required field",
    ),
]


@pytest.mark.parametrize("case", CLAIM_CASES, ids=[c[0] for c in CLAIM_CASES])
def test_claim_class_template_pod_refusals(case: Case) -> None:
    _, build, path, message = case
    err = refusal(build())
    assert (err.path, err.message) == (path, message)


def test_valid_references_and_statuses() -> None:
    nic = {"name": "nic", "firstAvailable": [SUB_RDMA, {"name": "plain", "deviceClassName": "nic.example.com"}]}
    claim = a_claim(
        [{"name": "gpu", "exactly": exactly(adminAccess=True)}, nic],
        constraints=[{"requests": ["gpu", "nic/rdma"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
        config=[{"requests": ["nic"], "opaque": {"driver": "nic.example.com", "parameters": {"mtu": 9000}}}],
    )
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    result(adminAccess=True),
                    result(request="nic/plain", driver="nic.example.com", device="nic-0"),
                ],
                "config": [
                    {
                        "source": "FromClaim",
                        "requests": ["nic"],
                        "opaque": {"driver": "nic.example.com", "parameters": {"mtu": 9000}},
                    }
                ],
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
                ]
            },
            "allocationTimestamp": "2025-12-20T10:00:01Z",
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "u-1"}],
    }
    parsed = parse_documents([claim]).claims["ml/c"]
    assert parsed.requests[0].exactly is not None and parsed.requests[0].exactly.admin_access
    assert parsed.constraints[0].requests == ("gpu", "nic/rdma")
    assert parsed.allocation is not None and parsed.allocation["allocationTimestamp"] == "2025-12-20T10:00:01Z"


# --- files, documents, lists, duplicates ----------------------------------------------------------------------


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_error_paths_name_the_document_and_the_list_item(tmp_path: Path) -> None:
    bad = a_slice(driver="Bad_Driver")
    err = refusal(a_class(), bad, file="many.yaml")
    assert err.path == "documents[1].spec.driver" and str(err).startswith("many.yaml: documents[1].spec.driver: ")
    listed = {"apiVersion": "v1", "kind": "List", "items": [a_class(), {"kind": "Pod"}]}
    err = refusal(listed)
    assert (err.path, err.message) == ("items[1].apiVersion", "missing required field")
    err = refusal(None, {"apiVersion": "v1", "kind": "List", "items": [a_slice(driver="")]})
    assert err.path == "documents[1].items[0].spec.driver"
    err = refusal(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": {"x": float("nan")}}
            ],
        }
    )
    assert (err.path, err.message) == ("items[0].spec.x", "a non-finite number (nan) is not allowed")


def test_kinds_and_versions() -> None:
    err = refusal({"apiVersion": V1})
    assert (err.path, err.message) == ("kind", "missing required field")
    err = refusal({**a_slice(), "apiVersion": "resource.k8s.io/v1beta2"})
    assert (err.path, err.message) == (
        "apiVersion",
        "expected `resource.k8s.io/v1` (Kubernetes 1.35), got `resource.k8s.io/v1beta2`",
    )
    err = refusal({**a_slice(), "metadata": {"generateName": "s-"}})
    assert (err.path, err.message) == (
        "metadata.name",
        "Required value: dralab needs the name itself (the API server would generate one from generateName)",
    )
    err = refusal([a_slice()])
    assert (err.path, err.message) == ("", "expected a Kubernetes object (a map), got list")
    assert str(err) == "in.yaml: expected a Kubernetes object (a map), got list"
    crd = {**a_slice(), "apiVersion": "example.com/v1"}  # a ResourceSlice of another group: not ours
    assert parse_documents([crd]).other == [crd]


def test_duplicate_names_name_both_places(tmp_path: Path) -> None:
    # an equal copy is the same object, read once (issue 23: several files, one cluster); tests/test_older_versions.py
    first = write(tmp_path, "a.yaml", yaml.safe_dump(a_slice()))
    second = write(tmp_path, "b.yaml", yaml.safe_dump_all([a_class(), a_slice(driver="other.example.com")]))
    with pytest.raises(ManifestError) as info:
        load_objects([first, second])
    err = info.value
    assert (err.file, err.path, err.message) == (
        str(second),
        "documents[1].metadata.name",
        f"duplicate ResourceSlice `s` (also in {first}), and the copies differ: first at `spec.driver`",
    )
    other = a_claim()
    other["metadata"]["labels"] = {"x": "y"}
    err = refusal(a_claim(), {"apiVersion": "v1", "kind": "List", "items": [other]}, file="c.yaml")
    assert (err.path, err.message) == (
        "documents[1].items[0].metadata.name",
        "duplicate ResourceClaim `ml/c` (also in c.yaml: documents[0]), and the copies differ: first at "
        "`metadata.labels`",
    )
    other_namespace = a_claim()
    other_namespace["metadata"]["namespace"] = "team-b"
    assert sorted(parse_documents([a_claim(), other_namespace]).claims) == ["ml/c", "team-b/c"]
    # the same name in two kinds is fine
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "s"}}
    parse_documents([node, a_slice()])


def test_file_level_errors(tmp_path: Path) -> None:
    syntax = write(tmp_path, "syntax.yaml", "apiVersion: v1\nkind: [Node\n")
    with pytest.raises(ManifestError) as info:
        load_objects([syntax])
    assert info.value.line is not None and str(info.value).startswith(f"{syntax}:{info.value.line}:")
    dup_key = write(tmp_path, "dup.yaml", "apiVersion: v1\nkind: Node\nkind: Node\n")
    with pytest.raises(ManifestError, match="duplicate key `kind`"):
        load_objects([dup_key])
    empty = write(tmp_path, "empty.yaml", "---\n# nothing\n---\n")
    with pytest.raises(ManifestError) as info:
        load_objects([empty])
    assert str(info.value) == f"{empty}: the file holds no Kubernetes object"
    with pytest.raises(ManifestError) as info:
        load_objects([tmp_path / "missing.yaml"])
    assert str(info.value) == f"{tmp_path / 'missing.yaml'}: cannot read the file: No such file or directory"
    big = write(tmp_path, "big.yaml", "x" * 100)
    with pytest.raises(ManifestError) as info:
        read_documents(str(big), max_bytes=10)
    assert str(info.value) == f"{big}: the file is larger than 10 bytes"
    huge = write(tmp_path, "huge.yaml", "x" * ((1 << 20) + 1))
    with pytest.raises(ManifestError) as info:
        read_documents(str(huge), max_bytes=1 << 20)
    assert str(info.value) == f"{huge}: the file is larger than 1 MiB"
    assert MAX_FILE_BYTES == 64 * 1024 * 1024


def test_timestamps_stay_strings_and_json_is_read(tmp_path: Path) -> None:
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [a_slice()]})
    inv = load_objects([write(tmp_path, "dump.json", text)])
    assert list(inv.slices) == ["s"]
    stamped = write(
        tmp_path,
        "t.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n  creationTimestamp: 2025-12-20T09:00:00Z\n",
    )
    node = load_objects([stamped]).nodes["n"]
    assert node.manifest["metadata"]["creationTimestamp"] == "2025-12-20T09:00:00Z"


def test_manifest_error_is_a_scenario_error_for_the_cli() -> None:
    err = refusal(a_slice(driver=""))
    assert isinstance(err, ScenarioError)
    assert (err.file, err.path, err.message) == ("in.yaml", "spec.driver", "Required value")


def test_parse_documents_does_not_modify_its_input() -> None:
    docs = [a_pod(resourceClaims=[{"name": "gpu", "resourceClaimName": "a"}]), a_claim()]
    docs[0]["metadata"].pop("namespace")
    before = copy.deepcopy(docs)
    inv = parse_documents(docs)
    assert docs == before
    assert list(inv.pods) == ["default/p"] and "namespace" not in inv.pods["default/p"]["metadata"]

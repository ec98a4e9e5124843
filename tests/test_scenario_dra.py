"""DRA in scenarios: `spec.objects`, node groups' `resourceSlices` templates, pods' claims."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dralab.core.dra.allocator import AllocatedState, Allocator
from dralab.core.dra.api import claim_from_template, parse_documents
from dralab.core.dra.cel import CelMatcher
from dralab.core.dra.model import Node
from dralab.core.scenario.dra import OBJECT_KINDS, slice_name
from dralab.core.scenario.load import NodeGroup, Scenario, ScenarioError, load_scenario, parse_scenario, render_slices

ROOT = Path(__file__).resolve().parents[1]
DRA_QUICKSTART = ROOT / "scenarios" / "dra-quickstart.yaml"
EVERY_FIELD = ROOT / "scenarios" / "examples" / "every-field.yaml"
V1 = "resource.k8s.io/v1"


def device_class(name: str = "gpu.example.com") -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{name}"'}}]},
    }


def requests(count: int) -> dict[str, Any]:
    return {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": count}}]}
    }


def claim_template(name: str = "one-gpu", count: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": requests(count)},
    }


def claim(name: str = "shared", count: int = 1) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": name}, "spec": requests(count)}


def slice_template(driver: str = "gpu.example.com", devices: int = 2, first: int = 0) -> dict[str, Any]:
    return {
        "spec": {
            "driver": driver,
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"nvlinkDomain": {"int": i // 4}},
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i in range(first, first + devices)
            ],
        }
    }


def dra_pod(name: str = "train") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [
                {"name": "main", "image": "x", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}
            ],
        },
    }


def scenario() -> dict[str, Any]:
    return {
        "apiVersion": "dralab.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "t"},
        "spec": {
            "duration": "10m",
            "objects": [device_class(), claim_template(), claim()],
            "nodeGroups": [
                {
                    "name": "gpu-8x",
                    "max": 4,
                    "template": {"status": {"allocatable": {"cpu": "96", "pods": "110"}}},
                    "resourceSlices": [slice_template()],
                }
            ],
            "nodes": [{"group": "gpu-8x"}],
            "workload": [{"at": "0s", "count": 2, "pod": dra_pod()}],
        },
    }


DELETE = object()
Keys = tuple[str | int, ...]


def edit(data: dict[str, Any], keys: Keys, value: object) -> None:
    target: Any = data
    for key in keys[:-1]:
        target = target[key]
    if value is DELETE:
        del target[keys[-1]]
    elif isinstance(target, list) and keys[-1] == len(target):
        target.append(value)
    else:
        target[keys[-1]] = value


def group(slices: list[dict[str, Any]]) -> NodeGroup:
    data = scenario()
    data["spec"]["nodeGroups"][0]["resourceSlices"] = slices
    return parse_scenario(data).node_groups[0]


# --- valid scenarios ------------------------------------------------------------------------------------


def test_defaults_without_dra() -> None:
    data = scenario()
    del data["spec"]["objects"]
    del data["spec"]["nodeGroups"][0]["resourceSlices"]
    s = parse_scenario(data)
    assert s.objects == []
    assert s.node_groups[0].resource_slices == []
    assert render_slices(s.node_groups[0], "gpu-8x-0") == []
    data["spec"]["objects"] = None
    data["spec"]["nodeGroups"][0]["resourceSlices"] = None
    s = parse_scenario(data)
    assert (s.objects, s.node_groups[0].resource_slices) == ([], [])


def test_objects_are_kept_with_the_namespace_filled_in() -> None:
    data = scenario()
    data["spec"]["objects"][1]["metadata"]["labels"] = {"team": "ml"}
    data["spec"]["objects"].append({**claim_template(), "metadata": {"name": "one-gpu", "namespace": "ml"}})
    original = copy.deepcopy(data)
    s = parse_scenario(data)
    assert data == original  # the input is not modified
    assert [o["kind"] for o in s.objects] == [
        "DeviceClass",
        "ResourceClaimTemplate",
        "ResourceClaim",
        "ResourceClaimTemplate",
    ]
    assert [o["metadata"].get("namespace") for o in s.objects] == [None, "default", "default", "ml"]
    assert s.objects[1]["metadata"]["labels"] == {"team": "ml"}
    assert s.objects[2]["spec"] == claim()["spec"]
    assert OBJECT_KINDS == ("DeviceClass", "ResourceClaimTemplate", "ResourceClaim", "Workload", "PodTemplate",
                            "ProvisioningRequest", "PodDisruptionBudget")
    # What the scenario keeps is what the DRA loader reads.
    inv = parse_documents(list(s.objects))
    assert set(inv.classes) == {"gpu.example.com"}
    assert set(inv.templates) == {"default/one-gpu", "ml/one-gpu"}
    assert set(inv.claims) == {"default/shared"}


def test_pods_may_name_claims_templates_and_classes_that_do_not_exist() -> None:
    # The scheduler reports such pods as pending with reason `missing`; the loader accepts them.
    data = scenario()
    data["spec"]["objects"] = [claim_template("other")]  # no DeviceClass either
    p = dra_pod()
    p["spec"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimTemplateName": "nowhere"},
        {"name": "shared", "resourceClaimName": "nobody"},
    ]
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu", "request": "gpu"}, {"name": "shared"}]
    p["spec"]["initContainers"] = [{"name": "init", "image": "x", "resources": {"claims": [{"name": "shared"}]}}]
    data["spec"]["workload"][0]["pod"] = p
    s = parse_scenario(data)
    assert s.workload[0].pod["spec"]["resourceClaims"] == p["spec"]["resourceClaims"]


def test_dra_quickstart() -> None:
    s = load_scenario(DRA_QUICKSTART)
    assert s.policy.autoscaler == "dra"
    assert s.duration_ms == 600_000
    assert [(o["kind"], o["metadata"]["name"]) for o in s.objects] == [
        ("DeviceClass", "gpu.example.com"),
        ("ResourceClaimTemplate", "four-gpus-one-domain"),
        ("ResourceClaimTemplate", "one-gpu"),
    ]
    [g] = s.node_groups
    assert (g.name, g.max, g.provision_delay_ms) == ("h100-8x", 3, (30_000, 45_000))
    assert [(n.group, n.count) for n in s.nodes] == [("h100-8x", 1)]
    [slc] = render_slices(g, "h100-8x-0")
    devices = slc["spec"]["devices"]
    assert [d["name"] for d in devices] == [f"gpu-{i}" for i in range(8)]
    assert [d["attributes"]["nvlinkDomain"] for d in devices] == [{"int": 0}] * 4 + [{"int": 1}] * 4
    assert all(d["capacity"] == {"memory": {"value": "80Gi"}} for d in devices)
    pods = sum(a.count for a in s.workload)
    assert pods <= 15
    used = {a.pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] for a in s.workload}
    assert used == {"one-gpu", "four-gpus-one-domain"}
    template = next(o for o in s.objects if o["metadata"]["name"] == "four-gpus-one-domain")
    assert template["spec"]["spec"]["devices"]["constraints"] == [
        {"requests": ["gpus"], "matchAttribute": "gpu.example.com/nvlinkDomain"}
    ]


def test_dra_quickstart_story_holds_with_the_allocator() -> None:
    """The story the file tells: first-fit single-GPU pods leave 5 free GPUs split 3 + 2 across the NVLink
    domains, so a 4-GPU-in-one-domain claim fails on the first node and both `train` claims fit on a new one."""
    s = load_scenario(DRA_QUICKSTART)
    [g] = s.node_groups
    inv = parse_documents([*s.objects, *render_slices(g, "h100-8x-0"), *render_slices(g, "h100-8x-1")])
    slices, classes = list(inv.slices.values()), inv.classes
    state = AllocatedState()
    matcher = CelMatcher()

    def allocate(node: str, template: str, name: str) -> list[str] | None:
        c = claim_from_template(inv.templates[f"default/{template}"], name)
        outcome = Allocator(slices, classes, state, matcher).allocate(Node(name=node), [c])
        if outcome.outcome != "allocated":
            return None
        allocation = outcome.allocations[c.key]
        state.add_allocation(allocation)
        return [r["device"] for r in allocation["devices"]["results"]]

    # 0s-3s: long-a, short-0..2, long-b, long-c on the starting node
    taken = {
        p: allocate("h100-8x-0", "one-gpu", p) for p in ("long-a", "short-0", "short-1", "short-2", "long-b", "long-c")
    }
    assert taken == {
        "long-a": ["gpu-0"],
        "short-0": ["gpu-1"],
        "short-1": ["gpu-2"],
        "short-2": ["gpu-3"],
        "long-b": ["gpu-4"],
        "long-c": ["gpu-5"],
    }
    # ~1m: the short pods end
    for p in ("short-0", "short-1", "short-2"):
        device = taken[p]
        assert device is not None
        state.devices.discard(next(d for d in state.devices if d.device == device[0]))
    assert len(state.devices) == 3  # 5 of 8 GPUs free
    # 2m: train-0 does not fit on the starting node (topology), but does on a new one, with train-1
    assert allocate("h100-8x-0", "four-gpus-one-domain", "train-0") is None
    assert allocate("h100-8x-1", "four-gpus-one-domain", "train-0") == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert allocate("h100-8x-1", "four-gpus-one-domain", "train-1") == ["gpu-4", "gpu-5", "gpu-6", "gpu-7"]
    # 3m: the four eval pods fill the first node's holes
    assert [allocate("h100-8x-0", "one-gpu", f"eval-{i}") for i in range(4)] == [
        ["gpu-1"],
        ["gpu-2"],
        ["gpu-3"],
        ["gpu-6"],
    ]


def test_every_field_has_dra() -> None:
    s = load_scenario(EVERY_FIELD)
    # PodDisruptionBudgets are in scenarios/preemption-gpu.yaml: one here would change this file's legacy log (the
    # scheduler's configuration records them), which must stay byte-identical
    assert {o["kind"] for o in s.objects} == set(OBJECT_KINDS) - {"PodDisruptionBudget"}
    assert any(g.resource_slices for g in s.node_groups)
    assert any(a.pod["spec"].get("resourceClaims") for a in s.workload)
    shared = [o for o in s.objects if o["kind"] == "ResourceClaim"]
    assert shared and all(o["metadata"]["namespace"] for o in shared)
    for g in s.node_groups:
        rendered = render_slices(g, f"{g.name}-0")
        parse_documents(list(rendered))  # every rendered slice is a valid ResourceSlice
    # the `tune` pod's claims (a template's and a shared one) fit on one gpu-8x node
    inv = parse_documents([*s.objects, *render_slices(s.node_groups[1], "gpu-8x-0")])
    claims = [
        claim_from_template(inv.templates["research/two-gpus"], "tune-gpus"),
        inv.claims["research/shared-scratch-gpu"],
    ]
    outcome = Allocator(list(inv.slices.values()), inv.classes, AllocatedState(), CelMatcher()).allocate(
        Node(name="gpu-8x-0"), claims
    )
    assert outcome.outcome == "allocated"
    assert [r["device"] for r in outcome.allocations["research/tune-gpus"]["devices"]["results"]] == ["gpu-0", "gpu-1"]


# --- render_slices --------------------------------------------------------------------------------------


def test_render_slices_fills_the_per_node_fields() -> None:
    first = slice_template("gpu.example.com", 2)
    first["metadata"] = {"labels": {"tier": "gpu"}}
    nic = slice_template("nic.example.com", 1)
    nic["spec"]["pool"] = {"generation": 3}
    second = slice_template("gpu.example.com", 2, first=2)
    second["spec"]["pool"] = {"resourceSliceCount": 5}
    g = group([first, nic, second])
    # the stored templates: type filled in, pool defaults filled in, per-node fields left out
    assert [t["spec"]["pool"] for t in g.resource_slices] == [
        {"generation": 1, "resourceSliceCount": 2},
        {"generation": 3, "resourceSliceCount": 1},
        {"resourceSliceCount": 5, "generation": 1},
    ]
    assert all(t["apiVersion"] == V1 and t["kind"] == "ResourceSlice" for t in g.resource_slices)
    assert all("nodeName" not in t["spec"] and "name" not in t["metadata"] for t in g.resource_slices)

    out = render_slices(g, "gpu-8x-3")
    assert [list(s) for s in out] == [["apiVersion", "kind", "metadata", "spec"]] * 3
    assert [s["metadata"] for s in out] == [
        {"name": "gpu-8x-3-gpu.example.com-0", "labels": {"tier": "gpu"}},
        {"name": "gpu-8x-3-nic.example.com-0"},
        {"name": "gpu-8x-3-gpu.example.com-1"},
    ]
    assert [s["spec"]["nodeName"] for s in out] == ["gpu-8x-3"] * 3
    assert [s["spec"]["pool"] for s in out] == [
        {"name": "gpu-8x-3", "generation": 1, "resourceSliceCount": 2},
        {"name": "gpu-8x-3", "generation": 3, "resourceSliceCount": 1},
        {"name": "gpu-8x-3", "resourceSliceCount": 5, "generation": 1},
    ]
    assert list(out[0]["spec"])[:3] == ["driver", "pool", "nodeName"]
    assert out[2]["spec"]["devices"] == second["spec"]["devices"]
    inv = parse_documents(list(out))
    assert sorted(inv.slices) == sorted(s["metadata"]["name"] for s in out)

    # deterministic, and deep copies: changing the output changes neither the group nor the next call
    assert render_slices(g, "gpu-8x-3") == out
    out[0]["spec"]["devices"].clear()
    out[0]["metadata"]["labels"]["tier"] = "x"
    assert render_slices(g, "gpu-8x-3")[0]["spec"]["devices"] == first["spec"]["devices"]
    assert g.resource_slices[0]["metadata"] == {"labels": {"tier": "gpu"}}


def test_render_slices_per_node_names_do_not_clash() -> None:
    g = group([slice_template(), slice_template(first=2)])
    names = [s["metadata"]["name"] for node in ("gpu-8x-0", "gpu-8x-1") for s in render_slices(g, node)]
    assert names == [
        "gpu-8x-0-gpu.example.com-0",
        "gpu-8x-0-gpu.example.com-1",
        "gpu-8x-1-gpu.example.com-0",
        "gpu-8x-1-gpu.example.com-1",
    ]
    assert slice_name("n", "GPU.Example.com", 2) == "n-gpu.example.com-2"


def test_slice_templates_shared_through_an_alias_get_their_own_defaults() -> None:
    data = scenario()
    shared = slice_template()
    g0 = data["spec"]["nodeGroups"][0]
    g0["resourceSlices"] = [shared]
    data["spec"]["nodeGroups"].append({**g0, "name": "other", "resourceSlices": [shared, slice_template(first=2)]})
    s = parse_scenario(data)
    assert "pool" not in shared["spec"]
    assert [t["spec"]["pool"]["resourceSliceCount"] for g in s.node_groups for t in g.resource_slices] == [1, 2, 2]


def test_scenario_structs_default_the_new_fields() -> None:
    s = parse_scenario(scenario())
    bare = Scenario(
        name=s.name,
        seed=None,
        duration_ms=1,
        policy=s.policy,
        scheduler=s.scheduler,
        autoscaler=s.autoscaler,
        node_groups=[],
        nodes=[],
        workload=[],
        source="x",
    )
    assert bare.objects == []
    g = NodeGroup(name="g", min=0, max=1, provision_delay_ms=(0, 0), template={})
    assert g.resource_slices == []


# --- bad input ------------------------------------------------------------------------------------------

OBJ: Keys = ("spec", "objects")
S: Keys = ("spec", "nodeGroups", 0, "resourceSlices")
P: Keys = ("spec", "workload", 0, "pod", "spec")
KINDS = (  # as Kubernetes 1.37, the default release, serves them
    "expected one of `DeviceClass`, `ResourceClaimTemplate`, `ResourceClaim` (resource.k8s.io/v1), "
    "`Workload`, `PodGroup`, `CompositePodGroup` (scheduling.k8s.io/v1alpha3, scheduling.k8s.io/v1beta1, as "
    "Kubernetes 1.37 serves them), `PriorityClass` (scheduling.k8s.io/v1), `PodTemplate` (v1), `ProvisioningRequest` "
    "(autoscaling.x-k8s.io/v1), `PodDisruptionBudget` (policy/v1) and Kueue's `AdmissionCheck` and "
    "`ProvisioningRequestConfig` (kueue.x-k8s.io/v1beta1)"
)
PER_NODE = "leave it out: each node of the group publishes its own slices; dralab fills it with the node's name"
NODE_LOCAL = (
    "a node group's slices describe the node's own devices (dralab sets `spec.nodeName` to each node's name); "
    "leave it out"
)
SUBDOMAIN = (
    "is not a valid name: expected an RFC 1123 subdomain (at most 253 lower case alphanumeric characters, '-' or "
    "'.', starting and ending with an alphanumeric character)"
)


def bad_claim_count() -> dict[str, Any]:
    c = claim()
    c["spec"]["devices"]["requests"][0]["exactly"]["count"] = -1
    return c


def bad_template_count() -> dict[str, Any]:
    t = claim_template()
    t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = -1
    return t


BAD: list[tuple[Keys, object, str, str]] = [
    # spec.objects
    (OBJ, "x", "spec.objects", "expected list, got str"),
    ((*OBJ, 0), "x", "spec.objects[0]", "expected a Kubernetes object (a map), got str"),
    ((*OBJ, 0, "kind"), DELETE, "spec.objects[0].kind", "missing required field"),
    ((*OBJ, 0, "apiVersion"), DELETE, "spec.objects[0].apiVersion", "missing required field"),
    ((*OBJ, 0, "kind"), 3, "spec.objects[0].kind", "expected str, got int"),
    ((*OBJ, 0, "kind"), "ConfigMap", "spec.objects[0].kind", f"unsupported kind `ConfigMap`; {KINDS}"),
    ((*OBJ, 0, "kind"), "List", "spec.objects[0].kind", f"unsupported kind `List`; {KINDS}"),
    (
        (*OBJ, 0, "kind"),
        "Pod",
        "spec.objects[0].kind",
        f"unsupported kind `Pod`; {KINDS}: pods arrive through `spec.workload`",
    ),
    (
        (*OBJ, 0, "kind"),
        "ResourceSlice",
        "spec.objects[0].kind",
        f"unsupported kind `ResourceSlice`; {KINDS}: ResourceSlices are published by the nodes: put them in "
        "`spec.nodeGroups[].resourceSlices`",
    ),
    (
        (*OBJ, 0, "apiVersion"),
        "resource.k8s.io/v1beta1",
        "spec.objects[0].apiVersion",
        "expected `resource.k8s.io/v1` (Kubernetes 1.37), got `resource.k8s.io/v1beta1`",
    ),
    (
        (*OBJ, 2, "status"),
        {"allocation": {}},
        "spec.objects[2].status",
        "a claim of the scenario starts unallocated (the scheduler allocates it); leave `status` out",
    ),
    (
        (*OBJ, 2),
        bad_claim_count(),
        "spec.objects[2].spec.devices.requests[0].exactly.count",
        "Invalid value: -1: must be greater than zero",
    ),
    (
        (*OBJ, 1),
        bad_template_count(),
        "spec.objects[1].spec.spec.devices.requests[0].exactly.count",
        "Invalid value: -1: must be greater than zero",
    ),
    (
        (*OBJ, 0, "metadata", "namespace"),
        "x",
        "spec.objects[0].metadata.namespace",
        "Forbidden: not allowed on this type",
    ),
    ((*OBJ, 1, "metadata", "name"), "Bad_Name", "spec.objects[1].metadata.name", f"`Bad_Name` {SUBDOMAIN}"),
    (
        (*OBJ, 1, "metadata"),
        DELETE,
        "spec.objects[1].metadata.name",
        "Required value: name or generateName is required",
    ),
    (
        (*OBJ, 1, "spek"),
        {},
        "spec.objects[1].spek",
        "unknown field `spek`; expected one of `apiVersion`, `kind`, `metadata`, `spec` (did you mean `spec`?)",
    ),
    (
        (*OBJ, 3),
        {**claim_template(), "metadata": {"name": "one-gpu", "namespace": "default"}},
        "spec.objects[3].metadata.name",
        "duplicate ResourceClaimTemplate `default/one-gpu` (also spec.objects[1])",
    ),
    (
        (*OBJ, 3),
        device_class(),
        "spec.objects[3].metadata.name",
        "duplicate DeviceClass `gpu.example.com` (also spec.objects[0])",
    ),
    # spec.nodeGroups[].resourceSlices
    (S, "x", "spec.nodeGroups[0].resourceSlices", "expected list, got str"),
    ((*S, 0), "x", "spec.nodeGroups[0].resourceSlices[0]", "expected map, got str"),
    (
        (*S, 0, "apiVersion"),
        "v1",
        "spec.nodeGroups[0].resourceSlices[0].apiVersion",
        "expected `resource.k8s.io/v1`, got `v1`",
    ),
    ((*S, 0, "kind"), "Node", "spec.nodeGroups[0].resourceSlices[0].kind", "expected `ResourceSlice`, got `Node`"),
    (
        (*S, 0, "metadata"),
        {"name": "x"},
        "spec.nodeGroups[0].resourceSlices[0].metadata.name",
        f"{PER_NODE} (`<node>-<driver>-<i>`)",
    ),
    (
        (*S, 0, "metadata"),
        {"generateName": "x-"},
        "spec.nodeGroups[0].resourceSlices[0].metadata.generateName",
        f"{PER_NODE} (`<node>-<driver>-<i>`)",
    ),
    ((*S, 0, "spec"), DELETE, "spec.nodeGroups[0].resourceSlices[0].spec", "missing required field"),
    ((*S, 0, "spec", "nodeName"), "n", "spec.nodeGroups[0].resourceSlices[0].spec.nodeName", PER_NODE),
    (  # a pool name of its own is allowed (each node publishes `<node>/<name>`), a bad one is refused
        (*S, 0, "spec", "pool"),
        {"name": "Bad_Pool"},
        "spec.nodeGroups[0].resourceSlices[0].spec.pool.name",
        "Invalid value: \"Bad_Pool\": a pool name is one or more DNS subdomains separated by '/' "
        "(`Bad_Pool` is not a DNS subdomain)",
    ),
    ((*S, 0, "spec", "allNodes"), True, "spec.nodeGroups[0].resourceSlices[0].spec.allNodes", NODE_LOCAL),
    ((*S, 0, "spec", "nodeSelector"), {}, "spec.nodeGroups[0].resourceSlices[0].spec.nodeSelector", NODE_LOCAL),
    (
        (*S, 0, "spec", "perDeviceNodeSelection"),
        True,
        "spec.nodeGroups[0].resourceSlices[0].spec.perDeviceNodeSelection",
        NODE_LOCAL,
    ),
    ((*S, 0, "spec", "driver"), DELETE, "spec.nodeGroups[0].resourceSlices[0].spec.driver", "Required value"),
    (
        (*S, 0, "spec", "driver"),
        "gpu_example",
        "spec.nodeGroups[0].resourceSlices[0].spec.driver",
        "Invalid value: \"gpu_example\": a driver name must be a DNS subdomain: alphanumeric characters, '-' or "
        "'.', starting and ending with an alphanumeric character (e.g. 'gpu.example.com')",
    ),
    ((*S, 0, "spec", "pool"), "p", "spec.nodeGroups[0].resourceSlices[0].spec.pool", "expected map, got str"),
    (
        (*S, 0, "spec", "pool"),
        {"generation": -1},
        "spec.nodeGroups[0].resourceSlices[0].spec.pool.generation",
        "Invalid value: -1: must be greater than or equal to zero",
    ),
    (
        (*S, 0, "spec", "pool"),
        {"resourceSliceCount": 0},
        "spec.nodeGroups[0].resourceSlices[0].spec.pool.resourceSliceCount",
        "Invalid value: 0: must be greater than zero",
    ),
    (
        (*S, 0, "spec", "devices", 1, "attributes", "nvlinkDomain"),
        {"int": 1, "string": "x"},
        "spec.nodeGroups[0].resourceSlices[0].spec.devices[1].attributes.nvlinkDomain",
        'Invalid value: {"int":1,"string":"x"}: exactly one value must be specified',
    ),
    (
        (*S, 0, "spec", "devices", 1, "name"),
        "gpu-0",
        "spec.nodeGroups[0].resourceSlices[0].spec.devices[1]",
        'Duplicate value: "gpu-0"',
    ),
    (
        (*S, 1),
        slice_template(first=1),
        "spec.nodeGroups[0].resourceSlices[1].spec.devices[0].name",
        "duplicate device name `gpu-1` in the pool of driver `gpu.example.com` (also "
        "spec.nodeGroups[0].resourceSlices[0].spec.devices[1].name); the slices of one driver on a node form one pool",
    ),
    (
        (*S, 0, "spec", "devices", 0, "consumesCounters"),
        [{"counterSet": "nope", "counters": {"memory": {"value": "1Gi"}}}],
        "spec.nodeGroups[0].resourceSlices",
        "the slices of driver `gpu.example.com` make an invalid pool: counter set nope not found",
    ),
    # pods' claims
    (
        (*P, "resourceClaims", 0, "resourceClaimName"),
        "shared",
        "spec.workload[0].pod.spec.resourceClaims[0]",
        "Invalid value: at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
    ),
    (
        (*P, "resourceClaims", 0, "resourceClaimTemplateName"),
        DELETE,
        "spec.workload[0].pod.spec.resourceClaims[0]",
        "Invalid value: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
    ),
    ((*P, "resourceClaims"), "x", "spec.workload[0].pod.spec.resourceClaims", "expected list, got str"),
    ((*P, "resourceClaims", 0, "name"), DELETE, "spec.workload[0].pod.spec.resourceClaims[0].name", "Required value"),
    (
        (*P, "resourceClaims", 0, "name"),
        "GPU",
        "spec.workload[0].pod.spec.resourceClaims[0].name",
        "`GPU` is not a valid name: expected an RFC 1123 label (at most 63 lower case alphanumeric characters or "
        "'-', starting and ending with an alphanumeric character)",
    ),
    (
        (*P, "resourceClaims", 1),
        {"name": "gpu", "resourceClaimName": "shared"},
        "spec.workload[0].pod.spec.resourceClaims[1].name",
        'Duplicate value: "gpu"',
    ),
    (
        (*P, "resourceClaims", 0, "resourceClaimTemplateName"),
        "Bad_Name",
        "spec.workload[0].pod.spec.resourceClaims[0].resourceClaimTemplateName",
        f"`Bad_Name` {SUBDOMAIN}",
    ),
    (
        (*P, "containers", 0, "resources", "claims", 0, "name"),
        "gpus",
        "spec.workload[0].pod.spec.containers[0].resources.claims[0].name",
        'Not found: "gpus": must be one of the names in pod.spec.resourceClaims',
    ),
    (
        (*P, "resourceClaims"),
        DELETE,
        "spec.workload[0].pod.spec.containers[0].resources.claims[0].name",
        'Not found: "gpu": no claims defined in pod.spec.resourceClaims',
    ),
    (
        (*P, "containers", 0, "resources", "claims", 0),
        {},
        "spec.workload[0].pod.spec.containers[0].resources.claims[0].name",
        "missing required field",
    ),
    (
        (*P, "containers", 0, "resources", "claims", 0, "request"),
        5,
        "spec.workload[0].pod.spec.containers[0].resources.claims[0].request",
        "expected str, got int",
    ),
    (
        (*P, "initContainers"),
        [{"name": "init", "image": "x", "resources": {"claims": [{"name": "nope"}]}}],
        "spec.workload[0].pod.spec.initContainers[0].resources.claims[0].name",
        'Not found: "nope": must be one of the names in pod.spec.resourceClaims',
    ),
]


@pytest.mark.parametrize(("keys", "value", "path", "message"), BAD, ids=[f"{c[2]}-{i}" for i, c in enumerate(BAD)])
def test_bad_dra_input_is_refused_with_path_and_reason(keys: Keys, value: object, path: str, message: str) -> None:
    data = scenario()
    edit(data, keys, value)
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "s.yaml")
    error = info.value
    assert (error.file, error.path, error.message) == ("s.yaml", path, message)
    assert str(error) == f"s.yaml: {path}: {message}"


def test_errors_in_a_file_name_the_file(tmp_path: Path) -> None:
    text = DRA_QUICKSTART.read_text().replace("count: 4\n", "count: 0.5\n", 1)
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(bad)
    assert info.value.file == str(bad)
    assert info.value.path == "spec.objects[1].spec.spec.devices.requests[0].exactly.count"

"""Explanations that name the real cause (issue 23), restated from public manifests (tests/fixtures/explain,
origins in its README): a selector failing at runtime is `selector-error`, not `capacity` (NVIDIA's gpu-test6);
taints and shared counters are named across several requests (gpu-test5 beside 7 tainted GPUs; the driver's
two-MIG bats spec on a dynamic-MIG GPU); a pending `firstAvailable` request is explained by the alternative that
came closest (dra-example-driver's prioritized-alternatives)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import simulated_scenario

from dralab.core.analysis.audit import audit
from dralab.core.analysis.causes import CAUSES, NEW_IN_ISSUE_23
from dralab.core.analysis.metrics import metrics_from_entries
from dralab.core.dra.allocate import allocate_inventory
from dralab.core.dra.api import parse_documents
from dralab.core.kube.versions import LEGACY_PROFILE
from dralab.core.scenario.load import parse_scenario

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "explain"


def docs(*files: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in files:
        out += [d for d in yaml.safe_load_all((FIXTURES / f).read_text()) if d]
    return out


def audited(*files: str) -> dict[str, Any]:
    report: dict[str, Any] = audit(parse_documents(docs(*files), "+".join(files)))
    return report


def verdict(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in report["pods"] if p["name"] == name)


def allocation(*files: str, claim_docs: list[dict[str, Any]]) -> dict[str, Any]:
    """`dralab allocate` on the fixture files plus the given claims (the report as JSON)."""
    return allocate_inventory(parse_documents(docs(*files) + claim_docs, "test")).to_json()


def claim_from_template(files: str, template: str, name: str) -> dict[str, Any]:
    tmpl = next(d for d in docs(files) if d["kind"] == "ResourceClaimTemplate" and d["metadata"]["name"] == template)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": tmpl["metadata"].get("namespace", "default")},
            "spec": copy.deepcopy(tmpl["spec"]["spec"])}


# ------------------------------------------------------------------ (1) a selector failing at runtime

GPU_TEST6 = ("a100-node.yaml", "gpu-test6.yaml", "gpu-test6-pods.yaml")


def test_gpu_test6_is_a_selector_error_with_upstreams_message() -> None:
    """gpu-test6 reads `index`, which the driver no longer publishes: CEL says "no such key: index" on the first
    A100 the allocator reaches; upstream's allocator returns "claim ...: selector #0: CEL runtime error: ..."."""
    report = audited(*GPU_TEST6)
    pods = [p for p in report["pods"] if p["namespace"] == "gpu-test6"]
    assert len(pods) == 4 and {p["reason"] for p in pods} == {"selector-error"}
    msg = verdict(report, "pod-6d9c8b7f5-7xk2p")["message"]
    assert msg.startswith("node a100-node: claim gpu-test6/pod-6d9c8b7f5-7xk2p-a100: selector #0: CEL runtime error: "
                          "no such key: index (request gpu of claim gpu-test6/pod-6d9c8b7f5-7xk2p-a100, on device "
                          "gpu.nvidia.com/a100-node/gpu-0)"), msg
    assert "cluster-autoscaler does not act on such pods" in msg and "capacity" not in msg
    [e] = allocation("a100-node.yaml", claim_docs=[claim_from_template("gpu-test6.yaml", "a100", "c")])["explanations"]
    assert (e["kind"], e["request"], e["matching"], e["free"]) == ("selector-error", "gpu", 0, 0)


def test_selector_error_remedy_is_not_add_nodes() -> None:
    assert "selector-error" in NEW_IN_ISSUE_23
    assert "more nodes do not help" in CAUSES["selector-error"].remedy


def _gpu_test6_scenario(version: str | None) -> dict[str, Any]:
    """gpu-test6's Deployment on one A100 node of today's driver; a second node group whose (older) driver still
    publishes `index` could take the pods."""
    node_docs = docs("a100-node.yaml")
    device_class = copy.deepcopy(next(d for d in node_docs if d["kind"] == "DeviceClass"))
    device_class["spec"].pop("extendedResourceName")  # DRAExtendedResource: off in 1.35, not what this is about
    devices = next(d for d in node_docs if d["kind"] == "ResourceSlice")["spec"]["devices"]
    older = copy.deepcopy(devices)
    for i, device in enumerate(older):
        device["attributes"]["index"] = {"int": i}
    test6 = docs("gpu-test6.yaml")
    template = next(d for d in test6 if d["kind"] == "ResourceClaimTemplate")
    pod = copy.deepcopy(next(d for d in test6 if d["kind"] == "Deployment")["spec"]["template"])
    pod["metadata"] = {"name": "pod", "namespace": "gpu-test6"}
    pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1"}

    def group(name: str, devs: list[dict[str, Any]], lo: int) -> dict[str, Any]:
        return {"name": name, "min": lo, "max": 2, "provisionDelay": {"min": "30s", "max": "30s"},
                "template": {"apiVersion": "v1", "kind": "Node", "metadata": {"labels": {}},
                             "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}}},
                "resourceSlices": [{"spec": {"driver": "gpu.nvidia.com", "devices": devs}}]}

    spec: dict[str, Any] = {
        "seed": 1, "duration": "5m", "policy": {"autoscaler": "dra"}, "autoscaler": {"scanInterval": "10s"},
        "objects": [device_class, template],
        "nodeGroups": [group("a100", devices, 1), group("a100-older-driver", older, 0)],
        "nodes": [{"group": "a100", "count": 1}],
        "workload": [{"at": "0s", "count": 4, "pod": pod}]}
    if version is not None:
        spec["kubernetes"] = {"version": version}
    return {"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "gpu-test6"}, "spec": spec}


@pytest.mark.parametrize("version", ["1.35", "1.37"])
def test_the_autoscaler_does_not_scale_up_for_a_selector_error(version: str) -> None:
    """Upstream writes such a pod SchedulerError and cluster-autoscaler lists only Unschedulable pods: no node is
    added, although the older driver's node group would fit them; the stranded GPUs are the selector's fault."""
    result = simulated_scenario(parse_scenario(_gpu_test6_scenario(version), "gpu-test6.yaml"), 1)
    assert sorted(result.state.nodes) == ["a100-0"]
    pending = result.state.pending_pods()
    assert len(pending) == 4 and {p.condition.cause for p in pending if p.condition} == {"selector-error"}
    m = metrics_from_entries(result.entries, end_ms=5 * 60_000)
    assert m.gpu_hours_stranded > 0 and set(m.gpu_hours_stranded_by_cause) == {"selector-error"}, m


def test_the_legacy_profile_still_scales_up_for_it() -> None:
    """Legacy logs do not change: the legacy model adds the older driver's node, where the pods run."""
    doc = _gpu_test6_scenario(None)
    result = simulated_scenario(parse_scenario(doc, "gpu-test6.yaml", profile=LEGACY_PROFILE), 1)
    assert sorted(result.state.nodes) == ["a100-0", "a100-older-driver-0"]
    assert result.state.pending_pods() == []


# ------------------------------------------------------------------ (2) taints across several requests

def test_two_one_gpu_requests_beside_seven_tainted_gpus_is_taint() -> None:
    """gpu-test5 asks for two GPUs in two requests (ts-gpu, mps-gpu); 7 of the node's 8 GPUs carry the driver's
    XID taint: `taint`, as one request with count 2 says, not "not enough are free (8 free of 8 matching)"."""
    v = verdict(audited("xid-node.yaml", "gpu-test5.yaml"), "pod0")
    assert v["reason"] == "device-taint", v
    assert "7 of the free ones have taints the requests do not tolerate (gpu.nvidia.com/xid=79:NoSchedule)" \
        in v["message"]
    two = claim_from_template("gpu-test5.yaml", "multiple-gpus", "two")
    [e] = allocation("xid-node.yaml", claim_docs=[two])["explanations"]
    assert (e["kind"], e["matching"], e["free"]) == ("taint", 8, 8)
    count2 = copy.deepcopy(two)
    count2["metadata"]["name"] = "count-two"
    count2["spec"]["devices"] = {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                          "count": 2}}]}
    [e2] = allocation("xid-node.yaml", claim_docs=[count2])["explanations"]
    assert e2["kind"] == "taint"


# ------------------------------------------------------------------ (3) shared counters across requests

def test_two_mig_requests_on_one_dynamic_mig_gpu_is_counters() -> None:
    """The driver's bats spec gpu-multiple-mig (one MIG with < 30 SMs, one with > 50) on an A100-40GB whose
    memory slices 4-7 are taken by a 3g.20gb: each request fits alone, together they overlap in the GPU's
    counters (the 4g.20gb takes slices 0-3): `counters`, naming the counters left."""
    v = verdict(audited("mig-node.yaml", "gpu-multiple-mig.yaml"), "pod-2mig")
    assert v["reason"] == "counters", v
    assert "the shared counters left in their pool (" in v["message"]
    assert "gpu-0-counter-set/memory-slice-4=0" in v["message"] and "multiprocessors=56" in v["message"]
    claim = claim_from_template("gpu-multiple-mig.yaml", "rct-migdevs", "migs")
    [e] = allocation("mig-node.yaml", claim_docs=[claim])["explanations"]
    assert (e["kind"], e["request"]) == ("counters", None)


# ------------------------------------------------------------------ (4) firstAvailable: the closest alternative

def test_first_available_is_explained_by_the_alternative_that_came_closest() -> None:
    """prioritized-alternatives' pod0 with both GPUs in use: bleeding-edge-gpu and huge-gpu match no device;
    older-gpu matches both, which are in use. The explanation quotes older-gpu, not "0 devices match"."""
    report = audited("example-node.yaml", "prioritized-alternatives.yaml")
    v = verdict(report, "pod0")
    assert v["reason"] == "capacity"
    assert ("request gpu/older-gpu of claim prioritized-alternatives/pod0-gpu needs 1 device of class "
            "gpu.example.com: 2 devices on node dra-example-driver-cluster-worker match, but only 0 are free "
            "(2 in use) (the closest of 3 alternatives of firstAvailable; the others: gpu/bleeding-edge-gpu: no "
            "device matches; gpu/huge-gpu: no device matches)") in v["message"], v
    # of equals (both alternatives of pod1 match both GPUs, in use), the first
    assert "request gpu/latest-gpu of claim prioritized-alternatives/pod1-gpu" in verdict(report, "pod1")["message"]


def test_a_class_selector_error_names_the_class_as_upstream_does() -> None:
    """A DeviceClass selector failing at runtime: upstream's "class <name>: selector #<i>: CEL runtime error"."""
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "indexed-gpu"},
           "spec": {"selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].index >= 0"}}]}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "c", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "indexed-gpu"}}]}}}
    report = allocation("a100-node.yaml", claim_docs=[cls, claim])
    assert report["outcome"] == "error"
    [e] = report["explanations"]
    assert e["kind"] == "selector-error" and e["claim"] == "default/c" and e["request"] == "gpu"
    assert e["message"].startswith("class indexed-gpu: selector #0: CEL runtime error: no such key: index")

"""DRA extended resources (KEP-5004): a pod's `nvidia.com/gpu: 2` served by DRA devices through a DeviceClass's
extendedResourceName (core/dra/extended.py, core/scheduler/plugins/dra_extended.py,
scenarios/dra-extended-resource.yaml)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_binding_conditions import events

from dralab.core.kube.versions import LEGACY_PROFILE, ProfileFlags
from dralab.core.log.events import ClaimAllocated, PodBound, ResourceClaimCreated
from dralab.core.scenario.load import ScenarioError, parse_scenario
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import SimResult, simulate
from dralab.replay.simulation.verify import verify

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "dra-extended-resource.yaml"


def base() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(SCENARIO.read_text()))


def run_doc(doc: dict[str, Any], **kw: Any) -> SimResult:
    scenario = parse_scenario(doc, "dra-extended-resource.yaml", **kw)
    result = simulate(scenario, scenario.seed)
    assert result.violations == [], result.violations  # no-overcommit holds: the GPUs are the devices'
    checked = verify(LogFile("x", {}, result.entries))
    assert checked.ok, checked.divergence and checked.divergence.render()
    return result


def bound(result: SimResult) -> dict[str, tuple[int, str]]:
    return {e.pod.split("/")[-1]: (t, e.node) for t, e in events(result) if isinstance(e, PodBound)}


def test_1_37_serves_nvidia_gpu_from_dra_devices_with_a_special_claim() -> None:
    result = run_doc(base())
    assert bound(result) == {"train-0": (0, "gpu-0"), "train-1": (0, "gpu-0"), "train-2": (124_000, "gpu-0")}
    made = [e.manifest for _, e in events(result) if isinstance(e, ResourceClaimCreated)]
    first = made[0]
    assert first["metadata"]["name"] == "train-0-extended-resources-0"
    assert first["metadata"]["generateName"] == "train-0-extended-resources-"
    assert first["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert first["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    assert first["spec"]["devices"]["requests"] == [{"name": "container-0-request-0", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2}}]
    devices = [[r["device"] for r in e.allocation["devices"]["results"]] for _, e in events(result)
               if isinstance(e, ClaimAllocated)]
    assert devices[:2] == [["gpu-0", "gpu-1"], ["gpu-2", "gpu-3"]]


def test_the_gate_per_release() -> None:
    with pytest.raises(ScenarioError, match="DRAExtendedResource"):
        parse_scenario(base(), flags=ProfileFlags(version="1.35"))  # alpha, off: the class field is refused
    on = run_doc(base(), flags=ProfileFlags(version="1.35", gates={"DRAExtendedResource": True}))
    assert set(bound(on)) == {"train-0", "train-1", "train-2"}
    assert set(bound(run_doc(base(), flags=ProfileFlags(version="1.36")))) == {"train-0", "train-1", "train-2"}


def test_legacy_profile_ignores_the_field_and_the_pods_are_insufficient() -> None:
    result = run_doc(base(), profile=LEGACY_PROFILE)
    assert bound(result) == {}
    assert {p.condition.message for p in result.state.pods.values() if p.condition} == {
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}


def test_the_implicit_name_serves_too() -> None:
    doc = base()
    del doc["spec"]["objects"][0]["spec"]["extendedResourceName"]
    limits = doc["spec"]["workload"][0]["pod"]["spec"]["containers"][0]["resources"]["limits"]
    limits.clear()
    limits["deviceclass.resource.kubernetes.io/gpu.nvidia.com"] = "2"
    assert set(bound(run_doc(doc))) == {"train-0", "train-1", "train-2"}


def test_a_node_that_lists_the_resource_keeps_the_device_plugin_path() -> None:
    doc = base()
    doc["spec"]["nodeGroups"].append({"name": "plugin", "min": 1, "max": 1, "provisionDelay": "1m", "template": {
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "2"}}}})
    doc["spec"]["nodes"].append({"group": "plugin", "count": 1})
    result = run_doc(doc)
    # the DRA node first (two pods, four devices), then the device plugin's node for the third, without a claim
    assert bound(result) == {"train-0": (0, "gpu-0"), "train-1": (0, "gpu-0"), "train-2": (0, "plugin-0")}
    made = [e.pod for _, e in events(result) if isinstance(e, ResourceClaimCreated)]
    assert made == ["pod/default/train-0", "pod/default/train-1"]


@pytest.mark.parametrize("policy", ["count", "dra"])
def test_the_autoscaler_does_not_resolve_extended_resources_to_dra(policy: str) -> None:
    """cluster-autoscaler's DRA snapshot does not implement the scheduler's DeviceClassResolver (autoscaler#8742,
    open): its simulation sees `nvidia.com/gpu` as an allocatable resource no template node has, so a pod that
    DRA would serve on a new node gets no scale-up; it waits for a GPU to free up."""
    doc = base()
    doc["spec"]["nodeGroups"][0]["max"] = 2
    doc["spec"]["policy"] = {"autoscaler": policy}
    result = run_doc(doc)
    assert result.state.node_groups["gpu"].created == 1
    assert bound(result)["train-2"] == (124_000, "gpu-0")


def test_a_node_listing_the_resource_as_zero_is_served_by_dra_and_no_overcommit_holds() -> None:
    doc = base()
    doc["spec"]["nodeGroups"][0]["template"]["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    result = run_doc(doc)  # run_doc checks every invariant, no-overcommit among them
    assert set(bound(result)) == {"train-0", "train-1", "train-2"}
    made = [e for _, e in events(result) if isinstance(e, ResourceClaimCreated)]
    assert len(made) == 3

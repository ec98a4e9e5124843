"""`dralab audit` / `schedule` / `whatif` on a dump with DRA extended resources (task "pgdra", KEP-5004): a pod
asking `nvidia.com/gpu` that a DeviceClass's extendedResourceName serves is read as the scheduler reads it (a
special claim on nodes that do not list the resource; the device plugin's count on those that do), and a bound
pod's special claim is linked through its `status.extendedResourceClaimStatus`
(core/analysis/audit_extended.py, core/analysis/dump.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from dralab.core.analysis.audit import audit, schedule
from dralab.core.analysis.dump import dump_record
from dralab.core.analysis.whatif import parse_node_groups, whatif
from dralab.core.dra.api import parse_documents
from dralab.core.dra.extended import POD_CLAIM
from dralab.core.dra.model import Inventory
from dralab.core.kube.versions import make_profile, profile_config
from dralab.core.state.cluster import ClusterState

DUMP = Path(__file__).resolve().parent / "fixtures" / "pgdra" / "extended-dump.yaml"
TOO_BIG = ("capacity", "needs 3 devices of class gpu.nvidia.com")


def docs() -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(DUMP.read_text()))


def inventory(items: list[dict[str, Any]] | None = None) -> Inventory:
    return parse_documents(copy.deepcopy(items if items is not None else docs()))


def verdicts(inv: Inventory) -> dict[str, tuple[str | None, str]]:
    return {p["name"]: (p["reason"], p["message"]) for p in audit(inv)["pods"]}


def test_audit_reads_dra_served_extended_resources_as_the_scheduler() -> None:
    inv = inventory()
    found = verdicts(inv)
    assert found["pending-fits"][0] is None and "fits on 1 node" in found["pending-fits"][1]
    reason, message = found["pending-too-big"]
    assert reason == TOO_BIG[0] and TOO_BIG[1] in message and "pending-too-big-extended-resources-0" in message
    assert "Insufficient" not in message
    # the running pod's special claim holds gpu-0 and gpu-1: 2 free, and none stranded
    assert audit(inv)["devices"] == {"total": 4, "allocated": 2, "free": 2, "stranded": 0}


def test_without_the_class_field_the_pods_are_insufficient() -> None:
    """The same dump from a cluster without extendedResourceName: no DRA path, the device plugin's count (0)."""
    items = docs()
    del items[0]["spec"]["extendedResourceName"]
    found = verdicts(inventory(items))
    assert found["pending-fits"] == ("resources", "node node-a: Insufficient nvidia.com/gpu")


def test_schedule_binds_with_the_special_claim_and_the_second_pod_finds_no_devices() -> None:
    result = schedule(inventory())
    [bound] = result["bindings"]
    assert (bound["name"], bound["node"]) == ("pending-fits", "node-a")
    [claim] = bound["claims"]
    assert claim["name"] == POD_CLAIM
    devices = [r["device"] for r in claim["allocation"]["devices"]["results"]]
    assert devices == ["gpu-2", "gpu-3"]  # gpu-0, gpu-1: the running pod's special claim
    [pending] = result["pending"]
    assert pending["name"] == "pending-too-big" and pending["reason"] == "capacity"
    assert "only 0 are free" in pending["message"]


def test_a_node_that_lists_the_resource_keeps_the_device_plugin_path() -> None:
    """node-b's device plugin lists nvidia.com/gpu: 4 and it has no DRA devices: there the requests count against
    allocatable, no special claim (the pod too big for node-a's DRA devices fits on node-b)."""
    items = docs()
    node_b = copy.deepcopy(items[1])
    node_b["metadata"]["name"] = "node-b"
    node_b["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    items.insert(2, node_b)
    result = schedule(inventory(items))
    where = {b["name"]: (b["node"], [c["name"] for c in b["claims"]]) for b in result["bindings"]}
    assert where["pending-too-big"] == ("node-b", [])
    assert where["pending-fits"][1] == [POD_CLAIM]
    assert result["pending"] == []


def test_the_dump_fold_links_the_special_claim_and_whatif_binds_through_it() -> None:
    inv = inventory()
    state = ClusterState()
    state.apply(1, dump_record(inv).record)
    claims = state.dra.pod_claims["pod/default/running"]
    assert claims[POD_CLAIM] == "claim/default/running-extended-resources-x7k2p"
    groups = parse_node_groups({"nodeGroups": [{"name": "gpu", "min": 0, "max": 2, "template": {
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}}}}]})
    report = whatif(inv, groups, kubernetes=profile_config(make_profile("1.37")))
    assert report["fits_now"] == ["default/pending-fits"]
    for policy in report["policies"]:
        # cluster-autoscaler does not resolve extended resources to device classes (autoscaler#8742): no scale-up
        assert policy["scale_ups"] == []
        [still] = policy["pods"]["still_pending"]
        assert still["name"] == "pending-too-big" and "Insufficient" not in still["message"]

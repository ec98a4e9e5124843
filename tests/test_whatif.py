"""`dralab whatif`: per autoscaler policy, what it would add for a real cluster's pending pods and whether
they would then run. The fixture is the topology trap from a dump: 5 free GPUs split 3/2 over two NVLink
domains, two pods wanting 4 in one domain, a cheap wrong-shaped group and a right-shaped one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.core.analysis.dump import dump_record
from dralab.core.analysis.whatif import parse_node_groups, whatif
from dralab.core.dra.api import load_objects
from dralab.core.kube.fields import FieldError
from dralab.core.state.cluster import ClusterState

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "whatif"
DUMP = FIXTURES / "topology-dump.yaml"
GROUPS = FIXTURES / "groups.yaml"
TRAIN = ["default/train-0", "default/train-1"]


def dralab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dralab", *args], capture_output=True, text=True, timeout=120)


def whatif_json(*args: str) -> dict[str, Any]:
    proc = dralab("whatif", "-f", str(DUMP), "--node-groups", str(GROUPS), "-o", "json", *args)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def groups() -> Any:
    return parse_node_groups(yaml.safe_load(GROUPS.read_text()))


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return whatif_json()


def by_policy(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["policy"]: p for p in report["policies"]}


def test_json_contract_keys(report: dict[str, Any]) -> None:
    assert list(report) == ["pending_before", "fits_now", "policies"]
    assert [p["policy"] for p in report["policies"]] == ["count", "dra", "atomic"]
    for result in report["policies"]:
        assert list(result) == ["policy", "scale_ups", "nodes_added", "cost_per_hour_added", "pods"]
        assert list(result["pods"]) == ["bound", "still_pending"]
        for scale_up in result["scale_ups"]:
            assert list(scale_up) == ["group", "nodes", "pods"]
        for pod in result["pods"]["still_pending"]:
            assert list(pod) == ["namespace", "name", "reason", "message"]
    assert report["pending_before"] == 2
    assert report["fits_now"] == []


def test_count_adds_the_cheap_wrong_shaped_nodes_and_the_pods_stay_pending_for_topology(
        report: dict[str, Any]) -> None:
    count = by_policy(report)["count"]
    # GPUs as integer counts: train-0 "fits" the 5 free GPUs of the dump's node, train-1 a 4-GPU split node.
    assert count["scale_ups"] == [{"group": "split", "nodes": 1, "pods": ["default/train-1"]}]
    assert count["nodes_added"] == {"split": 1}
    assert count["cost_per_hour_added"] == 20
    assert count["pods"]["bound"] == []
    still = count["pods"]["still_pending"]
    assert [(p["namespace"], p["name"], p["reason"]) for p in still] == [
        ("default", "train-0", "topology"), ("default", "train-1", "topology")]
    assert all("same gpu.example.com/nvlinkDomain" in p["message"] for p in still)


@pytest.mark.parametrize("policy", ["dra", "atomic"])
def test_dra_adds_the_right_nodes_and_both_pods_run(report: dict[str, Any], policy: str) -> None:
    result = by_policy(report)[policy]
    assert result["scale_ups"] == [{"group": "whole", "nodes": 1, "pods": TRAIN}]
    assert result["nodes_added"] == {"whole": 1}
    assert result["cost_per_hour_added"] == 98
    assert result["pods"] == {"bound": TRAIN, "still_pending": []}


def test_table_reads_at_a_glance() -> None:
    proc = dralab("whatif", "-f", str(DUMP), "--node-groups", str(GROUPS))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "2 pending pods"
    assert lines[1] == "count:  +1 split ($20/h) -> 0 of 2 pending pods would run (2 topology)"
    assert lines[2].startswith("  default/train-0  topology  ")
    assert "dra:    +1 whole ($98/h) -> 2 of 2 pending pods would run" in lines
    assert "atomic: +1 whole ($98/h) -> 2 of 2 pending pods would run" in lines


def test_policy_option_and_the_price_expander() -> None:
    report = whatif_json("--policy", "dra", "--expander", "price", "--seed", "3")
    assert [p["policy"] for p in report["policies"]] == ["dra"]
    assert report["policies"][0]["nodes_added"] == {"whole": 1}


def test_pods_that_fit_now_are_reported_and_count_as_bound(tmp_path: Path) -> None:
    dump = yaml.safe_load(DUMP.read_text())
    dump["items"].append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                          "spec": {"containers": [{"name": "web", "image": "nginx",
                                                   "resources": {"requests": {"cpu": "2"}}}]}})
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(dump))
    proc = dralab("whatif", "-f", str(path), "--node-groups", str(GROUPS), "-o", "json", "--policy", "dra")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["pending_before"] == 3
    assert report["fits_now"] == ["default/web"]
    # creation order: web has no creationTimestamp, so it sorts first
    assert report["policies"][0]["pods"]["bound"] == ["default/web", "default/train-0", "default/train-1"]


def test_bad_node_groups_file_is_exit_2_with_file_and_field_path(tmp_path: Path) -> None:
    doc = yaml.safe_load(GROUPS.read_text())
    doc["nodeGroups"][1]["template"]["status"]["allocatable"]["cpu"] = "lots"
    bad = tmp_path / "groups.yaml"
    bad.write_text(yaml.safe_dump(doc))
    proc = dralab("whatif", "-f", str(DUMP), "--node-groups", str(bad))
    assert proc.returncode == 2
    assert f"{bad}: nodeGroups[1].template.status.allocatable.cpu: invalid quantity `lots`" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


@pytest.mark.parametrize(("text", "expected"), [
    ("- name: a\n  maxx: 1\n", ": [0].maxx: unknown field `maxx`"),
    ("nodeGroups: []\n", ": nodeGroups: expected at least one node group"),
    ("groups: []\n", ": groups: unknown field `groups`"),
    ("", ": the file is empty"),
    ("42\n", ": expected a list of node groups or a map with `nodeGroups`, got int"),
    ("nodeGroups: [\n", ":2:1: "),
])
def test_node_groups_file_errors(tmp_path: Path, text: str, expected: str) -> None:
    bad = tmp_path / "g.yaml"
    bad.write_text(text)
    proc = dralab("whatif", "-f", str(DUMP), "--node-groups", str(bad))
    assert proc.returncode == 2, proc.stdout
    assert f"{bad}{expected}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_dump_is_exit_2_with_path(tmp_path: Path) -> None:
    dump = yaml.safe_load(DUMP.read_text())
    dump["items"][0]["status"]["allocatable"]["cpu"] = "lots"
    bad = tmp_path / "dump.yaml"
    bad.write_text(yaml.safe_dump(dump))
    proc = dralab("whatif", "-f", str(bad), "--node-groups", str(GROUPS))
    assert proc.returncode == 2
    assert f"{bad}: items[0].status.allocatable.cpu: " in proc.stderr
    missing = dralab("whatif", "-f", str(tmp_path / "nope.yaml"), "--node-groups", str(GROUPS))
    assert missing.returncode == 2 and "nope.yaml" in missing.stderr
    assert "Traceback" not in proc.stderr + missing.stderr


def test_the_dump_folds_into_the_cluster_it_shows() -> None:
    """Generated claims are linked to their pods (no duplicates from the claim controller), allocations and
    reservedFor carried over, the held devices in use; nothing is an anomaly."""
    dump = dump_record(load_objects([DUMP]))
    state = ClusterState()
    state.apply(1, dump.record)
    assert state.anomalies == [] and dump.skipped == ()
    assert dump.pending == ("pod/default/train-0", "pod/default/train-1")
    assert state.dra.pod_claims == {
        "pod/default/infer": {"gpus": "claim/default/infer-gpus-7bq4x"},
        "pod/default/train-0": {"gpus": "claim/default/train-0-gpus-m2x5d"},
    }
    assert list(state.dra.claims["claim/system/agent-gpu"].reserved_for) == ["pod/system/agent"]
    assert state.dra.claims["claim/default/train-0-gpus-m2x5d"].allocation is None
    assert len(state.dra.allocated.devices) == 3
    node = state.nodes["gpu-node-a"]
    assert node.ready and set(node.pods) == {"pod/system/agent", "pod/default/infer"}


def test_seeded_and_pure() -> None:
    """Same seed, same report; core.whatif reads no clock, environment or global random (test_purity's patches)."""
    from test_purity import forbid_outside_world

    inv = load_objects([DUMP])
    expected = whatif(inv, groups(), seed=5)
    with pytest.MonkeyPatch.context() as m:
        forbid_outside_world(m)
        assert whatif(inv, groups(), seed=5) == expected


def test_parse_node_groups_paths() -> None:
    with pytest.raises(FieldError) as exc:
        parse_node_groups([{"name": "a", "max": 1, "template": {"status": {"allocatable": {"pods": "x"}}}}])
    assert exc.value.path == "[0].template.status.allocatable.pods"
    assert [g.name for g in parse_node_groups(yaml.safe_load(GROUPS.read_text())["nodeGroups"])] == ["split", "whole"]


def test_finished_pods_free_their_devices_and_pods_on_unknown_nodes_are_left_out(tmp_path: Path) -> None:
    """`infer` has succeeded: the claim controller releases and deallocates its claim, domain 1 has 4 free
    GPUs again, and one training pod fits the cluster as it is. A pod bound to a node missing from the dump
    takes nothing anyone can see: it is left out, and said so."""
    dump = yaml.safe_load(DUMP.read_text())
    for item in dump["items"]:
        if item["kind"] == "Pod" and item["metadata"]["name"] == "infer":
            item["status"]["phase"] = "Succeeded"
    dump["items"].append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "elsewhere", "namespace": "default"},
                          "spec": {"nodeName": "gone", "containers": [{"name": "c", "image": "x"}]}})
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(dump))
    inv = load_objects([path])
    record = dump_record(inv)
    assert record.skipped == ("default/elsewhere: bound to node gone, not in the dump",)
    report = whatif(inv, groups(), policies=["dra"])
    assert report["pending_before"] == 2
    assert report["fits_now"] == ["default/train-0"]
    assert report["policies"][0]["pods"]["bound"] == TRAIN
    assert report["policies"][0]["nodes_added"] == {"whole": 1}

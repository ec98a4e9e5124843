"""`dralab audit` and `dralab schedule`: one fixture per pending reason, exact JSON, bad input, one pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.cli import main
from dralab.core.analysis.audit import audit, schedule
from dralab.core.analysis.audit_groups import group_by_cause
from dralab.core.dra.api import parse_documents

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "audit"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def audit_json(capsys: pytest.CaptureFixture[str], fixture: str) -> dict[str, Any]:
    code, out, err = run(capsys, "audit", "-f", str(FIXTURES / fixture), "-o", "json")
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    assert result.pop("groups") == group_by_cause(result)  # the pods by cause: tests/test_audit_html.py
    return result


def pending(name: str, reason: str | None, message: str, node: str | None, missing: list[str],
            summary: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"namespace": "default", "name": name, "node": None, "reason": reason, "message": message,
                           "closest": {"node": node, "missing": missing}}
    if summary is not None:
        out["summary"] = summary
    return out


def bound(name: str, node: str) -> dict[str, Any]:
    return {"namespace": "default", "name": name, "node": node, "reason": None, "message": "",
            "closest": {"node": node, "missing": []}}


def test_topology_mismatch_six_free_split_three_three() -> None:
    topo = ("node node-a: claim default/train needs 4 devices with the same gpu.example.com/nvlinkDomain "
            "(matchAttribute); on node node-a 8 devices match and 6 are free, but at most 3 free devices share "
            "one value (0: 3, 1: 3)")
    inv = parse_documents(list(yaml.safe_load_all((FIXTURES / "topology.yaml").read_text())), "topology.yaml")
    assert audit(inv) == {
        "pods": [bound("busy", "node-a"),
                 pending("train", "topology", topo, "node-a", [topo], "0/1 nodes are available: 1 topology.")],
        "devices": {"total": 8, "allocated": 2, "free": 6, "stranded": 0},
    }


def test_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    msg = ("node node-a: request gpus of claim default/big-gpus needs 4 devices of class gpu: only 2 devices on "
           "node node-a match its selectors")
    assert audit_json(capsys, "capacity.yaml") == {
        "pods": [pending("big", "capacity", msg, "node-a", [msg], "0/1 nodes are available: 1 capacity.")],
        "devices": {"total": 2, "allocated": 0, "free": 2, "stranded": 0},
    }


def test_fragmentation_across_two_nodes_and_a_stranded_nic(capsys: pytest.CaptureFixture[str]) -> None:
    why = ("node node-a: request gpus of claim default/spread-gpus needs 3 devices of class gpu: 3 devices on node "
           "node-a match, but only 2 are free (1 in use)")
    assert audit_json(capsys, "fragmentation.yaml") == {
        "pods": [pending("spread", "fragmentation",
                         "the claims need 3 device(s): 4 matching devices are free across 2 node(s), but at most 2 "
                         "on one node", "node-a", [why], "0/2 nodes are available: 2 capacity.")],
        "devices": {"total": 7, "allocated": 2, "free": 5, "stranded": 1},
    }


def test_resources(capsys: pytest.CaptureFixture[str]) -> None:
    msg = "node node-a: Insufficient cpu"
    assert audit_json(capsys, "resources.yaml") == {
        "pods": [bound("running", "node-a"),
                 pending("web", "resources", msg, "node-a", [msg], "0/1 nodes are available: 1 resources.")],
        "devices": {"total": 0, "allocated": 0, "free": 0, "stranded": 0},
    }


def test_taint_and_a_pod_that_tolerates_it(capsys: pytest.CaptureFixture[str]) -> None:
    msg = "node node-a has untolerated taint {dedicated: gpu}"
    assert audit_json(capsys, "taint.yaml")["pods"] == [
        pending("intolerant", "taint", msg, "node-a", [msg], "0/1 nodes are available: 1 taint."),
        pending("tolerant", None, "fits on 1 node(s), e.g. node-a", "node-a", []),
    ]


def test_selector_and_required_node_affinity(capsys: pytest.CaptureFixture[str]) -> None:
    msg = "node node-a didn't match Pod's node affinity/selector"
    summary = "0/2 nodes are available: 2 selector."
    assert audit_json(capsys, "selector.yaml")["pods"] == [
        pending("by-affinity", "selector", msg, "node-a", [msg], summary),
        pending("by-selector", "selector", msg, "node-a", [msg], summary),
    ]


def test_not_ready_and_cordoned(capsys: pytest.CaptureFixture[str]) -> None:
    assert audit_json(capsys, "not-ready.yaml")["pods"] == [
        pending("waiting", "not-ready", "node node-a is not Ready", "node-a", ["node node-a is not Ready"],
                "0/2 nodes are available: 2 not-ready."),
    ]


def test_missing_template_claim_and_class_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    def missing(name: str, what: str) -> dict[str, Any]:
        return pending(name, "missing", f"{what} not found", None, [what])

    assert audit_json(capsys, "missing.yaml") == {
        "pods": [missing("no-claim", "ResourceClaim default/absent-claim"),
                 missing("no-class", "DeviceClass tpu (claim default/tpu-claim, request gpus)"),
                 missing("no-template", "ResourceClaimTemplate default/absent-template")],
        "devices": {"total": 2, "allocated": 0, "free": 2, "stranded": 2},
    }


def test_incomplete_pool_is_not_ready() -> None:
    docs = list(yaml.safe_load_all((FIXTURES / "capacity.yaml").read_text()))
    docs[2]["spec"]["pool"]["resourceSliceCount"] = 2  # one of two slices published
    docs[3]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 1
    (pod,) = audit(parse_documents(docs))["pods"]
    assert pod["reason"] == "not-ready" and pod["closest"]["node"] == "node-a"
    assert "incomplete" in pod["message"] or "published" in pod["message"], pod["message"]


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "audit", "-f", str(FIXTURES / "fragmentation.yaml"))
    assert code == 0
    assert out.splitlines() == [
        "NAMESPACE  NAME    REASON         CLOSEST  MESSAGE",
        "default    spread  fragmentation  node-a   the claims need 3 device(s): 4 matching devices are free "
        "across 2 node(s), but at most 2 on one node",
        "devices: 7 total, 2 allocated, 5 free, 1 stranded",
        "pending by cause:",  # what each reason means and what to do (core/analysis/causes.py, issues 21, 23)
        "  fragmentation: 1 pod (default/spread)",
        "    enough free matching devices in all, but not on one node; consolidate small consumers, "
        "split the workload, or pack (most-allocated)",
    ]


def test_bad_input_exits_2_with_file_and_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                   "spec": {"containers": [{"name": "c", "image": "x",
                                                            "resources": {"requests": {"cpu": "lots"}}}]}}))
    for command in ("audit", "schedule"):
        code, out, err = run(capsys, command, "-f", str(bad))
        assert code == 2 and out == ""
        assert f"{bad}: spec.containers[0].resources.requests" in err, err
    code, _, err = run(capsys, "audit", "-f", str(tmp_path / "absent.yaml"))
    assert code == 2 and "absent.yaml" in err


def test_schedule_binds_in_queue_order_and_leaves_the_rest_pending(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "schedule", "-f", str(FIXTURES / "schedule.yaml"))
    assert code == 0, err
    result = json.loads(out)
    placed = [(b["name"], b["node"], [(c["name"], [r["device"] for r in c["allocation"]["devices"]["results"]])
                                      for c in b["claims"]]) for b in result["bindings"]]
    assert placed == [
        ("p1", "node-a", [("gpus", ["gpu-0", "gpu-1"])]),  # priority 10; tie between empty nodes: by name
        ("p2", "node-b", [("gpus", ["gpu-0", "gpu-1", "gpu-2", "gpu-3"])]),  # 4 GPUs: only node-b has them
        ("p3", "node-a", [("gpus", ["gpu-2", "gpu-3"])]),  # most-allocated: node-a is half full
    ]
    why = ("node node-a: request gpus of claim default/p4-gpus needs 4 devices of class gpu: 4 devices on node "
           "node-a match, but only 0 are free (4 in use)")
    assert result["pending"] == [pending("p4", "capacity", why, "node-a", [why],
                                         "0/2 nodes are available: 2 capacity.")]


def test_schedule_yaml_and_reasons_for_unschedulable() -> None:
    inv = parse_documents(list(yaml.safe_load_all((FIXTURES / "taint.yaml").read_text())))
    result = schedule(inv)
    assert [(b["name"], b["node"], b["claims"]) for b in result["bindings"]] == [("tolerant", "node-a", [])]
    assert [(p["name"], p["reason"]) for p in result["pending"]] == [("intolerant", "taint")]


def test_schedule_yaml_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "schedule", "-f", str(FIXTURES / "resources.yaml"), "-o", "yaml")
    assert code == 0
    assert yaml.safe_load(out)["pending"][0]["reason"] == "resources"


def test_a_gated_pod_is_reported_gated_and_never_placed() -> None:
    """A Kueue pod still held by its admission gate fits the cluster, but neither kube-scheduler nor
    cluster-autoscaler acts on it until the gate goes: `audit` and `schedule` say `gated`, not "fits"."""
    docs = list(yaml.safe_load_all((FIXTURES / "resources.yaml").read_text()))
    held = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "held", "namespace": "default"},
            "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}
    inv = parse_documents([*docs, held], "gated.yaml")
    message = "waiting for scheduling gates: ['kueue.x-k8s.io/admission']"
    verdict = next(p for p in audit(inv)["pods"] if p["name"] == "held")
    assert verdict == pending("held", "gated", message, None, ["kueue.x-k8s.io/admission"])
    result = schedule(inv)
    assert "held" not in [b.get("name") or b.get("pod") for b in result["bindings"]]
    assert [p["reason"] for p in result["pending"] if p["name"] == "held"] == ["gated"]

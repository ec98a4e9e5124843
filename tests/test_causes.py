"""The pending causes of issue 21 (preemption, spread, affinity, binding-conditions, device-taint): the summary
and `dralab audit` say what each means and what to do, and the audit finds them in a dump's own evidence
(core/analysis/causes.py, core/analysis/audit_causes.py)."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import arrival, group, pod, scenario_doc, simulated

from dralab.cli import main
from dralab.core.analysis.audit import audit
from dralab.core.analysis.causes import CAUSES, NEW_IN_ISSUE_21, explain_lines
from dralab.core.analysis.summary import render_text, summarize
from dralab.core.dra.api import parse_documents
from dralab.core.state.cluster import Condition

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "audit"


def docs(fixture: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((FIXTURES / fixture).read_text()))


def verdict(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in report["pods"] if p["name"] == name)


def test_every_new_cause_has_an_explanation_and_docs_name_it() -> None:
    audit_doc = (ROOT / "docs" / "audit.md").read_text()
    cli_doc = (ROOT / "docs" / "cli.md").read_text()
    for cause in NEW_IN_ISSUE_21:
        assert CAUSES[cause].meaning and CAUSES[cause].remedy
        assert f"| `{cause}` |" in audit_doc, f"docs/audit.md's reasons table lacks {cause}"
        assert f"`{cause}`" in cli_doc, f"docs/cli.md's pending_by_reason lacks {cause}"
    assert explain_lines(["spread", "spread", "unknown-cause"]) == [
        f"  spread: {CAUSES['spread'].meaning}; {CAUSES['spread'].remedy}"]


@pytest.mark.parametrize("cause", NEW_IN_ISSUE_21)
def test_a_state_with_a_new_cause_goes_through_the_summary(cause: str) -> None:
    """A pod pending with the cause (as the feature helpers' plugins write it on its condition): the summary
    counts it and its text says what the cause means and what to do."""
    doc = scenario_doc([group("cpu", max=1)], nodes={"cpu": 1},
                       workload=[arrival(0, pod("big", cpu="100"))], duration="1m")
    result = simulated(doc, 0)
    (stuck,) = result.state.pending_pods()
    assert stuck.condition is not None
    stuck.condition = dataclasses.replace(stuck.condition, cause=cause, message="test")
    summary = summarize(result.state, [])
    assert summary["pods"]["pending_by_reason"] == {cause: 1}
    text = render_text(summary)
    assert f"1 pending ({cause}: 1)" in text
    assert f"           {cause}: {CAUSES[cause].meaning}; {CAUSES[cause].remedy}" in text.splitlines()


def test_an_unknown_cause_is_counted_without_an_explanation() -> None:
    doc = scenario_doc([group("cpu", max=1)], nodes={"cpu": 1},
                       workload=[arrival(0, pod("big", cpu="100"))], duration="1m")
    result = simulated(doc, 0)
    (stuck,) = result.state.pending_pods()
    stuck.condition = Condition("False", "Unschedulable", "x", "some-future-cause", 0)
    text = render_text(summarize(result.state, []))
    assert "1 pending (some-future-cause: 1)" in text
    assert not [line for line in text.splitlines() if line.strip().startswith("some-future-cause:")]


def test_a_nominated_pod_without_room_waits_for_preemption() -> None:
    dump = docs("resources.yaml")
    web = next(d for d in dump if d["metadata"]["name"] == "web")
    web["status"] = {"nominatedNodeName": "node-a"}
    v = verdict(audit(parse_documents(dump, "dump.yaml")), "web")
    assert v["reason"] == "preemption"
    assert v["message"] == ("nominated to node node-a: it preempted pods there and waits for them to terminate "
                            "(now: node node-a: Insufficient cpu)")


def test_a_nominated_pod_that_fits_now_keeps_fitting() -> None:
    dump = docs("taint.yaml")
    tolerant = next(d for d in dump if d["metadata"]["name"] == "tolerant")
    tolerant["status"] = {"nominatedNodeName": "node-a"}
    assert verdict(audit(parse_documents(dump, "dump.yaml")), "tolerant")["reason"] is None


FIT_ERROR = ("0/3 nodes are available: 2 node(s) didn't match pod topology spread constraints, 1 node(s) didn't "
             "match pod anti-affinity rules. preemption: 0/3 nodes are available: 3 No preemption victims found "
             "for incoming pod.")


@pytest.mark.parametrize(("message", "cause"), [
    (FIT_ERROR, "spread"),
    ("0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label), "
     "2 node(s) didn't satisfy existing pods anti-affinity rules.", "affinity"),
    ("0/1 nodes are available: 1 node(s) didn't match pod affinity rules.", "affinity"),
])
def test_a_pod_kube_scheduler_found_no_room_for_by_spread_or_affinity(message: str, cause: str) -> None:
    """The audit does not run PodTopologySpread or InterPodAffinity: a pod that fits by its filters while the
    dump's PodScheduled condition names them gets that cause, quoting kube-scheduler (most nodes wins)."""
    dump = docs("taint.yaml")
    tolerant = next(d for d in dump if d["metadata"]["name"] == "tolerant")
    tolerant["status"] = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                          "message": message}]}
    v = verdict(audit(parse_documents(dump, "dump.yaml")), "tolerant")
    assert v["reason"] == cause
    assert v["message"].startswith(f"kube-scheduler: {message} (the audit does not check ")
    assert v["message"].endswith("by what it checks the pod fits on 1 node(s), e.g. node-a)")


def test_a_fit_error_the_audit_already_explains_is_left_alone() -> None:
    dump = docs("taint.yaml")
    intolerant = next(d for d in dump if d["metadata"]["name"] == "intolerant")
    intolerant["status"] = {"conditions": [{"type": "PodScheduled", "status": "False", "message": FIT_ERROR}]}
    assert verdict(audit(parse_documents(dump, "dump.yaml")), "intolerant")["reason"] == "taint"


def _binding_dump(conditions: list[dict[str, str]]) -> list[dict[str, Any]]:
    """A pod whose claim is allocated on a device with binding conditions (KEP-5007), in PreBind."""
    dump = [d for d in docs("capacity.yaml") if d["kind"] in ("Node", "DeviceClass", "ResourceSlice")]
    dump[2]["spec"]["devices"][0].update({"bindsToNode": True, "bindingConditions": ["Attached"],
                                          "bindingFailureConditions": ["AttachFailed"]})
    result = {"request": "gpus", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0",
              "bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"]}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "train-gpu", "namespace": "default", "uid": "c1"},
             "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu"}}]}},
             "status": {"allocation": {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [
                 {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}},
                 "reservedFor": [{"resource": "pods", "name": "train", "uid": "p1"}],
                 "devices": [{"driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0",
                              "conditions": [dict(c, lastTransitionTime="2026-01-01T00:00:00Z", reason="R",
                                                  message="m") for c in conditions]}]}}
    train = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "default", "uid": "p1"},
             "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
                      "resourceClaims": [{"name": "gpu", "resourceClaimName": "train-gpu"}]}}
    return [*dump, claim, train]


def test_a_pod_waiting_for_binding_conditions() -> None:
    v = verdict(audit(parse_documents(_binding_dump([{"type": "Attached", "status": "False"}]), "d.yaml")), "train")
    assert v["reason"] == "binding-conditions" and "gpu-0" in v["message"] and "Attached" in v["message"]


def test_a_binding_failure_condition_says_it_will_be_retried() -> None:
    dump = _binding_dump([{"type": "Attached", "status": "False"}, {"type": "AttachFailed", "status": "True"}])
    v = verdict(audit(parse_documents(dump, "d.yaml")), "train")
    assert (v["reason"], "AttachFailed" in v["message"]) == ("binding-conditions", True)


def test_binding_conditions_all_true_leave_the_verdict_alone() -> None:
    v = verdict(audit(parse_documents(_binding_dump([{"type": "Attached", "status": "True"}]), "d.yaml")), "train")
    assert v["reason"] is None


def test_untolerated_device_taints_are_device_taint_not_node_taint() -> None:
    dump = docs("capacity.yaml")
    dump[2]["spec"]["devices"] = [dict(d, taints=[{"key": "maintenance", "effect": "NoSchedule"}])
                                  for d in dump[2]["spec"]["devices"]]
    template = next(d for d in dump if d["kind"] == "ResourceClaimTemplate")
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 1
    v = verdict(audit(parse_documents(dump, "d.yaml")), "big")
    assert v["reason"] == "device-taint" and "taints the request does not tolerate" in v["message"]


def test_the_audit_table_explains_the_reasons_present(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = docs("resources.yaml")
    next(d for d in dump if d["metadata"]["name"] == "web")["status"] = {"nominatedNodeName": "node-a"}
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump_all(copy.deepcopy(dump)))
    assert main(["audit", "-f", str(path)]) == 0
    out = capsys.readouterr().out
    assert "pending by cause:\n  preemption: 1 pod (default/web)\n    " + explain_lines(["preemption"], indent="")[0][
        len("preemption: "):] in out


def test_the_html_report_explains_the_pending_reasons_it_plots() -> None:
    """`dralab report`: under the pending plot, one note per reason seen in the runs (a new cause included)."""
    from dralab.core.log.events import decode_record
    from dralab.core.run.config import policies, run_config
    from dralab.inputs import load_scenario_input
    from dralab.replay.logs.logfile import make_header
    from dralab.replay.report.report_data import extract
    from dralab.replay.report.report_html import render
    from dralab.replay.simulation.sim import Simulator

    scenario = load_scenario_input(str(ROOT / "scenarios" / "topology-mismatch.yaml"), "count")
    seed = scenario.seed if scenario.seed is not None else 0
    entries = Simulator(scenario, seed).run().entries
    header = make_header(scenario=scenario.name, seed=seed, policy=policies(run_config(scenario)), mode="sim")
    run = extract("x.dralog", header, [(o, decode_record(p, o)) for o, p in entries])
    run.pending.columns["spread"] = [1.0] * len(run.pending.t)
    page = render([run], [("pending", "Pending pods", "<svg></svg>")])
    for cause in ("topology", "spread"):
        assert explain_lines([cause], indent="")[0].replace("'", "&#x27;") in page
    assert explain_lines(["gated"], indent="")[0] not in page  # not seen: not explained


def test_schedule_leaves_pending_what_the_dump_says_is_blocked() -> None:
    """`dralab schedule` applies the same evidence: a pod kube-scheduler found blocked by spread is not bound."""
    from dralab.core.analysis.audit import schedule

    dump = docs("taint.yaml")
    tolerant = next(d for d in dump if d["metadata"]["name"] == "tolerant")
    assert [b["name"] for b in schedule(parse_documents(copy.deepcopy(dump), "d.yaml"))["bindings"]] == ["tolerant"]
    tolerant["status"] = {"conditions": [{"type": "PodScheduled", "status": "False", "message": FIT_ERROR}]}
    result = schedule(parse_documents(dump, "d.yaml"))
    assert result["bindings"] == []
    assert [(p["name"], p["reason"]) for p in result["pending"]] == [("intolerant", "taint"), ("tolerant", "spread")]

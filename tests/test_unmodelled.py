"""No silent ignores (issue 21): a field that changes scheduling and that dralab does not model is refused in a
scenario (exit 2, naming the field) and reported, not refused, in a dump `dralab audit` reads; the table in
core/kube/unmodelled.py matches the closed field lists of the DRA and gang kinds and the docs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.cli import main
from dralab.core.analysis.audit import audit
from dralab.core.dra import claims
from dralab.core.dra.api import parse_documents
from dralab.core.kube import podgroup_convert
from dralab.core.kube.fields import FieldError
from dralab.core.kube.manifests import check_node, check_pod
from dralab.core.kube.unmodelled import FIELDS, MODELLED, NO_EFFECT, REFUSED, render_markdown, unmodelled_uses
from dralab.core.scenario.load import ScenarioError, parse_scenario

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "audit"

POD: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                       "spec": {"containers": [{"name": "c", "image": "busybox",
                                                "resources": {"requests": {"cpu": "1"}}}]}}


def pod(**spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(POD)
    out["spec"].update(spec)
    return out


def scenario(p: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
            "spec": {"duration": "1m", "nodes": [], "workload": [{"at": "0s", "pod": p}],
                     "nodeGroups": [{"name": "g", "max": 1, "template": {"status": {"allocatable": {
                         "cpu": "8", "memory": "8Gi", "pods": "110"}}}}]}}


REFUSED_CASES = [
    (pod(volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
     "spec.volumes[0].persistentVolumeClaim", "VolumeBinding"),
    (pod(volumes=[{"name": "cfg", "configMap": {"name": "x"}},
                  {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]),
     "spec.volumes[1].ephemeral", "PersistentVolumeClaim"),
    (pod(volumes=[{"name": "inline", "csi": {"driver": "x.example.com"}}]), "spec.volumes[0].csi", "NodeVolumeLimits"),
    (pod(containers=[{"name": "c", "ports": [{"containerPort": 80}, {"containerPort": 443, "hostPort": 443}]}]),
     "spec.containers[0].ports[1].hostPort", "NodePorts"),
    (pod(hostNetwork=True, containers=[{"name": "c", "ports": [{"containerPort": 80}]}]), "spec.hostNetwork",
     "host port"),
    (pod(runtimeClassName="nvidia"), "spec.runtimeClassName", "overhead"),
    (pod(os={"name": "windows"}), "spec.os", "operating system"),
    (pod(activeDeadlineSeconds=60), "spec.activeDeadlineSeconds", "runFor"),
]


@pytest.mark.parametrize(("manifest", "path", "word"), REFUSED_CASES, ids=[c[1] for c in REFUSED_CASES])
def test_a_scenario_pod_with_an_unmodelled_field_is_refused_naming_it(manifest: dict[str, Any], path: str,
                                                                     word: str) -> None:
    with pytest.raises(FieldError) as e:
        check_pod(manifest)
    assert e.value.path == path and "not modelled by dralab" in e.value.message and word in e.value.message
    with pytest.raises(ScenarioError) as s:
        parse_scenario(scenario(manifest), "s.yaml")
    assert f"spec.workload[0].pod.{path}" in str(s.value) and "not modelled by dralab" in str(s.value)


@pytest.mark.parametrize("manifest", [
    pod(volumes=[{"name": "cfg", "configMap": {"name": "x"}}, {"name": "tmp", "emptyDir": {}}]),
    pod(hostNetwork=True),  # no ports: no host port taken
    pod(os={"name": "linux"}),  # dralab's emulated kubelets are linux: admitted, as upstream would
    pod(containers=[{"name": "c", "ports": [{"containerPort": 80, "hostPort": 0}]}]),  # 0: no host port
    pod(volumes=[], hostNetwork=False, readinessGates=[{"conditionType": "x"}], restartPolicy="Never"),
    pod(affinity={"podAntiAffinity": {}}, topologySpreadConstraints=[], priorityClassName="high",
        preemptionPolicy="Never", terminationGracePeriodSeconds=5),  # issue 21: modelled by other helpers
])
def test_fields_without_scheduling_effect_or_modelled_are_accepted(manifest: dict[str, Any]) -> None:
    check_pod(manifest)


def test_the_cli_exits_2_on_an_unmodelled_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario(REFUSED_CASES[0][0])))
    assert main(["sim", str(path)]) == 2
    err = capsys.readouterr().err
    assert "spec.workload[0].pod.spec.volumes[0].persistentVolumeClaim" in err and "not modelled" in err


def test_a_dump_pod_with_an_unmodelled_field_is_read_and_reported_by_audit(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The same field in a dump: a real cluster's objects are read (no exit 2), and the audit says what it could
    not check, in JSON and in the table."""
    docs = list(yaml.safe_load_all((FIXTURES / "resources.yaml").read_text()))
    pods = [d for d in docs if d["kind"] == "Pod"]
    for d in pods:
        d["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    pods[0]["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    report = audit(parse_documents(docs, "dump.yaml"))
    assert [(r["field"], r["count"]) for r in report["not_modelled"]] == [
        ("spec.containers[].ports[].hostPort", 1), ("spec.volumes[].persistentVolumeClaim", len(pods))]
    assert report["not_modelled"][1]["line"] == (
        f"not modelled: {len(pods)} pods use spec.volumes[].persistentVolumeClaim; their volume constraints "
        "(binding, zone, conflicts, attach limits) were not checked")
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(docs))
    assert main(["audit", "-f", str(dump)]) == 0
    out = capsys.readouterr().out
    assert "not modelled: 1 pod uses spec.containers[].ports[].hostPort; their host ports were not checked" in out
    assert main(["audit", "-f", str(dump), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["not_modelled"] == report["not_modelled"]


def test_a_clean_dump_has_no_not_modelled_key() -> None:
    docs = list(yaml.safe_load_all((FIXTURES / "resources.yaml").read_text()))
    assert "not_modelled" not in audit(parse_documents(docs, "dump.yaml"))
    assert unmodelled_uses("Pod", [d for d in docs if d["kind"] == "Pod"]) == []


def test_a_node_template_goes_through_the_table() -> None:
    """No Node field is refused today; a Node template with the fields the table calls modelled or without effect
    loads (the call in _check_node is the hook for one that would be)."""
    node = {"metadata": {"labels": {"zone": "a"}}, "spec": {"podCIDR": "10.0.0.0/24", "providerID": "x"},
            "status": {"allocatable": {"pods": "110"}, "images": [{"names": ["busybox"], "sizeBytes": 1}],
                       "conditions": [{"type": "Ready", "status": "True"}], "volumesAttached": []}}
    check_node(node)
    assert not [f for f in FIELDS if f.kind == "Node" and f.status == REFUSED]


def _spec_fields(kind: str, prefix: str) -> set[str]:
    return {f.path[len(prefix):] for f in FIELDS if f.kind == kind and f.path.startswith(prefix)
            and "." not in f.path[len(prefix):]}


def test_the_table_covers_every_field_the_closed_dra_and_gang_lists_accept() -> None:
    """The DRA kinds and gangs are read with closed field lists: each accepted field has its row (and no row names
    a field those lists refuse), so the docs' table says what each one does."""
    assert _spec_fields("DeviceClass", "spec.") == {"selectors", "config", "extendedResourceName"}
    for base, accepted in (("spec.devices.requests[].exactly.", set(claims._EXACT)),
                           ("spec.devices.requests[].firstAvailable[].", set(claims._SUB))):
        assert _spec_fields("ResourceClaim", base) == accepted
    assert _spec_fields("ResourceClaim", "spec.devices.") == {"constraints", "config"}
    assert _spec_fields("Workload", "spec.") == {"controllerRef"}
    assert _spec_fields("Workload", "spec.podGroups[].") == {"name", "policy"}
    assert _spec_fields("PodGroup", "spec.") == {"minMember", "minResources", "scheduleTimeoutSeconds"}
    assert _spec_fields("PodGroup (1.36+)", "spec.") == set(podgroup_convert._POD_GROUP) | set(
        podgroup_convert._V1ALPHA2_POD_GROUP)
    assert _spec_fields("CompositePodGroup (1.37)", "spec.") == {"parentCompositePodGroupName", "workloadRef",
                                                                 "schedulingPolicy", "priorityClassName", "priority"}
    assert _spec_fields("Workload (1.36+)", "spec.") == {"controllerRef", "podGroupTemplates",
                                                         "compositePodGroupTemplates"}


def test_issue_21_fields_are_modelled_not_refused() -> None:
    issue21 = {(f.kind, f.path) for f in FIELDS if "(issue 21)" in f.why}
    assert {("Pod", "spec.topologySpreadConstraints"), ("Pod", "spec.affinity.podAffinity"),
            ("Pod", "spec.affinity.podAntiAffinity"), ("Pod", "status.nominatedNodeName"),
            ("Pod", "spec.priorityClassName"), ("Pod", "spec.preemptionPolicy"),
            ("Pod", "spec.terminationGracePeriodSeconds"), ("Node", "status.images"),
            ("DeviceClass", "spec.extendedResourceName")} <= issue21
    assert all(f.status == MODELLED for f in FIELDS if "(issue 21)" in f.why)
    assert {f.status for f in FIELDS} == {MODELLED, NO_EFFECT, REFUSED}
    assert all(f.unchecked for f in FIELDS if f.status == REFUSED)
    assert len({(f.kind, f.path) for f in FIELDS}) == len(FIELDS)


def test_the_docs_list_what_is_modelled_as_the_table_says() -> None:
    doc = (ROOT / "docs" / "scenario-format.md").read_text()
    start, end = "<!-- generated: core/kube/unmodelled.py render_markdown -->\n", "<!-- end generated -->"
    assert start in doc and end in doc, "docs/scenario-format.md lost its 'What dralab models' markers"
    assert doc.split(start, 1)[1].split(end, 1)[0] == render_markdown(), \
        "docs/scenario-format.md is stale: paste render_markdown() between the markers"


def test_whatif_simulates_a_dump_with_unmodelled_fields_and_says_so(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`dralab whatif` reads a dump too: its pods' unmodelled fields are simulated as if absent, and said."""
    whatif_dir = ROOT / "tests" / "fixtures" / "whatif"
    dump = yaml.safe_load((whatif_dir / "topology-dump.yaml").read_text())  # a kind: List
    for d in dump["items"]:
        if d.get("kind") == "Pod":
            d["spec"]["runtimeClassName"] = "nvidia"
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(dump))
    args = ["whatif", "-f", str(path), "--node-groups", str(whatif_dir / "groups.yaml"), "--policy", "dra"]
    assert main([*args, "-o", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["not_modelled"]
    assert (row["field"], row["count"]) == ("spec.runtimeClassName", sum(d["kind"] == "Pod" for d in dump["items"]))
    assert main(args) == 0
    assert row["line"] in capsys.readouterr().out


def test_every_way_a_scenario_makes_pods_refuses_the_field() -> None:
    """A Job's pod template and a ProvisioningRequest's PodTemplate are pods dralab will run: the same rule."""
    volume = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    job_doc = scenario(POD)
    job_doc["spec"]["workload"] = [{"at": "0s", "job": {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
        "spec": {"parallelism": 1, "template": {"spec": {**copy.deepcopy(POD["spec"]), "restartPolicy": "Never",
                                                         "volumes": volume}}}}}]
    with pytest.raises(ScenarioError, match=r"spec\.volumes\[0\]\.persistentVolumeClaim.*not modelled by dralab"):
        parse_scenario(job_doc, "s.yaml")
    template_doc = scenario(POD)
    template_doc["spec"]["objects"] = [{"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                                        "template": {"spec": {**copy.deepcopy(POD["spec"]), "volumes": volume}}}]
    with pytest.raises(ScenarioError, match=r"persistentVolumeClaim.*not modelled by dralab"):
        parse_scenario(template_doc, "s.yaml")

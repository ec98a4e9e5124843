"""Task "job": a batch/v1 Job arrives in a scenario and the Job controller reactor creates its pods, and with the
gate WorkloadWithJob its Workload and PodGroup first (KEP-5547 in 1.36, KEP-6089 in 1.37), through the simulator
and verify; bad Jobs are refused with their field path (exit status 2)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from dralab.cli import main
from dralab.core.kube.jobs import _safe_hash
from dralab.core.kube.yaml_files import load_yaml_file
from dralab.core.log.events import JobCreated, PodCreated, PodGroupCreated, WorkloadCreated, decode_record
from dralab.core.run.config import build_reactors, run_config
from dralab.core.scenario.load import ScenarioError, parse_scenario
from tests.builders import simulated

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "job-gang.yaml"
V1ALPHA3 = "scheduling.k8s.io/v1alpha3"


def doc() -> dict[str, Any]:
    loaded = load_yaml_file(str(SCENARIO), max_bytes=1 << 20)
    assert isinstance(loaded, dict)
    return copy.deepcopy(loaded)


def job_of(d: dict[str, Any]) -> dict[str, Any]:
    job: dict[str, Any] = d["spec"]["workload"][0]["job"]
    return job


def on_137(d: dict[str, Any], *, gang: bool | None = True) -> dict[str, Any]:
    """The same Job in 1.37 (GenericWorkload and WorkloadWithJob on, v1alpha3 served): `gang` True asks for a
    gang with spec.scheduling, False for basic, None leaves spec.scheduling out."""
    d["spec"]["kubernetes"] = {"version": "1.37", "featureGates": {"GenericWorkload": True, "WorkloadWithJob": True},
                               "runtimeConfig": {V1ALPHA3: True}}
    if gang is not None:
        job_of(d)["spec"]["scheduling"] = {"policy": {"gang": {}} if gang else {"basic": {}}}
    return d


def records(result: Any) -> list[Any]:
    return [decode_record(payload, offset) for offset, payload in result.entries]


def controller_record(result: Any) -> Any:
    (rec,) = [r for r in records(result) if r.source == "jobs"]
    return rec


def bound(result: Any) -> int:
    return sum(1 for p in result.state.pods.values() if p.node is not None)


# --- 1.36: the inferred gang ----------------------------------------------------------------------------------


def test_gate_on_creates_workload_then_podgroup_then_pods_and_nothing_binds() -> None:
    result = simulated(doc(), 1)
    rec = controller_record(result)
    kinds = [type(e).__name__ for e in rec.events]
    assert kinds == ["WorkloadCreated", "PodGroupCreated"] + ["PodCreated"] * 8  # KEP-5547's creation order
    workload, group = rec.events[0].manifest, rec.events[1].manifest
    wl_name, pg_name = workload["metadata"]["name"], group["metadata"]["name"]
    assert re.fullmatch(r"train-[bcdfghjklmnpqrstvwxz2456789]+", wl_name)
    assert workload["spec"]["controllerRef"] == {"apiGroup": "batch", "kind": "Job", "name": "train"}
    (template,) = workload["spec"]["podGroupTemplates"]
    assert template["name"] == "train-pgt-0" and template["schedulingPolicy"] == {"gang": {"minCount": 8}}
    assert pg_name.startswith(f"{wl_name}-train-pgt-0-")
    assert group["spec"]["workloadRef"] == {"workloadName": wl_name, "templateName": "train-pgt-0"}
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 8}}
    assert [r["kind"] for r in group["metadata"]["ownerReferences"]] == ["Job", "Workload"]
    pods = [e.pod for e in rec.events[2:]]
    for i, pod in enumerate(pods):
        assert re.fullmatch(rf"train-{i}-[bcdfghjklmnpqrstvwxz2456789]{{5}}", pod["metadata"]["name"])
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": pg_name}
        assert pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == str(i)
        owner = pod["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "Job" and owner["name"] == "train" and owner["controller"] is True
    assert all(e.run_for_ms == 3_600_000 for e in rec.events[2:])
    assert bound(result) == 0  # 4 of 8 fit; minCount 8: none binds
    job = result.state.jobs["default/train"]
    assert job.pods == [f"pod/default/{p['metadata']['name']}" for p in pods]


def test_gate_off_creates_only_the_pods_and_half_of_them_bind() -> None:
    d = doc()
    d["spec"]["kubernetes"]["featureGates"]["WorkloadWithJob"] = False
    result = simulated(d, 1)
    rec = controller_record(result)
    assert all(isinstance(e, PodCreated) for e in rec.events) and len(rec.events) == 8
    assert all("schedulingGroup" not in e.pod["spec"] for e in rec.events)
    assert not any(isinstance(e, WorkloadCreated | PodGroupCreated) for r in records(result) for e in r.events)
    assert bound(result) == 4  # pod by pod: the four that fit hold the node's 8 GPUs


def test_cli_sim_and_replay_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "job.dralog"
    assert main(["sim", str(SCENARIO), "--log", str(log), "-o", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pods"]["scheduled"] == 0
    assert main(["replay", "--verify", str(log)]) == 0
    assert "no divergence" in capsys.readouterr().out
    assert main(["sim", str(SCENARIO), "--feature-gates", "WorkloadWithJob=false", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["pods"]["scheduled"] == 4


def test_a_job_that_does_not_qualify_in_1_36_gets_no_objects() -> None:
    d = doc()
    job_of(d)["spec"]["completionMode"] = "NonIndexed"  # 1.36 gangs only Indexed Jobs
    result = simulated(d, 1)
    assert all(isinstance(e, PodCreated) for e in controller_record(result).events)
    assert bound(result) == 4
    assert all("job-completion-index" not in str(e.pod["metadata"]) for e in controller_record(result).events)


def test_a_template_naming_its_own_group_gets_no_objects() -> None:
    d = doc()
    d["spec"]["objects"] = [{"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                             "metadata": {"name": "mine"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}]
    job_of(d)["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": "mine"}
    result = simulated(d, 1)
    events = controller_record(result).events
    assert all(isinstance(e, PodCreated) and e.pod["spec"]["schedulingGroup"] == {"podGroupName": "mine"}
               for e in events)
    assert bound(result) == 4  # the user's gang of minCount 2: every pair that fits binds


# --- 1.37: spec.scheduling (KEP-6089) ----------------------------------------------------------------------------


def test_1_37_gang_asked_for_in_spec_scheduling() -> None:
    d = on_137(doc())
    job_of(d)["spec"]["scheduling"]["disruptionMode"] = {"all": {}}
    result = simulated(d, 1)
    workload, group = controller_record(result).events[:2]
    assert group.manifest["spec"]["schedulingPolicy"] == {"gang": {"minCount": 8}}  # defaulted to parallelism
    assert group.manifest["spec"]["disruptionMode"] == {"all": {}}  # copied
    assert workload.manifest["spec"]["podGroupTemplates"][0]["disruptionMode"] == {"all": {}}
    assert bound(result) == 0


def test_1_37_explicit_min_count_lets_a_smaller_gang_bind() -> None:
    d = on_137(doc())
    job_of(d)["spec"]["scheduling"]["policy"] = {"gang": {"minCount": 4}}
    result = simulated(d, 1)
    assert controller_record(result).events[1].manifest["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert bound(result) == 4


@pytest.mark.parametrize("gang", [False, None])
def test_1_37_without_gang_gets_a_basic_podgroup_and_binds_pod_by_pod(gang: bool | None) -> None:
    result = simulated(on_137(doc(), gang=gang), 1)
    events = controller_record(result).events
    assert isinstance(events[1], PodGroupCreated)
    assert events[1].manifest["spec"]["schedulingPolicy"] == {"basic": {}}
    assert bound(result) == 4


def test_names_are_stable_and_the_hash_is_fnv32a_safe_encoded() -> None:
    # fnv-32a("") = 2166136261, fnv-32a("a") = 0xe40c292c = 3826002220; digits mapped by rand.SafeEncodeString
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    assert _safe_hash("") == "".join(alphabet[ord(c) % 27] for c in "2166136261")
    assert _safe_hash("a") == "".join(alphabet[ord(c) % 27] for c in "3826002220")
    first = controller_record(simulated(doc(), 1)).events[1].manifest["metadata"]["name"]
    again = controller_record(simulated(doc(), 2)).events[1].manifest["metadata"]["name"]
    assert first == again


# --- the run config: only runs with Jobs have the reactor ----------------------------------------------------------


def test_the_job_controller_is_registered_only_with_jobs() -> None:
    with_job = run_config(parse_scenario(doc(), "x.yaml"))
    assert "jobs" in with_job and "jobs" in [r.name for r in build_reactors(with_job)]
    d = doc()
    d["spec"]["workload"] = [{"at": "0s", "pod": {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "i"}]}}}]
    plain = run_config(parse_scenario(d, "x.yaml"))
    assert "jobs" not in plain and "jobs" not in [r.name for r in build_reactors(plain)]


def test_the_job_arrives_as_one_jobcreated_record() -> None:
    from dralab.core.run.inputs import arrival_records

    (rec,) = arrival_records(parse_scenario(doc(), "x.yaml"))
    (event,) = rec.events
    assert isinstance(event, JobCreated) and event.key == "default/train" and event.run_for_ms == 3_600_000
    assert event.manifest["metadata"]["uid"]  # a stable uid filled in


# --- bad input: exit 2, the field's path ---------------------------------------------------------------------------


def _refused(d: dict[str, Any]) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(d, "x.yaml")
    return info.value


JOB = "spec.workload[0].job"


@pytest.mark.parametrize(("edit", "path", "words"), [
    (lambda d: on_137(d)["spec"]["kubernetes"]["featureGates"].pop("WorkloadWithJob"),
     f"{JOB}.spec.scheduling", "WorkloadWithJob"),
    (lambda d: job_of(d)["spec"].__setitem__("scheduling", {"policy": {"gang": {}}}), f"{JOB}.spec.scheduling",
     "1.36"),
    (lambda d: on_137(d) and job_of(d)["spec"]["scheduling"].__setitem__("policy", {"gang": {"minCount": 9}}),
     f"{JOB}.spec.scheduling.policy.gang.minCount", "<= 8"),
    (lambda d: on_137(d) and job_of(d)["spec"]["scheduling"].__setitem__("policy", {"gang": {}, "basic": {}}),
     f"{JOB}.spec.scheduling.policy", "one"),
    (lambda d: on_137(d) and job_of(d)["spec"]["scheduling"].__setitem__(
        "constraints", {"topology": [{"level": "topology.kubernetes.io/zone"}]}),
     f"{JOB}.spec.scheduling.constraints.topology[0].level", "key"),
    (lambda d: on_137(d) and job_of(d)["spec"]["scheduling"].__setitem__(
        "constraints", {"topology": [{"key": "topology.kubernetes.io/zone"}]}),
     f"{JOB}.spec.scheduling.constraints", "TopologyAwareWorkloadScheduling"),
    (lambda d: on_137(d) and d["spec"]["kubernetes"].pop("runtimeConfig"), f"{JOB}.apiVersion", V1ALPHA3),
    (lambda d: d["spec"]["kubernetes"]["featureGates"].pop("GenericWorkload"), f"{JOB}.apiVersion",
     "GenericWorkload"),
    (lambda d: job_of(d)["spec"].__setitem__("backoffLimit", 2), f"{JOB}.spec.backoffLimit", "not modelled"),
    (lambda d: job_of(d)["spec"].__setitem__("completions", 16), f"{JOB}.spec.completions", "parallelism"),
    (lambda d: job_of(d)["spec"].pop("completions"), f"{JOB}.spec.completions", "Indexed"),
    (lambda d: job_of(d)["spec"]["template"]["spec"].pop("restartPolicy"),
     f"{JOB}.spec.template.spec.restartPolicy", "Never"),
    (lambda d: job_of(d)["spec"]["template"]["spec"]["containers"][0].pop("name"),
     f"{JOB}.spec.template.spec.containers[0].name", "missing"),
    (lambda d: job_of(d)["metadata"].__setitem__("ownerReferences", [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "u", "controller": True}]),
     f"{JOB}.metadata.ownerReferences", "standalone"),
    (lambda d: d["spec"]["workload"][0].__setitem__("count", 2), "spec.workload[0].count", "parallelism"),
    (lambda d: d["spec"]["workload"][0].__setitem__("pod", {}), "spec.workload[0].job", "not both"),
    (lambda d: d["spec"]["workload"].append(copy.deepcopy(d["spec"]["workload"][0])),
     "spec.workload[1].job.metadata.name", "unique"),
])
def test_bad_jobs_are_refused_with_their_path(edit: Any, path: str, words: str) -> None:
    d = doc()
    edit(d)
    error = _refused(d)
    assert error.path == path, str(error)
    assert words in error.message, str(error)


def test_the_default_backoff_limit_is_accepted() -> None:
    d = doc()
    job_of(d)["spec"]["backoffLimit"] = 6
    assert parse_scenario(d, "x.yaml").workload[0].job is not None


def test_cli_exit_status_2_names_the_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = SCENARIO.read_text().replace("completionMode: Indexed", "completionMode: Indexed\n        suspend: true")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert main(["sim", str(bad)]) == 2
    assert f"{JOB}.spec.suspend" in capsys.readouterr().err

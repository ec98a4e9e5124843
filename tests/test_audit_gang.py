"""Gangs (KEP-4671 Workloads, Kubernetes 1.35) in `dralab audit` and `dralab schedule`: one fixture per rule,
exact JSON through the CLI and the functions, bad Workload manifests, and schedule's all-or-nothing placement
(with the snapshot's rollback) on seeded random dumps."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.cli import main
from dralab.core.analysis.audit import audit, queue_order, schedule
from dralab.core.analysis.audit_snapshot import Snapshot, is_pending
from dralab.core.dra.api import dump_objects, parse_documents

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "audit"
GANG = "default/job-1/worker"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def cli(capsys: pytest.CaptureFixture[str], command: str, fixture: str) -> dict[str, Any]:
    code, out, err = run(capsys, command, "-f", str(FIXTURES / fixture), "-o", "json")
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def load(fixture: str) -> list[Any]:
    return list(yaml.safe_load_all((FIXTURES / fixture).read_text()))


def pod(name: str, reason: str | None, message: str, node: str | None, missing: list[str],
        bound_to: str | None = None) -> dict[str, Any]:
    return {"namespace": "default", "name": name, "node": bound_to, "reason": reason, "message": message,
            "closest": {"node": node, "missing": missing}}


def fits(name: str, n: int = 2) -> dict[str, Any]:
    return pod(name, None, f"fits on {n} node(s), e.g. node-a", "node-a", [])


def waiting(name: str, have: int, need: int, gang: str = GANG) -> dict[str, Any]:
    message = (f"waiting for minCount pods from a gang to appear in scheduling queue: {have} of minCount {need} "
               f"pods of gang {gang} exist")
    return pod(name, "gang", message, None, [f"{need - have} more pod(s) of gang {gang}"])


def no_room(name: str, node: str) -> dict[str, Any]:
    return pod(name, "gang", f"room for 2 of the 3 pods gang {GANG} needs (minCount 3, 0 bound)", node,
               [f"gang {GANG}: 2 of 3 pods fit at once"])


def test_inventory_reads_workloads_and_dumps_them_back() -> None:
    inv = parse_documents(load("gang-waiting.yaml"), "gang-waiting.yaml")
    assert sorted(inv.workloads) == ["default/job-1", "default/job-2"]
    assert inv.other == []
    dumped = dump_objects(inv)
    assert [o["metadata"]["name"] for o in dumped if o["kind"] == "Workload"] == ["job-1", "job-2"]
    assert parse_documents(dumped).workloads == inv.workloads
    typed = {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "WorkloadList",
             "items": [{"metadata": {"name": "w"}, "spec": {"podGroups": [{"name": "g", "policy": {"basic": {}}}]}}]}
    assert list(parse_documents([typed]).workloads) == ["default/w"]


def test_gang_that_fits_audits_as_fitting_pods_and_binds_whole(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "audit", "gang-fits.yaml")["pods"] == [fits("worker-0"), fits("worker-1")]
    result = cli(capsys, "schedule", "gang-fits.yaml")
    assert [(b["name"], b["node"]) for b in result["bindings"]] == [("worker-0", "node-a"), ("worker-1", "node-b")]
    assert result["pending"] == []


def test_gang_without_room_for_min_count(capsys: pytest.CaptureFixture[str]) -> None:
    selector = "node node-a didn't match Pod's node affinity/selector"
    expected = [fits("web"), no_room("worker-0", "node-a"), no_room("worker-1", "node-b"),
                no_room("worker-2", "node-a"),  # fits alone on node-a, as the first two do
                {**pod("worker-3", "selector", selector, "node-a", [selector]),  # its own reason
                 "summary": "0/2 nodes are available: 2 selector."}]
    assert cli(capsys, "audit", "gang-too-big.yaml")["pods"] == expected
    assert audit(parse_documents(load("gang-too-big.yaml")))["pods"] == expected
    # schedule: two workers were placed, then rolled back; the plain pod queued after them gets node-a
    result = cli(capsys, "schedule", "gang-too-big.yaml")
    assert [(b["name"], b["node"]) for b in result["bindings"]] == [("web", "node-a")]
    assert result["pending"] == expected[1:]


def test_waiting_for_min_count_missing_workload_or_group_basic_and_replicas(
        capsys: pytest.CaptureFixture[str]) -> None:
    expected = [fits("driver"),  # basic policy: judged alone
                pod("orphan", "missing", "Workload default/job-0 not found", None, ["Workload default/job-0"]),
                waiting("r0-worker-0", 1, 2, "default/job-2/worker/r0"),  # each replica is a gang of its own
                fits("r1-worker-0"), fits("r1-worker-1"),
                pod("stray", "missing", "pod group ps in Workload default/job-1 not found", None,
                    ["pod group ps in Workload default/job-1"]),
                waiting("worker-0", 2, 4), waiting("worker-1", 2, 4)]
    assert cli(capsys, "audit", "gang-waiting.yaml")["pods"] == expected
    result = schedule(parse_documents(load("gang-waiting.yaml")))
    assert [(b["name"], b["node"]) for b in result["bindings"]] == [
        ("driver", "node-a"), ("r1-worker-0", "node-a"), ("r1-worker-1", "node-b")]
    assert sorted(p["name"] for p in result["pending"]) == ["orphan", "r0-worker-0", "stray", "worker-0", "worker-1"]
    assert {p["name"]: p for p in result["pending"]}["worker-0"] == waiting("worker-0", 2, 4)


def test_gang_with_min_count_bound_judges_the_others_alone(capsys: pytest.CaptureFixture[str]) -> None:
    why = ("node node-a: request gpus of claim default/worker-2-gpus needs 4 devices of class gpu: 4 devices on "
           "node node-a match, but only 0 are free (4 in use)")
    assert cli(capsys, "audit", "gang-bound.yaml")["pods"] == [
        pod("worker-0", None, "", "node-a", [], "node-a"), pod("worker-1", None, "", "node-b", [], "node-b"),
        {**pod("worker-2", "capacity", why, "node-a", [why]), "summary": "0/2 nodes are available: 2 capacity."},
        fits("worker-3")]
    result = cli(capsys, "schedule", "gang-bound.yaml")
    assert [(b["name"], b["node"]) for b in result["bindings"]] == [("worker-3", "node-a")]
    assert [p["reason"] for p in result["pending"]] == ["capacity"]


def test_finished_members_do_not_count() -> None:
    docs = load("gang-fits.yaml")
    items = docs[0]["items"]
    done = copy.deepcopy(next(o for o in items if o["metadata"]["name"] == "worker-1"))
    done["metadata"]["name"], done["status"]["phase"] = "worker-old", "Failed"
    items.append(done)
    items[-2]["status"]["phase"] = "Succeeded"  # worker-1 finished: one member of minCount 2 left
    (p,) = [p for p in audit(parse_documents(docs))["pods"] if p["name"] == "worker-0"]
    assert p == waiting("worker-0", 1, 2)


# --- bad input -------------------------------------------------------------------------------------------

WORKLOAD = {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload", "metadata": {"name": "job-1"},
            "spec": {"podGroups": [{"name": "worker", "policy": {"gang": {"minCount": 2}}}]}}


def _with(path: str, value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(WORKLOAD)
    *parents, last = path.split(".")
    target: Any = obj
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[last] = value
    return obj


@pytest.mark.parametrize(("objects", "where", "what"), [
    ([_with("spec.podGroups.0.policy.gang.minCount", 0)], "items[1].spec.podGroups[0].policy.gang.minCount", ""),
    ([_with("spec.podGroups.0.policy", {"basic": {}, "gang": {"minCount": 1}})], "items[1].spec.podGroups[0].policy",
     "exactly one of `basic` and `gang`"),
    ([_with("spec.podGroups", [])], "items[1].spec.podGroups", "at least one pod group"),
    ([_with("spec.podGroups.0.name", "Worker_0")], "items[1].spec.podGroups[0].name", ""),
    # a v1beta1 Workload makes the dump a 1.37 one, where a Workload is a template (docs/versions.md)
    ([_with("apiVersion", "scheduling.k8s.io/v1beta1")], "items[1].spec.podGroups",
     "unknown field `podGroups`; expected one of `controllerRef`, `podGroupTemplates`"),
    # an equal copy is read once (issue 23); one that differs is refused
    ([WORKLOAD, _with("spec.podGroups.0.policy.gang.minCount", 1)], "items[2].metadata.name",
     "duplicate Workload `default/job-1`"),
])
def test_bad_workload_exits_2_with_file_and_field(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                  objects: list[dict[str, Any]], where: str, what: str) -> None:
    node = load("gang-fits.yaml")[0]["items"][0]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node, *objects]}))
    for command in ("audit", "schedule"):
        code, out, err = run(capsys, command, "-f", str(bad))
        assert code == 2 and out == "", err
        assert f"{bad}: {where}: " in err and what in err, err


@pytest.mark.parametrize(("ref", "where"), [
    ({"name": "job-1"}, "spec.workloadRef.podGroup"),
    ({"name": "job-1", "podGroup": "Worker"}, "spec.workloadRef.podGroup"),
    ({"name": "job-1", "podGroup": "worker", "replica": "r0"}, "spec.workloadRef.replica"),
    ("job-1", "spec.workloadRef"),
])
def test_bad_workload_ref_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, ref: Any, where: str) -> None:
    bad = tmp_path / "pod.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                   "spec": {"containers": [{"name": "c", "image": "x"}], "workloadRef": ref}}))
    code, out, err = run(capsys, "audit", "-f", str(bad))
    assert code == 2 and out == ""
    assert f"{bad}: {where}" in err, err


# --- schedule never binds part of a gang -------------------------------------------------------------------


def random_dump(seed: int) -> list[dict[str, Any]]:
    """Nodes with 2-8 GPUs in 2 NVLink domains, some GPUs held by running pods, plain pods and gangs
    (minCount 1-4, 1-5 members, some already bound) asking 0-4 GPUs, some on one NVLink domain."""
    rng = random.Random(seed)
    driver, v1 = "gpu.example.com", "resource.k8s.io/v1"
    docs: list[dict[str, Any]] = [{"apiVersion": v1, "kind": "DeviceClass", "metadata": {"name": "gpu"},
                                   "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}}]
    for count in range(1, 5):
        for nvlink in (False, True):
            devices: dict[str, Any] = {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu",
                                                                               "count": count}}]}
            if nvlink:
                devices["constraints"] = [{"matchAttribute": f"{driver}/nvlinkDomain"}]
            docs.append({"apiVersion": v1, "kind": "ResourceClaimTemplate",
                         "metadata": {"name": f"g{count}{'n' if nvlink else ''}", "namespace": "default"},
                         "spec": {"spec": {"devices": devices}}})
    nodes = [f"node-{i}" for i in range(rng.randint(2, 5))]
    created = iter(range(10_000))

    def a_pod(name: str, gpus: int, ref: dict[str, str] | None = None, node: str | None = None,
              claim: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {
            "requests": {"cpu": str(rng.choice([1, 2, 4, 8]))}}}], "priority": rng.choice([0, 0, 5])}
        if claim:
            spec["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim}]
        elif gpus:
            spec["resourceClaims"] = [{"name": "gpus",
                                       "resourceClaimTemplateName": f"g{gpus}{rng.choice(['', 'n'])}"}]
        if ref:
            spec["workloadRef"] = ref
        if node:
            spec["nodeName"] = node
        n = next(created)
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default",
                             "creationTimestamp": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"},
                "spec": spec, "status": {"phase": "Running" if node else "Pending"}}

    for name in nodes:
        size = rng.choice([2, 4, 8])
        docs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                     "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}})
        docs.append({"apiVersion": v1, "kind": "ResourceSlice", "metadata": {"name": f"{name}-gpus"},
                     "spec": {"driver": driver, "nodeName": name,
                              "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                              "devices": [{"name": f"gpu-{i}", "attributes": {"nvlinkDomain": {"int": i * 2 // size}}}
                                          for i in range(size)]}})
        if rng.random() < 0.5:  # a running pod holding GPU 0
            docs.append({"apiVersion": v1, "kind": "ResourceClaim",
                         "metadata": {"name": f"run-{name}", "namespace": "default"},
                         "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu"}}]}},
                         "status": {"allocation": {"devices": {"results": [
                             {"request": "gpus", "driver": driver, "pool": name, "device": "gpu-0"}]}}}})
            docs.append(a_pod(f"run-{name}", 1, node=name, claim=f"run-{name}"))
    for i in range(rng.randint(0, 6)):
        docs.append(a_pod(f"plain-{i}", rng.randint(0, 4)))
    for g in range(rng.randint(1, 4)):
        workload = f"job-{g}"
        need, members = rng.randint(1, 4), rng.randint(1, 5)
        docs.append({"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
                     "metadata": {"name": workload, "namespace": "default"},
                     "spec": {"podGroups": [{"name": "worker", "policy": {"gang": {"minCount": need}}}]}})
        for m in range(members):
            bound = rng.random() < 0.15
            docs.append(a_pod(f"{workload}-{m}", 0 if bound else rng.randint(0, 4),
                              {"name": workload, "podGroup": "worker"}, node=rng.choice(nodes) if bound else None))
    return docs


def gang_of(p: dict[str, Any]) -> str | None:
    ref = (p.get("spec") or {}).get("workloadRef")
    return ref["name"] if ref else None


def reference_schedule(docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The bindings of a pass without gangs, every pod evaluated afresh (no memo, no shared outcomes)."""
    from dralab.core.analysis.audit import Placer, evaluate

    inv = parse_documents(docs)
    snap = Snapshot(inv)
    placer = Placer(snap)
    out = []
    for p in queue_order(p for p in inv.pods.values() if is_pending(p)):
        verdict = evaluate(snap, p)
        if verdict.reason is None:
            binding = placer.bind(p, verdict)
            out.append((binding["name"], binding["node"]))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_schedule_never_binds_part_of_a_gang(seed: int) -> None:
    docs = random_dump(seed)
    inv = parse_documents(docs)
    result = schedule(inv)
    bound = {b["name"] for b in result["bindings"]}
    assert len(bound) == len(result["bindings"])
    for key, workload in inv.workloads.items():
        need = workload["spec"]["podGroups"][0]["policy"]["gang"]["minCount"]
        members = [p for p in inv.pods.values() if gang_of(p) == workload["metadata"]["name"]]
        already = sum(1 for p in members if not is_pending(p))
        placed = sum(1 for p in members if p["metadata"]["name"] in bound)
        assert placed == 0 or already + placed >= need, (key, need, already, placed)
    assert all(p["reason"] is not None for p in result["pending"])
    # No trace of the gangs rolled back: without their pending pods, the others bind as before, and the same
    # way as a pass that evaluates every pod afresh.
    idle = {w for w in (gang_of(p) for p in inv.pods.values()) if w
            and not any(b["name"].startswith(w + "-") for b in result["bindings"])}
    rest = [d for d in docs if not (d["kind"] == "Pod" and gang_of(d) in idle and is_pending(d))]
    again = schedule(parse_documents(rest))
    assert [(b["name"], b["node"]) for b in again["bindings"]] == [
        (b["name"], b["node"]) for b in result["bindings"]]
    plain = [d for d in docs if not (d["kind"] == "Pod" and gang_of(d) and is_pending(d))]
    assert reference_schedule(plain) == [(b["name"], b["node"]) for b in schedule(parse_documents(plain))["bindings"]]

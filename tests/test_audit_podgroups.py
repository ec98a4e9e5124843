"""1.36/1.37 PodGroups (pods with `spec.schedulingGroup`) in `dralab audit` and `dralab schedule` on kubectl
dumps: one fixture per reason a group is pending (tests/fixtures/audit/podgroup-{topology,fits,min-count,
capacity,preemption,claim,composite,invalid}.yaml), each run through the CLI (exit status, JSON fields, table
text), and a changed copy of the dump that removes the obstacle, so that each verdict can be seen to flip."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "audit"
RACK = "topology.kubernetes.io/rack"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def cli(capsys: pytest.CaptureFixture[str], command: str, path: Path | str, *flags: str) -> dict[str, Any]:
    code, out, err = run(capsys, command, "-f", str(path), "-o", "json", *flags)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def items(fixture: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load((FIXTURES / fixture).read_text())
    out: list[dict[str, Any]] = doc["items"]
    return out


def write(tmp_path: Path, objs: list[dict[str, Any]]) -> Path:
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objs}))
    return path


def named(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def group(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in report["pod_groups"] if g["name"] == name)


def pods(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in report["pods"]}


def test_topology_domain_too_small(capsys: pytest.CaptureFixture[str]) -> None:
    report = cli(capsys, "audit", FIXTURES / "podgroup-topology.yaml")
    row = group(report, "ml/train-workers-0")
    assert row["blocked_by"] == "topology"
    assert row["policy"] == f"gang minCount 4, one {RACK} domain"
    assert row["pods"] == {"pending": 4, "bound": 0}
    assert row["evidence"] == {"key": RACK, "domains": [{"domain": "rack-a", "room": 3},
                                                        {"domain": "rack-b", "room": 1}],
                               "closest": "rack-a", "room": 3, "minCount": 4, "bound": 0, "cluster_room": 4}
    assert row["why"] == (f"no {RACK} domain fits the pod group (2 tried; at most 3 of 4 pods fit, in rack-a; the "
                          "cluster as a whole has room for 4)")
    assert row["conditions"][0]["type"] == "PodGroupInitiallyScheduled"
    assert row["conditions"][0]["reason"] == "Unschedulable"
    for p in pods(report).values():
        if p["namespace"] == "ml":
            assert (p["reason"], p["pod_group"], p["message"]) == ("topology", "ml/train-workers-0", row["why"])
            assert p["closest"]["node"] in ("gpu-a1", "gpu-a2")  # where it went in the closest domain
    code, out, _ = run(capsys, "audit", "-f", str(FIXTURES / "podgroup-topology.yaml"))
    assert code == 0
    assert "PODGROUP            POLICY" in out
    assert f"ml/train-workers-0  gang minCount 4, one {RACK} domain  4        0      topology    no {RACK}" in out
    assert f"  room per {RACK} domain (minCount 4): rack-a: 3, rack-b: 1; closest rack-a; whole cluster 4" in out
    assert ("  condition PodGroupInitiallyScheduled=False Unschedulable: pod group \"ml/train-workers-0\" is "
            "unschedulable") in out
    sched = cli(capsys, "schedule", FIXTURES / "podgroup-topology.yaml")
    assert [b for b in sched["bindings"] if b.get("pod_group")] == []  # all-or-nothing: none binds
    assert sorted(p["name"] for p in sched["pending"]) == [f"train-w-{i}" for i in range(4)]
    assert group(sched, "ml/train-workers-0")["blocked_by"] == "topology"


def test_topology_ignored_would_fit_and_the_gate_off_is_refused(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    """Without the constraint the same gang fits (so the topology verdict is the constraint's doing); a dump
    read with the gate forced off is refused, naming the field and the gate."""
    objs = items("podgroup-topology.yaml")
    del named(objs, "PodGroup", "train-workers-0")["spec"]["schedulingConstraints"]
    sched = cli(capsys, "schedule", write(tmp_path, objs))
    assert sorted(b["name"] for b in sched["bindings"]) == [f"train-w-{i}" for i in range(4)]
    assert group(sched, "ml/train-workers-0")["blocked_by"] is None
    code, _, err = run(capsys, "audit", "-f", str(FIXTURES / "podgroup-topology.yaml"),
                       "--feature-gates", "TopologyAwareWorkloadScheduling=false")
    assert code == 2
    assert "podgroup-topology.yaml: items[" in err
    assert "spec.schedulingConstraints" in err and "TopologyAwareWorkloadScheduling" in err


def test_fits_in_the_tightest_domain(capsys: pytest.CaptureFixture[str]) -> None:
    sched = cli(capsys, "schedule", FIXTURES / "podgroup-fits.yaml")
    train = [b for b in sched["bindings"] if b["pod_group"] == "ml/train-workers-0"]
    assert sorted(b["node"] for b in train) == ["gpu-b1", "gpu-b1", "gpu-b2", "gpu-b2"]
    row = group(sched, "ml/train-workers-0")
    assert (row["blocked_by"], row["domain"]) == (None, "rack-b")
    assert row["bindings"] == [f"ml/train-w-{i}" for i in range(4)]
    assert group(sched, "ml/eval")["bindings"] == ["ml/eval-0", "ml/eval-1"]
    assert sched["pending"] == []
    report = cli(capsys, "audit", FIXTURES / "podgroup-fits.yaml")
    assert all(p["reason"] is None for p in report["pods"])
    assert [g["blocked_by"] for g in report["pod_groups"]] == [None, None]
    _, out, _ = run(capsys, "audit", "-f", str(FIXTURES / "podgroup-fits.yaml"))
    assert "(fits)      binds 4 pod(s) in rack-b" in out


def test_min_count_and_missing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = cli(capsys, "audit", FIXTURES / "podgroup-min-count.yaml")
    row = group(report, "ml/train-workers-0")
    assert row["blocked_by"] == "min-count"
    assert row["evidence"] == {"pods": 2, "minCount": 4}
    assert row["why"] == ("waiting for minCount pods from a gang to appear in scheduling queue (2 of minCount 4 pods "
                          "of PodGroup ml/train-workers-0 exist)")
    p = pods(report)["train-w-0"]
    assert p["reason"] == "gang"
    assert p["closest"] == {"node": None, "missing": ["2 more pod(s) of PodGroup ml/train-workers-0"]}
    missing = group(report, "ml/infer-group")
    assert (missing["blocked_by"], missing["policy"]) == ("missing", "unknown (no PodGroup)")
    assert pods(report)["infer-0"]["reason"] == "missing"
    assert pods(report)["infer-0"]["closest"]["missing"] == ["PodGroup ml/infer-group"]
    # a dump of the pods alone (`kubectl get pods`): their schedulingGroup proves GenericWorkload was on
    objs = [o for o in items("podgroup-min-count.yaml") if o["kind"] != "PodGroup"]
    assert {g["blocked_by"] for g in cli(capsys, "audit", write(tmp_path, objs))["pod_groups"]} == {"missing"}
    code, _, err = run(capsys, "audit", "-f", str(write(tmp_path, objs)), "--feature-gates", "GenericWorkload=false")
    assert code == 2 and "spec.schedulingGroup" in err and "GenericWorkload" in err
    objs = items("podgroup-min-count.yaml")
    named(objs, "PodGroup", "train-workers-0")["spec"]["schedulingPolicy"]["gang"]["minCount"] = 2
    sched = cli(capsys, "schedule", write(tmp_path, objs))
    assert sorted(b["name"] for b in sched["bindings"]) == ["train-w-0", "train-w-1"]


def test_min_count_comes_before_gates_and_priority(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The scheduler's PreEnqueue holds a group below minCount before it looks at gates or priorities, so the run
    summary says `min-count`; the audit says the same."""
    objs = items("podgroup-min-count.yaml")
    named(objs, "PodGroup", "train-workers-0")["spec"]["priority"] = 1000
    for name in ("train-w-0", "train-w-1"):
        named(objs, "Pod", name)["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    assert group(cli(capsys, "audit", write(tmp_path, objs)), "ml/train-workers-0")["blocked_by"] == "min-count"


def test_capacity(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = cli(capsys, "audit", FIXTURES / "podgroup-capacity.yaml")
    row = group(report, "ml/train-workers-0")
    assert row["blocked_by"] == "capacity"
    assert row["evidence"] == {"room": 2, "minCount": 4, "bound": 0}
    assert row["why"] == "room for 2 of the 4 pods PodGroup ml/train-workers-0 needs (minCount 4, 0 bound)"
    assert {p["reason"] for p in report["pods"] if p["node"] is None} == {"gang"}
    objs = items("podgroup-capacity.yaml")
    objs = [o for o in objs if o["metadata"]["name"] not in ("etl-0", "etl-1")]
    sched = cli(capsys, "schedule", write(tmp_path, objs))
    assert len(sched["bindings"]) == 4 and group(sched, "ml/train-workers-0")["blocked_by"] is None


def test_own_cause_when_no_member_fits_alone(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    objs = items("podgroup-capacity.yaml")
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"].startswith("train-w-"):
            o["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "16"}}
    report = cli(capsys, "audit", write(tmp_path, objs))
    row = group(report, "ml/train-workers-0")
    assert row["blocked_by"] == "resources"
    assert "Insufficient cpu" in row["why"]


def test_waiting_for_preemption_victims(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = cli(capsys, "audit", FIXTURES / "podgroup-preemption.yaml")
    row = group(report, "ml/train-workers-0")
    assert row["blocked_by"] == "preemption"
    assert row["evidence"] == {"nominated": {"ml/train-w-0": "gpu-b1", "ml/train-w-1": "gpu-b2"},
                               "victims": ["batch/sweep-0", "batch/sweep-1"]}
    assert row["why"] == ('pod group "ml/train-workers-0" is waiting for 2 preemption victims to terminate '
                          "(batch/sweep-0, batch/sweep-1)")
    assert {p["reason"] for p in report["pods"] if p["node"] is None} == {"preemption"}
    victim = group(report, "batch/sweep")
    assert victim["blocked_by"] is None and victim["pods"] == {"pending": 0, "bound": 2}
    assert [c["type"] for c in victim["conditions"]] == ["PodGroupInitiallyScheduled", "DisruptionTarget"]
    # the victims are no longer on their way out: nothing is being freed, the nodes are simply full
    objs = items("podgroup-preemption.yaml")
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"].startswith("sweep-"):
            del o["metadata"]["deletionTimestamp"]
            o["status"]["conditions"] = [c for c in o["status"]["conditions"] if c["type"] != "DisruptionTarget"]
    row = group(cli(capsys, "audit", write(tmp_path, objs)), "ml/train-workers-0")
    assert (row["blocked_by"], row["evidence"]["room"]) == ("resources", 0)  # no member fits on its own


def test_group_claim_unsatisfiable_then_shared(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = cli(capsys, "audit", FIXTURES / "podgroup-claim.yaml")
    row = group(report, "ml/train-workers-0")
    assert row["blocked_by"] == "group-claim"
    assert row["evidence"]["claims"] == {"nvlink": "train-workers-0-nvlink"}
    assert "claim ml/train-workers-0-nvlink" in row["evidence"]["explanation"]
    assert "only 0 are free" in row["evidence"]["explanation"]
    assert row["why"] == f"the pod group's shared claim cannot be allocated: {row['evidence']['explanation']}"
    # free rack-b's channel: both pods bind in rack-b and share the one claim (allocated once for the group)
    objs = [o for o in items("podgroup-claim.yaml") if o["metadata"]["name"] != "eval-workers-0-nvlink-9rd7c"]
    sched = cli(capsys, "schedule", write(tmp_path, objs))
    assert sorted(b["node"][:5] for b in sched["bindings"]) == ["gpu-b", "gpu-b"]
    claims = [b["claims"] for b in sched["bindings"]]
    assert claims[0] == claims[1]
    assert claims[0][0]["allocation"]["devices"]["results"][0]["pool"] == "rack-b-channels"
    assert group(sched, "ml/train-workers-0")["domain"] == "rack-b"


def test_group_claim_name_from_status(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The claim the controller generated (PodGroup status.resourceClaimStatuses) is the group's claim."""
    objs = items("podgroup-claim.yaml")
    named(objs, "PodGroup", "train-workers-0")["status"]["resourceClaimStatuses"] = [
        {"name": "nvlink", "resourceClaimName": "sim-workers-0-nvlink-4hx2q"}]
    objs = [o for o in objs if o["metadata"]["name"] != "eval-workers-0-nvlink-9rd7c"]
    sched = cli(capsys, "schedule", write(tmp_path, objs))
    assert sorted(b["node"][:5] for b in sched["bindings"]) == ["gpu-a", "gpu-a"]  # where that claim's channel is


def test_composite_all_or_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = cli(capsys, "audit", FIXTURES / "podgroup-composite.yaml")
    leader = group(report, "ml/lws-replica-0-leader")
    assert leader["blocked_by"] == "capacity" and leader["composite"] == "ml/lws-replica-0"
    assert leader["why"] == ("CompositePodGroup ml/lws-replica-0 needs minGroupCount 2 child groups; 1 of them fit "
                             "at once")
    assert leader["evidence"] == {"composite": "ml/lws-replica-0", "minGroupCount": 2, "satisfied": 1, "children": 2}
    assert group(report, "ml/lws-replica-0-workers")["blocked_by"] == "capacity"
    sched = cli(capsys, "schedule", FIXTURES / "podgroup-composite.yaml")
    assert sched["bindings"] == []
    objs = items("podgroup-composite.yaml")
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"].startswith("lws-worker-"):
            o["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
    sched = cli(capsys, "schedule", write(tmp_path, objs))
    assert len(sched["bindings"]) == 4
    assert {g["blocked_by"] for g in sched["pod_groups"]} == {None}


def test_priority_mismatch_and_gated(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    objs = items("podgroup-fits.yaml")
    named(objs, "PodGroup", "train-workers-0")["spec"]["priority"] = 1000
    named(objs, "Pod", "train-w-0")["spec"]["priority"] = 1000
    row = group(cli(capsys, "audit", write(tmp_path, objs)), "ml/train-workers-0")
    assert row["blocked_by"] == "priority-mismatch"
    assert row["why"] == ("pods of pod group ml/train-workers-0 must have its priority 1000; 3 do not "
                          "(e.g. ml/train-w-1)")
    objs = items("podgroup-fits.yaml")
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"].startswith("train-w-"):
            o["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    report = cli(capsys, "audit", write(tmp_path, objs))
    assert group(report, "ml/train-workers-0")["blocked_by"] == "gated"
    assert pods(report)["train-w-0"]["reason"] == "gated"
    # one member gated: the other three cannot reach minCount 4
    named(objs, "Pod", "train-w-1")["spec"].pop("schedulingGates")
    for name in ("train-w-2", "train-w-3"):
        named(objs, "Pod", name)["spec"].pop("schedulingGates")
    sched = cli(capsys, "schedule", write(tmp_path, objs))
    assert group(sched, "ml/train-workers-0")["blocked_by"] == "gated"
    assert [b for b in sched["bindings"] if b["pod_group"] == "ml/train-workers-0"] == []


def test_invalid_dump_exits_2_with_file_and_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for command in ("audit", "schedule"):
        code, _, err = run(capsys, command, "-f", str(FIXTURES / "podgroup-invalid.yaml"))
        assert code == 2
        assert "podgroup-invalid.yaml: items[1].spec.schedulingPolicy.gang.minCount" in err
    objs = items("podgroup-fits.yaml")
    named(objs, "Pod", "train-w-0")["spec"]["schedulingGroup"] = {"podGroupName": "Not_A_Name"}
    code, _, err = run(capsys, "audit", "-f", str(write(tmp_path, objs)))
    assert code == 2 and "spec.schedulingGroup.podGroupName" in err


def test_dumps_without_podgroups_keep_their_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert "pod_groups" not in cli(capsys, "audit", FIXTURES / "gang-fits.yaml")
    assert "pod_groups" not in cli(capsys, "schedule", FIXTURES / "gang-fits.yaml")


# ---------------------------------------------------------------- the audit agrees with the scheduler


def _state_dump(result: Any) -> list[dict[str, Any]]:
    """The end state of a simulated run as `kubectl get nodes,pods,podgroups -o yaml` would show it."""
    state = result.state
    out: list[dict[str, Any]] = []
    for node in state.nodes.values():
        m = copy.deepcopy(node.manifest)
        m.update(apiVersion="v1", kind="Node")
        m.setdefault("metadata", {})["name"] = node.name
        m.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": "True" if node.ready else "False"}]
        out.append(m)
    for p in state.pods.values():
        m = copy.deepcopy(p.manifest)
        m.update(apiVersion="v1", kind="Pod")
        if p.node is not None:
            m["spec"]["nodeName"] = p.node
        m["status"] = {"phase": p.phase.capitalize()}
        out.append(m)
    out += [copy.deepcopy(g.manifest) for g in state.gang.podgroups.values()]
    return out


@pytest.mark.parametrize("case", ["min-count", "capacity", "topology", "priority-mismatch", "fits"])
def test_audit_of_the_end_state_names_what_the_scheduler_named(case: str, capsys: pytest.CaptureFixture[str],
                                                                tmp_path: Path) -> None:
    """Simulate a 1.37 run (tests/test_scheduler_podgroup.py's builders), dump its end state, and audit the dump:
    the group is pending for the reason the run summary (core/analysis/podgroups.py) gives, or both place it."""
    from builders import arrival, node_template
    from builders import group as node_group
    from test_scheduler_podgroup import member, podgroup, racks, run, why

    if case == "min-count":
        result = run([(arrival(0, member(), count=3), "train")], [podgroup()], duration="5s")
    elif case == "capacity":
        result = run([(arrival(0, member(), count=5), "train")], [podgroup(min_count=5)],
                     groups=[node_group("gpu", max=2, delay="1m", template=node_template(gpu=8))], duration="5s")
    elif case == "topology":
        groups, nodes = racks(2, 2)
        result = run([(arrival(0, member(), count=6), "train")], [podgroup(min_count=6, topology="rack")],
                     groups=groups, nodes=nodes, duration="5s")
    elif case == "priority-mismatch":
        result = run([(arrival(0, member(priority=1), count=4), "train")], [podgroup(priority=5)], duration="5s")
    else:
        groups, nodes = racks(2, 3)
        result = run([(arrival(0, member(), count=6, run_for="5m"), "train")],
                     [podgroup(min_count=6, topology="rack")], groups=groups, nodes=nodes, duration="30s")
    objs = _state_dump(result)
    if case == "fits":  # the run bound the group in rack b; unbound again, the audit places it there too
        bound_racks = {o["metadata"]["labels"]["rack"] for o in objs if o["kind"] == "Node"
                       and any(p["kind"] == "Pod" and p["spec"].get("nodeName") == o["metadata"]["name"]
                               for p in objs)}
        for o in objs:
            if o["kind"] == "Pod":
                o["spec"].pop("nodeName", None)
                o["status"] = {"phase": "Pending"}
        row = group(cli(capsys, "schedule", write(tmp_path, objs)), "default/train")
        assert (row["blocked_by"], {row["domain"]}) == (None, bound_racks)
        return
    row = group(cli(capsys, "audit", write(tmp_path, objs)), "default/train")
    assert row["blocked_by"] == why(result)[0]

"""The upstream bugs of issue 22's cluster-autoscaler slice (core/kube/bugs.py), each with its scenario under
scenarios/upstream/ and both outcomes: with the bug (as the release has it) and without it (the switch off)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dralab.core.log.events import ProvisioningRequestCondition, ScaleUpRequested, decode_record
from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import SimResult, simulate

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = ROOT / "scenarios" / "upstream"


def run(name: str, bugs: dict[str, bool] | None = None, seed: int = 1) -> SimResult:
    data: dict[str, Any] = yaml.safe_load((UPSTREAM / f"{name}.yaml").read_text())
    if bugs is not None:
        data["spec"]["kubernetes"]["bugs"] = bugs
    result = simulate(parse_scenario(data, f"{name}.yaml"), seed)
    assert result.violations == [], result.violations
    return result


def conditions(result: SimResult, request: str) -> list[tuple[int, str, str, str]]:
    """(t in s, condition, status, reason) of one ProvisioningRequest, in log order."""
    out = []
    for offset, payload in result.entries:
        record = decode_record(payload, offset)
        out += [(record.t // 1000, e.condition, e.status, e.reason) for e in record.events
                if isinstance(e, ProvisioningRequestCondition) and e.request.endswith("/" + request)]
    return out


def scale_ups(result: SimResult) -> list[tuple[int, str, int]]:
    out = []
    for offset, payload in result.entries:
        record = decode_record(payload, offset)
        out += [(record.t // 1000, e.group, e.delta) for e in record.events if isinstance(e, ScaleUpRequested)]
    return out


def test_autoscaler_10065_check_capacity_never_finds_capacity_for_template_claims() -> None:
    buggy = conditions(run("provreq-claim-templates"), "check")
    assert ("Provisioned", "True", "CapacityIsFound") not in [c[1:] for c in buggy]
    assert ("Provisioned", "False", "CapacityIsNotFound") in [c[1:] for c in buggy]
    fixed = conditions(run("provreq-claim-templates", {"autoscaler#10065": False}), "check")
    assert [c[1:] for c in fixed][:2] == [("Accepted", "True", "Accepted"), ("Provisioned", "True", "CapacityIsFound")]


def test_autoscaler_9805_a_consumed_booking_still_counts_and_hides_free_capacity() -> None:
    buggy = run("booking-double-count")  # 1.36: the bug
    assert [c for c in conditions(buggy, "pretrain") if c[1] == "BookingExpired"] == [
        (600, "BookingExpired", "True", "CapacityReservationTimeExpired")]
    probe = conditions(buggy, "probe")
    assert ("Provisioned", "True", "CapacityIsFound") not in [c[1:] for c in probe]
    assert [c[0] for c in probe if c[3] == "CapacityIsNotFound"][:4] == [10, 70, 190, 430]
    fixed = run("booking-double-count", {"autoscaler#9805": False})
    assert (10, "BookingExpired", "True", "CapacityBookingConsumed") in conditions(fixed, "pretrain")
    assert (10, "Provisioned", "True", "CapacityIsFound") in conditions(fixed, "probe")


def test_autoscaler_9805_follows_the_release() -> None:
    from dralab.core.kube.versions import make_profile
    assert make_profile("1.36").bug("autoscaler#9805") and not make_profile("1.37").bug("autoscaler#9805")
    assert make_profile("1.37").bug("autoscaler#10065") and make_profile("1.37").bug("autoscaler#7683")


def _nominated_cluster(bugs: dict[str, bool]) -> list[tuple[str, int]]:
    """A GPU node (16 cpu, 8 GPUs) whose `batch` pod (12 cpu) is terminating for `train` (8 cpu, 8 GPUs), nominated
    there; `infer` (4 GPUs, no cpu request) is pending Unschedulable. The autoscaler's scale-ups (group, nodes)."""
    import msgspec

    from dralab.core.analysis.dump import dump_record
    from dralab.core.analysis.whatif import _groups_record, parse_node_groups
    from dralab.core.autoscaler.reactor import Autoscaler
    from dralab.core.dra.api import parse_documents
    from dralab.core.engine.contract import decide
    from dralab.core.kube.versions import make_profile, profile_config
    from dralab.core.log.events import NodeCreated, PodNominated, PodUnschedulable, Record
    from dralab.core.state.cluster import ClusterState

    def claim(name: str, count: int) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                    "deviceClassName": "gpu.example.com", "count": count}}]}}}

    def pod(name: str, cpu: str | None, claim_name: str | None, **status: Any) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "c", "image": "c:1"}
        if cpu:
            container["resources"] = {"requests": {"cpu": cpu}}
        spec: dict[str, Any] = {"containers": [container]}
        if claim_name:
            spec["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim_name}]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": spec, "status": status}

    unschedulable = {"phase": "Pending",
                     "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    manifests = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
         "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-0"},
         "status": {"allocatable": {"cpu": "16", "memory": "256Gi", "pods": "110"}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "gpu-0-gpu"},
         "spec": {"driver": "gpu.example.com", "nodeName": "gpu-0",
                  "pool": {"name": "gpu-0", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": f"gpu-{i}"} for i in range(8)]}},
        {**pod("batch", "12", None, phase="Running"),
         "metadata": {"name": "batch", "namespace": "default", "deletionTimestamp": "2026-01-01T00:00:00Z"}},
        claim("train-gpus", 8), claim("infer-gpus", 4),
        pod("train", "8", "train-gpus", nominatedNodeName="gpu-0", **unschedulable),
        pod("infer", None, "infer-gpus", **unschedulable),
    ]
    manifests[3]["spec"]["nodeName"] = "gpu-0"
    profile = make_profile("1.37", bugs=bugs)
    inv = parse_documents(manifests, "nominated", profile=profile)
    groups = parse_node_groups({"nodeGroups": [{
        "name": "gpu", "min": 1, "max": 3, "template": {"status": {"allocatable": {
            "cpu": "16", "memory": "256Gi", "pods": "110"}}},
        "resourceSlices": [{"spec": {"driver": "gpu.example.com",
                                     "devices": [{"name": f"gpu-{i}"} for i in range(8)]}}],
    }]}, profile)
    state = ClusterState()
    dump = dump_record(inv).record
    for i, record in enumerate((_groups_record(groups), msgspec.structs.replace(dump, events=tuple(
            msgspec.structs.replace(e, group="gpu") if isinstance(e, NodeCreated) else e for e in dump.events)),
            Record(id="nominate", source="scheduler", view=-1, t=0,
                   events=(PodNominated(pod="pod/default/train", node="gpu-0"),  # as the scheduler wrote them
                           *(PodUnschedulable(pod=f"pod/default/{p}", reason="Unschedulable", message="", cause=c)
                             for p, c in (("train", "preemption"), ("infer", "capacity"))))))):
        state.apply(i + 1, record)
    record, _ = decide(Autoscaler(policy="dra", kubernetes=profile_config(profile)), state, 10_000, 0)
    return [(e.group, e.delta) for e in (record.events if record else ()) if isinstance(e, ScaleUpRequested)]


def test_autoscaler_7683_a_nominated_pods_devices_look_free() -> None:
    """With the bug (every release) `train` is force-added to its nominated node without its claims: its 8 GPUs look
    free and `infer` "fits" there, so no scale-up; with the switch off its claims take the GPUs in the snapshot and
    `infer` gets a node. (End to end, dralab's scheduler, like kube-scheduler's DynamicResources, does not hold a
    nominated pod's devices either, and binds `infer` there first: the window is the autoscaler's alone.)"""
    assert _nominated_cluster({}) == []
    assert _nominated_cluster({"autoscaler#7683": False}) == [("gpu", 1)]

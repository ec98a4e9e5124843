"""Objects over time (issue 22): `spec.workload[]` entries that create, change or delete an object at a time.

Load: each manifest checked as spec.objects' are, errors at the entry's path; the entries played against what
exists then (AlreadyExists, NotFound, immutable specs refused, exit 2 before the run). Run: every reactor sees
the change at its time (a DeviceClass created lets a pending pod schedule, a ProvisioningRequest created triggers a
scale-up, a claim deleted in use waits for its pods), and the logs verify.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dralab.core.log.events import (
    ClaimAllocated,
    DeviceTaintRuleCreated,
    DeviceTaintRuleDeleted,
    ObjectDeleted,
    ObjectUpdated,
    PodBound,
    PodUnschedulable,
    ProvisioningRequestCondition,
    Record,
    ResourceClaimRemoved,
    ScaleUpRequested,
    decode_record,
)
from dralab.core.run.inputs import scenario_inputs
from dralab.core.scenario.load import ScenarioError, load_scenario, parse_scenario
from dralab.core.state.cluster import ClusterState
from dralab.core.state.codec import decode_state, encode_state
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.shrink_units import InputSet
from dralab.replay.simulation.sim import SimResult, simulate
from dralab.replay.simulation.verify import verify

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "objects-over-time.yaml"
V1 = "resource.k8s.io/v1"
CLASS = {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
         "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}
REQUESTS = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}
TEMPLATE = {"apiVersion": V1, "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
            "spec": {"spec": REQUESTS}}
CLAIM = {"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": "shared"}, "spec": REQUESTS}
POD_TEMPLATE = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "trainer"},
                "template": {"spec": {"containers": [{"name": "t", "image": "t:1",
                                                      "resources": {"requests": {"cpu": "100"}}}]}}}
PROVREQ = {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": {"name": "pretrain"},
           "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                    "podSets": [{"podTemplateRef": {"name": "trainer"}, "count": 2}]}}


def pod(name: str, *, template: str = "", claim: str = "") -> dict[str, Any]:
    ref = {"name": "gpu", **({"resourceClaimTemplateName": template} if template else {"resourceClaimName": claim})}
    return {"metadata": {"name": name}, "spec": {"resourceClaims": [ref], "containers": [{
        "name": "main", "image": "x:1", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}]}}


def scenario(workload: list[dict[str, Any]], objects: list[dict[str, Any]] | None = None, *,
             version: str | None = None, nodes: int = 1) -> dict[str, Any]:
    devices = [{"name": f"gpu-{i}", "attributes": {"nvlinkDomain": {"int": i // 2}}} for i in range(4)]
    return {"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"}, "spec": {
        "seed": 1, "duration": "20m", "policy": {"autoscaler": "dra"}, "autoscaler": {"scanInterval": "10s"},
        **({"kubernetes": {"version": version}} if version else {}),
        "objects": copy.deepcopy(objects if objects is not None else [TEMPLATE]),
        "nodeGroups": [{"name": "g", "max": 3, "provisionDelay": "30s", "template": {
            "status": {"allocatable": {"cpu": "192", "memory": "1000Gi", "pods": "110"}}},
            "resourceSlices": [{"spec": {"driver": "gpu.example.com", "devices": devices}}]}],
        "nodes": [{"group": "g", "count": nodes}] if nodes else [],
        "workload": copy.deepcopy(workload)}}


def refused(doc: dict[str, Any]) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc, "s.yaml")
    return info.value


def run(doc: dict[str, Any] | None = None) -> SimResult:
    loaded = load_scenario(SCENARIO) if doc is None else parse_scenario(doc, "s.yaml")
    result = simulate(loaded, loaded.seed or 0)
    assert result.violations == [], result.violations
    assert result.state.anomalies == []
    checked = verify(LogFile("t", {}, result.entries))
    assert checked.ok, checked.divergence and checked.divergence.render()
    return result


def events(result: SimResult, kind: type) -> list[tuple[int, Any]]:
    return [(r.t, e) for r in (decode_record(p, o) for o, p in result.entries) for e in r.events
            if isinstance(e, kind)]


def bound_at(result: SimResult, name: str) -> int | None:
    return next((t for t, e in events(result, PodBound) if e.pod == f"pod/default/{name}"), None)


# ------------------------------------------------------------------ load


def test_create_of_an_existing_object_is_refused_as_the_api_server_would() -> None:
    error = refused(scenario([{"at": "1m", "create": CLASS}], [TEMPLATE, CLASS]))
    assert error.path == "spec.workload[0].create.metadata.name"
    assert "already exists" in error.message and "spec.objects[1]" in error.message and "apply" in error.message


def test_delete_of_a_missing_object_is_refused_and_entries_play_in_time_order() -> None:
    ref = {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"}}
    error = refused(scenario([{"at": "2m", "create": CLASS}, {"at": "1m", "delete": ref}]))
    assert error.path == "spec.workload[1].delete.metadata.name"
    assert "does not exist at 1m0s" in error.message and "NotFound" in error.message
    ok = parse_scenario(scenario([{"at": "2m", "delete": ref}, {"at": "1m", "create": CLASS}]), "s.yaml")
    assert [(c.at_ms, c.op) for c in ok.object_changes] == [(60_000, "create"), (120_000, "delete")]


def test_a_manifest_error_names_the_entry_path() -> None:
    bad = copy.deepcopy(CLAIM)
    bad["spec"]["devices"]["requests"][0]["exactly"]["count"] = -1
    error = refused(scenario([{"at": "1m", "create": bad}]))
    assert error.path == "spec.workload[0].create.spec.devices.requests[0].exactly.count"


@pytest.mark.parametrize(("obj", "field"), [(CLAIM, "spec"), (TEMPLATE, "spec"), (PROVREQ, "spec.podSets")])
def test_an_update_of_an_immutable_field_is_refused(obj: dict[str, Any], field: str) -> None:
    changed = copy.deepcopy(obj)
    if obj["kind"] == "ProvisioningRequest":
        changed["spec"]["podSets"][0]["count"] = 3
    elif obj["kind"] == "ResourceClaim":
        changed["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    else:
        changed["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    objects = [CLASS, POD_TEMPLATE, *([] if obj is TEMPLATE else [TEMPLATE]), obj]
    error = refused(scenario([{"at": "1m", "apply": changed}], objects))
    assert error.path == f"spec.workload[0].apply.{field}"
    assert "immutable" in error.message.lower()
    relabelled = copy.deepcopy(obj)
    relabelled["metadata"]["labels"] = {"team": "a"}  # metadata may change
    loaded = parse_scenario(scenario([{"at": "1m", "apply": relabelled}], objects), "s.yaml")
    assert [c.op for c in loaded.object_changes] == ["update"]


def test_kinds_that_configure_the_run_and_gang_objects_cannot_change_mid_run() -> None:
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000}
    error = refused(scenario([{"at": "1m", "create": pc}]))
    assert error.path == "spec.workload[0].create.kind" and "spec.objects" in error.message
    ref = {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload", "metadata": {"name": "w"}}
    error = refused(scenario([{"at": "1m", "delete": ref}]))
    assert error.path == "spec.workload[0].delete.kind" and "not modelled" in error.message


def test_entry_shape_errors() -> None:
    error = refused(scenario([{"at": "1m", "create": CLASS, "delete": {}}]))
    assert error.path == "spec.workload[0].delete"
    error = refused(scenario([{"at": "21m", "create": CLASS}]))
    assert error.path == "spec.workload[0].at"
    error = refused(scenario([{"at": "1m", "create": CLASS, "count": 2}]))
    assert error.path == "spec.workload[0]" or error.path.startswith("spec.workload[0].count")


def test_a_deleted_claim_name_cannot_be_created_again() -> None:
    ref = {"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": "shared"}}
    error = refused(scenario([{"at": "1m", "delete": ref}, {"at": "2m", "create": CLAIM}], [TEMPLATE, CLAIM]))
    assert error.path == "spec.workload[1].create.metadata.name" and "finalizer" in error.message


def test_the_changes_are_external_inputs_at_their_times_and_shrink_units() -> None:
    loaded = load_scenario(SCENARIO)
    records = scenario_inputs(loaded, 7)
    changes = [r for r in records if r.id.startswith("scenario/object/")]
    assert [(r.t, type(r.events[0]).__name__) for r in changes] == [
        (60_000, "DeviceClassCreated"), (120_000, "ResourceClaimCreated"), (180_000, "ObjectDeleted"),
        (240_000, "ObjectUpdated"), (350_000, "PodTemplateCreated"), (360_000, "ProvisioningRequestCreated"),
        (720_000, "ObjectDeleted")]
    assert [r.t for r in records] == sorted(r.t for r in records)
    inputs = InputSet.from_records(records)
    assert {records[i].id for i in inputs.others} >= {r.id for r in changes}  # shrink may remove each one


# ------------------------------------------------------------------ run


def test_the_scenario_story() -> None:
    result = run()
    assert bound_at(result, "early") == 60_000  # its DeviceClass created at 1m
    devices = {e.claim.split("/")[-1].rsplit("-", 2)[0]: [r["device"] for r in e.allocation["devices"]["results"]]
               for _, e in events(result, ClaimAllocated)}
    assert devices["early"] == ["gpu-0"] and devices["after-change"] == ["gpu-4"]  # the class changed at 4m
    messages = [(t, e.message) for t, e in events(result, PodUnschedulable) if e.pod == "pod/default/late-user"]
    assert messages[0] == (210_000, "waiting for objects: resourceclaim default/shared-gpu is being deleted")
    assert messages[-1][1].endswith("ResourceClaim default/shared-gpu does not exist")
    assert [t for t, _ in events(result, ResourceClaimRemoved)] == [310_000]  # when `user` was done
    assert "claim/default/shared-gpu" not in result.state.dra.claims and not result.state.dra.deleting
    ups = events(result, ScaleUpRequested)
    assert [t for t, _ in ups] == [360_000]  # the ProvisioningRequest created at 6m
    assert events(result, ObjectUpdated) and events(result, ObjectDeleted)


def test_a_deleted_provisioning_request_is_dropped_by_the_autoscaler() -> None:
    doc = scenario([{"at": "1m", "create": PROVREQ}], [POD_TEMPLATE])
    kept = run(doc)
    assert [c.condition for t, c in events(kept, ProvisioningRequestCondition) if t > 60_000] == ["BookingExpired"]
    ref = {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": {"name": "pretrain"}}
    doc["spec"]["workload"].append({"at": "5m", "delete": ref})
    dropped = run(doc)
    assert [t for t, _ in events(dropped, ScaleUpRequested)] == [60_000]
    assert [t for t, _ in events(dropped, ProvisioningRequestCondition) if t > 60_000] == []  # no booking expiry
    assert "default/pretrain" not in dropped.state.provisioning.requests


def test_a_deleted_device_class_keeps_allocated_claims_and_stops_new_ones() -> None:
    ref = {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"}}
    result = run(scenario([{"at": "0s", "pod": pod("a", template="one-gpu")}, {"at": "2m", "delete": ref},
                           {"at": "3m", "pod": pod("b", template="one-gpu")}], [TEMPLATE, CLASS]))
    assert bound_at(result, "a") == 0 and bound_at(result, "b") is None
    assert result.state.pods["pod/default/a"].phase == "Running"
    assert "does not exist" in (result.state.pods["pod/default/b"].condition.message or "")  # type: ignore[union-attr]


def test_an_unused_claim_is_gone_at_its_deletion() -> None:
    ref = {"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": "shared"}}
    result = run(scenario([{"at": "1m", "delete": ref}, {"at": "2m", "pod": pod("p", claim="shared")}],
                          [TEMPLATE, CLASS, CLAIM]))
    assert events(result, ResourceClaimRemoved) == [] and "claim/default/shared" not in result.state.dra.claims
    assert bound_at(result, "p") is None


def test_a_device_taint_rule_created_then_deleted() -> None:
    rule = {"apiVersion": V1, "kind": "DeviceTaintRule", "metadata": {"name": "all"},
            "spec": {"deviceSelector": {"driver": "gpu.example.com"},
                     "taint": {"key": "maintenance", "value": "x", "effect": "NoSchedule"}}}
    ref = {"apiVersion": V1, "kind": "DeviceTaintRule", "metadata": {"name": "all"}}
    result = run(scenario([{"at": "1m", "create": rule}, {"at": "90s", "pod": pod("p", template="one-gpu")},
                           {"at": "3m", "delete": ref}], [TEMPLATE, CLASS], version="1.37", nodes=1))
    assert [t for t, _ in events(result, DeviceTaintRuleCreated)] == [60_000]
    assert [t for t, _ in events(result, DeviceTaintRuleDeleted)] == [180_000]
    assert bound_at(result, "p") is not None and bound_at(result, "p") >= 180_000  # type: ignore[operator]


def test_the_fold_and_a_snapshot_keep_a_claim_being_deleted() -> None:
    result = run()
    state = ClusterState()
    for offset, payload in result.entries:
        record: Record = decode_record(payload, offset)
        if record.t > 200_000:
            break
        state.apply(offset, record)
    assert state.dra.deleting == {"claim/default/shared-gpu": 180_000}
    again = decode_state(encode_state(state))
    assert again.dra.deleting == state.dra.deleting
    assert msgspec.to_builtins(sorted(again.dra.claims)) == msgspec.to_builtins(sorted(state.dra.claims))


def test_a_budget_created_mid_run_holds_the_drain_and_its_deletion_lets_it_go() -> None:
    """tests/test_autoscaler_pdb.py's case: `web` (a ReplicaSet's pod) on a node the autoscaler drains at 620 s. A
    budget allowing no disruption created at 5m keeps it (NotEnoughPdb); deleted at 12m, the drain comes after."""
    from builders import GPU_TOLERATION, arrival, group, node_template, scenario_doc, simulated
    from builders import pod as gpu_pod

    from dralab.core.log.events import ObjectCreated, PodEvicted

    web = gpu_pod("web", gpu=1, tolerations=[GPU_TOLERATION])
    web["metadata"]["labels"] = {"app": "web"}
    web["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f",
                                           "uid": "uid-web", "controller": True}]
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web-pdb"},
              "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 0}}
    ref = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web-pdb"}}

    def evicted(workload: list[dict[str, Any]]) -> tuple[list[int], Any]:
        d = scenario_doc([group("gpu", min=0, max=4, delay="1m", template=node_template(gpu=8))], nodes={"gpu": 2},
                         workload=[arrival(0, gpu_pod("big", gpu=4, tolerations=[GPU_TOLERATION])),
                                   arrival("1s", web), *workload], duration="20m", score="least-allocated")
        result = simulated(d, 1, "pdb.yaml")
        return [t for t, e in events(result, PodEvicted) if e.pod == "pod/default/web"], result

    assert evicted([])[0] == [620_000]
    held, result = evicted([{"at": "5m", "create": budget}])
    assert held == [] and [t for t, _ in events(result, ObjectCreated)] == [300_000]
    assert result.state.pdbs == {"default/web-pdb": budget | {"metadata": {"name": "web-pdb", "namespace": "default"}}}
    released, _ = evicted([{"at": "5m", "create": budget}, {"at": "12m", "delete": ref}])
    assert len(released) == 1 and released[0] > 720_000
    loose = copy.deepcopy(budget)
    loose["spec"]["maxUnavailable"] = 1  # an update: the budget now lets one pod go
    assert evicted([{"at": "5m", "create": budget}, {"at": "8m", "apply": loose}])[0] != []


def test_a_request_created_again_under_its_name_is_simulated_afresh() -> None:
    """The autoscaler caches a request's pods: a request deleted and created again (2 pods instead of 1) under the
    same name, or a PodTemplate changed, must not be served from the old ones."""
    ref = {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": {"name": "pretrain"}}
    one = copy.deepcopy(PROVREQ)
    one["spec"]["podSets"][0]["count"] = 1
    doc = scenario([{"at": "1m", "create": one}, {"at": "2m", "delete": ref}, {"at": "3m", "create": PROVREQ}],
                   [POD_TEMPLATE], nodes=0)
    doc["spec"]["objects"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "150"
    ups = [(t, e.delta) for t, e in events(run(doc), ScaleUpRequested)]
    assert ups == [(60_000, 1), (180_000, 1)]  # at 3m: one pod fits the node made for the first request
    nowhere = copy.deepcopy(POD_TEMPLATE)
    nowhere["template"]["spec"]["nodeSelector"] = {"pool": "none"}  # no group has that label: not provisionable
    result = run(scenario([{"at": "1m", "create": PROVREQ}, {"at": "3m", "apply": POD_TEMPLATE}], [nowhere], nodes=0))
    ups = [t for t, _ in events(result, ScaleUpRequested)]
    assert len(ups) == 1 and ups[0] > 180_000  # a retry after the template changed finds a group


def test_a_workload_created_mid_run_lets_its_gang_schedule_then() -> None:
    """gang-quickstart's Workload created at 2m instead of t=0: its pods wait for it (missing), then the gang is
    placed as before, from 2m."""
    import yaml

    doc = yaml.safe_load((ROOT / "scenarios" / "gang-quickstart.yaml").read_text())
    workload = doc["spec"].pop("objects")[0]
    doc["spec"]["workload"].append({"at": "2m", "create": workload})
    result = run(doc)
    bound = [t for t, e in events(result, PodBound) if e.pod.startswith("pod/default/worker")]
    assert len(bound) == 4 and min(bound) >= 120_000
    early = [e.message for t, e in events(result, PodUnschedulable) if t < 120_000]
    assert early and all('workload "pretrain" to appear' in m for m in early)


def test_a_claim_held_by_a_gang_waiting_at_permit_stays_until_the_gang_lets_it_go() -> None:
    """gang-quickstart with one shared (node-local) claim for its four workers: two wait at Permit holding the claim's
    allocation in the scheduler's memory when the claim is deleted at 1m. It is kept as in use (being deleted) while
    they wait; when the gang's Permit timeout (5m) releases them, nobody holds it and the claim controller removes
    it; the workers then wait for a claim that does not exist."""
    import yaml

    doc = yaml.safe_load((ROOT / "scenarios" / "gang-quickstart.yaml").read_text())
    spec = doc["spec"]
    spec["objects"] += [CLASS, CLAIM]
    spec["nodeGroups"][0]["resourceSlices"] = [{"spec": {"driver": "gpu.example.com", "devices": [{"name": "gpu-0"}]}}]
    pod_spec = spec["workload"][0]["pod"]["spec"]
    pod_spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
    pod_spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    spec["workload"].append({"at": "1m", "delete": {"apiVersion": V1, "kind": "ResourceClaim",
                                                    "metadata": {"name": "shared"}}})
    result = run(doc)
    assert [t for t, _ in events(result, ResourceClaimRemoved)] == [300_000]  # not at 1m: held at Permit until 5m
    assert events(result, PodBound) == []
    last = {e.pod: e.message for _, e in events(result, PodUnschedulable)}
    assert set(last.values()) == {"waiting for objects: ResourceClaim default/shared does not exist"}


def test_shrink_keeps_the_object_changes_that_make_the_outcome() -> None:
    """`scale-up-without-pod` in objects-over-time comes from the ProvisioningRequest (no pod consumes it): shrinking
    the inputs keeps its creation and its PodTemplate's, and drops every pod and the other object changes."""
    from dralab.replay.simulation.outcomes import resolve_target
    from dralab.replay.simulation.shrink import Shrinker

    loaded = load_scenario(SCENARIO)
    result = Shrinker(scenario_inputs(loaded, 7), resolve_target("scale-up-without-pod")).run()
    assert result.reproduced and result.after["pods"] == 0 and result.after["other"] == 2
    kinds = [type(e).__name__ for r in result.inputs[1:] for e in r.events]
    assert kinds == ["PodTemplateCreated", "ProvisioningRequestCreated"]


# ------------------------------------------------------------------ nodes


def plain_pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {**spec, "containers": [
        {"name": "main", "image": "x:1", "resources": {"requests": {"cpu": "1"}}}]}}


def node_patch(name: str = "g-0", **parts: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, **parts.pop("metadata", {})}, **parts}


def test_a_node_label_added_mid_run_lets_a_selecting_pod_schedule_then() -> None:
    doc = scenario([{"at": "0s", "pod": plain_pod("picky", nodeSelector={"team": "vision"})},
                    {"at": "2m", "apply": node_patch(metadata={"labels": {"team": "vision"}})}], [])
    doc["spec"]["nodeGroups"][0]["max"] = 1  # no other node to scale up to
    result = run(doc)
    assert bound_at(result, "picky") == 120_000
    labels = result.state.nodes["g-0"].labels
    assert labels["team"] == "vision" and labels["kubernetes.io/hostname"] == "g-0"  # merged, not replaced


def test_a_cordon_and_taints_mid_run() -> None:
    cordon = node_patch(spec={"unschedulable": True, "taints": [{"key": "maint", "effect": "NoSchedule"}]})
    uncordon = node_patch(spec={"unschedulable": False, "taints": []}, metadata={"labels": {"absent": None}})
    doc = scenario([{"at": "1m", "apply": cordon}, {"at": "90s", "pod": plain_pod("p")},
                    {"at": "3m", "apply": uncordon}], [])
    doc["spec"]["nodeGroups"][0]["max"] = 1
    result = run(doc)
    assert bound_at(result, "p") == 180_000
    assert "unschedulable" not in result.state.nodes["g-0"].manifest["spec"] and not result.state.nodes["g-0"].taints


def test_node_entry_errors() -> None:
    error = refused(scenario([{"at": "1m", "apply": node_patch("g-7")}]))
    assert error.path == "spec.workload[0].apply.metadata.name" and "not a starting node" in error.message
    error = refused(scenario([{"at": "1m", "create": node_patch()}]))
    assert error.path == "spec.workload[0].create.kind"
    error = refused(scenario([{"at": "1m", "delete": node_patch()}]))
    assert error.path == "spec.workload[0].delete.kind" and "node-fail" in error.message
    error = refused(scenario([{"at": "1m", "apply": node_patch(spec={"taints": [{"key": "k", "effect": "Often"}]})}]))
    assert error.path == "spec.workload[0].apply.spec.taints[0].effect"
    error = refused(scenario([{"at": "1m", "apply": node_patch(status={"allocatable": {"cpu": "1"}})}]))
    assert error.path.startswith("spec.workload[0].apply")


def test_preemption_reads_a_budget_created_mid_run() -> None:
    """tests/test_preemption.py's PDB case (DefaultPreemption prefers the node whose victims violate no budget): the
    budget guarding the cheap victims created at 30s, before `high` arrives at 1m, protects them as one of
    spec.objects would; deleted again at 45s, it does not."""
    from builders import arrival, group, node_template, scenario_doc, simulated, sourced_events
    from builders import pod as cpu_pod

    from dralab.core.log.events import PodTerminating

    def one(name: str, cpu: str, priority: int) -> dict[str, Any]:
        return cpu_pod(name, cpu=cpu, priority=priority)

    guarded = one("guarded", "1", -5)
    guarded["metadata"]["labels"] = {"app": "guarded"}
    low = one("low", "1", 0)
    low["spec"]["terminationGracePeriodSeconds"] = 20
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep"},
              "spec": {"selector": {"matchLabels": {"app": "guarded"}}, "maxUnavailable": 0}}
    ref = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep"}}

    def victims(changes: list[dict[str, Any]]) -> set[str]:
        d = scenario_doc([group("cpu", min=2, max=2, template=node_template(gpu=0, cpu="4"))], nodes={"cpu": 2},
                         workload=[arrival("0s", low, count=4), arrival("0s", guarded, count=4),
                                   arrival("1m", one("high", "2", 1000)), *changes], duration="10m")
        d["spec"]["kubernetes"] = {"version": "1.35"}
        result = simulated(d, 0)
        return {e.pod.rsplit("/", 1)[1].split("-")[0] for _, _, e in sourced_events(result.entries, PodTerminating)}

    assert victims([]) == {"guarded"}
    assert victims([{"at": "30s", "create": budget}]) == {"low"}
    assert victims([{"at": "30s", "create": budget}, {"at": "45s", "delete": ref}]) == {"guarded"}

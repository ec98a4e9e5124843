"""The scheduler reactor with DRA, in the simulator: claims from templates, allocation with the
structured allocator, release on completion, shared claims, pending reasons with evidence."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from dralab.core.log.events import (
    ClaimAllocated,
    ClaimReleased,
    PodUnschedulable,
    ResourceClaimCreated,
    ScaleUpRequested,
    decode_record,
)
from dralab.core.scenario.load import parse_scenario
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import simulate
from dralab.replay.simulation.verify import verify

DRA_QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "dra-quickstart.yaml"


def base() -> dict[str, Any]:
    return yaml.safe_load(DRA_QUICKSTART.read_text())


def run(doc: dict[str, Any], seed: int = 7):  # type: ignore[no-untyped-def]
    result = simulate(parse_scenario(doc, "test.yaml"), seed)
    assert result.violations == [], result.violations
    check = verify(LogFile("x", {}, result.entries))
    assert check.ok, check.divergence and check.divergence.render()
    return result


def events_of(result, kind):  # type: ignore[no-untyped-def]
    return [e for o, p in result.entries for e in decode_record(p, o).events if isinstance(e, kind)]


def test_template_claims_are_created_like_the_resourceclaim_controller() -> None:
    result = run(base())
    created = events_of(result, ResourceClaimCreated)
    assert created, "pods with template claims get claims"
    first = created[0]
    meta = first.manifest["metadata"]
    pod_name = first.pod.split("/")[2]
    assert re.fullmatch(rf"{pod_name}-{first.pod_claim}-[bcdfghjklmnpqrstvwxz2456789]{{5}}", meta["name"])
    assert meta["ownerReferences"][0]["kind"] == "Pod" and meta["ownerReferences"][0]["name"] == pod_name
    assert meta["annotations"]["resource.kubernetes.io/pod-claim-name"] == first.pod_claim


def count_policy(trains: int = 2) -> dict[str, Any]:
    doc = base()
    doc["spec"]["policy"]["autoscaler"] = "count"
    next(a for a in doc["spec"]["workload"] if a["pod"]["metadata"]["name"] == "train")["count"] = trains
    return doc


def test_topology_mismatch_is_the_pending_reason_with_evidence() -> None:
    """After the short pods end, 5 GPUs are free on the node but split 3/2 across NVLink domains:
    a 4-GPU-one-domain pod stays pending for topology, not capacity; the count-based autoscaler
    believes 5 free GPUs take a 4-GPU pod, so no node comes until the eval pods (3m) fill the node
    and the count no longer fits."""
    result = run(count_policy(trains=1))
    conditions = [e for e in events_of(result, PodUnschedulable) if e.pod == "pod/default/train"]
    first = conditions[0]
    assert (first.reason, first.cause) == ("Unschedulable", "topology")
    # DRA's rejection is UnschedulableAndUnresolvable upstream (1.34-1.37): preemption cannot help there
    assert first.message == ("0/1 nodes are available: 1 cannot allocate all claims. preemption: 0/1 nodes are "
                             "available: 1 Preemption is not helpful for scheduling.")
    assert "nvlinkDomain" in first.detail and "at most 3 free devices share one value" in first.detail
    scale_ups = [(o, decode_record(p, o).t) for o, p in result.entries
                 if any(isinstance(e, ScaleUpRequested) for e in decode_record(p, o).events)]
    assert scale_ups and scale_ups[0][1] >= 180_000  # blind for a whole minute


def test_the_dra_policy_adds_the_node_the_topology_needs() -> None:
    """dra-quickstart as written (`policy.autoscaler: dra`): the autoscaler runs the allocator on a
    template node's slices, adds one node, and the two `train` pods take one NVLink domain each there."""
    result = run(base())
    assert result.state.pending_pods() == []
    trains = [p for p in result.state.pods.values() if p.key.split("/")[2].startswith("train")]
    assert {p.node for p in trains} == {"h100-8x-1"}
    allocated = [e for e in events_of(result, ClaimAllocated) if e.pod in {p.key for p in trains}]
    domains = {tuple(sorted(r["device"] for r in e.allocation["devices"]["results"])) for e in allocated}
    assert domains == {("gpu-0", "gpu-1", "gpu-2", "gpu-3"), ("gpu-4", "gpu-5", "gpu-6", "gpu-7")}


def test_allocations_are_exactly_what_the_claims_ask_and_devices_return_on_completion() -> None:
    result = run(count_policy())
    allocated = events_of(result, ClaimAllocated)
    released = events_of(result, ClaimReleased)
    # every short and eval pod finished: its claim released and deallocated
    finished = {k for k in result.state.pods_by_phase["Succeeded"]}
    assert finished and {r.pod for r in released} == finished and all(r.deallocate for r in released)
    # a device freed by a finished pod is allocated again later
    devices = [r["device"] for a in allocated for r in a.allocation["devices"]["results"]]
    assert len(devices) > len(set(devices))
    for a in allocated:  # each allocation pins its claim to the node of its devices
        (node,) = a.allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"]
        assert {r["pool"] for r in a.allocation["devices"]["results"]} == {node}
        assert result.state.pods[a.pod].node == node


def test_missing_template_is_pending_with_a_reason_naming_it_not_a_crash() -> None:
    doc = base()
    pod = doc["spec"]["workload"][0]["pod"]
    pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "no-such-template"
    result = run(doc)
    (p,) = [p for p in result.state.pending_pods() if p.key.endswith("/long-a")]
    assert p.condition is not None
    assert (p.condition.reason, p.condition.cause) == ("NotReadyForScheduling", "missing")
    assert "ResourceClaimTemplate default/no-such-template does not exist" in p.condition.message


def test_missing_class_is_pending_with_a_reason_naming_it() -> None:
    doc = base()
    template = next(o for o in doc["spec"]["objects"] if o["metadata"]["name"] == "one-gpu")
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "no-such-class"
    result = run(doc)
    causes = {p.condition.cause for p in result.state.pending_pods() if p.condition}
    assert "missing" in causes
    assert any("DeviceClass no-such-class" in (p.condition.message if p.condition else "")
               for p in result.state.pending_pods())


def test_shared_claim_is_allocated_once_and_reserved_for_every_consumer() -> None:
    doc = base()
    doc["spec"]["objects"].append({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "shared-gpu", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
    })
    pod = copy.deepcopy(doc["spec"]["workload"][0]["pod"])
    pod["metadata"]["name"] = "sharer"
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared-gpu"}]
    doc["spec"]["workload"].append({"at": "5s", "count": 3, "pod": pod})
    result = run(doc)
    allocations = [a for a in events_of(result, ClaimAllocated) if a.claim == "claim/default/shared-gpu"]
    assert len(allocations) == 1
    claim = result.state.dra.claims["claim/default/shared-gpu"]
    assert set(claim.reserved_for) == {f"pod/default/sharer-{i}" for i in range(3)}


def test_same_seed_same_log_with_dra() -> None:
    a, b = simulate(parse_scenario(base(), "x"), 3), simulate(parse_scenario(base(), "x"), 3)
    assert a.entries == b.entries

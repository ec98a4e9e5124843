"""The provisioning scenarios of scenarios/ (issue 5), each with its expected outcome per autoscaler
policy, as the scenario file documents it. Every run keeps the invariants and replays exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from dralab.core.log.events import ScaleUpRequested, decode_record
from dralab.core.scenario.load import Policy, load_scenario
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import SimResult, simulate
from dralab.replay.simulation.verify import verify

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def run(name: str, policy: str, seed: int | None = None) -> SimResult:
    scenario = load_scenario(SCENARIOS / f"{name}.yaml")
    scenario = msgspec.structs.replace(scenario, policy=Policy(autoscaler=policy))  # type: ignore[arg-type]
    result = simulate(scenario, scenario.seed if seed is None else seed)
    assert result.violations == [], result.violations
    checked = verify(LogFile(name, {}, result.entries))
    assert checked.ok, checked.divergence and checked.divergence.render()
    return result


def scale_ups(result: SimResult) -> list[tuple[int, ScaleUpRequested]]:
    return [(decode_record(p, o).t, e) for o, p in result.entries for e in decode_record(p, o).events
            if isinstance(e, ScaleUpRequested)]


def added(result: SimResult) -> dict[str, int]:
    return {name: g.created - g.initial for name, g in sorted(result.state.node_groups.items())}


def causes(result: SimResult) -> dict[str, Any]:
    out: dict[str, int] = {}
    for pod in result.state.pending_pods():
        cause = pod.condition.cause if pod.condition else "not-yet-tried"
        out[cause] = out.get(cause, 0) + 1
    return out


def test_topology_mismatch_count_adds_wrong_shaped_nodes_and_pods_stay_pending() -> None:
    result = run("topology-mismatch", "count")
    assert added(result) == {"split": 4, "whole": 0}
    assert len(scale_ups(result)) == 1  # and never again: it believes the pods fit the nodes it added
    assert causes(result) == {"topology": 4}


@pytest.mark.parametrize("policy", ["dra", "atomic"])
def test_topology_mismatch_dra_adds_the_right_nodes(policy: str) -> None:
    result = run("topology-mismatch", policy)
    assert added(result) == {"split": 0, "whole": 2}
    assert result.state.pending_pods() == []


def conditions(result: SimResult, request: str = "default/pretrain") -> list[tuple[int, str, str, str]]:
    from dralab.core.log.events import ProvisioningRequestCondition

    return [(decode_record(p, o).t, e.condition, e.status, e.reason) for o, p in result.entries
            for e in decode_record(p, o).events if isinstance(e, ProvisioningRequestCondition) and e.request == request]


@pytest.mark.parametrize("policy", ["count", "dra", "atomic"])
def test_booking_theft_unrelated_pods_take_the_booked_capacity(policy: str) -> None:
    result = run("booking-theft", policy)
    ups = scale_ups(result)
    assert [(e.group, e.delta, e.atomic) for _, e in ups] == [("gpu", 2, True)]
    conds = conditions(result)
    assert [c[1:] for c in conds] == [("Accepted", "True", "Accepted"),
                                      ("Provisioned", "True", "CapacityIsProvisioned"),
                                      ("BookingExpired", "True", "CapacityReservationTimeExpired")]
    provisioned_t, expired_t = conds[1][0], conds[2][0]
    assert 600_000 <= expired_t - provisioned_t < 620_000  # the 10-minute booking, at the next scan
    pods = result.state.pods
    assert all(pods[f"pod/default/batch-{i}"].node for i in range(2))
    assert causes(result) == {"capacity": 2}  # the trainers: no regular scale-up for consumers


def events(result: SimResult, kind: type) -> list[tuple[int, Any]]:
    return [(decode_record(p, o).t, e) for o, p in result.entries for e in decode_record(p, o).events
            if isinstance(e, kind)]


@pytest.mark.parametrize("policy", ["count", "dra", "atomic"])
def test_provision_timeout_the_late_node_arrives_billed_and_idle(policy: str) -> None:
    from dralab.core.analysis.metrics import metrics_from_entries
    from dralab.core.log.events import NodeReady, ScaleUpTimedOut

    result = run("provision-timeout", policy)
    assert [(t, e.group) for t, e in events(result, ScaleUpTimedOut)] == [(990_000, "spot-slow")]
    assert added(result) == {"ondemand": 1, "spot-slow": 1}
    assert result.state.pods["pod/default/train"].node == "ondemand-0"
    ready = {e.name: t for t, e in events(result, NodeReady)}
    assert ready["spot-slow-0"] == 1_230_000 and not result.state.nodes["spot-slow-0"].pods
    metrics = metrics_from_entries(result.entries, 30 * 60_000)
    assert metrics.contract()["gpu_hours_idle"] > 1.0  # the late node, 10 min of 8 idle GPUs


@pytest.mark.parametrize("policy", ["count", "dra", "atomic"])
def test_scale_down_race_kills_the_pod_bound_after_the_taint(policy: str) -> None:
    from dralab.core.log.events import NodeDeleted, PodFinished

    result = run("scale-down-race", policy)
    assert [(t, e.pod, e.phase) for t, e in events(result, PodFinished)] == [(660_000, "pod/default/a", "Failed")]
    assert [e.name for _, e in events(result, NodeDeleted)] == ["gpu-0"]


@pytest.mark.parametrize("protection", ["nominated-node-name", "recheck"])
def test_scale_down_race_does_not_happen_with_either_default_protection(protection: str) -> None:
    import yaml

    from dralab.core.log.events import NodeDeleted
    from dralab.core.scenario.load import parse_scenario

    doc = yaml.safe_load((SCENARIOS / "scale-down-race.yaml").read_text())
    if protection == "recheck":
        doc["spec"]["autoscaler"]["scaleDown"]["recheckBeforeDelete"] = True
    else:
        doc["spec"]["scheduler"]["featureGates"]["NominatedNodeNameForExpectation"] = True
    result = simulate(parse_scenario(doc, "race.yaml"), 1)
    assert result.violations == []
    assert events(result, NodeDeleted) == []
    assert all(p.phase == "Running" for p in result.state.pods.values())


def test_partial_gang_dra_pays_for_five_nodes_no_pod_runs_on() -> None:
    from dralab.core.analysis.metrics import metrics_from_entries
    from dralab.core.log.events import ScaleUpFailed

    result = run("partial-gang", "dra")
    assert added(result) == {"h100": 5}
    assert [(e.delta, e.reason) for _, e in events(result, ScaleUpFailed)][0] == (3, "out-of-stock")
    assert result.state.pods_by_phase["Running"] == {} and result.state.pods_by_phase["Succeeded"] == {}
    metrics = metrics_from_entries(result.entries, 30 * 60_000)
    contract, details = metrics.contract(), metrics.details()
    assert contract["gpu_hours_paid"] > 15 and details["gpu_hours_used"] == 0  # paid for, never worked
    assert contract["gpu_hours_idle"] >= 0.75 * contract["gpu_hours_paid"]  # mostly held at Permit


def test_partial_gang_atomic_pays_for_nothing() -> None:
    from dralab.core.log.events import ScaleUpFailed

    result = run("partial-gang", "atomic")
    requested = scale_ups(result)
    assert requested and all(e.atomic and e.delta == 8 for _, e in requested)
    assert all(e.delta == 8 for _, e in events(result, ScaleUpFailed))
    assert added(result) == {"h100": 0}
    assert causes(result) == {"capacity": 8}


def test_partial_gang_through_a_best_effort_atomic_request_pays_for_nothing() -> None:
    import yaml

    from dralab.core.scenario.load import parse_scenario

    doc = yaml.safe_load((SCENARIOS / "partial-gang.yaml").read_text())
    worker = doc["spec"]["workload"][0]["pod"]
    doc["spec"]["objects"] += [
        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "worker"},
         "template": {"spec": {k: v for k, v in worker["spec"].items() if k != "workloadRef"}}},
        {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": {"name": "pretrain"},
         "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                  "podSets": [{"podTemplateRef": {"name": "worker"}, "count": 8}]}},
    ]
    worker["metadata"]["annotations"] = {"autoscaling.x-k8s.io/consume-provisioning-request": "pretrain"}
    result = simulate(parse_scenario(doc, "pg.yaml"), 2)
    assert result.violations == []
    assert verify(LogFile("x", {}, result.entries)).ok
    assert all(e.atomic and e.delta == 8 for _, e in scale_ups(result))
    assert added(result) == {"h100": 0}
    reasons = [c[1:] for c in conditions(result)]
    assert ("Provisioned", "True", "CapacityIsProvisioned") in reasons
    assert ("Provisioned", "False", "CapacityIsNotFound") in reasons  # the cloud could not deliver 8


def test_booking_theft_with_capacity_revoked_provisions_again_and_the_trainers_run() -> None:
    """The option `capacityRevoked`: once the batch pods have taken the booked nodes, the booking no
    longer fits the autoscaler's snapshot: CapacityRevoked=True, Provisioned=False, a second atomic
    scale-up, and the trainers run."""
    import yaml

    from dralab.core.scenario.load import parse_scenario

    doc = yaml.safe_load((SCENARIOS / "booking-theft.yaml").read_text())
    doc["spec"]["autoscaler"] = {"capacityRevoked": True}
    result = simulate(parse_scenario(doc, "bt.yaml"), 3)
    assert result.violations == [] and verify(LogFile("x", {}, result.entries)).ok
    reasons = [c[1:] for c in conditions(result)]
    assert ("CapacityRevoked", "True", "CapacityNotAvailable") in reasons
    assert [(e.delta, e.atomic) for _, e in scale_ups(result)] == [(2, True), (2, True)]
    assert result.state.pending_pods() == []
    assert reasons[-1] == ("BookingExpired", "True", "CapacityBookingConsumed")


def test_booking_theft_with_reserved_bookings_the_trainers_get_their_nodes() -> None:
    """The option `reserveBookings` (dralab's model of the integrated design): the nodes of the atomic
    scale-up carry a reservation taint only the request's consumers pass; the batch pods cannot take
    them and get nodes of their own; the trainers run on the booked nodes; the booking is consumed and
    the taints are lifted."""
    import yaml

    from dralab.core.kube.provreq import BOOKING_TAINT
    from dralab.core.log.events import NodeTaintsChanged, PodBound
    from dralab.core.scenario.load import parse_scenario

    doc = yaml.safe_load((SCENARIOS / "booking-theft.yaml").read_text())
    doc["spec"]["autoscaler"] = {"reserveBookings": True}
    result = simulate(parse_scenario(doc, "bt.yaml"), 3)
    assert result.violations == [] and verify(LogFile("x", {}, result.entries)).ok
    assert result.state.pending_pods() == []
    ups = scale_ups(result)
    assert ups[0][1].booking == "default/pretrain" and ups[0][1].atomic
    assert [e.booking for _, e in ups[1:]] == [""] * (len(ups) - 1)  # the batch pods' own scale-up
    bound = {e.pod: e.node for _, e in events(result, PodBound)}
    booked = {"gpu-0", "gpu-1"}
    assert {bound["pod/default/trainer-0"], bound["pod/default/trainer-1"]} == booked
    assert not {bound["pod/default/batch-0"], bound["pod/default/batch-1"]} & booked
    assert [c[1:] for c in conditions(result)][-1] == ("BookingExpired", "True", "CapacityBookingConsumed")
    lifted = [e.name for _, e in events(result, NodeTaintsChanged)
              if not any(t.get("key") == BOOKING_TAINT for t in e.taints)]
    assert set(lifted) == booked

"""ProvisioningRequests through the autoscaler (core/autoscaler/provisioning/provreq_broker.py): check-capacity,
best-effort-atomic, retry backoff, noRetry, booking consumed, the 7-day expiry and garbage collection,
and bad input named by path."""

from __future__ import annotations

from typing import Any

import pytest
from builders import GPU_TOLERATION, Log, arrival, group, node_template, pod, scenario_doc

from dralab.core.autoscaler.provisioning.provreq_broker import Broker
from dralab.core.kube.provreq import (
    BOOKING_MS,
    EXPIRATION_MS,
    MAX_UPDATED,
    TERMINAL_TTL_MS,
    check_pod_template,
    check_provisioning_request,
    retry_backoff_ms,
)
from dralab.core.log.events import (
    AnyEvent,
    PodTemplateCreated,
    ProvisioningRequestCondition,
    ProvisioningRequestCreated,
    ProvisioningRequestDeleted,
    ScaleUpRequested,
    decode_record,
)
from dralab.core.scenario.load import ScenarioError, parse_scenario
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import SimResult, simulate
from dralab.replay.simulation.verify import verify


def template(gpu: int = 8) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "worker"},
            "template": {"spec": {"tolerations": [GPU_TOLERATION], "containers": [
                {"name": "w", "image": "w:1", "resources": {"limits": {"nvidia.com/gpu": str(gpu)}}}]}}}


def request(cls: str, count: int = 2, **params: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"provisioningClassName": f"{cls}.autoscaling.x-k8s.io",
                            "podSets": [{"podTemplateRef": {"name": "worker"}, "count": count}]}
    if params:
        spec["parameters"] = params
    return {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": {"name": "req"},
            "spec": spec}


def consumer(name: str) -> dict[str, Any]:
    manifest = pod(name, gpu=8, tolerations=[GPU_TOLERATION])
    manifest["metadata"]["annotations"] = {"autoscaling.x-k8s.io/consume-provisioning-request": "req"}
    return manifest


def doc(objects: list[dict[str, Any]], *, nodes: int = 0, max_nodes: int = 4, workload: list[Any] | None = None,
        duration: str = "20m") -> dict[str, Any]:
    d = scenario_doc([group("gpu", max=max_nodes, delay="1m", template=node_template(gpu=8))],
                     nodes={"gpu": nodes} if nodes else None, workload=workload, duration=duration)
    d["spec"]["objects"] = objects
    return d


def run(d: dict[str, Any]) -> SimResult:
    result = simulate(parse_scenario(d, "pr.yaml"), 1)
    assert result.violations == [], result.violations
    assert verify(LogFile("x", {}, result.entries)).ok
    return result


def conds(result: SimResult) -> list[tuple[int, str, str, str]]:
    return [(decode_record(p, o).t, e.condition, e.status, e.reason) for o, p in result.entries
            for e in decode_record(p, o).events if isinstance(e, ProvisioningRequestCondition)]


def ups(result: SimResult) -> list[ScaleUpRequested]:
    return [e for o, p in result.entries for e in decode_record(p, o).events if isinstance(e, ScaleUpRequested)]


def test_check_capacity_that_fits_is_provisioned_without_a_scale_up() -> None:
    result = run(doc([template(), request("check-capacity")], nodes=2))
    assert [c[1:] for c in conds(result)][:2] == [("Accepted", "True", "Accepted"),
                                                  ("Provisioned", "True", "CapacityIsFound")]
    assert ups(result) == []


def test_check_capacity_that_does_not_fit_retries_with_backoff() -> None:
    result = run(doc([template(), request("check-capacity")], nodes=1, duration="10m"))
    tries = [t for t, kind, status, _ in conds(result) if kind == "Provisioned" and status == "False"]
    assert tries and ups(result) == []  # check-capacity never scales up
    gaps = [b - a for a, b in zip(tries, tries[1:], strict=False)]
    assert all(gap >= retry_backoff_ms(i + 1) for i, gap in enumerate(gaps))
    assert [retry_backoff_ms(n) for n in (1, 2, 3, 4, 5)] == [60_000, 120_000, 240_000, 480_000, 600_000]


def test_check_capacity_with_no_retry_fails() -> None:
    result = run(doc([template(), request("check-capacity", noRetry="true")], nodes=1))
    assert ("Failed", "True", "CapacityIsNotFound") in [c[1:] for c in conds(result)]


def test_best_effort_atomic_scales_one_group_for_all_and_the_booking_is_consumed() -> None:
    result = run(doc([template(), request("best-effort-atomic-scale-up")],
                     workload=[arrival("3m", consumer("w"), count=2)]))
    assert [(e.group, e.delta, e.atomic) for e in ups(result)] == [("gpu", 2, True)]
    reasons = [c[1:] for c in conds(result)]
    assert reasons[-1] == ("BookingExpired", "True", "CapacityBookingConsumed")
    assert result.state.pending_pods() == []


def test_best_effort_atomic_that_no_group_can_take_whole_is_not_provisioned() -> None:
    result = run(doc([template(), request("best-effort-atomic-scale-up", count=5)], max_nodes=4, duration="5m"))
    assert ups(result) == []
    assert ("Provisioned", "False", "CapacityIsNotFound") in [c[1:] for c in conds(result)]


def test_a_request_naming_a_missing_template_fails() -> None:
    result = run(doc([request("check-capacity")], nodes=1))
    assert ("Failed", "True", "FailedToCreatePods") in [c[1:] for c in conds(result)]


# ---------------------------------------------------------------- lifetime: 7-day expiry, garbage collection

DAY = 24 * 3_600_000


def test_lifetime_constants_are_upstreams() -> None:
    """cluster-autoscaler processors/provreq/processor.go: defaultExpirationTime and
    defaultTerminalProvReqTTL are 7 days, defaultMaxUpdated 20, defaultReservationTime 10 minutes."""
    assert (EXPIRATION_MS, TERMINAL_TTL_MS, MAX_UPDATED, BOOKING_MS) == (7 * DAY, 7 * DAY, 20, 600_000)


def requests_log(n: int = 1, cls: str = "check-capacity") -> Log:
    """A fold holding the PodTemplate and `n` requests `req-<i>`, all created at t=0."""
    events: list[AnyEvent] = [PodTemplateCreated(manifest=check_pod_template(template(), "t"))]
    for i in range(n):
        manifest = request(cls)
        manifest["metadata"]["name"] = f"req-{i}"
        events.append(ProvisioningRequestCreated(manifest=check_provisioning_request(manifest, "r")))
    log = Log()
    log.append(*events, t=0)
    return log


def loop(log: Log, now: int) -> list[AnyEvent]:
    """One loop's start: what the broker's expire() decides at `now`; appended to the log."""
    events = Broker(log.state, now, {}).expire()
    if events:
        log.append(*events, t=now)
    return events


def condition(log: Log, kind: str, status: str, reason: str, t: int, key: str = "default/req-0") -> None:
    log.append(ProvisioningRequestCondition(request=key, condition=kind, status=status, reason=reason), t=t)


def test_a_request_not_provisioned_in_7_days_fails_as_expired() -> None:
    log = requests_log()
    condition(log, "Accepted", "True", "Accepted", t=10_000)
    condition(log, "Provisioned", "False", "CapacityIsNotFound", t=6 * DAY)  # still retrying
    assert loop(log, EXPIRATION_MS) == []  # upstream: created + 7 days *before* now
    [failed] = loop(log, EXPIRATION_MS + 1)
    assert isinstance(failed, ProvisioningRequestCondition)
    assert (failed.request, failed.condition, failed.status, failed.reason, failed.message) == (
        "default/req-0", "Failed", "True", "Expired", "ProvisioningRequest is expired")
    assert log.state.provisioning.requests["default/req-0"].is_true("Failed")
    assert loop(log, EXPIRATION_MS + 10_000) == []  # failed once; not handled any more


def test_a_request_failed_as_expired_is_not_handled_in_the_same_loop() -> None:
    log = requests_log()
    broker = Broker(log.state, EXPIRATION_MS + 1, {})
    assert broker.next_request() is not None
    assert [e.condition for e in broker.expire() if isinstance(e, ProvisioningRequestCondition)] == ["Failed"]
    assert broker.next_request() is None


def test_a_provisioned_request_never_expires_and_is_deleted_7_days_after_provisioned() -> None:
    log = requests_log()
    condition(log, "Provisioned", "True", "CapacityIsFound", t=60_000)
    [booking] = loop(log, 60_000 + BOOKING_MS)
    assert isinstance(booking, ProvisioningRequestCondition) and booking.reason == "CapacityReservationTimeExpired"
    assert loop(log, 60_000 + TERMINAL_TTL_MS) == []  # not a Failed(Expired) past 7 days from creation either
    [deleted] = loop(log, 60_000 + TERMINAL_TTL_MS + 1)
    assert deleted == ProvisioningRequestDeleted(request="default/req-0", reason=deleted.reason)
    assert log.state.provisioning.requests == {}
    assert log.state.provisioning.deleted == {"default/req-0": 60_000 + TERMINAL_TTL_MS + 1}
    assert log.state.anomalies == []


def test_an_expired_request_is_deleted_7_days_after_it_failed() -> None:
    """Created at 0, retried until day 7 (Provisioned=False, last written then), Failed at day 7: upstream
    deletes it when either condition was last written more than 7 days ago, here day 14."""
    log = requests_log()
    last_try = EXPIRATION_MS - 60_000
    condition(log, "Provisioned", "False", "CapacityIsNotFound", t=last_try)
    assert [e.reason for e in loop(log, EXPIRATION_MS + 1) if isinstance(e, ProvisioningRequestCondition)] == [
        "Expired"]
    assert loop(log, last_try + TERMINAL_TTL_MS) == []
    assert [type(e) for e in loop(log, last_try + TERMINAL_TTL_MS + 1)] == [ProvisioningRequestDeleted]
    assert log.state.provisioning.requests == {}


def test_a_request_failed_for_another_reason_is_deleted_7_days_after_it_failed() -> None:
    log = requests_log()
    condition(log, "Failed", "True", "FailedToCreatePods", t=30_000)
    assert loop(log, 30_000 + TERMINAL_TTL_MS) == []
    assert [type(e) for e in loop(log, 30_000 + TERMINAL_TTL_MS + 1)] == [ProvisioningRequestDeleted]


def test_a_request_never_tried_is_failed_but_not_deleted() -> None:
    """No Provisioned or Failed condition: nothing to measure a TTL from (until it fails as expired)."""
    log = requests_log()
    assert [e.reason for e in loop(log, 30 * DAY) if isinstance(e, ProvisioningRequestCondition)] == ["Expired"]
    assert "default/req-0" in log.state.provisioning.requests
    assert [type(e) for e in loop(log, 37 * DAY + 1)] == [ProvisioningRequestDeleted]


def test_at_most_20_requests_fail_as_expired_per_loop() -> None:
    log = requests_log(MAX_UPDATED + 5)
    assert len(loop(log, EXPIRATION_MS + 1)) == MAX_UPDATED
    assert len(loop(log, EXPIRATION_MS + 10_001)) == 5
    assert all(s.is_true("Failed") for s in log.state.provisioning.requests.values())


def test_reservation_expiries_and_expired_failures_share_the_20_updates_of_a_loop() -> None:
    """Upstream's refresh: failures are taken while fewer than 20 - (reservation expiries so far)."""
    log = requests_log(MAX_UPDATED + 5)
    condition(log, "Provisioned", "True", "CapacityIsFound", t=0, key="default/req-10")
    events = loop(log, EXPIRATION_MS + 1)
    reasons = [e.reason for e in events if isinstance(e, ProvisioningRequestCondition)]
    assert reasons.count("CapacityReservationTimeExpired") == 1
    assert reasons.count("Expired") == MAX_UPDATED - 1


def test_deleting_an_unknown_request_is_an_anomaly() -> None:
    log = requests_log()
    log.append(ProvisioningRequestDeleted(request="default/nope"), t=1)
    assert log.state.anomalies == ["offset 2: deletion of unknown ProvisioningRequest default/nope"]


def test_a_deleted_request_may_be_created_again() -> None:
    log = requests_log()
    log.append(ProvisioningRequestDeleted(request="default/req-0"), t=1)
    manifest = check_provisioning_request(request("check-capacity") | {"metadata": {"name": "req-0"}}, "r")
    log.append(ProvisioningRequestCreated(manifest=manifest), t=2)
    assert log.state.anomalies == [] and log.state.provisioning.deleted == {}
    assert log.state.provisioning.requests["default/req-0"].created_t == 2


def test_the_autoscaler_deletes_a_request_7_days_after_it_was_provisioned() -> None:
    """End to end (and replayed exactly): provisioned at 0, booking expired at 10 min, deleted by the
    first loop more than 7 days after Provisioned was written."""
    result = run(doc([template(), request("check-capacity")], nodes=2, duration="170h"))
    assert [c[1:] for c in conds(result)] == [("Accepted", "True", "Accepted"),
                                              ("Provisioned", "True", "CapacityIsFound"),
                                              ("BookingExpired", "True", "CapacityReservationTimeExpired")]
    deleted = [(decode_record(p, o).t, e.request) for o, p in result.entries for e in decode_record(p, o).events
               if isinstance(e, ProvisioningRequestDeleted)]
    assert deleted == [(TERMINAL_TTL_MS + 10_000, "default/req")]  # the next 10 s loop after 7 days
    assert result.state.provisioning.requests == {}


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda o: o[1]["spec"].update(provisioningClassName="queued-provisioning.gke.io"),
         "spec.objects[1].spec.provisioningClassName"),
        (lambda o: o[1]["spec"]["podSets"][0].update(count=0), "spec.objects[1].spec.podSets[0].count"),
        (lambda o: o[1]["spec"].update(podSets=[]), "spec.objects[1].spec.podSets"),
        (lambda o: o[1].update(status={"conditions": []}), "spec.objects[1].status"),
        (lambda o: o[0]["template"]["spec"]["containers"][0]["resources"]["limits"].update(cpu="lots"),
         "spec.objects[0].template.spec.containers[0].resources.limits.cpu"),
        (lambda o: o[1].update(apiVersion="autoscaling.x-k8s.io/v1beta1"), "spec.objects[1].apiVersion"),
    ],
)
def test_bad_requests_are_refused_with_their_path(edit, path: str) -> None:  # type: ignore[no-untyped-def]
    objects = [template(), request("check-capacity")]
    edit(objects)
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc(objects), "pr.yaml")
    assert info.value.path == path


# ---------------------------------------------------------------- virtual pods with claims (autoscaler#10065)

GPU_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
             "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}
FOUR_GPUS = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "four"},
             "spec": {"spec": {"devices": {"requests": [
                 {"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": 4}}]}}}}


def claim_template_doc(cls: str, *, nodes: int, claims: str | None = None, policy: str = "dra") -> dict[str, Any]:
    """A DRA node group (4 devices a node) and a request for 2 pods whose template claims 4 devices each."""
    g = group("dra", max=4, delay="1m", template=node_template(gpu=0))
    g["resourceSlices"] = [{"spec": {"driver": "gpu.example.com", "devices": [{"name": f"gpu-{i}"} for i in range(4)]}}]
    worker = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "worker"}, "template": {"spec": {
        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "four"}],
        "containers": [{"name": "w", "image": "w:1", "resources": {"claims": [{"name": "gpus"}]}}]}}}
    d = scenario_doc([g], nodes={"dra": nodes} if nodes else None, duration="10m")
    d["spec"]["objects"] = [GPU_CLASS, FOUR_GPUS, worker, request(cls)]
    d["spec"]["policy"] = {"autoscaler": policy}
    if claims is not None:
        d["spec"]["autoscaler"] = {"provisioningRequestClaims": claims}
    return d


@pytest.mark.parametrize("policy", ["count", "dra"])
def test_virtual_pods_claims_are_made_in_memory_so_check_capacity_finds_capacity(policy: str) -> None:
    # set explicitly: the release's default is autoscaler#10065 (open in every release, core/kube/bugs.py)
    result = run(claim_template_doc("check-capacity", nodes=2, policy=policy, claims="materialize"))
    assert [c[1:] for c in conds(result)][:2] == [("Accepted", "True", "Accepted"),
                                                  ("Provisioned", "True", "CapacityIsFound")]
    assert result.state.dra.claims == {}  # made for the simulation only, never written


def test_the_bug_leaves_virtual_pods_claims_unresolved_and_capacity_is_never_found() -> None:
    result = run(claim_template_doc("check-capacity", nodes=2, claims="unresolved"))
    reasons = [c[1:] for c in conds(result)]
    assert ("Provisioned", "True", "CapacityIsFound") not in reasons
    assert ("Provisioned", "False", "CapacityIsNotFound") in reasons


def test_best_effort_atomic_with_claims_scales_up_for_the_whole_request() -> None:
    result = run(claim_template_doc("best-effort-atomic-scale-up", nodes=0, claims="materialize"))
    assert [(e.group, e.delta, e.atomic) for e in ups(result)] == [("dra", 2, True)]
    assert ups(run(claim_template_doc("best-effort-atomic-scale-up", nodes=0, claims="unresolved"))) == []


def test_an_unknown_claims_mode_is_refused_with_its_path() -> None:
    with pytest.raises(ScenarioError, match="spec.autoscaler.provisioningRequestClaims"):
        parse_scenario(claim_template_doc("check-capacity", nodes=1, claims="sometimes"), "pr.yaml")

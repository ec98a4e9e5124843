"""ProvisioningRequests through the autoscaler (core/reactors/provreq_broker.py): check-capacity,
best-effort-atomic, retry backoff, noRetry, booking consumed, and bad input named by path."""

from __future__ import annotations

from typing import Any

import pytest
from builders import GPU_TOLERATION, arrival, group, node_template, pod, scenario_doc

from dralab.core.events import ProvisioningRequestCondition, ScaleUpRequested, decode_record
from dralab.core.provreq import retry_backoff_ms
from dralab.core.scenario import ScenarioError, parse_scenario
from dralab.replay.logfile import LogFile
from dralab.replay.sim import SimResult, simulate
from dralab.replay.verify import verify


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

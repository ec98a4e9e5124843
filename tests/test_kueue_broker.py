"""The provisioning broker (Kueue's ProvisioningRequest admission check, core/controllers/kueue_broker.py) and
scheduling gates: pods held by Kueue's gate until a request is Provisioned, retries with backoff, the
retry limit, pod groups, managed resources, and what the scheduler and the autoscaler do with gated pods.
Every run keeps the invariants and replays exactly (builders.simulated)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dralab.core.analysis.metrics import metrics_from_entries
from dralab.core.controllers.kueue_broker import KueueBroker
from dralab.core.kube.kueue import ADMISSION_GATE, retry_delay_ms
from dralab.core.kube.versions import LEGACY_PROFILE
from dralab.core.log.events import (
    AdmissionCheckUpdated,
    PodTemplateCreated,
    PodUngated,
    ProvisioningRequestCondition,
    ProvisioningRequestCreated,
    ScaleUpRequested,
)
from dralab.core.run.config import build_reactors, run_config
from dralab.core.scenario.load import ScenarioError, load_scenario, parse_scenario
from dralab.core.state.cluster import PENDING, RUNNING
from tests.builders import (
    arrival,
    group,
    key,
    node_template,
    pod,
    record,
    scenario_doc,
    simulated,
    simulated_scenario,
    sourced_events,
)

ROOT = Path(__file__).resolve().parents[1]
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"


def kueue_objects(cls: str = CHECK_CAPACITY, *, parameters: dict[str, str] | None = None,
                  retry: dict[str, int] | None = None, managed: list[str] | None = None) -> list[dict[str, Any]]:
    spec: dict[str, Any] = {"provisioningClassName": cls}
    if parameters:
        spec["parameters"] = parameters
    if retry:
        spec["retryStrategy"] = retry
    if managed is not None:
        spec["managedResources"] = managed
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ProvisioningRequestConfig", "metadata": {"name": "prc"},
         "spec": spec},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck", "metadata": {"name": "capacity"},
         "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prc"}}},
    ]


def queued(name: str, *, gpu: int = 8, group_name: str | None = None, total: int | None = None) -> dict[str, Any]:
    manifest = pod(name, gpu=gpu, cpu="8")
    manifest["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "training"}
    if group_name is not None:
        manifest["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = group_name
        manifest["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": str(total)}
    return manifest


def doc(workload: list[dict[str, Any]], objects: list[dict[str, Any]], *, nodes: int = 2, max_nodes: int | None = None,
        duration: str = "20m") -> dict[str, Any]:
    d = scenario_doc([group("gpu", min=0, max=nodes if max_nodes is None else max_nodes, delay="60s",
                            template=node_template(gpu=8))],
                     nodes={"gpu": nodes} if nodes else None, workload=workload, duration=duration,
                     scan_interval="10s")
    d["spec"]["objects"] = objects
    d["spec"]["policy"] = {"autoscaler": "dra"}
    return d


def checks(result: Any) -> list[tuple[int, str, int, int]]:
    return [(t, e.state, e.attempt, e.retry_at) for t, _, e in sourced_events(result.entries, AdmissionCheckUpdated)]


# ---------------------------------------------------------------- the scenario file


def test_kueue_retry_scenario_admits_on_the_fourth_attempt_after_the_capacity_came_back() -> None:
    """scenarios/kueue-retry.yaml under the legacy model (the logs written before Kueue releases were modelled;
    tests/test_kueue_release.py runs it as Kueue 0.19 and 0.14): three Failed check-capacity requests 1, 2 and
    4 min apart, the fourth finds the capacity the batch pods left at 6m, the group runs from 490s; the two nodes
    idle meanwhile (Kueue's backoff, not the capacity, kept the trainers waiting)."""
    sc = load_scenario(ROOT / "scenarios" / "kueue-retry.yaml", profile=LEGACY_PROFILE)
    result = simulated_scenario(sc, sc.seed or 0)
    assert checks(result) == [
        (30_000, "Pending", 1, -1), (40_000, "Retry", 1, 100_000),
        (100_000, "Pending", 2, -1), (110_000, "Retry", 2, 230_000),
        (230_000, "Pending", 3, -1), (240_000, "Retry", 3, 480_000),
        (480_000, "Pending", 4, -1), (490_000, "Ready", 4, -1),
    ]
    requests = result.state.provisioning.requests
    assert sorted(requests) == [f"default/pretrain-capacity-{i}" for i in range(1, 5)]
    assert [requests[f"default/pretrain-capacity-{i}"].is_true("Failed") for i in range(1, 5)] == [True] * 3 + [False]
    assert requests["default/pretrain-capacity-4"].is_true("Provisioned")
    for name in ("trainer-0", "trainer-1"):
        trainer = result.state.pods[key(name)]
        assert trainer.phase == RUNNING and trainer.bound_t == 490_000
        assert "schedulingGates" not in trainer.manifest["spec"]
        assert trainer.manifest["metadata"]["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"] == \
            "pretrain-capacity-4"
    assert not sourced_events(result.entries, ScaleUpRequested)
    # 16 GPUs free from 360 s to 490 s while the gated trainers ask for nothing: idle, not "wanted"
    metrics = metrics_from_entries(result.entries, sc.duration_ms)
    assert metrics.gpu_hours_idle == pytest.approx(16 * 130 / 3600)
    assert metrics.pending_pod_seconds_by_reason == {"gated": 920.0}


# ---------------------------------------------------------------- admission, retries, rejection


def test_an_atomic_request_scales_up_then_the_group_is_admitted_and_consumes_it() -> None:
    """best-effort-atomic through Kueue: the pods stay gated (they never trigger a regular scale-up), the
    autoscaler provisions 2 nodes for the request in one atomic scale-up, Kueue admits the group with the
    consume annotation, and the pods run on the new nodes."""
    d = doc([arrival("10s", queued("train", group_name="g", total=2), count=2)], kueue_objects(ATOMIC), nodes=0,
            max_nodes=4)
    result = simulated(d, 1)
    ups = sourced_events(result.entries, ScaleUpRequested)
    assert [(e.group, e.delta, e.atomic, e.booking) for _, _, e in ups] == [("gpu", 2, True, "")]
    states = [s for _, s, _, _ in checks(result)]
    assert states == ["Pending", "Ready"]
    ungated = sourced_events(result.entries, PodUngated)
    assert {e.pod for _, _, e in ungated} == {key("train-0"), key("train-1")}
    assert all(e.annotations["autoscaling.x-k8s.io/consume-provisioning-request"] == "g-capacity-1"
               for _, _, e in ungated)
    assert all(result.state.pods[key(f"train-{i}")].phase == RUNNING for i in range(2))
    # The request's pod set is the pods' template, without Kueue's gate.
    templates = [e.manifest for _, _, e in sourced_events(result.entries, PodTemplateCreated)]
    assert [t["metadata"]["name"] for t in templates] == ["ppt-g-capacity-1-main"]
    assert "schedulingGates" not in templates[0]["template"]["spec"]
    (created,) = [e.manifest for _, _, e in sourced_events(result.entries, ProvisioningRequestCreated)]
    assert created["spec"]["podSets"] == [{"podTemplateRef": {"name": "ppt-g-capacity-1-main"}, "count": 2}]


def test_the_retry_limit_rejects_the_workload_and_its_pods_stay_gated() -> None:
    d = doc([arrival("0s", pod("batch", gpu=8, cpu="8"), count=2),
             arrival("10s", queued("train"))],
            kueue_objects(parameters={"noRetry": "true"},
                          retry={"backoffLimitCount": 1, "backoffBaseSeconds": 30}))
    result = simulated(d, 1)
    states = checks(result)
    assert [s for _, s, _, _ in states] == ["Pending", "Retry", "Pending", "Rejected"]
    assert states[1][3] == states[1][0] + 30_000  # retry 30 s after the first failure
    train = result.state.pods[key("train")]
    assert train.phase == PENDING and train.condition is not None and train.condition.reason == "SchedulingGated"
    assert train.condition.cause == "gated"
    assert not sourced_events(result.entries, PodUngated)


def test_a_pod_group_waits_for_all_its_pods() -> None:
    d = doc([arrival("10s", queued("w", group_name="trio", total=3), count=2),
             arrival("3m", {**queued("w", group_name="trio", total=3),
                            "metadata": {**queued("w", group_name="trio", total=3)["metadata"], "name": "w-2"}})],
            kueue_objects(), nodes=2)
    d["spec"]["nodeGroups"][0]["template"] = node_template(gpu=16)
    result = simulated(d, 1)
    created = sourced_events(result.entries, ProvisioningRequestCreated)
    assert [t for t, _, _ in created] == [180_000]
    assert created[0][2].manifest["spec"]["podSets"][0]["count"] == 3
    assert all(result.state.pods[key(n)].phase == RUNNING for n in ("w-0", "w-1", "w-2"))


def test_pods_not_asking_for_a_managed_resource_are_admitted_without_a_request() -> None:
    d = doc([arrival("10s", queued("cpu-only", gpu=0))], kueue_objects(managed=["nvidia.com/gpu"]))
    result = simulated(d, 1)
    assert not sourced_events(result.entries, ProvisioningRequestCreated)
    assert [(s, a) for _, s, a, _ in checks(result)] == [("Ready", 0)]
    (ungated,) = [e for _, _, e in sourced_events(result.entries, PodUngated)]
    assert ungated.annotations == {}
    assert result.state.pods[key("cpu-only")].phase == RUNNING


def test_a_booking_that_expires_before_admission_is_retried() -> None:
    """Kueue treats BookingExpired before the workload is admitted like a failure (it retries); the
    broker, deciding on a view where the request is both Provisioned and BookingExpired (it was down for
    the whole booking), retries rather than admit on an expired booking. (The legacy model: its backoff runs from
    the condition's time; Kueue's releases run it from when Kueue saw it, tests/test_kueue_release.py.)"""
    sc = parse_scenario(doc([arrival("0s", queued("train"))], kueue_objects()), "t.yaml", profile=LEGACY_PROFILE)
    config = run_config(sc)
    broker = next(r for r in build_reactors(config) if r.name == "broker")
    assert isinstance(broker, KueueBroker)
    from tests.builders import initial_state

    view = initial_state(sc, 1)
    first = broker.react(view, 0, None)  # type: ignore[arg-type]
    offset = view.offset
    view.apply(offset + 1, record(*first.events, t=0, source="broker"))
    for cond in ("Provisioned", "BookingExpired"):
        view.apply(view.offset + 1, record(ProvisioningRequestCondition(
            request="default/pod-train-capacity-1", condition=cond, status="True", reason="r"), t=600_000))
    decision = broker.react(view, 700_000, None)  # type: ignore[arg-type]
    (update,) = decision.events
    assert isinstance(update, AdmissionCheckUpdated)
    assert (update.state, update.attempt, update.retry_at) == ("Retry", 1, 600_000 + 60_000)
    again = broker.react(view, 700_000, None)  # type: ignore[arg-type]
    assert again.events == decision.events  # a pure function of the view


def test_retry_backoff_doubles_up_to_the_maximum() -> None:
    assert [retry_delay_ms(n, 60, 1800) for n in range(1, 8)] == [
        60_000, 120_000, 240_000, 480_000, 960_000, 1_800_000, 1_800_000]


# ---------------------------------------------------------------- scheduling gates without Kueue


def test_a_gated_pod_is_never_tried_and_never_scales_the_cluster_up() -> None:
    """A user's own gate (no Kueue in the scenario): the scheduler writes SchedulingGated once and the
    autoscaler, which acts on Unschedulable pods only, adds no node for it."""
    gated = pod("held", gpu=8, cpu="8")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    d = doc([arrival("0s", gated)], [], nodes=0, max_nodes=2)
    del d["spec"]["objects"]
    result = simulated(d, 1)
    held = result.state.pods[key("held")]
    assert held.phase == PENDING and held.condition is not None
    assert (held.condition.reason, held.condition.cause) == ("SchedulingGated", "gated")
    assert not sourced_events(result.entries, ScaleUpRequested)
    assert "broker" not in [r.name for r in build_reactors(run_config(parse_scenario(d, "t.yaml")))]


def test_without_an_admission_check_a_queue_label_changes_nothing() -> None:
    d = doc([arrival("0s", queued("train"))], [], nodes=1)
    del d["spec"]["objects"]
    sc = parse_scenario(d, "t.yaml")
    assert "schedulingGates" not in sc.workload[0].pod["spec"]
    assert sc.workload[0].pod["spec"].get("schedulingGates") is None


def test_kueue_pods_are_gated_when_created() -> None:
    sc = parse_scenario(doc([arrival("0s", queued("train"))], kueue_objects()), "t.yaml")
    assert sc.workload[0].pod["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]
    assert run_config(sc)["broker"]["checks"][0] == {
        "name": "capacity", "provisioning_class": CHECK_CAPACITY, "parameters": {}, "managed_resources": [],
        "backoff_limit_count": 3, "backoff_base_s": 60, "backoff_max_s": 1800}


# ---------------------------------------------------------------- bad input


def _bad(mutate: Any) -> ScenarioError:
    d = doc([arrival("0s", queued("train", group_name="g", total=1))], kueue_objects())
    mutate(d)
    with pytest.raises(ScenarioError) as info:
        parse_scenario(copy.deepcopy(d), "s.yaml")
    return info.value


@pytest.mark.parametrize(("mutate", "path", "words"), [
    (lambda d: d["spec"]["objects"][1]["spec"].update(controllerName="example.com/other"),
     "spec.objects[1].spec.controllerName", "models the admission check controller"),
    (lambda d: d["spec"]["objects"][1]["spec"]["parameters"].update(name="nope"),
     "spec.objects[1].spec.parameters.name", "no ProvisioningRequestConfig `nope`"),
    (lambda d: d["spec"]["objects"][0].update(apiVersion="kueue.x-k8s.io/v1alpha9"),
     "spec.objects[0].apiVersion", "expected one of"),
    (lambda d: d["spec"]["objects"][0]["spec"].update(provisioningClassName="queued-provisioning.gke.io"),
     "spec.objects[0].spec.provisioningClassName", "dralab models the classes"),
    (lambda d: d["spec"]["objects"][0]["spec"].update(retryStrategy={"backoffLimitCount": -1}),
     "spec.objects[0].spec.retryStrategy.backoffLimitCount", ">= 0"),
    (lambda d: d["spec"]["objects"][0]["metadata"].update(namespace="ns"),
     "spec.objects[0].metadata.namespace", "cluster-scoped"),
    (lambda d: d["spec"]["workload"][0]["pod"]["metadata"].pop("annotations"),
     "spec.workload[0].pod.metadata.annotations.kueue.x-k8s.io/pod-group-total-count", "must say how many"),
    (lambda d: d["spec"]["workload"][0]["pod"]["metadata"].update(
        annotations={"kueue.x-k8s.io/pod-group-total-count": "zero"}),
     "spec.workload[0].pod.metadata.annotations.kueue.x-k8s.io/pod-group-total-count", "positive integer"),
    (lambda d: d["spec"]["workload"][0]["pod"]["spec"].update(schedulingGates=[{"name": "a"}, {"name": "a"}]),
     "spec.workload[0].pod.spec.schedulingGates[1].name", "duplicate gate"),
    (lambda d: d["spec"]["workload"][0]["pod"]["spec"].update(schedulingGates=[{"nam": "a"}]),
     "spec.workload[0].pod.spec.schedulingGates[0].nam", "unknown field"),
])
def test_bad_kueue_input_is_refused_with_path_and_reason(mutate: Any, path: str, words: str) -> None:
    error = _bad(mutate)
    assert error.path == path, (error.path, error.message)
    assert words in error.message, error.message

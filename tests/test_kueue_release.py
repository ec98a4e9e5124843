"""Kueue as a release (core/controllers/kueue_broker.py with a release profile, kueue_workloads.py): admission check
retries that evict and requeue, per release (0.14's shared requeue count, 0.15+'s per-check retry count, the
cleanup of an evicted Workload's requests from 0.17.7), waitForPodsReady (timeout, recovery timeout, requeue
backoff, deactivation, blockAdmission), the Configuration object and its per-release defaults, and the two Kueue
bugs with both outcomes. Every run keeps the invariants and replays exactly (builders.simulated)."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.core.analysis.summary import summarize
from dralab.core.controllers.kueue_broker import KueueBroker
from dralab.core.controllers.kueue_workloads import requeue_delay_ms
from dralab.core.kube.kueue_config import pods_ready_settings
from dralab.core.log.events import (
    AdmissionCheckUpdated,
    KueueWorkloadUpdated,
    PodBound,
    PodDeleted,
    ProvisioningRequestCondition,
    ProvisioningRequestCreated,
    ProvisioningRequestDeleted,
)
from dralab.core.run.config import build_reactors, run_config
from dralab.core.scenario.load import ScenarioError, parse_scenario
from dralab.core.state.cluster import FAILED, RUNNING, SUCCEEDED
from tests.builders import initial_state, key, record, simulated, sourced_events

ROOT = Path(__file__).resolve().parents[1]


def load(name: str, **kubernetes: Any) -> dict[str, Any]:
    d: dict[str, Any] = yaml.safe_load((ROOT / "scenarios" / name).read_text())
    d["spec"].setdefault("kubernetes", {}).update(kubernetes)
    return d


def transitions(result: Any) -> list[tuple[int, str, str, int, int]]:
    return [(t, e.state, e.reason, e.count, e.requeue_at)
            for t, _, e in sourced_events(result.entries, KueueWorkloadUpdated)]


def checks(result: Any) -> list[tuple[int, str, int, int]]:
    return [(t, e.state, e.attempt, e.retry_at) for t, _, e in sourced_events(result.entries, AdmissionCheckUpdated)]


def bound(result: Any) -> list[tuple[int, str]]:
    return [(t, e.pod) for t, _, e in sourced_events(result.entries, PodBound)]


# ---------------------------------------------------------------- waitForPodsReady


def test_wait_for_pods_ready_scenario_evicts_requeues_and_runs_the_second_generation() -> None:
    """scenarios/kueue-wait-for-pods-ready.yaml, as its header says."""
    result = simulated(load("kueue-wait-for-pods-ready.yaml"), 7)
    assert transitions(result) == [
        (40_000, "Admitted", "", 0, -1),
        (340_000, "Evicted", "PodsReadyTimeout", 1, 400_000),  # admitted + 5m; requeue after 60 s (count 1)
        (400_000, "Requeued", "", 1, -1),
        (410_000, "Admitted", "", 1, -1),
        (459_061, "PodsReady", "", 1, -1),
    ]
    deleted = sourced_events(result.entries, ProvisioningRequestDeleted)
    assert [(t, e.request) for t, _, e in deleted] == [(340_000, "default/pretrain-capacity-1")]
    made = [(t, e.manifest["metadata"]["name"])
            for t, _, e in sourced_events(result.entries, ProvisioningRequestCreated)]
    assert made == [(30_000, "pretrain-capacity-1"), (400_000, "pretrain-capacity-1")]  # no retry spent
    assert [e.pod for _, _, e in sourced_events(result.entries, PodDeleted)] == [
        key("trainer-0"), key("trainer-1")]
    state = result.state
    assert state.pods[key("trainer-0")].phase == FAILED and state.pods[key("trainer-1")].phase == FAILED
    second = [p for p in state.pods.values() if p.created_t == 340_000]
    assert len(second) == 2 and all(p.phase == RUNNING for p in second)
    assert all(p.manifest["metadata"]["annotations"]["dralab.io/replaces"] in ("trainer-0", "trainer-1")
               for p in second)
    kueue = summarize(state, [])["kueue"]
    assert kueue == {"workloads": 1, "admissions": 2, "evictions": {"PodsReadyTimeout": 1}, "requeues": 1,
                     "deactivations": {}}


def test_the_workload_is_deactivated_once_the_requeuing_limit_is_reached() -> None:
    """Nodes that never come in time, timeout 2m, backoffLimitCount 1: one eviction (count 1, requeue 60 s later),
    then at the second timeout count + 1 > 1: deactivated (RequeuingLimitExceeded), its pods deleted and not made
    again, its request deleted; nothing happens after."""
    d = load("kueue-wait-for-pods-ready.yaml")
    d["spec"]["objects"][0]["waitForPodsReady"] = {"timeout": "2m", "requeuingStrategy": {"backoffLimitCount": 1}}
    d["spec"]["nodeGroups"][0]["provisionDelay"] = {"min": "1500s", "max": "1600s"}
    result = simulated(d, 7)
    assert transitions(result) == [
        (40_000, "Admitted", "", 0, -1),
        (160_000, "Evicted", "PodsReadyTimeout", 1, 220_000),
        (220_000, "Requeued", "", 1, -1),
        (230_000, "Admitted", "", 1, -1),
        (350_000, "Deactivated", "RequeuingLimitExceeded", 1, -1),
    ]
    trainers = [p for p in result.state.pods.values() if p.key.startswith("pod/default/")]
    assert len(trainers) == 4 and all(p.phase == FAILED for p in trainers)  # two generations, none replaced after
    assert summarize(result.state, [])["kueue"]["deactivations"] == {"RequeuingLimitExceeded": 1}


def test_requeue_backoff_is_wait_backoffs_steps() -> None:
    """kueue pkg/util/wait: base·2^(n-1) capped at max (60 s / 3600 s by default), jitter left out."""
    assert [requeue_delay_ms(n, 60, 3600) // 1000 for n in range(1, 9)] == [60, 120, 240, 480, 960, 1920, 3600, 3600]


def test_block_admission_holds_the_next_workload_until_the_first_is_pods_ready() -> None:
    """v1beta1 `enable: true` defaults blockAdmission to true: a second group arriving while the first is admitted
    but not PodsReady gets no quota (no request) until the first is PodsReady or, here, evicted (its nodes take 7
    minutes, the v1beta1 timeout is 5): at 340 s; with blockAdmission false it asks at once."""
    def run(block: bool) -> Any:
        d = load("kueue-wait-for-pods-ready.yaml")
        d["spec"]["objects"][0] = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
                                   "waitForPodsReady": {"enable": True, **({} if block else {"blockAdmission": False})}}
        later = copy.deepcopy(d["spec"]["workload"][0])
        later["at"] = "60s"
        later["pod"]["metadata"]["name"] = "second"
        later["pod"]["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "second"
        d["spec"]["workload"].append(later)
        d["spec"]["nodeGroups"][0]["max"] = 8
        return simulated(d, 7)

    def second_asked(result: Any) -> int:
        return min(t for t, _, e in sourced_events(result.entries, ProvisioningRequestCreated)
                   if e.manifest["metadata"]["name"].startswith("second-"))

    assert second_asked(run(False)) == 60_000
    blocked = run(True)
    first_out = min(t for t, _, e in sourced_events(blocked.entries, KueueWorkloadUpdated)
                    if e.state in ("PodsReady", "Evicted") and e.workload == "default/pretrain")
    assert second_asked(blocked) == first_out == 340_000


# ---------------------------------------------------------------- admission check retries per release


@pytest.mark.parametrize(("kueue", "left", "counts"), [
    ("0.19", [4], [0, 0, 0]),  # cleanup on eviction; retries counted per check
    ("0.16", [1, 2, 3, 4], [0, 0, 0]),  # kueue#11677: the failed requests stay
    ("0.14", [1, 2, 3, 4], [1, 2, 3]),  # 0.14: the retries are the Workload's requeue count
])
def test_kueue_retry_as_a_release_evicts_on_each_retry(kueue: str, left: list[int], counts: list[int]) -> None:
    """scenarios/kueue-retry.yaml as a Kueue release: the legacy timeline (retries 1, 2 and 4 min apart, Ready on
    attempt 4 at 490 s), and each Retry evicts the Workload until its retry time."""
    result = simulated(load("kueue-retry.yaml", kueue=kueue), 7)
    assert [c for c in checks(result) if c[1] in ("Retry", "Ready")] == [
        (40_000, "Retry", 1, 100_000), (110_000, "Retry", 2, 230_000), (240_000, "Retry", 3, 480_000),
        (490_000, "Ready", 4, -1)]
    evicted = [(t, r, n, at) for t, s, r, n, at in transitions(result) if s == "Evicted"]
    assert evicted == [(40_000, "AdmissionCheck", counts[0], 100_000), (110_000, "AdmissionCheck", counts[1], 230_000),
                       (240_000, "AdmissionCheck", counts[2], 480_000)]
    assert sorted(result.state.provisioning.requests) == [f"default/pretrain-capacity-{i}" for i in left]
    assert all(result.state.pods[key(f"trainer-{i}")].phase == RUNNING for i in (0, 1))


def test_a_retry_backs_off_from_when_kueue_saw_the_failure() -> None:
    """Kueue's releases time the retry from the Retry transition (0.19: lastTransitionTime + requeueAfterSeconds;
    0.14: now + backoff), not from the condition: a broker that saw BookingExpired late retries later; and the Retry
    evicts the Workload and deletes its request."""
    d = load("kueue-retry.yaml")
    sc = parse_scenario(d, "t.yaml")
    broker = next(r for r in build_reactors(run_config(sc)) if r.name == "broker")
    assert isinstance(broker, KueueBroker) and broker.release is not None
    view = initial_state(sc, 1, until_ms=30_000)
    first = broker.react(view, 30_000, random.Random(0))
    view.apply(view.offset + 1, record(*first.events, t=30_000, source="broker"))
    for cond in ("Provisioned", "BookingExpired"):
        view.apply(view.offset + 1, record(ProvisioningRequestCondition(
            request="default/pretrain-capacity-1", condition=cond, status="True", reason="r"), t=600_000))
    decision = broker.react(view, 700_000, random.Random(0))
    kinds = [type(e).__name__ for e in decision.events]
    assert kinds == ["AdmissionCheckUpdated", "KueueWorkloadUpdated", "ProvisioningRequestDeleted"]
    retry, evicted, _ = decision.events
    assert isinstance(retry, AdmissionCheckUpdated) and (retry.state, retry.retry_at) == ("Retry", 760_000)
    assert isinstance(evicted, KueueWorkloadUpdated) and evicted.requeue_at == 760_000
    assert broker.react(view, 700_000, random.Random(0)).events == decision.events


# ---------------------------------------------------------------- Configuration


def test_wait_for_pods_ready_defaults_per_api_version_and_release() -> None:
    on = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "waitForPodsReady": {"enable": True}}
    assert pods_ready_settings(on, "0.16") == {
        "timeout_ms": 300_000, "block_admission": True, "recovery_timeout_ms": 300_000, "timestamp": "Eviction",
        "backoff_limit_count": None, "backoff_base_s": 60, "backoff_max_s": 3600}
    old = pods_ready_settings(on, "0.15")  # recoveryTimeout is defaulted to timeout from 0.16 only
    assert old is not None and old["recovery_timeout_ms"] == 0
    v1beta2 = pods_ready_settings(None, "0.19")  # on by default from 0.19 (kueue PR #11855)
    assert v1beta2 is not None and (v1beta2["timeout_ms"], v1beta2["block_admission"]) == (1_800_000, False)
    assert pods_ready_settings(None, "0.18") is None
    assert pods_ready_settings({"apiVersion": "config.kueue.x-k8s.io/v1beta1"}, "0.19") is None  # enable: false
    given = {"apiVersion": "config.kueue.x-k8s.io/v1beta2",
             "waitForPodsReady": {"timeout": "90s", "recoveryTimeout": "0s"}}
    settings = pods_ready_settings(given, "0.16")
    assert settings is not None and (settings["timeout_ms"], settings["recovery_timeout_ms"]) == (90_000, 0)


@pytest.mark.parametrize(("config", "kueue", "path", "words"), [
    ({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "fairSharing": {}}, "0.19", "spec.objects[0].fairSharing",
     "not modelled"),
    ({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "waitForPodsReady": {"timeout": "5m"}}, "0.14",
     "spec.objects[0].apiVersion", "does not serve"),
    ({"apiVersion": "config.kueue.x-k8s.io/v1beta1", "waitForPodsReady": {"enable": True}}, "0.14",
     "spec.objects[1].apiVersion", "kueue.x-k8s.io/v1beta2"),  # the scenario's ProvisioningRequestConfig
    ({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "waitForPodsReady": {}}, "0.18",
     "spec.objects[0].waitForPodsReady.timeout", "required in Kueue 0.18"),
    ({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "waitForPodsReady": {"enable": True}}, "0.19",
     "spec.objects[0].waitForPodsReady.enable", "unknown field"),
    ({"apiVersion": "config.kueue.x-k8s.io/v1beta1",
      "waitForPodsReady": {"enable": True, "requeuingStrategy": {"timestamp": "Creation"}}}, "0.19",
     "spec.objects[0].waitForPodsReady.requeuingStrategy.timestamp", "no queue order"),
])
def test_configuration_refusals_name_the_field(config: dict[str, Any], kueue: str, path: str, words: str) -> None:
    d = load("kueue-wait-for-pods-ready.yaml", kueue=kueue)
    d["spec"]["objects"][0] = {"kind": "Configuration", **config}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(d, "t.yaml")
    assert err.value.path == path and words in str(err.value)


def test_a_configuration_without_an_admission_check_is_refused() -> None:
    d = load("kueue-wait-for-pods-ready.yaml")
    d["spec"]["objects"] = d["spec"]["objects"][:1]
    with pytest.raises(ScenarioError, match="no AdmissionCheck"):
        parse_scenario(d, "t.yaml")


# ---------------------------------------------------------------- upstream bugs, both outcomes


@pytest.mark.parametrize("buggy", [{"kueue": "0.16"}, {"bugs": {"kueue#11677": True}}])
def test_kueue_11677_the_kept_request_rejects_the_requeued_workload(buggy: dict[str, Any]) -> None:
    """scenarios/upstream/kueue-11677-stale-request-readmits.yaml: with the bug the expired booking of the kept request
    rejects the check at the requeue (backoffLimitCount 0) and the trainers never run; without it (0.19) a new
    request is made and they run from 839 s."""
    name = "upstream/kueue-11677-stale-request-readmits.yaml"
    fixed = simulated(load(name), 7)
    assert [(t, s) for t, s, *_ in transitions(fixed)] == [
        (40_000, "Admitted"), (700_000, "Evicted"), (760_000, "Requeued"), (770_000, "Admitted"),
        (839_061, "PodsReady")]
    assert [t for t, _, _ in sourced_events(fixed.entries, ProvisioningRequestDeleted)] == [700_000]
    assert sorted(t for t, _ in bound(fixed)) == [821_994, 839_061]
    bug = simulated(load(name, **buggy), 7)
    assert [(t, s, r) for t, s, r, *_ in transitions(bug)] == [
        (40_000, "Admitted", ""), (700_000, "Evicted", "PodsReadyTimeout"), (760_000, "Requeued", ""),
        (760_000, "Deactivated", "AdmissionCheck")]
    assert ("Rejected", 1) in [(s, a) for _, s, a, _ in checks(bug)]
    assert not sourced_events(bug.entries, ProvisioningRequestDeleted) and not bound(bug)


def test_kueue_15734_a_succeeded_member_gets_its_running_group_evicted() -> None:
    """scenarios/upstream/kueue-15734-succeeded-pod-not-ready.yaml: with the bug (Kueue 0.19's default) the prep pod's
    success starts the recovery timeout: evicted at 340 s, deactivated at 710 s, no worker finishes; without it the
    workers finish at 1240 s and nothing is evicted."""
    name = "upstream/kueue-15734-succeeded-pod-not-ready.yaml"
    bug = simulated(load(name), 7)
    assert [(t, s, r) for t, s, r, *_ in transitions(bug) if s in ("PodsNotReady", "Evicted", "Deactivated")] == [
        (160_000, "PodsNotReady", "WaitForRecovery"), (340_000, "Evicted", "PodsReadyTimeout"),
        (530_000, "PodsNotReady", "WaitForRecovery"), (710_000, "Deactivated", "RequeuingLimitExceeded")]
    assert not [p for p in bug.state.pods.values() if p.phase == SUCCEEDED and p.run_for_ms > 120_000]
    fixed = simulated(load(name, bugs={"kueue#15734": False}), 7)
    assert [s for _, s, *_ in transitions(fixed)] == ["Admitted", "PodsReady"]
    workers = [fixed.state.pods[key(f"worker-{i}")] for i in (0, 1)]
    assert all(p.phase == SUCCEEDED and p.finished_t == 1_240_000 for p in workers)


def test_kueue_0_14_counts_a_pods_ready_eviction_as_a_retry() -> None:
    """0.14 keeps one requeue count for waitForPodsReady and the admission check's retries: after a PodsReady
    eviction (count 1) the kept request's expired booking (attempt 1 <= count 1) is no Retry, and Kueue makes attempt
    2 at once; 0.16 counts retries per check: the expired booking is a Retry (an eviction, 60 s of backoff)."""
    def run(kueue: str) -> Any:
        d = load("upstream/kueue-11677-stale-request-readmits.yaml", kueue=kueue)
        del d["spec"]["objects"][1]["spec"]["retryStrategy"]  # the defaults: 3 retries
        d["spec"]["objects"][0] = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
                                   "waitForPodsReady": {"enable": True, "timeout": "11m", "blockAdmission": False}}
        for obj in d["spec"]["objects"][1:]:
            obj["apiVersion"] = "kueue.x-k8s.io/v1beta1"  # 0.14 serves v1beta1 only
        return simulated(d, 7)

    def second(result: Any) -> int:
        return next(t for t, _, e in sourced_events(result.entries, ProvisioningRequestCreated)
                    if e.manifest["metadata"]["name"] == "pretrain-capacity-2")

    old, new = run("0.14"), run("0.16")
    assert second(old) == 760_000 and not [r for _, s, r, *_ in transitions(old) if r == "AdmissionCheck"]
    assert [(t, s, r, at) for t, s, r, _, at in transitions(new) if r == "AdmissionCheck"] == [
        (760_000, "Evicted", "AdmissionCheck", 820_000)]
    assert second(new) == 820_000


@pytest.mark.parametrize(("kueue", "evicted"), [("0.19", [1_840_000]), ("0.18", [])])
def test_without_a_configuration_kueue_0_19_waits_for_pods_ready_30_minutes(kueue: str, evicted: list[int]) -> None:
    """No Configuration: Kueue 0.19's default Configuration enables waitForPodsReady (v1beta2 defaults, kueue PR
    #11855) with a 30-minute timeout; 0.18's does not. Nodes that take 35 minutes: 0.19 evicts at 40 s + 30 min."""
    d = load("kueue-wait-for-pods-ready.yaml", kueue=kueue)
    d["spec"]["objects"] = d["spec"]["objects"][1:]
    d["spec"]["nodeGroups"][0]["provisionDelay"] = {"min": "2100s", "max": "2110s"}
    d["spec"]["duration"] = "40m"
    result = simulated(d, 7)
    assert [t for t, s, *_ in transitions(result) if s == "Evicted"] == evicted


def test_an_admission_check_eviction_resets_the_other_checks_to_pending() -> None:
    """resetChecksOnEviction: a Retry evicts the Workload and every Ready check goes back to Pending (a second check
    that needs no request is Ready again at the requeue, not carried over)."""
    d = load("kueue-retry.yaml")
    d["spec"]["objects"] += [
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ProvisioningRequestConfig", "metadata": {"name": "fpga"},
         "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", "managedResources": ["x.io/fpga"]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck", "metadata": {"name": "fpga"},
         "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "fpga"}}}]
    result = simulated(d, 7)
    fpga = [(t, e.state) for t, _, e in sourced_events(result.entries, AdmissionCheckUpdated) if e.check == "fpga"]
    assert fpga[:4] == [(30_000, "Ready"), (40_000, "Pending"), (100_000, "Ready"), (110_000, "Pending")]
    assert fpga[-1] == (480_000, "Ready")
    assert all(result.state.pods[key(f"trainer-{i}")].phase == RUNNING for i in (0, 1))


def test_capacity_revoked_rejects_the_check_and_deactivates_even_an_admitted_workload() -> None:
    """kueue PR #2196: CapacityRevoked is no retry but a Rejected check that deactivates the Workload, also once it
    is admitted (its pods deleted, so that none waits for nodes that are gone)."""
    sc = parse_scenario(load("kueue-retry.yaml"), "t.yaml")
    broker = next(r for r in build_reactors(run_config(sc)) if r.name == "broker")
    assert isinstance(broker, KueueBroker)
    view = initial_state(sc, 1, until_ms=30_000)
    rng = random.Random(0)
    for t, condition in ((30_000, ""), (40_000, "Provisioned"), (50_000, "CapacityRevoked")):
        if condition:
            view.apply(view.offset + 1, record(ProvisioningRequestCondition(
                request="default/pretrain-capacity-1", condition=condition, status="True", reason="r"), t=t))
        decision = broker.react(view, t, rng)
        view.apply(view.offset + 1, record(*decision.events, t=t, source="broker"))
    kinds = [type(e).__name__ for e in decision.events]
    assert kinds == ["AdmissionCheckUpdated", "KueueWorkloadUpdated", "ProvisioningRequestDeleted", "PodDeleted",
                     "PodDeleted"]
    assert view.provisioning.workloads["default/pretrain"].state == "Deactivated"
    assert view.provisioning.admission[("default/pretrain", "capacity")].state == "Rejected"
    assert all(view.pods[key(f"trainer-{i}")].phase == FAILED for i in (0, 1))
    assert broker.react(view, 60_000, rng).events == ()  # deactivated: nothing more

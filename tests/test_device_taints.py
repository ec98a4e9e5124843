"""DeviceTaintRules (core/dra/taint_rules.py, core/state/device_taints.py) and the device taint eviction controller
(core/controllers/device_taint_eviction.py): the scenario's story, the API each release serves, the fold and its
snapshot, and the eviction timing rules."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import simulated_scenario

from dralab.core.analysis.audit import audit, schedule
from dralab.core.controllers.device_taint_eviction import NEVER, claim_eviction, condition, taint_time
from dralab.core.dra.api import parse_documents
from dralab.core.dra.model import Device as DraDevice
from dralab.core.dra.model import DeviceID, Slice, Taint, Toleration
from dralab.core.dra.taint_rules import TaintRule, convert_rule, patch_slices
from dralab.core.kube.errors import ScenarioError
from dralab.core.kube.versions import make_profile
from dralab.core.log.events import (
    DeviceTaintRuleStatus,
    PodBound,
    PodEvicted,
    PodTerminating,
    PodUnschedulable,
    ScaleUpRequested,
    decode_record,
)
from dralab.core.scenario.load import parse_scenario
from dralab.core.state.codec import decode_state, encode_state

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "device-taint-rule.yaml"
DOC: dict[str, Any] = yaml.safe_load(SCENARIO.read_text())


def events(result: Any, kind: type) -> list[tuple[int, Any]]:
    out = []
    for offset, payload in result.entries:
        record = decode_record(payload, offset)
        out += [(record.t, e) for e in record.events if isinstance(e, kind)]
    return out


def run(doc: dict[str, Any], seed: int = 7) -> Any:
    return simulated_scenario(parse_scenario(doc, "device-taint-rule.yaml"), seed)


def test_the_scenario_tells_its_story() -> None:
    result = run(DOC)
    # deleted by the controller (graceful: the pod's 30 s grace period), gone 30 s later
    evicted = {e.pod.rsplit("/", 1)[1]: (t, e.reason) for t, e in events(result, PodTerminating)
               if e.condition == "DeletionByDeviceTaintManager"}
    assert {k: t for k, (t, _) in evicted.items()} == {"web": 600_000, "web-b": 600_000, "batch": 660_000}
    assert all(r.startswith("DeletionByDeviceTaintManager: NoExecute taint of DeviceTaintRule pool-ecc")
               for _, r in evicted.values())
    gone = {e.pod.rsplit("/", 1)[1]: t for t, e in events(result, PodEvicted)}
    assert gone == {"web": 630_000, "web-b": 630_000, "batch": 690_000}
    # `late` waits for the NoSchedule rule's GPU: cause taint, the rule's taint named
    late = [e for t, e in events(result, PodUnschedulable) if e.pod.endswith("/late") and t == 30_000]
    assert late and late[0].cause == "device-taint" and "example.com/maintenance=planned:NoSchedule" in late[0].detail
    # the rule's status as the controller writes it
    statuses = [(t, e.condition["reason"], e.evicted) for t, e in events(result, DeviceTaintRuleStatus)
                if e.name == "pool-ecc"]
    # the first update sees the pods it evicts as pending; then at most every 10 s, and 10 s after an eviction
    assert statuses == [(600_000, "PodsPendingEviction", 2), (610_000, "PodsPendingEviction", 2),
                        (660_000, "PodsPendingEviction", 3), (670_000, "Completed", 3)]
    messages = [e.condition["message"] for t, e in events(result, DeviceTaintRuleStatus) if e.name == "pool-ecc"]
    assert messages[:2] == ["3 pods need to be evicted in 1 namespace.",
                            "1 pod needs to be evicted in 1 namespace. 2 pods evicted since starting the controller."]
    assert messages[-1] == "3 pods evicted since starting the controller."
    # after the rule is deleted, `late` and the two replacements bind at once, none to the NoSchedule GPU
    bound = [(t, e) for t, e in events(result, PodBound) if t == 900_000]
    assert len(bound) == 3
    devices = {r["device"] for c in result.state.dra.claims.values() if c.allocation
               for r in c.allocation["devices"]["results"]}
    assert devices == {"gpu-1", "gpu-2", "gpu-3"}
    # the autoscaler's simulation does not see DeviceTaintRules (kubernetes/autoscaler#7947): no scale-up
    assert events(result, ScaleUpRequested) == []
    assert "pool-ecc" not in result.state.dra.taint_rules.rules


def test_a_pod_tolerating_for_good_is_never_evicted() -> None:
    doc = copy.deepcopy(DOC)
    exactly = doc["spec"]["objects"][2]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    del exactly["tolerations"][0]["tolerationSeconds"]
    evicted = {e.pod.rsplit("/", 1)[1] for _, e in events(run(doc), PodEvicted)}
    assert evicted == {"web", "web-b"}


def test_without_the_rules_every_pod_fits_at_once() -> None:
    """The NoSchedule rule is what keeps `late` pending: without it, `late` binds on arrival (the rules used to
    be ignored, which is what this shows)."""
    doc = copy.deepcopy(DOC)
    doc["spec"]["objects"] = doc["spec"]["objects"][:3]
    del doc["spec"]["faults"]
    bound = {e.pod.rsplit("/", 1)[1]: t for t, e in events(run(doc), PodBound)}
    assert bound["late"] == 30_000


def test_the_snapshot_keeps_the_rules() -> None:
    doc = copy.deepcopy(DOC)
    doc["spec"]["duration"] = "11m"
    state = run(doc).state
    assert set(state.dra.taint_rules.rules) == {"gpu-0-maintenance", "pool-ecc"}
    back = decode_state(encode_state(state))
    assert back.dra.taint_rules == state.dra.taint_rules
    assert back.dra.taint_rules.rules["pool-ecc"].time_added_ms == 600_000
    assert back.dra.taint_rules.rules["pool-ecc"].evicted == 3


# --- the API as each release serves it ---------------------------------------------------------------------

RULE: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
        "spec": {"deviceSelector": {"driver": "gpu.example.com"}, "taint": {"key": "k", "effect": "NoSchedule"}}}


def with_rule(version: str | None, api_version: str, gates: dict[str, bool] | None = None,
              runtime: dict[str, bool] | None = None, **spec: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    rule = copy.deepcopy(RULE)
    rule["apiVersion"] = api_version
    rule["spec"].update(spec)
    doc["spec"]["objects"] = doc["spec"]["objects"][:3] + [rule]
    del doc["spec"]["faults"]
    if version is None:
        del doc["spec"]["kubernetes"]
    else:
        doc["spec"]["kubernetes"] = {"version": version, "featureGates": gates or {}, "runtimeConfig": runtime or {}}
    return doc


@pytest.mark.parametrize(("version", "api_version", "gates", "runtime", "error"), [
    (None, "resource.k8s.io/v1", None, None, ""),  # no spec.kubernetes: 1.37
    ("1.34", "resource.k8s.io/v1alpha3", None, None, "DRADeviceTaints (alpha, off by default"),
    ("1.34", "resource.k8s.io/v1alpha3", {"DRADeviceTaints": True}, None, "runtimeConfig"),
    ("1.34", "resource.k8s.io/v1alpha3", {"DRADeviceTaints": True}, {"resource.k8s.io/v1alpha3": True}, ""),
    ("1.35", "resource.k8s.io/v1alpha3", {"DRADeviceTaints": True}, {"resource.k8s.io/v1alpha3": True},
     "DRADeviceTaintRules (alpha, off by default"),
    ("1.35", "resource.k8s.io/v1alpha3", {"DRADeviceTaints": True, "DRADeviceTaintRules": True},
     {"resource.k8s.io/v1alpha3": True}, ""),
    ("1.35", "resource.k8s.io/v1beta2", {"DRADeviceTaints": True, "DRADeviceTaintRules": True}, None,
     "does not serve DeviceTaintRule in `resource.k8s.io/v1beta2`"),
    ("1.36", "resource.k8s.io/v1beta2", None, {"resource.k8s.io/v1beta2": True},
     "DRADeviceTaintRules (beta, off by default"),
    ("1.36", "resource.k8s.io/v1beta2", {"DRADeviceTaintRules": True}, {"resource.k8s.io/v1beta2": True}, ""),
    ("1.37", "resource.k8s.io/v1", None, None, ""),
    ("1.37", "resource.k8s.io/v1alpha3", None, None, "it serves resource.k8s.io/v1beta2, resource.k8s.io/v1"),
    ("1.37", "resource.k8s.io/v1", {"DRADeviceTaintRules": False}, None, "DRADeviceTaintRules (ga"),
])
def test_each_release_serves_its_versions(version: str | None, api_version: str, gates: dict[str, bool] | None,
                                          runtime: dict[str, bool] | None, error: str) -> None:
    doc = with_rule(version, api_version, gates, runtime)
    if not error:
        parse_scenario(doc, "x.yaml")
        return
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc, "x.yaml")
    assert error in str(info.value) and "spec.objects[3]" in str(info.value)


@pytest.mark.parametrize(("spec", "path", "error"), [
    ({"deviceSelector": {"deviceClassName": "gpu"}}, "deviceSelector.deviceClassName", "unknown field"),
    ({"taint": {"key": "k", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}}, "taint.timeAdded",
     "leave it out"),
    ({"taint": {"key": "k", "effect": "PreferNoSchedule"}}, "taint.effect", "Unsupported value"),
    ({"taint": None}, "taint", "Required"),
    ({"deviceSelector": {"driver": "Not_A_Driver"}}, "deviceSelector.driver", ""),
])
def test_bad_rules_are_refused_at_their_field(spec: dict[str, Any], path: str, error: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(with_rule("1.37", "resource.k8s.io/v1", **spec), "x.yaml")
    assert f"spec.objects[3].spec.{path}" in str(info.value) and error in str(info.value)


def test_1_34_selectors_are_not_modelled_and_effect_none_is_1_35() -> None:
    profile = make_profile("1.34", {"DRADeviceTaints": True}, {"resource.k8s.io/v1alpha3": True})
    rule = copy.deepcopy(RULE)
    rule["apiVersion"] = "resource.k8s.io/v1alpha3"
    rule["spec"]["deviceSelector"]["deviceClassName"] = "gpu"
    with pytest.raises(ValueError, match="not modelled by dralab"):
        convert_rule(rule, "", profile)
    rule["spec"]["deviceSelector"] = {}
    rule["spec"]["taint"]["effect"] = "None"
    with pytest.raises(ValueError, match="no device taint effect `None`"):
        convert_rule(rule, "", profile)


def test_a_device_taint_fault_is_refused_where_rules_are_not_served() -> None:
    doc = copy.deepcopy(DOC)
    doc["spec"]["objects"] = doc["spec"]["objects"][:3]
    doc["spec"]["kubernetes"] = {"version": "1.35", "featureGates": {"DRADeviceTaints": True}}
    with pytest.raises(ScenarioError, match=r"spec\.faults\[0\].*DRADeviceTaintRules"):
        parse_scenario(doc, "x.yaml")


# --- the rules on the slices, and the eviction times --------------------------------------------------------


def _slice(name: str, pool: str, devices: tuple[str, ...], driver: str = "gpu.example.com") -> Slice:
    return Slice(name=name, driver=driver, pool=pool, generation=1, resource_slice_count=1, node_selection=None,
                 devices=tuple(DraDevice(DeviceID(driver, pool, d), name) for d in devices))


def test_rules_taint_only_the_devices_they_select_and_leave_other_slices_alone() -> None:
    a, b = _slice("a", "node-a", ("gpu-0", "gpu-1")), _slice("b", "node-b", ("gpu-0",))
    c = _slice("c", "node-a", ("nic-0",), driver="nic.example.com")
    taint = Taint("k", "v", "NoExecute")
    rules = [TaintRule("r1", taint, pool="node-a", device="gpu-0"),
             TaintRule("r2", Taint("x"), driver="nic.example.com")]
    pa, pb, pc = patch_slices([a, b, c], rules)
    assert pb is b  # no rule selects node-b's pool
    assert [d.taints for d in pa.devices] == [(taint,), ()]
    assert pa.devices[1] is a.devices[1]
    assert pc.devices[0].taints == (Taint("x"),)
    assert TaintRule("all", taint).matches("any", "pool", "device")  # an empty selector selects every device


@pytest.mark.parametrize(("tolerations", "expected"), [
    ((), 5_000),  # not tolerated: at the time the taint was added
    ((Toleration(key="k", operator="Exists", effect="NoExecute", toleration_seconds=60),), 65_000),
    ((Toleration(key="k", operator="Exists", effect="NoExecute", toleration_seconds=-3),), 5_000),
    ((Toleration(key="k", operator="Exists"),), NEVER),  # tolerated for good
    ((Toleration(key="k", operator="Exists", toleration_seconds=30),
      Toleration(operator="Exists", toleration_seconds=90)), 35_000),  # the shortest of the matching ones
    ((Toleration(key="other", operator="Exists", toleration_seconds=1),), 5_000),  # does not match
])
def test_eviction_time(tolerations: tuple[Toleration, ...], expected: int) -> None:
    assert taint_time(Taint("k", "", "NoExecute"), 5_000, tolerations) == expected


def test_a_claim_is_evicted_at_its_earliest_device_and_names_every_rule_then() -> None:
    allocation = {"devices": {"results": [
        {"request": "r", "driver": "d.io", "pool": "p", "device": "a"},
        {"request": "r", "driver": "d.io", "pool": "p", "device": "b",
         "tolerations": [{"key": "slow", "operator": "Exists", "tolerationSeconds": 10}]}]}}
    rules = [(TaintRule("fast", Taint("fast", "", "NoExecute"), device="a"), 7_000),
             (TaintRule("also", Taint("also", "", "NoExecute"), pool="p"), 7_000),
             (TaintRule("slow", Taint("slow", "", "NoExecute"), device="b"), 0)]
    assert claim_eviction(allocation, rules) == (7_000, ["also", "fast", "slow"])  # every rule that would evict
    assert claim_eviction(allocation, rules[2:]) == (10_000, ["slow"])
    assert claim_eviction(allocation, []) is None


def test_rule_conditions_as_upstream_words_them() -> None:
    noexec = TaintRule("r", Taint("k", "", "NoExecute"))
    assert condition(noexec, {}, 0)["reason"] == "NotStarted"
    two = condition(noexec, {"pod/a/x": None, "pod/b/y": None}, 1)
    assert (two["status"], two["reason"]) == ("True", "PodsPendingEviction")
    assert two["message"] == ("2 pods need to be evicted in 2 different namespaces. 1 pod evicted since starting "
                              "the controller.")
    none = condition(TaintRule("r", Taint("k", "", "None")), {}, 0, ["pod/a/x", "pod/a/y"], (3, 1))
    assert (none["reason"], none["message"]) == ("NoEffect", (
        "3 published devices selected. 1 allocated device selected. 2 pods would be evicted in 1 namespace if the "
        "effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to trigger "
        "an update."))
    assert condition(TaintRule("r", Taint("k")), {}, 0)["reason"] == "OtherEffect"


def test_a_no_execute_taint_in_a_slice_template_evicts_after_its_toleration() -> None:
    """A driver's own NoExecute taint counts from when its slice was first published with it (t=0 for the starting
    node): `batch`, tolerating it for 60 s, is the only pod put on that GPU, and is evicted at 60 s."""
    doc = copy.deepcopy(DOC)
    doc["spec"]["objects"] = doc["spec"]["objects"][:3]
    del doc["spec"]["faults"]
    doc["spec"]["nodeGroups"][0]["resourceSlices"][0]["spec"]["devices"][1]["taints"] = [
        {"key": "example.com/ecc-error", "effect": "NoExecute"}]
    result = run(doc)
    evicted = [(t, e.pod.rsplit("/", 1)[1], e.reason) for t, e in events(result, PodTerminating)]
    assert evicted == [(60_000, "batch", "DeletionByDeviceTaintManager: NoExecute taint of ResourceSlice "
                                         "gpu-4x-0-gpu.example.com-0")]
    assert events(result, DeviceTaintRuleStatus) == []
    assert result.state.dra.taint_rules.no_execute_since == {
        "gpu-4x-0-gpu.example.com-0": {"gpu-1/example.com/ecc-error=": 0}}


def test_audit_of_a_dump_with_a_rule_names_the_device_taint() -> None:
    """`dralab audit` and `schedule` read a dump's DeviceTaintRules and apply them, as kube-scheduler would: the pod
    fits nowhere because its only device is tainted (without the rule it would fit)."""
    case = Path(__file__).parent / "scheduler_cases" / "device-taints" / "scheduling-dralab-no-schedule-rule.yaml"
    docs = [d for d in yaml.safe_load_all(case.read_text()) if d.get("kind") != "SchedulingTest"]
    (pod,) = audit(parse_documents(docs))["pods"]
    assert pod["reason"] == "device-taint" and "example.com/taint=something:NoSchedule" in pod["message"], pod
    assert [p["reason"] for p in schedule(parse_documents(docs))["pending"]] == ["device-taint"]
    without = [d for d in docs if d.get("kind") != "DeviceTaintRule"]
    assert [b["name"] for b in schedule(parse_documents(without))["bindings"]] == ["my-pod"]


def test_a_rule_created_again_replaces_its_spec_and_keeps_its_status() -> None:
    """An update is a DeviceTaintRuleCreated of the same name: the new spec and taint time, the old condition and
    count; a deletion of an unknown rule is an anomaly, never a crash."""
    from dralab.core.log.events import DeviceTaintRuleCreated, DeviceTaintRuleDeleted
    from dralab.core.state.device_taints import DeviceTaintState

    state, anomalies = DeviceTaintState(), list[str]()
    state.apply(1, DeviceTaintRuleCreated(manifest=RULE, time_added_ms=0), anomalies)
    state.apply(2, DeviceTaintRuleStatus(name="r", condition={"reason": "NotStarted"}, evicted=2), anomalies)
    changed = copy.deepcopy(RULE)
    changed["spec"]["taint"]["effect"] = "NoExecute"
    state.apply(3, DeviceTaintRuleCreated(manifest=changed, time_added_ms=5_000), anomalies)
    (rule,) = state.converted()
    assert rule.taint.effect == "NoExecute" and state.rules["r"].time_added_ms == 5_000
    assert state.rules["r"].evicted == 2 and state.rules["r"].condition == {"reason": "NotStarted"}
    state.apply(4, DeviceTaintRuleDeleted(name="r"), anomalies)
    state.apply(5, DeviceTaintRuleDeleted(name="r"), anomalies)
    assert state.rules == {} and state.converted() == () and anomalies == [
        "offset 5: deletion of unknown DeviceTaintRule r"]


def test_a_typed_rule_list_from_kubectl_is_read() -> None:
    """`kubectl get devicetaintrules -o yaml` may print a DeviceTaintRuleList: its rules are read, not kept aside."""
    case = Path(__file__).parent / "scheduler_cases" / "device-taints" / "scheduling-dralab-no-schedule-rule.yaml"
    docs = [d for d in yaml.safe_load_all(case.read_text()) if d.get("kind") != "SchedulingTest"]
    rules = [d for d in docs if d.get("kind") == "DeviceTaintRule"]
    listed = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRuleList",
              "items": [{k: v for k, v in r.items() if k not in ("apiVersion", "kind")} for r in rules]}
    inv = parse_documents([d for d in docs if d.get("kind") != "DeviceTaintRule"] + [listed])
    assert [p["reason"] for p in schedule(inv)["pending"]] == ["device-taint"]


def test_the_patched_index_is_made_again_only_for_what_changed() -> None:
    """The scheduler's index with the rules: the same object while neither the slices nor the rules change; a slice
    republished is patched again, the others keep their patched devices (the allocator caches per device)."""
    from dralab.core.dra.pools import SliceIndex
    from dralab.core.log.events import DeviceTaintRuleCreated
    from dralab.core.state.device_taints import DeviceTaintState

    state = DeviceTaintState()
    assert state.apply(1, DeviceTaintRuleCreated(manifest=RULE), [])
    slices = {"a": _slice("a", "node-a", ("gpu-0",)), "b": _slice("b", "node-b", ("gpu-0",))}
    raw = SliceIndex.build(list(slices.values()))
    first = state.index(slices, raw)
    assert state.index(slices, raw) is first
    assert [d.taints for s in first.by_pool.values() for d in s[0].devices] == [(Taint("k"),), (Taint("k"),)]
    slices["b"] = _slice("b", "node-b", ("gpu-0", "gpu-1"))
    second = state.index(slices, SliceIndex.build(list(slices.values())))
    assert second.by_pool[("gpu.example.com", "node-a")][0] is first.by_pool[("gpu.example.com", "node-a")][0]
    assert len(second.by_pool[("gpu.example.com", "node-b")][0].devices) == 2
    assert DeviceTaintState().index(slices, raw) is raw  # no rule: the slices as published

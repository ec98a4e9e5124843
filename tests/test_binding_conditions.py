"""Device binding conditions (KEP-5007): the scheduler's PreBind wait, the emulated driver's conditions, the
binding timeout, failure conditions, and the release gates (core/scheduler/plugins/dra_binding.py,
core/controllers/device_binding.py, scenarios/binding-conditions.yaml)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.core.kube.fields import FieldError
from dralab.core.kube.versions import LEGACY_PROFILE, ProfileFlags
from dralab.core.log.events import (
    ClaimDeviceConditionSet,
    ClaimReleased,
    PodBindingEnded,
    PodBindingStarted,
    PodBound,
    PodUnschedulable,
    ResourceSlicePublished,
    decode_record,
)
from dralab.core.scenario.load import ScenarioError, load_scenario, parse_scenario
from dralab.core.scheduler.plugins.dra_binding import check_args, next_poll
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import SimResult, simulate
from dralab.replay.simulation.verify import verify

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "binding-conditions.yaml"


def run_doc(doc: dict[str, Any], **kw: Any) -> SimResult:
    scenario = parse_scenario(doc, "binding-conditions.yaml", **kw)
    result = simulate(scenario, scenario.seed)
    assert result.violations == [], result.violations
    checked = verify(LogFile("binding-conditions", {}, result.entries))
    assert checked.ok, checked.divergence and checked.divergence.render()
    return result


def base() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(SCENARIO.read_text()))


def events(result: SimResult) -> list[tuple[int, Any]]:
    out = []
    for offset, payload in result.entries:
        record = decode_record(payload, offset)
        out += [(record.t, e) for e in record.events]
    return out


def bound_at(result: SimResult) -> dict[str, int]:
    return {e.pod.split("/")[-1]: t for t, e in events(result) if isinstance(e, PodBound)}


def test_the_scenario_waits_in_prebind_times_out_and_retries_elsewhere() -> None:
    result = run_doc(base())
    # train-a binds at PreBind's poll at 45 s (its device attached then); train-b's device never attaches:
    # timeout at 600 s (upstream's default bindingTimeout), claim deallocated, gpu-0 (free since 3m45s) taken
    assert bound_at(result) == {"train-a": 45_000, "train-b": 645_000}
    ends = [(t, e.pod.split("/")[-1], e.bound) for t, e in events(result) if isinstance(e, PodBindingEnded)]
    assert ends == [(45_000, "train-a", True), (600_000, "train-b", False), (645_000, "train-b", True)]
    errors = [e for _, e in events(result) if isinstance(e, PodUnschedulable)]
    assert [(e.reason, e.cause) for e in errors] == [("SchedulerError", "binding-conditions")]
    assert "binding timeout (10m0s) passed" in errors[0].message
    released = [e for t, e in events(result) if isinstance(e, ClaimReleased) and t == 600_000]
    assert [e.deallocate for e in released] == [True]
    starts = [e for _, e in events(result) if isinstance(e, PodBindingStarted)]
    devices = [result.state.dra.claims.get(c) for s in starts for c in s.claims]
    assert all(s.nominated for s in starts)  # NominatedNodeNameForExpectation is on in 1.37
    assert devices  # the claims exist
    conditions = [e for _, e in events(result) if isinstance(e, ClaimDeviceConditionSet)]
    assert [(e.device, e.condition, e.status) for e in conditions] == [
        ("gpu-0", "dra.example.com/FabricAttached", "True")] * 2


def test_while_waiting_the_pod_is_pending_with_cause_binding_conditions_and_holds_its_device() -> None:
    doc = base()
    doc["spec"]["duration"] = "30s"
    result = run_doc(doc)
    state = result.state
    assert set(state.dra.binding) == {"pod/default/train-a", "pod/default/train-b"}
    assert all(p.node is None for p in state.pods.values())
    assert len(state.dra.allocated.devices) == 2  # both devices allocated in the API while the pods wait
    from dralab.core.analysis.waits import pending_cause
    assert {pending_cause(state, p) for p in state.pods.values()} == {"binding-conditions"}


def test_a_failure_condition_ends_the_wait_taints_the_device_and_the_retry_uses_another() -> None:
    doc = base()
    rules = doc["spec"]["nodeGroups"][0]["drivers"][0]["bindingConditions"]
    rules["devices"] = [{"device": "gpu-0", "delay": "20s", "outcome": "fail"}]
    doc["spec"]["workload"] = doc["spec"]["workload"][:1]  # train-a only: gets gpu-0 first
    result = run_doc(doc)
    failed = [(t, e) for t, e in events(result) if isinstance(e, ClaimDeviceConditionSet)
              and e.condition.endswith("FabricAttachFailed")]
    assert [(t, e.device, e.status) for t, e in failed] == [(20_000, "gpu-0", "True")]
    tainted = [e for t, e in events(result) if isinstance(e, ResourceSlicePublished) and t == 20_000]
    assert tainted and any(d.get("taints") for d in tainted[0].manifest["spec"]["devices"] if d["name"] == "gpu-0")
    # the scheduler sees the failure at its 20 s poll: unreserve, deallocate, retry at once on gpu-1 (45 s more)
    assert bound_at(result) == {"train-a": 65_000}
    claim = next(iter(result.state.dra.claims.values()))
    assert claim.allocation is None  # done and released; the second allocation was gpu-1
    allocations = [e for _, e in events(result) if type(e).__name__ == "ClaimAllocated"]
    assert [a.allocation["devices"]["results"][0]["device"] for a in allocations] == ["gpu-0", "gpu-1"]


def test_legacy_profile_binds_at_once() -> None:
    result = run_doc(base(), profile=LEGACY_PROFILE)
    assert not [e for _, e in events(result) if isinstance(e, PodBindingStarted)]
    assert bound_at(result) == {"train-a": 0, "train-b": 0}


def test_gate_off_in_1_35_the_fields_are_refused_and_with_the_gate_on_the_pod_waits() -> None:
    with pytest.raises(ScenarioError, match="needs the feature gate DRADeviceBindingConditions"):
        parse_scenario(base(), flags=ProfileFlags(version="1.35"))
    on = run_doc(base(), flags=ProfileFlags(version="1.35", gates={"DRADeviceBindingConditions": True}))
    assert bound_at(on) == {"train-a": 45_000, "train-b": 645_000}


def test_1_34_waits_without_a_nominated_node() -> None:
    on = run_doc(base(), flags=ProfileFlags(version="1.34", gates={"DRADeviceBindingConditions": True}))
    starts = [e for _, e in events(on) if isinstance(e, PodBindingStarted)]
    assert starts and not any(s.nominated for s in starts)  # NominatedNodeNameForExpectation: alpha, off in 1.34


def test_default_driver_sets_conditions_at_once_and_the_pod_binds_at_the_next_poll() -> None:
    doc = base()
    del doc["spec"]["nodeGroups"][0]["drivers"]
    result = run_doc(doc)
    assert bound_at(result) == {"train-a": 5_000, "train-b": 5_000}


def test_poll_ticks_and_args() -> None:
    assert [next_poll(1_000, t) for t in (0, 1_000, 1_001, 6_000, 6_001)] == [1_000, 6_000, 6_000, 6_000, 11_000]
    assert check_args({}, "args") == {"bindingTimeout": 600_000, "filterTimeout": 10_000}
    with pytest.raises(FieldError, match=r"a\.filterTimeout: .*not modelled"):
        check_args({"filterTimeout": "2s"}, "a")
    assert check_args({"bindingTimeout": "30s", "filterTimeout": 0}, "a") == {"bindingTimeout": 30_000,
                                                                               "filterTimeout": 0}
    with pytest.raises(FieldError, match="args.bindingTimeout"):
        check_args({"bindingTimeout": "0s"}, "args")
    with pytest.raises(FieldError, match="args.nope"):
        check_args({"nope": 1}, "args")


def test_scenario_field_errors() -> None:
    doc = base()
    doc["spec"]["nodeGroups"][0]["drivers"][0]["bindingConditions"]["devices"] = [{"device": "gpu-9"}]
    with pytest.raises(ScenarioError, match=r"drivers\[0\].bindingConditions.devices\[0\].device"):
        parse_scenario(doc)
    doc["spec"]["nodeGroups"][0]["drivers"][0]["bindingConditions"]["devices"] = [
        {"device": "gpu-0", "outcome": "maybe"}]
    with pytest.raises(ScenarioError, match="outcome"):
        parse_scenario(doc)
    assert load_scenario(SCENARIO).node_groups[0].binding[0].outcome == "never"


def test_a_device_binding_fault_makes_the_device_fail_and_the_retry_uses_another() -> None:
    doc = base()
    doc["spec"]["nodeGroups"][0]["drivers"][0]["bindingConditions"] = {"delay": "45s"}
    doc["spec"]["workload"] = doc["spec"]["workload"][:1]
    doc["spec"]["faults"] = [{"at": "0s", "kind": "device-binding", "node": "fabric-0", "driver": "dra.example.com",
                              "device": "gpu-0", "outcome": "fail"}]
    result = run_doc(doc)
    failed = [(t, e.device) for t, e in events(result) if isinstance(e, ClaimDeviceConditionSet)
              and e.condition.endswith("FabricAttachFailed")]
    assert failed == [(45_000, "gpu-0")]
    assert bound_at(result) == {"train-a": 90_000}  # failed at the 45 s poll, then gpu-1 attached 45 s later
    never = copy.deepcopy(doc)
    del never["spec"]["faults"][0]["outcome"]  # default: never
    never["spec"]["duration"] = "30m"
    result = run_doc(never)
    # a device that never attaches is not avoided: upstream deallocates and the next attempt's first fit (pools
    # and devices in order, 1.36+) takes gpu-0 again; it times out every 10 min for as long as the fault lasts
    assert bound_at(result) == {}
    timeouts = [t for t, e in events(result) if isinstance(e, PodBindingEnded) and not e.bound]
    assert timeouts == [600_000, 1_200_000, 1_800_000]
    devices = {a.allocation["devices"]["results"][0]["device"] for _, a in events(result)
               if type(a).__name__ == "ClaimAllocated"}
    assert devices == {"gpu-0"}


def test_audit_and_schedule_on_a_dump_say_a_pod_in_prebind_waits_for_binding_conditions() -> None:
    from dralab.core.analysis.audit import audit, schedule
    from dralab.core.dra.api import parse_documents

    dump = Path(__file__).resolve().parent / "fixtures" / "dra-binding" / "prebind-dump.yaml"
    inv = parse_documents(list(yaml.safe_load_all(dump.read_text())))
    why = "waiting for binding conditions: waiting-gpu/gpu-0: dra.example.com/FabricAttached"
    verdicts = {p["name"]: (p["reason"], p["message"]) for p in audit(inv)["pods"]}
    assert verdicts["waiting"] == ("binding-conditions", why)
    assert verdicts["other"][0] is None
    result = schedule(inv)
    assert [(p["name"], p["reason"]) for p in result["pending"]] == [("waiting", "binding-conditions")]
    # once the driver sets the condition True, the pod is no longer reported as waiting there
    for doc in inv.claims.values():
        doc.manifest["status"]["devices"][0]["conditions"][0]["status"] = "True"
    assert {p["name"]: p["reason"] for p in audit(inv)["pods"]}["waiting"] != "binding-conditions"

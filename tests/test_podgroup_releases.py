"""The same PodGroup story under the releases that have PodGroups: a 1.36 scenario written in
`scheduling.k8s.io/v1alpha2` (its own shapes: `podGroupTemplateRef.workload`, `disruptionMode: PodGroup`) runs as
1.36 does (condition `PodGroupScheduled`, workload-aware preemption only with its own gate), a 1.37 one in
`v1beta1` as 1.37 does (`PodGroupInitiallyScheduled`, preemption part of GenericWorkload), and a 1.35 scenario
cannot name a PodGroup at all."""

from __future__ import annotations

from typing import Any

import pytest
from builders import GPU_TOLERATION, arrival, group, node_template, pod, scenario_doc, simulated

from dralab.core.log.events import PodBound, PodEvicted, PodGroupConditionSet, decode_record
from dralab.core.scenario.load import ScenarioError, parse_scenario

V136 = {"version": "1.36", "featureGates": {"GenericWorkload": True},
        "runtimeConfig": {"scheduling.k8s.io/v1alpha2": True}}
V137 = {"version": "1.37", "featureGates": {"GenericWorkload": True},
        "runtimeConfig": {"scheduling.k8s.io/v1beta1": True}}


def podgroup(version: str, name: str, min_count: int, priority_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": f"scheduling.k8s.io/{version}", "kind": "PodGroup",
            "metadata": {"name": name}, "spec": spec}


def run(release: dict[str, Any], objects: list[dict[str, Any]], arrivals: list[dict[str, Any]],
        duration: str = "2m"):  # type: ignore[no-untyped-def]
    d = scenario_doc([group("gpu", max=2, delay="1m", template=node_template(gpu=8))], nodes={"gpu": 2},
                     workload=arrivals, duration=duration)
    d["spec"]["kubernetes"] = release
    d["spec"]["objects"] = objects
    return simulated(d, 3, "release.yaml")


def events(result, kind):  # type: ignore[no-untyped-def]
    return [e for o, p in result.entries for e in decode_record(p, o).events if isinstance(e, kind)]


def member(name: str, group_name: str | None, priority: int = 0) -> dict[str, Any]:
    manifest = pod(name, gpu=4, tolerations=[GPU_TOLERATION], priority=priority)
    if group_name is not None:
        manifest["spec"]["schedulingGroup"] = {"podGroupName": group_name}
    return manifest


@pytest.mark.parametrize(("release", "version", "condition"), [
    (V136, "v1alpha2", "PodGroupScheduled"), (V137, "v1beta1", "PodGroupInitiallyScheduled")])
def test_each_release_writes_its_own_condition(release: dict[str, Any], version: str, condition: str) -> None:
    result = run(release, [podgroup(version, "train", 4)],
                 [arrival(0, member("worker", "train"), count=4, run_for="1m")])
    assert len(events(result, PodBound)) == 4
    assert [(e.condition, e.status, e.reason) for e in events(result, PodGroupConditionSet)] == [
        (condition, "True", "Scheduled")]


def test_v1alpha2_shapes_are_read_as_1_36_wrote_them() -> None:
    group_obj = podgroup("v1alpha2", "train", 2)
    group_obj["spec"]["podGroupTemplateRef"] = {"workload": {"workloadName": "job", "podGroupTemplateName": "w"}}
    result = run(V136, [group_obj], [arrival(0, member("worker", "train"), count=2, run_for="1m")])
    state = result.state.gang.podgroups["default/train"]
    assert state.spec["workloadRef"] == {"workloadName": "job", "templateName": "w"}
    assert state.manifest["apiVersion"] == "scheduling.k8s.io/v1beta1"  # stored in the hub version


def priority_class(value: int, name: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value}


@pytest.mark.parametrize(("release", "version", "preempts"), [
    (V136, "v1alpha2", False),  # WorkloadAwarePreemption is its own gate in 1.36, off by default
    ({**V136, "featureGates": {"GenericWorkload": True, "WorkloadAwarePreemption": True}}, "v1alpha2", True),
    (V137, "v1beta1", True),  # part of GenericWorkload in 1.37 (KEP-4671's gate merge)
])
def test_workload_aware_preemption_per_release(release: dict[str, Any], version: str, preempts: bool) -> None:
    # without WorkloadAwarePreemption a 1.36 PodGroup may not name a priority class: its pods' priority is all
    gated_off = version == "v1alpha2" and not release["featureGates"].get("WorkloadAwarePreemption")
    result = run(release, [priority_class(100, "high"), podgroup(version, "train", 2, None if gated_off else "high")],
                 [arrival(0, member("low", None), count=4, run_for="1h"),
                  arrival("1m", member("worker", "train", priority=100), count=2, run_for="5m")])
    assert bool(events(result, PodEvicted)) is preempts


def test_a_1_35_scenario_cannot_name_a_podgroup() -> None:
    d = scenario_doc([group("gpu", max=1, template=node_template(gpu=8))], nodes={"gpu": 1},
                     workload=[arrival(0, member("worker", "train"))])
    d["spec"]["kubernetes"] = {"version": "1.35", "featureGates": {"GenericWorkload": True, "GangScheduling": True},
                               "runtimeConfig": {"scheduling.k8s.io/v1alpha1": True}}
    with pytest.raises(ScenarioError, match="schedulingGroup"):
        parse_scenario(d, "old.yaml")
    d["spec"]["workload"] = []
    d["spec"]["objects"] = [podgroup("v1beta1", "train", 2)]
    with pytest.raises(ScenarioError, match="does not serve PodGroup"):
        parse_scenario(d, "old.yaml")

"""Task "pgapi": the scheduling.k8s.io Workload / PodGroup / CompositePodGroup API of Kubernetes 1.36 and 1.37,
checked as the API server checks it and converted to the v1beta1 hub (core/kube/podgroups.py).

The fixtures in tests/fixtures/podgroups/ are the same job as `kubectl get -o yaml` prints it from a 1.36 cluster
(v1alpha2) and a 1.37 one (v1beta1, v1alpha3 with a CompositePodGroup): read with the matching profile, they must
give the same hub objects.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dralab.core.dra.api import ManifestError, load_objects, parse_documents, scheduling_objects
from dralab.core.kube.fields import FieldError
from dralab.core.kube.manifests import check_pod
from dralab.core.kube.podgroups import (
    HUB_API_VERSION,
    admit_priorities,
    check_priority_class,
    check_scheduling_group,
    check_scheduling_object,
    group_min_count,
    is_gang,
    pod_group_name,
    topology_key,
)
from dralab.core.kube.versions import Profile, make_profile
from dralab.core.scenario.dra import check_objects

FIXTURES = Path(__file__).parent / "fixtures" / "podgroups"
V1A2, V1A3, V1B1 = ("scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1alpha3", "scheduling.k8s.io/v1beta1")
ALL_ON = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True, "DRAWorkloadResourceClaims": True}


def profile(version: str = "1.37", api: str = V1B1, **gates: bool) -> Profile:
    extra = {"WorkloadAwarePreemption": True} if version == "1.36" else {}
    return make_profile(version, {**ALL_ON, **extra, **gates}, {api: True})


def pod_group(api: str = V1B1, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": 2}}, **spec}
    return {"apiVersion": api, "kind": "PodGroup", "metadata": {"name": "pg"}, "spec": body}


def workload(api: str = V1B1, **spec: Any) -> dict[str, Any]:
    body = spec or {"podGroupTemplates": [{"name": "t", "schedulingPolicy": {"basic": {}}}]}
    return {"apiVersion": api, "kind": "Workload", "metadata": {"name": "w", "namespace": "ml"}, "spec": body}


def refused(obj: dict[str, Any], prof: Profile | None = None) -> FieldError:
    with pytest.raises(FieldError) as e:
        check_scheduling_object(obj, "spec.objects[2]", prof or profile())
    return e.value


# --- the same job in every version gives the same hub --------------------------------------------------------


READS = {
    "v1alpha2": profile("1.36", V1A2),
    "v1beta1": profile("1.37", V1B1),
    "v1alpha3": profile("1.37", V1A3, CompositePodGroup=True),
}


def _read(name: str) -> Any:
    return load_objects([FIXTURES / f"{name}.yaml"], profile=READS[name])


def test_every_version_of_the_dump_converts_to_the_same_hub() -> None:
    hubs = {}
    for name in READS:
        inv = _read(name)
        workload_ = scheduling_objects(inv, "Workload")["ml/train"]
        group = scheduling_objects(inv, "PodGroup")["ml/train-workers-0"]
        assert workload_["apiVersion"] == group["apiVersion"] == HUB_API_VERSION
        hubs[name] = (workload_["spec"], group["spec"], group["metadata"]["name"])
    assert hubs["v1alpha2"] == hubs["v1beta1"] == hubs["v1alpha3"]
    spec = hubs["v1beta1"][1]
    assert spec == {
        "workloadRef": {"workloadName": "train", "templateName": "workers"},
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
        "resourceClaims": [{"name": "nvlink", "resourceClaimTemplateName": "nvlink-domain"}],
        "disruptionMode": {"all": {}},
        "priorityClassName": "high",
        "priority": 100000,
    }


def test_a_dump_keeps_the_podgroup_status_and_metadata() -> None:
    conditions = {}
    for name in READS:
        group = scheduling_objects(_read(name), "PodGroup")["ml/train-workers-0"]
        conditions[name] = [c["type"] for c in group["status"]["conditions"]]
        assert group["status"]["resourceClaimStatuses"][0]["resourceClaimName"] == "train-workers-0-nvlink-x7k2p"
        assert group["metadata"]["uid"] == "3e0b9d6a-1b8e-4b8f-9c55-7a0f2d7e3c44"
        assert group["metadata"]["managedFields"][0]["manager"] == "kube-scheduler"
    assert conditions == {"v1alpha2": ["PodGroupScheduled"], "v1beta1": ["PodGroupInitiallyScheduled"],
                          "v1alpha3": ["PodGroupInitiallyScheduled"]}


def test_a_v1alpha3_dump_holds_a_two_level_composite_group() -> None:
    inv = _read("v1alpha3")
    cpg = scheduling_objects(inv, "CompositePodGroup")["ml/lws-0"]
    assert cpg["apiVersion"] == HUB_API_VERSION
    assert cpg["spec"]["schedulingPolicy"] == {"gang": {"minGroupCount": 2}}
    assert cpg["status"]["conditions"][0]["type"] == "CompositePodGroupInitiallyScheduled"
    groups = scheduling_objects(inv, "PodGroup")
    assert groups["ml/lws-0-workers"]["spec"]["parentCompositePodGroupName"] == "lws-0"
    templates = scheduling_objects(inv, "Workload")["ml/lws"]["spec"]["compositePodGroupTemplates"]
    assert [t["name"] for t in templates[0]["podGroupTemplates"]] == ["leader", "workers"]
    assert templates[0]["podGroupTemplates"][0]["disruptionMode"] == {"single": {}}  # defaulted
    assert pod_group_name(inv.pods["ml/train-w-0"]) == "train-workers-0"


def test_the_dump_needs_its_release() -> None:
    with pytest.raises(ManifestError, match="Kubernetes 1.37 does not serve Workload in `scheduling.k8s.io/v1alpha2`"):
        load_objects([FIXTURES / "v1alpha2.yaml"], profile=READS["v1beta1"])
    with pytest.raises(ManifestError, match="needs the feature gate CompositePodGroup"):
        load_objects([FIXTURES / "v1alpha3.yaml"], profile=profile("1.37", V1A3))
    # without a profile, dralab reads dumps as it always has: 1.35's v1alpha1 Workload only
    with pytest.raises(ManifestError, match=r"expected `scheduling.k8s.io/v1alpha1` \(Kubernetes 1.35\)"):
        load_objects([FIXTURES / "v1beta1.yaml"])


def test_a_typed_podgroup_list_is_read() -> None:
    item = pod_group(priority=0)
    del item["apiVersion"], item["kind"]
    inv = parse_documents([{"apiVersion": V1B1, "kind": "PodGroupList", "items": [item]}], profile=profile())
    assert list(scheduling_objects(inv, "PodGroup")) == ["default/pg"]


def test_a_dump_podgroup_without_its_admitted_priority_needs_its_class() -> None:
    # admission ran in the cluster: a group that carries its priority is kept, its class need not be dumped
    inv = parse_documents([pod_group(priorityClassName="high", priority=100000)], profile=profile())
    assert scheduling_objects(inv, "PodGroup")["default/pg"]["spec"]["priority"] == 100000
    doc = pod_group(priorityClassName="high")
    with pytest.raises(ManifestError, match=r"documents\[0\].spec.priorityClassName: no PriorityClass with name high"):
        parse_documents([doc, None], "dump.yaml", profile=profile())


# --- the rules, each refused with its path ---------------------------------------------------------------------

T = "spec.podGroupTemplates"
S = "spec.objects[2].spec"
RULES = [
    # (what, object, path, message part)
    ("9 templates", workload(podGroupTemplates=[{"name": f"t{i}", "schedulingPolicy": {"basic": {}}}
                                                for i in range(9)]), f"{S}.podGroupTemplates", "at most 8 items"),
    ("5 claims", pod_group(resourceClaims=[{"name": f"c{i}", "resourceClaimName": "x"} for i in range(5)]),
     f"{S}.resourceClaims", "at most 4 items"),
    ("no policy member", pod_group(schedulingPolicy={}), f"{S}.schedulingPolicy", "must specify one of: `basic`"),
    ("two policy members", pod_group(schedulingPolicy={"basic": {}, "gang": {"minCount": 1}}),
     f"{S}.schedulingPolicy", "exactly one of `basic`, `gang`"),
    ("minCount 0", pod_group(schedulingPolicy={"gang": {"minCount": 0}}), f"{S}.schedulingPolicy.gang.minCount",
     "missing required field"),
    ("minCount -1", pod_group(schedulingPolicy={"gang": {"minCount": -1}}), f"{S}.schedulingPolicy.gang.minCount",
     "must be >= 1"),
    ("all with basic", pod_group(schedulingPolicy={"basic": {}}, disruptionMode={"all": {}}), f"{S}.disruptionMode",
     "needs the `gang` policy"),
    ("two disruption modes", pod_group(disruptionMode={"all": {}, "single": {}}), f"{S}.disruptionMode",
     "exactly one of `single`, `all`"),
    ("priority over 1e9", pod_group(priority=1_000_000_001), f"{S}.priority", "must be <= 1000000000"),
    ("claim with both", pod_group(resourceClaims=[{"name": "c", "resourceClaimName": "a",
                                                   "resourceClaimTemplateName": "b"}]),
     f"{S}.resourceClaims[0]", "exactly one of `resourceClaimName`, `resourceClaimTemplateName`"),
    ("claim name", pod_group(resourceClaims=[{"name": "C_1", "resourceClaimName": "a"}]),
     f"{S}.resourceClaims[0].name", "RFC 1123 label"),
    ("two topology constraints", pod_group(schedulingConstraints={"topology": [{"key": "a"}, {"key": "b"}]}),
     f"{S}.schedulingConstraints.topology", "at most 1 item"),
    ("topology key", pod_group(schedulingConstraints={"topology": [{"key": "-rack"}]}),
     f"{S}.schedulingConstraints.topology[0].key", "invalid label key"),
    ("template name", workload(podGroupTemplates=[{"name": "Workers", "schedulingPolicy": {"basic": {}}}]),
     f"{S}.podGroupTemplates[0].name", "RFC 1123 label"),
    ("workloadName", pod_group(workloadRef={"workloadName": "a_b", "templateName": "t"}),
     f"{S}.workloadRef.workloadName", "RFC 1123 subdomain"),
    ("unknown field", pod_group(minMember=3), f"{S}.minMember", "unknown field `minMember`"),
    ("neither template list", workload(controllerRef={"kind": "Job", "name": "j"}), S,
     "exactly one of `podGroupTemplates` and `compositePodGroupTemplates`"),
    ("controllerRef kind", workload(controllerRef={"kind": "a/b", "name": "j"},
                                    podGroupTemplates=[{"name": "t", "schedulingPolicy": {"basic": {}}}]),
     f"{S}.controllerRef.kind", "may not contain '/'"),
    ("priorities differ", workload(podGroupTemplates=[
        {"name": "a", "schedulingPolicy": {"basic": {}}, "priority": 5},
        {"name": "b", "schedulingPolicy": {"basic": {}}}]), f"{S}.podGroupTemplates[1]",
     "all priority and priorityClassName values must be identical"),
]


@pytest.mark.parametrize(("what", "obj", "path", "message"), RULES, ids=[r[0] for r in RULES])
def test_each_rule_is_refused_with_its_path(what: str, obj: dict[str, Any], path: str, message: str) -> None:
    error = refused(obj)
    assert error.path == path, what
    assert message in error.message


CPG = "spec.objects[2].spec.compositePodGroupTemplates"


def _cpg_tree(depth: int) -> dict[str, Any]:
    """A composite template nested `depth` levels deep over one pod group template."""
    node: dict[str, Any] = {"name": "leaf", "schedulingPolicy": {"basic": {}}}
    children: dict[str, Any] = {"podGroupTemplates": [node]}
    for level in range(depth, 0, -1):
        parent = {"name": f"c{level}", "schedulingPolicy": {"basic": {}}, **children}
        children = {"compositePodGroupTemplates": [parent]}
    return workload(V1A3, **children)


COMPOSITE = profile("1.37", V1A3, CompositePodGroup=True)


def test_a_template_tree_is_at_most_four_levels_deep() -> None:
    hub = check_scheduling_object(_cpg_tree(3), "spec.objects[2]", COMPOSITE)  # 3 composite levels + pod groups
    assert hub["spec"]["compositePodGroupTemplates"][0]["name"] == "c1"
    error = refused(_cpg_tree(4), COMPOSITE)
    assert error.path == CPG + "[0].compositePodGroupTemplates[0].compositePodGroupTemplates[0]" \
                               ".compositePodGroupTemplates[0]"
    assert "maximum template hierarchy depth is 4" in error.message


def test_template_names_are_unique_across_the_tree_and_composites_have_children() -> None:
    obj = _cpg_tree(1)
    obj["spec"]["compositePodGroupTemplates"][0]["podGroupTemplates"][0]["name"] = "c1"
    error = refused(obj, COMPOSITE)
    assert (error.path, "duplicate template name `c1`" in error.message) == (
        CPG + "[0].podGroupTemplates[0]", True)
    obj = _cpg_tree(1)
    del obj["spec"]["compositePodGroupTemplates"][0]["podGroupTemplates"]
    error = refused(obj, COMPOSITE)
    assert error.path == CPG + "[0]" and "at least one child" in error.message


def test_a_podgroup_parent_needs_its_workload_ref() -> None:
    error = refused(pod_group(V1A3, parentCompositePodGroupName="lws-0"), COMPOSITE)
    assert error.path == "spec.objects[2].spec.workloadRef" and "needs `workloadRef`" in error.message


def test_v1alpha2_names_are_converted_and_prerelease_names_refused() -> None:
    p = profile("1.36", V1A2)
    hub = check_scheduling_object(pod_group(V1A2, podGroupTemplateRef={
        "workload": {"workloadName": "w", "podGroupTemplateName": "t"}}, disruptionMode="Pod"), "x", p)
    assert hub["spec"]["workloadRef"] == {"workloadName": "w", "templateName": "t"}
    assert hub["spec"]["disruptionMode"] == {"single": {}}
    error = refused(pod_group(V1A2, schedulingConstraints={"topologyConstraints": [{"topologyKey": "r"}]}), p)
    assert error.path == f"{S}.schedulingConstraints.topologyConstraints"
    assert "`schedulingConstraints.topology[].key`" in error.message
    error = refused(pod_group(V1A2, workloadRef={"workloadName": "w", "templateName": "t"}), p)
    assert error.path == f"{S}.workloadRef"  # the 1.37 name, not a v1alpha2 field
    error = refused(pod_group(V1A2, disruptionMode={"all": {}}), p)
    assert error.path == f"{S}.disruptionMode" and "`Pod`, `PodGroup`" in error.message


# --- gates --------------------------------------------------------------------------------------------------

GATED = [
    ("TopologyAwareWorkloadScheduling", profile(TopologyAwareWorkloadScheduling=False),
     pod_group(schedulingConstraints={"topology": [{"key": "rack"}]}), f"{S}.schedulingConstraints"),
    ("DRAWorkloadResourceClaims", profile(DRAWorkloadResourceClaims=False),
     pod_group(resourceClaims=[{"name": "c", "resourceClaimName": "x"}]), f"{S}.resourceClaims"),
    ("WorkloadAwarePreemption", profile("1.36", V1A2, WorkloadAwarePreemption=False),
     pod_group(V1A2, priorityClassName="high"), f"{S}.priorityClassName"),
    ("WorkloadAwarePreemption", profile("1.36", V1A2, WorkloadAwarePreemption=False),
     pod_group(V1A2, disruptionMode="PodGroup"), f"{S}.disruptionMode"),
    ("PodGroupPreemptionPolicy", profile(), pod_group(preemptionPolicy="Never"), f"{S}.preemptionPolicy"),
    ("CompositePodGroup", profile("1.37", V1A3), pod_group(V1A3, parentCompositePodGroupName="p",
                                                           workloadRef={"workloadName": "w", "templateName": "t"}),
     f"{S}.parentCompositePodGroupName"),
    ("CompositePodGroup", profile("1.37", V1A3), _cpg_tree(1), f"{S}.compositePodGroupTemplates"),
    ("CompositePodGroup", profile("1.37", V1A3),
     {"apiVersion": V1A3, "kind": "CompositePodGroup", "metadata": {"name": "c"},
      "spec": {"workloadRef": {"workloadName": "w", "templateName": "t"}, "schedulingPolicy": {"basic": {}}}},
     "spec.objects[2].apiVersion"),
    ("GenericWorkload", profile(GenericWorkload=False), pod_group(), "spec.objects[2].apiVersion"),
]


@pytest.mark.parametrize(("gate", "prof", "obj", "path"), GATED, ids=[f"{g[0]}:{g[3]}" for g in GATED])
def test_a_gated_field_is_refused_naming_the_gate(gate: str, prof: Profile, obj: dict[str, Any], path: str) -> None:
    error = refused(obj, prof)
    assert error.path == path
    assert f"needs the feature gate {gate}" in error.message


def test_the_release_and_runtime_config_decide_what_is_served() -> None:
    error = refused(pod_group(V1B1), profile("1.36", V1A2))
    assert "Kubernetes 1.36 does not serve PodGroup in `scheduling.k8s.io/v1beta1`" in error.message
    assert "it serves scheduling.k8s.io/v1alpha2" in error.message
    error = refused(pod_group(V1B1), make_profile("1.37", ALL_ON))
    assert "`scheduling.k8s.io/v1beta1` is a beta API, not enabled by default" in error.message
    error = refused(pod_group("scheduling.k8s.io/v2"))
    assert error.path == "spec.objects[2].apiVersion"


# --- the pod's field ------------------------------------------------------------------------------------------


def _pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], **spec}}


def test_a_pod_names_its_group_as_its_release_does() -> None:
    pod = check_pod(_pod(schedulingGroup={"podGroupName": "train-0"}), "pod", profile=profile())
    assert pod_group_name(pod) == "train-0"
    cases = [
        (profile(), _pod(workloadRef={"name": "w", "podGroup": "g"}), "pod.spec.workloadRef", "the 1.35 field"),
        (make_profile("1.35", {"GenericWorkload": True}), _pod(schedulingGroup={"podGroupName": "g"}),
         "pod.spec.schedulingGroup", "the 1.36 field"),
        (profile(GenericWorkload=False), _pod(schedulingGroup={"podGroupName": "g"}), "pod.spec.schedulingGroup",
         "needs the feature gate GenericWorkload"),
        (make_profile("1.35"), _pod(workloadRef={"name": "w", "podGroup": "g"}), "pod.spec.workloadRef",
         "needs the feature gate GenericWorkload"),
        (profile(), _pod(schedulingGroup={}), "pod.spec.schedulingGroup.podGroupName", "missing required field"),
        (profile(), _pod(schedulingGroup={"podGroupName": "A"}), "pod.spec.schedulingGroup.podGroupName",
         "RFC 1123 subdomain"),
    ]
    for prof, raw, path, message in cases:
        with pytest.raises(FieldError) as e:
            check_pod(raw, "pod", profile=prof)
        assert (e.value.path, message in e.value.message) == (path, True), raw
    # without a profile: as before (1.35's workloadRef checked, schedulingGroup not read)
    check_pod(_pod(schedulingGroup={}), "pod")
    with pytest.raises(FieldError):
        check_pod(_pod(workloadRef={"name": "w"}), "pod")
    spec: dict[str, Any] = {"schedulingGroup": {"podGroupName": "ok"}}
    check_scheduling_group(spec, "spec", profile("1.36", V1A2))


# --- priorities ------------------------------------------------------------------------------------------------


def _class(name: str, value: int, **extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                           "value": value, **extra}
    checked: dict[str, Any] = check_priority_class(raw, "pc")
    return checked


def _admitted(prof: Profile, classes: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    hub = check_scheduling_object(pod_group(**spec), "g", prof)
    admit_priorities([(hub, "g")], classes, prof)
    return dict(hub["spec"])


def test_priority_admission_resolves_as_the_plugin_does() -> None:
    p = profile()
    high, default = _class("high", 1000), _class("batch", 10, globalDefault=True)
    assert _admitted(p, [high], priorityClassName="high")["priority"] == 1000
    resolved = _admitted(p, [high, default])
    assert (resolved["priorityClassName"], resolved["priority"]) == ("batch", 10)
    assert _admitted(p, [high])["priority"] == 0
    assert "priorityClassName" not in _admitted(p, [high])
    assert _admitted(p, [], priorityClassName="system-cluster-critical")["priority"] == 2_000_000_000
    with pytest.raises(FieldError, match="no PriorityClass with name gold was found") as e:
        _admitted(p, [high], priorityClassName="gold")
    assert e.value.path == "g.spec.priorityClassName"
    with pytest.raises(FieldError, match=r"priority \(5\) must not be provided; priority admission computed 1000"):
        _admitted(p, [high], priorityClassName="high", priority=5)
    # preemptionPolicy exists (and is filled from the class) only with PodGroupPreemptionPolicy on
    assert "preemptionPolicy" not in _admitted(p, [high], priorityClassName="high")
    q = profile(PodGroupPreemptionPolicy=True)
    never = _class("never", 7, preemptionPolicy="Never")
    assert _admitted(q, [never], priorityClassName="never")["preemptionPolicy"] == "Never"
    assert _admitted(q, [])["preemptionPolicy"] == "PreemptLowerPriority"
    assert list(_admitted(q, [never], priorityClassName="never"))[-3:] == [
        "priorityClassName", "priority", "preemptionPolicy"]


def test_a_priority_class_is_checked() -> None:
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"value": 1_000_000_001}, "pc.value", "must be <= 1000000000"),
        ({"value": 1, "metadata": {"name": "system-mine"}}, "pc.metadata.name", "reserved for system use"),
        ({"value": 1, "preemptionPolicy": "Sometimes"}, "pc.preemptionPolicy", "expected one of"),
        ({}, "pc.value", "missing required field"),
        ({"value": 1, "metadata": {"name": "x", "namespace": "ml"}}, "pc.metadata.namespace", "cluster-scoped"),
    ]
    for raw, path, message in cases:
        obj: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                               "metadata": {"name": "x"}, **raw}
        with pytest.raises(FieldError) as e:
            check_priority_class(obj, "pc")
        assert (e.value.path, message in e.value.message) == (path, True)


# --- the scenario's spec.objects -------------------------------------------------------------------------------


def _scenario_objects() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 50},
        workload(),
        pod_group(priorityClassName="high", workloadRef={"workloadName": "w", "templateName": "t"}),
    ]


def test_scenario_objects_take_the_new_kinds_with_a_profile() -> None:
    out = check_objects(_scenario_objects(), profile=profile())
    assert [o["kind"] for o in out] == ["PriorityClass", "Workload", "PodGroup"]
    assert out[2]["apiVersion"] == HUB_API_VERSION and out[2]["spec"]["priority"] == 50
    assert out[1]["metadata"]["namespace"] == "ml" and out[2]["metadata"]["namespace"] == "default"
    with pytest.raises(FieldError, match=r"unsupported kind `PodGroup`"):
        check_objects(_scenario_objects()[2:])  # no profile: as before


def test_scenario_objects_refuse_duplicates_status_and_a_second_default() -> None:
    objects = _scenario_objects() + [copy.deepcopy(_scenario_objects()[2])]
    with pytest.raises(FieldError, match=r"duplicate PodGroup `default/pg` \(also spec.objects\[2\]\)") as e:
        check_objects(objects, profile=profile())
    assert e.value.path == "spec.objects[3].metadata.name"
    objects = _scenario_objects()
    objects[2]["status"] = {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True"}]}
    with pytest.raises(FieldError, match="starts unscheduled") as e:
        check_objects(objects, profile=profile())
    assert e.value.path == "spec.objects[2].status"
    defaults = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": 1,
                 "globalDefault": True} for n in ("a", "b")]
    with pytest.raises(FieldError, match="only one PriorityClass can be marked as default") as e:
        check_objects(defaults, profile=profile())
    assert e.value.path == "spec.objects[1].globalDefault"
    with pytest.raises(FieldError, match="`CompositePodGroup`.*`PriorityClass`") as e:
        check_objects([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}], profile=profile())
    assert e.value.path == "spec.objects[0].kind"


def test_a_legacy_workload_under_a_profile_is_served_by_1_35_only() -> None:
    legacy = {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload", "metadata": {"name": "w"},
              "spec": {"podGroups": [{"name": "g", "policy": {"gang": {"minCount": 2}}}]}}
    p135 = make_profile("1.35", {"GenericWorkload": True}, {"scheduling.k8s.io/v1alpha1": True})
    assert check_objects([legacy], profile=p135)[0]["spec"]["podGroups"][0]["name"] == "g"
    with pytest.raises(FieldError, match="Kubernetes 1.37 does not serve Workload in `scheduling.k8s.io/v1alpha1`"):
        check_objects([legacy], profile=profile())


def test_the_hub_readers() -> None:
    hub = check_scheduling_object(pod_group(schedulingConstraints={"topology": [{"key": "rack"}]}), "x", profile())
    assert (is_gang(hub), group_min_count(hub), topology_key(hub)) == (True, 2, "rack")
    basic = check_scheduling_object(pod_group(schedulingPolicy={"basic": {}}), "x", profile())
    assert (is_gang(basic), group_min_count(basic), topology_key(basic)) == (False, None, None)
    template = check_scheduling_object(workload(), "x", profile())["spec"]["podGroupTemplates"][0]
    assert (is_gang(template), template["disruptionMode"]) == (False, {"single": {}})

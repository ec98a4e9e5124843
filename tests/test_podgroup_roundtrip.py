"""Round trip of the scheduling.k8s.io PodGroup versions (core/kube/podgroup_convert.py): a random hub (v1beta1)
PodGroup written as 1.36's v1alpha2 or 1.37's v1alpha3 and read back gives the same hub object, for the fields
both versions have (v1alpha2 has no preemptionPolicy or parentCompositePodGroupName). Issue 23."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dralab.core.kube.podgroups import check_scheduling_object
from dralab.core.kube.versions import make_profile

_label = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)
_policy = st.one_of(st.just({"basic": {}}), st.builds(lambda n: {"gang": {"minCount": n}}, st.integers(1, 64)))


@st.composite
def hub_pod_groups(draw: Any) -> dict[str, Any]:
    policy = draw(_policy)
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["workloadRef"] = {"workloadName": draw(_label), "templateName": draw(_label)}
    spec["schedulingPolicy"] = policy
    mode = "all" if "gang" in policy and draw(st.booleans()) else "single"
    spec["disruptionMode"] = {mode: {}}
    if draw(st.booleans()):
        spec["priorityClassName"] = draw(_label)
    if draw(st.booleans()):
        spec["priority"] = draw(st.integers(-100, 1_000_000_000))
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": draw(_label), "namespace": "default"}, "spec": spec}


def as_v1alpha2(hub: dict[str, Any]) -> dict[str, Any]:
    """The hub PodGroup as 1.36 served it: podGroupTemplateRef.workload, the disruption mode as a string."""
    obj = copy.deepcopy(hub)
    obj["apiVersion"] = "scheduling.k8s.io/v1alpha2"
    spec = obj["spec"]
    ref = spec.pop("workloadRef", None)
    if ref is not None:
        spec["podGroupTemplateRef"] = {"workload": {"workloadName": ref["workloadName"],
                                                    "podGroupTemplateName": ref["templateName"]}}
    spec["disruptionMode"] = "PodGroup" if "all" in spec["disruptionMode"] else "Pod"
    return obj


V1ALPHA2 = make_profile("1.36", {"GenericWorkload": True, "WorkloadAwarePreemption": True},
                        {"scheduling.k8s.io/v1alpha2": True})
V1ALPHA3 = make_profile("1.37", {"GenericWorkload": True}, {"scheduling.k8s.io/v1alpha3": True,
                                                            "scheduling.k8s.io/v1beta1": True})


@settings(max_examples=150, deadline=None)
@given(hub=hub_pod_groups())
def test_pod_group_round_trip(hub: dict[str, Any]) -> None:
    assert check_scheduling_object(hub, "", V1ALPHA3) == hub  # the hub reads as itself
    alpha3 = {**copy.deepcopy(hub), "apiVersion": "scheduling.k8s.io/v1alpha3"}
    assert check_scheduling_object(alpha3, "", V1ALPHA3) == hub
    assert check_scheduling_object(as_v1alpha2(hub), "", V1ALPHA2) == hub

"""What cluster-autoscaler sees of a pod waiting in PreBind for binding conditions (KEP-5007), per release
(autoscaler#8795 "CA DRA: support DRA DeviceBindingConditions", closed without a fix): the pod has no node and
no Unschedulable condition, so the autoscaler neither scales up for it nor counts it on its node. Without a
nominated node name (NominatedNodeNameForExpectation, alpha and off in 1.34) the node looks empty: its GPU
utilization counts only the claims of pods on the node, and the node is scaled down under the waiting pod.
With it (beta and on from 1.35) the scheduler nominates the node for the binding cycle and the autoscaler
takes the node as occupied."""

from __future__ import annotations

from typing import Any

from test_binding_conditions import base, bound_at, events, run_doc

from dralab.core.kube.versions import ProfileFlags
from dralab.core.log.events import NodeDeleted, PodBindingEnded


def late_pod() -> dict[str, Any]:
    """One GPU node idle since the start, then at 9m one pod whose device attaches 2 min after PreBind begins:
    meanwhile the node's 10 minutes of scale-down's unneededTime pass."""
    doc = base()
    group = doc["spec"]["nodeGroups"][0]
    group["min"] = 0
    group["drivers"][0]["bindingConditions"] = {"delay": "2m"}
    doc["spec"]["workload"] = doc["spec"]["workload"][:1]
    doc["spec"]["workload"][0]["at"] = "9m"
    doc["spec"]["duration"] = "14m"
    return doc


def test_1_34_without_a_nominated_node_the_waiting_pods_node_is_scaled_down() -> None:
    result = run_doc(late_pod(), flags=ProfileFlags(version="1.34", gates={"DRADeviceBindingConditions": True}))
    deleted = [t for t, e in events(result) if isinstance(e, NodeDeleted) and e.name == "fabric-0"]
    assert deleted and 600_000 <= deleted[0] < 660_000  # during the wait, before the device attaches
    ends = [(t, e.reason) for t, e in events(result) if isinstance(e, PodBindingEnded) and not e.bound]
    assert ends and ends[0][1] == "node fabric-0 was deleted"
    assert "fabric-0" not in bound_at(result).values()


def test_1_35_on_the_nominated_node_stays_and_the_pod_binds() -> None:
    for flags in (ProfileFlags(version="1.35", gates={"DRADeviceBindingConditions": True}), ProfileFlags()):
        result = run_doc(late_pod(), flags=flags)
        assert not [e for _, e in events(result) if isinstance(e, NodeDeleted)]
        assert bound_at(result) == {"train-a": 660_000}


def test_1_35_with_nomination_turned_off_fails_as_1_34() -> None:
    flags = ProfileFlags(version="1.35", gates={"DRADeviceBindingConditions": True,
                                                "NominatedNodeNameForExpectation": False})
    result = run_doc(late_pod(), flags=flags)
    assert [e for _, e in events(result) if isinstance(e, NodeDeleted)]

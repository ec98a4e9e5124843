"""PodGroup members (1.36, 1.37) through DynamicResources as any pod (task "pgdra"): the PreBind wait for device
binding conditions (KEP-5007) and the special claim of DRA-served extended resources (KEP-5004). Upstream runs
each placed member's own binding cycle (PreBind, then Bind) once the group is feasible
(pkg/scheduler/schedule_one_podgroup.go: runBindingCycle per pod), so a member waits in PreBind alone and a
member whose wait fails goes back to the queue alone (the group's condition stays as the cycle set it)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_binding_conditions import events

from dralab.core.log.events import (
    PodBindingEnded,
    PodBindingStarted,
    PodBound,
    PodGroupConditionSet,
    PodUnschedulable,
    ResourceClaimCreated,
)
from dralab.core.scenario.load import parse_scenario
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import SimResult, simulate
from dralab.replay.simulation.verify import verify

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
RELEASES = [("1.37", "scheduling.k8s.io/v1beta1"), ("1.36", "scheduling.k8s.io/v1alpha2")]


def run_doc(doc: dict[str, Any]) -> SimResult:
    scenario = parse_scenario(doc, "pgdra.yaml")
    result = simulate(scenario, scenario.seed)
    assert result.violations == [], result.violations
    checked = verify(LogFile("pgdra", {}, result.entries))
    assert checked.ok, checked.divergence and checked.divergence.render()
    return result


def grouped(name: str, version: str, api: str, min_count: int) -> dict[str, Any]:
    """The scenario `name` with its pods made members of one gang PodGroup `pg` (minCount), under `version`."""
    doc = copy.deepcopy(yaml.safe_load((SCENARIOS / name).read_text()))
    spec = doc["spec"]
    spec["kubernetes"] = {"version": version, "featureGates": {"GenericWorkload": True},
                          "runtimeConfig": {api: True}}
    spec["objects"].append({"apiVersion": api, "kind": "PodGroup", "metadata": {"name": "pg"},
                            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})
    for item in spec["workload"]:
        item["pod"]["spec"]["schedulingGroup"] = {"podGroupName": "pg"}
    return doc


@pytest.mark.parametrize(("version", "api"), RELEASES)
def test_podgroup_members_wait_in_prebind_each_on_its_own(version: str, api: str) -> None:
    doc = grouped("binding-conditions.yaml", version, api, 2)
    for item in doc["spec"]["workload"]:
        item["runFor"] = "1h"  # train-a keeps running: the group stays at minCount for train-b's retry
    result = run_doc(doc)
    evs = events(result)
    starts = [(t, e.pod.split("/")[-1]) for t, e in evs if isinstance(e, PodBindingStarted)]
    # the group's cycle at 0s places both (minCount 2 reached); each member then waits in PreBind; train-b's
    # device never attaches: its wait times out at 600 s and it alone is placed again (first fit: gpu-1 again)
    assert starts == [(0, "train-a"), (0, "train-b"), (600_000, "train-b")]
    assert [(t, e.pod.split("/")[-1]) for t, e in evs if isinstance(e, PodBound)] == [(45_000, "train-a")]
    ends = [(t, e.pod.split("/")[-1], e.bound) for t, e in evs if isinstance(e, PodBindingEnded)]
    assert ends == [(45_000, "train-a", True), (600_000, "train-b", False)]
    errors = [(t, e.reason, e.cause) for t, e in evs if isinstance(e, PodUnschedulable)]
    assert errors == [(600_000, "SchedulerError", "binding-conditions")]
    conditions = [(t, e.status) for t, e in evs if isinstance(e, PodGroupConditionSet)]
    assert conditions[0] == (0, "True")  # the group cycle succeeded: its members went to their binding cycles
    assert all(status == "True" for _, status in conditions)


@pytest.mark.parametrize(("version", "api"), RELEASES)
def test_podgroup_members_get_the_special_claim_of_dra_served_extended_resources(version: str, api: str) -> None:
    doc = grouped("dra-extended-resource.yaml", version, api, 2)
    result = run_doc(doc)
    evs = events(result)
    bound = sorted((t, e.pod.split("/")[-1]) for t, e in evs if isinstance(e, PodBound))
    assert [t for t, _ in bound[:2]] == [0, 0]  # two members fit at once with their special claims
    created = [(t, e.pod.split("/")[-1], e.pod_claim) for t, e in evs if isinstance(e, ResourceClaimCreated)]
    assert [(t, c) for t, _, c in created[:2]] == [(0, "<extended-resources>")] * 2
    assert {p for _, p, _ in created} == {p for _, p in bound}
    assert len(bound) == 2
    # the third member is tried on the DRA path too: its special claim does not fit (4 GPUs taken), not
    # "Insufficient nvidia.com/gpu" (the node does not list it); when the two finish, the group's PreEnqueue
    # holds it back (fewer than minCount members left), as for any gang
    third = [e for _, e in evs if isinstance(e, PodUnschedulable) and e.pod.endswith("train-2")]
    assert "cannot allocate all claims" in third[0].message
    insufficient = [e for _, e in evs if isinstance(e, PodUnschedulable) and "Insufficient" in e.message]
    assert insufficient == []


def test_a_failed_trial_placement_leaves_no_special_claim_nor_wait() -> None:
    """minCount 4 of 3 pods that exist: not admitted; minCount 3 with only 2 fitting: the group's trial is
    rolled back, and with it the members' special claims (nothing created, nothing bound) until room frees."""
    doc = grouped("dra-extended-resource.yaml", "1.37", "scheduling.k8s.io/v1beta1", 3)
    result = run_doc(doc)
    evs = events(result)
    assert [e for _, e in evs if isinstance(e, ResourceClaimCreated)] == []
    assert [e for _, e in evs if isinstance(e, PodBound)] == []
    reasons = {e.reason for _, e in evs if isinstance(e, PodUnschedulable)}
    assert reasons == {"Unschedulable"}


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_topology_placement_chosen_among_domains_waits_in_prebind_too(seed: int) -> None:
    """Two domains of one node each: the group is tried in each (rolled back), then the chosen placement is
    replayed (`Placement.rebind`, pod_group.choose); its members wait in PreBind in one domain, none bound at once."""
    doc = grouped("binding-conditions.yaml", "1.37", "scheduling.k8s.io/v1beta1", 2)
    spec = doc["spec"]
    spec["seed"] = seed
    spec["kubernetes"]["featureGates"]["TopologyAwareWorkloadScheduling"] = True
    spec["objects"][-1]["spec"]["schedulingConstraints"] = {"topology": [{"key": "example.com/fabric"}]}
    group_a = spec["nodeGroups"][0]
    group_a["template"]["metadata"] = {"labels": {"example.com/fabric": "a"}}
    group_b = copy.deepcopy(group_a)
    group_b["name"] = "fabric-b"
    group_b["template"]["metadata"]["labels"]["example.com/fabric"] = "b"
    spec["nodeGroups"].append(group_b)
    spec["nodes"].append({"group": "fabric-b", "count": 1})
    spec["duration"] = "1m"
    result = run_doc(doc)
    starts = [(t, e.node) for t, e in events(result) if isinstance(e, PodBindingStarted)]
    # at 0 s or, when the claim controller's record comes after the scheduler's, at the next decision (1 s)
    t0 = starts[0][0]
    assert [t for t, _ in starts] == [t0, t0] and t0 in (0, 1_000)
    assert len({node for _, node in starts}) == 1  # one domain: the group's placement
    assert [t for t, e in events(result) if isinstance(e, PodBound)] == [t0 + 45_000]  # train-a's device attaches

"""DefaultPreemption for single pods (core/scheduler/plugins/default_preemption.py, preemption.py), graceful
termination (core/state/termination.py, controllers/lifecycle.py), nominatedNodeName as upstream reads it.

Each scenario is simulated with every invariant checked and the log verified (builders.simulated)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from builders import arrival, group, node_template, pod, scenario_doc, simulated, simulated_scenario, sourced_events

from dralab.core.kube.versions import LEGACY_PROFILE
from dralab.core.log.events import PodBound, PodEvicted, PodNominated, PodTerminating, PodUnschedulable
from dralab.core.scenario.load import ScenarioError, parse_scenario
from dralab.core.scheduler.plugins.default_preemption import Candidate, offset_and_count, pick_one
from dralab.core.state.cluster import PodState
from dralab.core.state.termination import timestamp

ROOT = Path(__file__).resolve().parents[1]


def _pod(name: str, cpu: str, priority: int, **spec: Any) -> dict[str, Any]:
    manifest = pod(name, cpu=cpu, priority=priority)
    manifest["spec"].update(spec)
    return manifest


def doc(*arrivals: dict[str, Any], version: str | None = "1.35", nodes: int = 2) -> dict[str, Any]:
    """Two 4-cpu nodes (a group that cannot grow), eight 1-cpu low-priority pods at 0s, then `arrivals`."""
    low = arrival("0s", _pod("low", "1", 0, terminationGracePeriodSeconds=20), count=8)
    d = scenario_doc([group("cpu", min=nodes, max=nodes, template=node_template(gpu=0, cpu="4"))],
                     nodes={"cpu": nodes}, workload=[low, *arrivals], duration="10m")
    if version is not None:
        d["spec"]["kubernetes"] = {"version": version}
    return d


def names(events: list[tuple[int, str, Any]]) -> list[tuple[int, str]]:
    return [(t, e.pod.rsplit("/", 1)[1]) for t, _, e in events]


def test_a_high_priority_pod_evicts_the_fewest_victims_gracefully_and_binds_where_it_was_nominated() -> None:
    result = simulated(doc(arrival("1m", _pod("high", "2", 1000))), seed=0)
    terminating = sourced_events(result.entries, PodTerminating)
    assert [(t, e.grace_ms) for t, _, e in terminating] == [(60_000, 20_000)] * 2  # two 1-cpu victims, own grace
    victims = {e.pod for _, _, e in terminating}
    node = terminating[0][2].node
    assert all(e.node == node for _, _, e in terminating)
    nominated = sourced_events(result.entries, PodNominated)
    assert [(t, e.pod, e.node) for t, _, e in nominated] == [(60_000, "pod/default/high", node)]
    evicted = sourced_events(result.entries, PodEvicted)
    assert {e.pod for _, _, e in evicted} == victims and {t for t, _, _ in evicted} == {80_000}
    bound = [(t, e.node) for t, _, e in sourced_events(result.entries, PodBound) if e.pod == "pod/default/high"]
    assert bound == [(80_000, node)]  # not before its victims are gone: they hold the cpu while terminating
    waiting = [e for _, _, e in sourced_events(result.entries, PodUnschedulable) if e.pod == "pod/default/high"]
    assert waiting[0].cause == "preemption" and node in waiting[0].detail


def test_no_new_victims_while_the_last_ones_terminate() -> None:
    """PodEligibleToPreemptOthers: nominated, with a lower-priority pod terminating there: wait, keep the node."""
    result = simulated(doc(arrival("1m", _pod("high", "2", 1000)), arrival("1m5s", _pod("mid", "4", 500))), seed=0)
    by_pod = {e.pod: t for t, _, e in sourced_events(result.entries, PodTerminating)}
    high_victims = [p for p, t in by_pod.items() if t == 60_000]
    assert len(high_victims) == 2
    # mid (4 cpu) preempts a whole node, but never the room nominated to high
    high_node = next(e.node for _, _, e in sourced_events(result.entries, PodNominated) if e.pod.endswith("high"))
    mid_nominated = [e.node for _, _, e in sourced_events(result.entries, PodNominated) if e.pod.endswith("mid")]
    assert mid_nominated and high_node not in mid_nominated


def test_preemption_policy_never_waits_without_evicting() -> None:
    result = simulated(doc(arrival("1m", _pod("high", "2", 1000, preemptionPolicy="Never"))), seed=0)
    assert sourced_events(result.entries, PodTerminating) == []
    message = [e.message for _, _, e in sourced_events(result.entries, PodUnschedulable) if e.pod.endswith("high")]
    assert message[0] == ("0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible due to "
                          "preemptionPolicy=Never.")


def test_equal_priority_finds_no_victims_and_says_so() -> None:
    result = simulated(doc(arrival("1m", _pod("same", "2", 0))), seed=0)
    assert sourced_events(result.entries, PodTerminating) == []
    message = [e.message for _, _, e in sourced_events(result.entries, PodUnschedulable) if e.pod.endswith("same")]
    assert message[0].endswith("preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")


def test_unresolvable_nodes_are_not_candidates() -> None:
    """A node failing on its selector is UnschedulableAndUnresolvable: preemption is not tried there."""
    high = _pod("high", "2", 1000, nodeSelector={"pool": "other"})
    result = simulated(doc(arrival("1m", high)), seed=0)
    assert sourced_events(result.entries, PodTerminating) == []
    message = [e.message for _, _, e in sourced_events(result.entries, PodUnschedulable) if e.pod.endswith("high")]
    assert message[0].endswith("preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")


def test_the_legacy_model_never_preempts_single_pods() -> None:
    legacy = parse_scenario(doc(arrival("1m", _pod("high", "2", 1000)), version=None), profile=LEGACY_PROFILE)
    result = simulated_scenario(legacy, seed=0)
    assert sourced_events(result.entries, PodTerminating) == []
    assert sourced_events(result.entries, PodNominated) == []
    message = [e.message for _, _, e in sourced_events(result.entries, PodUnschedulable) if e.pod.endswith("high")]
    assert "preemption" not in message[0]


def test_async_preemption_writes_the_nomination_before_the_deletions() -> None:
    on = simulated(doc(arrival("1m", _pod("high", "2", 1000))), seed=0)
    off_doc = doc(arrival("1m", _pod("high", "2", 1000)))
    off_doc["spec"]["kubernetes"]["featureGates"] = {"SchedulerAsyncPreemption": False}
    off = simulated(off_doc, seed=0)

    def order(result: Any) -> list[str]:
        kinds = (PodNominated, PodTerminating)
        return [type(e).__name__ for _, _, e in sourced_events(result.entries, kinds)][:3]
    assert order(on) == ["PodNominated", "PodTerminating", "PodTerminating"]
    assert order(off) == ["PodTerminating", "PodTerminating", "PodNominated"]


def _victim(key: str, priority: int, start: int) -> PodState:
    return PodState(key, {}, {}, priority, 0, 0, -1, node="n", bound_t=start)


def test_pick_one_follows_upstreams_criteria_in_order() -> None:
    """pickOneNodeForPreemption (TestSelectBestCandidate's criteria): violations, highest victim priority, sum,
    count, latest start of the highest-priority victims, then the first."""
    a = Candidate("a", [_victim("a1", 10, 0)], violations=1)
    b = Candidate("b", [_victim("b1", 50, 0)], violations=0)
    assert pick_one([a, b]).node == "b"
    c = Candidate("c", [_victim("c1", 10, 0), _victim("c2", 10, 0)], 0)
    d = Candidate("d", [_victim("d1", 20, 0)], 0)
    assert pick_one([d, c]).node == "c"  # the lower highest priority first
    e = Candidate("e", [_victim("e1", 10, 0), _victim("e2", 5, 0)], 0)
    f = Candidate("f", [_victim("f1", 10, 0), _victim("f2", 1, 0)], 0)
    assert pick_one([e, f]).node == "f"  # smaller sum
    g = Candidate("g", [_victim("g1", 10, 0)], 0)
    h = Candidate("h", [_victim("h1", 10, 0), _victim("h2", -2**31, 0)], 0)
    assert pick_one([h, g]).node == "g"  # fewer victims (sums shifted by 2^31: h's is larger)
    i = Candidate("i", [_victim("i1", 10, 100)], 0)
    j = Candidate("j", [_victim("j1", 10, 200)], 0)
    assert pick_one([i, j]).node == "j"  # the latest start
    assert pick_one([j, Candidate("k", [_victim("k1", 10, 200)], 0)]).node == "j"  # the first


def test_candidate_count_as_upstream() -> None:
    class _C:
        class rng:  # noqa: N801 - a stand-in for the decision's random source
            @staticmethod
            def randrange(n: int) -> int:
                return n - 1
    assert offset_and_count(_C(), 50) == (49, 50)  # type: ignore[arg-type]
    assert offset_and_count(_C(), 5000) == (4999, 500)  # type: ignore[arg-type]
    assert offset_and_count(_C(), 500) == (499, 100)  # type: ignore[arg-type]


def test_deletion_timestamps_are_rfc3339() -> None:
    assert timestamp(0) == "1970-01-01T00:00:00Z"
    assert timestamp(951_782_400_000 + 3_723_000) == "2000-02-29T01:02:03Z"


def _classes(*classes: tuple[str, int, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v, **x}
            for n, v, x in classes]


def test_priority_class_names_resolve_as_the_admission_plugin_does() -> None:
    d = doc(arrival("1m", {**_pod("high", "2", 0), "spec": {**_pod("high", "2", 0)["spec"],
                                                             "priorityClassName": "train"}}))
    del d["spec"]["workload"][1]["pod"]["spec"]["priority"]
    d["spec"]["objects"] = _classes(("train", 1000, {"preemptionPolicy": "Never"}), ("batch", 0, {}))
    sc = parse_scenario(d)
    spec = sc.workload[-1].pod["spec"]
    assert (spec["priority"], spec["preemptionPolicy"], spec["priorityClassName"]) == (1000, "Never", "train")
    result = simulated_scenario(sc, seed=0)
    assert sourced_events(result.entries, PodTerminating) == []  # the class says Never


def test_priority_admission_errors() -> None:
    d = doc(arrival("1m", _pod("high", "2", 5, priorityClassName="nope")))
    with pytest.raises(ScenarioError, match=r"spec\.workload\[1\]\.pod\.spec\.priorityClassName.*no PriorityClass"):
        parse_scenario(d)
    d = doc(arrival("1m", _pod("high", "2", 5, priorityClassName="train")))
    d["spec"]["objects"] = _classes(("train", 1000, {}))
    with pytest.raises(ScenarioError, match=r"priority \(5\) must not be provided in pod spec; priority admission"):
        parse_scenario(d)


def test_the_global_default_class_applies_to_pods_without_a_class() -> None:
    high = _pod("high", "2", 0)
    del high["spec"]["priority"]
    d = doc(arrival("1m", high))
    for a in d["spec"]["workload"]:
        a["pod"]["spec"].pop("priority", None)
    d["spec"]["objects"] = _classes(("default", 7, {"globalDefault": True}))
    sc = parse_scenario(d)
    assert {a.pod["spec"]["priority"] for a in sc.workload} == {7}
    assert {a.pod["spec"]["priorityClassName"] for a in sc.workload} == {"default"}


def _pdb(name: str, selector: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": selector}, **spec}}


def test_a_node_whose_victims_violate_no_budget_is_preferred() -> None:
    """pickOneNodeForPreemption's first criterion (PDB violations) before its second (the lowest highest-priority
    victim): the guarded pods (priority -5) would be the cheaper victims, but their budget allows no disruption."""
    guarded = _pod("guarded", "1", -5)
    guarded["metadata"]["labels"] = {"app": "guarded"}

    def victims(pdbs: list[dict[str, Any]]) -> set[str]:
        d = doc(arrival("1m", _pod("high", "2", 1000)))
        d["spec"]["workload"][0]["count"] = 4
        d["spec"]["workload"].insert(1, arrival("0s", guarded, count=4))
        if pdbs:
            d["spec"]["objects"] = pdbs
        result = simulated(d, seed=0)
        return {e.pod.rsplit("/", 1)[1].split("-")[0] for _, _, e in sourced_events(result.entries, PodTerminating)}

    assert victims([]) == {"guarded"}
    assert victims([_pdb("keep", {"app": "guarded"}, maxUnavailable=0)]) == {"low"}
    assert victims([_pdb("keep", {"app": "guarded"}, maxUnavailable=2)]) == {"guarded"}  # two may go


def test_pdb_validation_and_disruptions_allowed() -> None:
    from dralab.core.kube.fields import FieldError
    from dralab.core.kube.pdb import check_pdb, disruptions_allowed

    with pytest.raises(FieldError, match="cannot be both set"):
        check_pdb(_pdb("x", {"a": "b"}, minAvailable=1, maxUnavailable=1), "o")
    with pytest.raises(FieldError, match="percent"):
        check_pdb(_pdb("x", {"a": "b"}, minAvailable="50"), "o")
    pods = [({"a": "b"}, True)] * 3 + [({"a": "b"}, False), ({"a": "c"}, True)]
    assert disruptions_allowed(_pdb("x", {"a": "b"}, minAvailable=2), pods) == 1
    assert disruptions_allowed(_pdb("x", {"a": "b"}, minAvailable="50%"), pods) == 1  # ceil(2) of 4
    assert disruptions_allowed(_pdb("x", {"a": "b"}, maxUnavailable=1), pods) == 0  # 3 healthy, 3 desired
    assert disruptions_allowed(_pdb("x", {"a": "b"}, maxUnavailable="50%"), pods) == 1


def test_the_preemption_gpu_scenario_tells_its_story() -> None:
    """scenarios/preemption-gpu.yaml (seed 1), as its header says."""
    from dralab.core.log.events import ClaimReleased, ScaleUpRequested
    from dralab.core.scenario.load import load_scenario

    result = simulated_scenario(load_scenario(str(ROOT / "scenarios" / "preemption-gpu.yaml")), seed=1)
    terminating = [(t, e.pod, e.grace_ms) for t, _, e in sourced_events(result.entries, PodTerminating)]
    assert terminating == [(120_000, "pod/default/inference-1", 45_000)]
    assert [(t, e.pod) for t, _, e in sourced_events(result.entries, ClaimReleased)][:1] == [
        (165_000, "pod/default/inference-1")]
    bound = {e.pod: (t, e.node) for t, _, e in sourced_events(result.entries, PodBound)}
    assert bound["pod/default/train-a"] == (165_000, "h100-1")
    scale_ups = [(t, e.pods) for t, _, e in sourced_events(result.entries, ScaleUpRequested)]
    assert all(t >= 165_000 for t, _ in scale_ups)  # not for train-a while it waits, nominated
    assert any("pod/default/train-b" in pods for _, pods in scale_ups)
    train_b = [e.message for _, _, e in sourced_events(result.entries, PodUnschedulable) if e.pod.endswith("train-b")]
    assert train_b[0].endswith("preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")


def test_a_victim_whose_run_ends_with_its_grace_period_ends_once() -> None:
    """A preemption victim whose own run time ends at the very moment its grace period does (two deadlines due
    in one decision) is ended once: found by tests/test_sim_properties.py (seed 0), where the second PodEvicted
    made the fold report 'finished but was not running'."""
    from builders import arrival, group, node_template, pod, simulated

    from dralab.core.log.events import PodEvicted

    doc = {"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "twice"},
           "spec": {"duration": "96s", "nodeGroups": [group("g", max=1, delay=0, template=node_template(gpu=8))],
                    "nodes": [{"group": "g", "count": 1}],
                    "workload": [arrival(0, pod("keep", gpu=1)), arrival(0, pod("victim", gpu=2), run_for="91s"),
                                 arrival("61s", pod("urgent", gpu=6, priority=10))]}}
    result = simulated(doc, seed=0)  # asserts that no invariant was violated
    evicted = [e.pod for _, _, e in sourced_events(result.entries, PodEvicted)]
    terminating = [(t, e.pod) for t, _, e in sourced_events(result.entries, PodTerminating)]
    assert terminating == [(61_000, "pod/default/victim")] and evicted == ["pod/default/victim"]

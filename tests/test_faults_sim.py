"""Faults injected at a time (`spec.faults`): external inputs in the log, the chaos reactor's effects on
the cluster and their undoing, and what they do to scheduling; verified, checked and shrinkable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import arrival, group, key, node_template, pod, scenario_doc, simulated, sourced_events

from dralab.core.checks.log_check import check_records
from dralab.core.log.events import FaultApplied, FaultInjected, NodeNotReady, NodeReady, NodeTaintsChanged, PodBound
from dralab.core.run.inputs import scenario_inputs
from dralab.core.scenario.load import ScenarioError, parse_scenario
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.outcomes import resolve_target
from dralab.replay.simulation.shrink import Shrinker

ROOT = Path(__file__).resolve().parents[1]
TAINT = {"key": "maintenance", "effect": "NoSchedule"}


def doc(faults: list[dict[str, Any]], *, arrivals: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One 8-GPU node that cannot grow (max 1): a fault on it is felt by every pod."""
    d = scenario_doc([group("gpu", max=1, template=node_template(gpu=8))], nodes={"gpu": 1},
                     workload=arrivals if arrivals is not None else [arrival("2m", pod("job", gpu=2))],
                     duration="10m")
    d["spec"]["faults"] = faults
    return d


def test_node_fail_holds_pods_back_until_the_node_is_ready_again() -> None:
    result = simulated(doc([{"at": "1m", "kind": "node-fail", "node": "gpu-0", "for": "3m"}]), seed=1)
    injected = sourced_events(result.entries, FaultInjected)
    assert [(t, src, e.kind, e.target, e.until_ms) for t, src, e in injected] == \
        [(60_000, "scenario", "node-fail", "gpu-0", 240_000)]
    assert [(t, src) for t, src, _ in sourced_events(result.entries, NodeNotReady)] == [(60_000, "chaos")]
    assert [(t, src) for t, src, _ in sourced_events(result.entries, NodeReady)][-1] == (240_000, "chaos")
    applied = [(t, e.phase, e.note) for t, _, e in sourced_events(result.entries, FaultApplied)]
    assert applied == [(60_000, "start", ""), (240_000, "end", "")]
    bound = {e.pod: t for t, _, e in sourced_events(result.entries, PodBound)}
    assert bound == {key("job"): 240_000}  # arrived at 2m on a NotReady node; bound when it is back
    assert result.state.faults["fault/0"].ended and result.state.nodes["gpu-0"].ready
    full = check_records((o, r) for o, r in LogFile("x", {}, result.entries).records())
    assert full.ok, full.violations


def test_node_taint_keeps_intolerant_pods_off_and_is_removed_at_the_end() -> None:
    tolerant = pod("tolerant", gpu=2, tolerations=[{"key": "maintenance", "operator": "Exists"}])
    d = doc([{"at": "1m", "kind": "node-taint", "node": "gpu-0", "for": "4m", "taint": TAINT}],
            arrivals=[arrival("2m", pod("plain", gpu=2)), arrival("2m", tolerant)])
    result = simulated(d, seed=2)
    taints = [(t, e.taints) for t, _, e in sourced_events(result.entries, NodeTaintsChanged)]
    assert taints == [(60_000, ({**TAINT},)), (300_000, ())]
    bound = {e.pod: t for t, _, e in sourced_events(result.entries, PodBound)}
    assert bound[key("tolerant")] == 120_000 and bound[key("plain")] == 300_000


def test_a_fault_on_a_missing_node_changes_nothing_and_says_so() -> None:
    result = simulated(doc([{"at": "1m", "kind": "node-fail", "node": "gpu-7", "for": "1m"}]), seed=3)
    applied = [(e.phase, e.note) for _, _, e in sourced_events(result.entries, FaultApplied)]
    assert applied == [("start", "node gpu-7 does not exist"), ("end", "nothing to undo")]
    assert sourced_events(result.entries, NodeNotReady) == []
    assert {e.pod: t for t, _, e in sourced_events(result.entries, PodBound)} == {key("job"): 120_000}


def test_a_node_that_is_not_ready_already_is_not_made_ready_by_the_end() -> None:
    faults = [{"at": "1m", "kind": "node-fail", "node": "gpu-0"},  # never ends
              {"at": "2m", "kind": "node-fail", "node": "gpu-0", "for": "1m"}]
    result = simulated(doc(faults, arrivals=[]), seed=4)
    applied = [(e.fault, e.phase, e.note) for _, _, e in sourced_events(result.entries, FaultApplied)]
    assert applied == [("fault/0", "start", ""), ("fault/1", "start", "node gpu-0 is NotReady already"),
                       ("fault/1", "end", "nothing to undo")]
    assert not result.state.nodes["gpu-0"].ready


def test_faults_are_inputs_at_their_time_and_a_scenario_without_faults_has_no_chaos_reactor() -> None:
    sc = parse_scenario(doc([{"at": "3m", "kind": "node-fail", "node": "gpu-0"}]))
    inputs = scenario_inputs(sc, 1)
    assert [(r.id, r.t) for r in inputs] == [("scenario/setup", 0), ("scenario/arrival/0", 120_000),
                                             ("scenario/fault/0", 180_000)]
    assert "chaos" in inputs[0].events[0].config  # type: ignore[union-attr]
    plain = parse_scenario(doc([]))
    assert "chaos" not in scenario_inputs(plain, 1)[0].events[0].config  # type: ignore[union-attr]


def test_faults_are_shrinkable_inputs() -> None:
    """Faults are external inputs: shrink counts them and removes the ones the target does not need
    (here none: with the node itself removed, nothing can run the pod, which is smaller still)."""
    faults = [{"at": "1m", "kind": "node-taint", "node": "gpu-0", "for": "30s", "taint": TAINT},
              {"at": "1m", "kind": "node-fail", "node": "gpu-5"},
              {"at": "1m30s", "kind": "node-fail", "node": "gpu-0"}]
    result = simulated(doc(faults), seed=5)
    records = [r for _, r in LogFile("x", {}, result.entries).records() if r.source == "scenario"]
    shrunk = Shrinker(records, resolve_target("pod-pending")).run()
    assert shrunk.reproduced and shrunk.before["other"] == 3 and shrunk.after["other"] == 0
    assert not any(r.id.startswith("scenario/fault/") for r in shrunk.inputs)


@pytest.mark.parametrize(("fault", "path", "message"), [
    ({"at": "1m", "kind": "node-melt", "node": "gpu-0"}, "spec.faults[0].kind", "node-fail"),
    ({"at": "1m", "kind": "node-taint", "node": "gpu-0"}, "spec.faults[0].taint", "required"),
    ({"at": "1m", "kind": "node-fail", "node": "gpu-0", "taint": TAINT}, "spec.faults[0].taint", "takes no taint"),
    ({"at": "11m", "kind": "node-fail", "node": "gpu-0"}, "spec.faults[0].at", "spec.duration"),
    ({"at": "1m", "kind": "node-fail"}, "spec.faults[0]", "node"),
    ({"at": "1m", "kind": "node-taint", "node": "x", "taint": {"key": "k", "effect": "Sometimes"}},
     "spec.faults[0].taint.effect", "NoSchedule"),
    ({"at": "1m", "kind": "node-fail", "node": "gpu-0", "for": "0s"}, "spec.faults[0].for", ""),
    ({"at": "1m", "kind": "quota-cut", "group": "gpu"}, "spec.faults[0].quota", "required for a quota-cut"),
    ({"at": "1m", "kind": "partial-fulfilment", "group": "gpu", "fraction": 1.5}, "spec.faults[0].fraction",
     "from 0 to 1"),
    ({"at": "1m", "kind": "stale-view", "reactor": "autoscaler", "lag": 0}, "spec.faults[0].lag", ""),
    ({"at": "1m", "kind": "swizzle", "reactors": [], "step": "10s"}, "spec.faults[0].reactors", "at least one"),
])
def test_bad_faults_say_where(fault: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc([fault]), "f.yaml")
    assert path in str(err.value) and message in str(err.value) and "f.yaml" in str(err.value)


def test_the_chaos_node_fail_scenario_tells_its_story() -> None:
    """scenarios/chaos/node-fail.yaml, as its header says: train-b-2 waits from 5m to 14m for the failed
    node, no node is added, every invariant (liveness included) holds."""
    d = yaml.safe_load((ROOT / "scenarios" / "chaos" / "node-fail.yaml").read_text())
    result = simulated(d, seed=11)
    bound = {e.pod: (t, e.node) for t, _, e in sourced_events(result.entries, PodBound)}
    assert bound[key("train-b-2")] == (840_000, "gpu-8x-1")
    assert all(t == 300_000 for p, (t, _) in bound.items() if p in (key("train-b-0"), key("train-b-1")))
    assert sum(g.created - g.initial for g in result.state.node_groups.values()) == 0
    full = check_records((o, r) for o, r in LogFile("x", {}, result.entries).records())
    assert full.ok, full.violations
    del d["spec"]["faults"]
    calm = simulated(d, seed=11)
    assert all(t == 300_000 for t, _, e in sourced_events(calm.entries, PodBound) if "train-b" in e.pod)


def test_snapshots_keep_the_faults() -> None:
    """A reactor restarted from a snapshot must know which faults started and ended, or it would apply
    them again: the snapshot of every prefix decodes to the same state, faults included."""
    from dralab.core.state.cluster import ClusterState
    from dralab.core.state.codec import decode_state, encode_state

    result = simulated(doc([{"at": "1m", "kind": "node-taint", "node": "gpu-0", "for": "2m", "taint": TAINT}]), 6)
    state = ClusterState()
    for offset, record in LogFile("x", {}, result.entries).records():
        state.apply(offset, record)
        data = encode_state(state)
        again = decode_state(data)
        assert again.faults == state.faults and encode_state(again) == data
    assert state.faults["fault/0"].ended and state.faults["fault/0"].effective


def test_faults_others_act_on_are_only_marked_by_the_chaos_reactor() -> None:
    faults = [{"at": "1m", "kind": "cloud-stockout", "group": "gpu", "for": "1m"},
              {"at": "1m", "kind": "quota-cut", "group": "cpu", "quota": 0}]
    result = simulated(doc(faults, arrivals=[]), seed=7)
    applied = [(e.fault, e.phase, e.note) for _, _, e in sourced_events(result.entries, FaultApplied)]
    assert applied == [("fault/0", "start", ""), ("fault/1", "start", "node group cpu does not exist"),
                       ("fault/0", "end", "")]
    injected = {e.fault: (e.kind, e.target, e.params) for _, _, e in sourced_events(result.entries, FaultInjected)}
    assert injected["fault/1"] == ("quota-cut", "cpu", {"quota": 0})

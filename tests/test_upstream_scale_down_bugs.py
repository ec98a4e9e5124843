"""The scale-down bugs of core/kube/bugs.py, each scenario of scenarios/upstream/ with its two outcomes: the release
(or switch) with the bug, and the one without."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from builders import sourced_events

from dralab.core.analysis.scale_down_summary import scale_down_summary
from dralab.core.kube.versions import ProfileFlags
from dralab.core.log.events import (
    NodeDeleted,
    NodeTaintsChanged,
    PodBindingEnded,
    PodBound,
    ScaleDownReported,
    decode_record,
)
from dralab.core.scenario.load import load_scenario
from dralab.replay.simulation.sim import SimResult, simulate

UPSTREAM = Path(__file__).resolve().parents[1] / "scenarios" / "upstream"


def run(name: str, version: str | None = None, bugs: dict[str, bool] | None = None) -> SimResult:
    sc = load_scenario(UPSTREAM / name, flags=ProfileFlags(version=version) if version else None)
    if bugs is not None:
        sc = load_scenario(UPSTREAM / name, profile=dataclasses.replace(sc.kubernetes, bugs=bugs))
    result = simulate(sc, sc.seed if sc.seed is not None else 1)
    assert result.violations == []
    return result


def taints(result: SimResult) -> list[tuple[int, str]]:
    return [(t // 1000, e.name) for t, _, e in sourced_events(result.entries, NodeTaintsChanged) if e.taints]


def deletions(result: SimResult) -> list[tuple[int, str]]:
    return [(t // 1000, e.name) for t, _, e in sourced_events(result.entries, NodeDeleted)]


def test_autoscaler_8707_threshold_zero_keeps_the_daemonset_only_node_until_1_36() -> None:
    with_bug = run("threshold-zero-daemonset-node.yaml")  # 1.35
    assert deletions(with_bug) == []
    assert scale_down_summary(with_bug.state) is None  # gpu-0 NotUnderutilized (0 >= 0): nothing to say
    fixed = run("threshold-zero-daemonset-node.yaml", version="1.36")
    assert taints(fixed) == [(600, "gpu-0")] and deletions(fixed) == [(610, "gpu-0")]
    empty = [e for _, _, e in sourced_events(fixed.entries, ScaleDownReported) if e.reason == "ScaleDownEmpty"]
    assert [e.node for e in empty] == ["gpu-0"]


def test_autoscaler_5117_a_drain_in_progress_holds_back_the_empty_node() -> None:
    with_bug = run("drain-blocks-empty-node.yaml")  # spec.kubernetes.bugs turns it on
    assert taints(with_bug) == [(600, "gpu-1"), (780, "gpu-2")]
    assert deletions(with_bug) == [(780, "gpu-1"), (960, "gpu-2")]
    fixed = run("drain-blocks-empty-node.yaml", bugs={})  # 1.37 as released: fixed since 1.28
    assert taints(fixed) == [(600, "gpu-1"), (720, "gpu-2")]
    assert deletions(fixed) == [(780, "gpu-1"), (900, "gpu-2")]
    assert scale_down_summary(fixed.state)["drained"] == 1 and scale_down_summary(fixed.state)["empty"] == 1


def test_autoscaler_9607_a_pod_nominated_in_prebind_is_invisible_and_its_node_deleted() -> None:
    with_bug = run("prebind-nominated-invisible.yaml")  # spec.kubernetes.bugs turns it on
    assert deletions(with_bug) == [(610, "fabric-0")]
    ended = [(t // 1000, e.reason) for t, _, e in sourced_events(with_bug.entries, PodBindingEnded) if not e.bound]
    assert ended == [(610, "node fabric-0 was deleted")]
    assert [(t // 1000, e.node) for t, _, e in sourced_events(with_bug.entries, PodBound)] == [(802, "fabric-1")]
    fixed = run("prebind-nominated-invisible.yaml", bugs={})
    assert deletions(fixed) == []
    assert [(t // 1000, e.node) for t, _, e in sourced_events(fixed.entries, PodBound)] == [(660, "fabric-0")]
    assert fixed.state.scale_down.unremovable == {}  # NotUnneededLongEnough (nominated): not written


def test_the_drained_pods_story_shows_the_autoscalers_event() -> None:
    """`replay --explain web`: the pod's story has cluster-autoscaler's ScaleDown "deleting pod for node scale down"
    beside its eviction."""
    from dralab.replay.simulation.timetravel import explain

    result = run("drain-blocks-empty-node.yaml", bugs={})
    story = explain(((o, decode_record(p, o)) for o, p in result.entries), "web")["story"]
    lines = [s["event"] for s in story]
    assert any(line.startswith("ScaleDownReported") and "deleting pod for node scale down" in line for line in lines)
    assert any(line.startswith("PodEvicted") for line in lines)

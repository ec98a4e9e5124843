"""PodTopologySpread's PreScore first pass (the nodes missing a constraint's key, each constraint's domain values)
kept per set of keys while the nodes and their manifests are the same objects (SpreadScore._domains_of), and
its Score made once per set of values (`score_all`, ScoreState.by_values): benchmark optimisations that must
change no score. Over test_spread_score_counts_perf2's random rounds (zone / hostname constraints, nodes
without a hostname or a zone, NodeTaintsChanged replacing node manifests), every PreScore's first pass is compared with
the pass over every node (scoring.go initPreScoreState, restated below) and every `score_all` with `score` on
each node; and a node whose labels change (a new manifest object) or a node added is seen at once.

Seen to fail on deliberate breaks: the kept pass keyed without the manifests (a relabelled node then keeps its
old domain), and the scores per set of values kept across pods (one dict for every ScoreState).
"""

from __future__ import annotations

import math
import random
from typing import Any

import test_spread_score_counts_perf2 as spread

from dralab.core.scheduler.plugins.pod_topology_spread import HOSTNAME, SpreadScore, constraints, count_matching
from dralab.core.state.cluster import NodeState


def first_pass(cs: Any, nodes: list[NodeState]) -> tuple[set[str], list[dict[str, int]]]:
    """The pass over every node, as it was before it was kept (and as upstream's initPreScoreState)."""
    ignored: set[str] = set()
    counts: list[dict[str, int]] = [{} for _ in cs]
    for node in nodes:
        labels = node.labels
        if not all(c.key in labels for c in cs):
            ignored.add(node.name)
            continue
        for i, c in enumerate(cs):
            if c.key != HOSTNAME:
                counts[i].setdefault(labels.get(c.key, ""), 0)
    return ignored, counts


def reference_score(state: Any, node: NodeState) -> int:
    """scoring.go Score on one node, restated (no kept values)."""
    if node.name in state.ignored:
        return 0
    total = 0.0
    for i, c in enumerate(state.constraints):
        value = node.labels.get(c.key)
        if value is None:
            continue
        cnt = (count_matching(state.pods.on(node.name), c.selector, state.namespace) if c.key == HOSTNAME
               else state.counts[i][value])
        total += cnt * state.weights[i] + (c.max_skew - 1)
    return math.floor(total + 0.5)  # Go's math.Round for the non-negative sums here


def decide_checked(seed: int, nodes: int, rounds: int, seen: list[int]) -> list[int]:
    original_pre, original_all = SpreadScore.pre_score, SpreadScore.score_all

    def pre_score(self: SpreadScore, cycle: Any, pod: Any, nodes: Any) -> Any:
        got = original_pre(self, cycle, pod, nodes)
        if got is not None:
            ignored, counts = first_pass(constraints(pod, "ScheduleAnyway"), nodes)
            assert got.ignored == ignored, f"{pod.key}: the kept pass ignores other nodes"
            assert [list(c) for c in got.counts] == [list(c) for c in counts], f"{pod.key}: other domains"
        return got

    def score_all(self: SpreadScore, state: Any, pod: Any, found: Any) -> Any:
        got = original_all(self, state, pod, found)
        want = {name: reference_score(state, node) for name, node, _ in found}
        assert got == want and list(got) == list(want), f"{pod.key}: score_all scored otherwise"
        assert {name: self.score(state, pod, node, used) for name, node, used in found} == want
        seen.append(len(found))
        return got

    def node(r: random.Random) -> dict[str, Any]:  # some nodes without a zone: ignored by a zone constraint
        manifest = original_node(r)
        if r.random() < 0.15:
            manifest["metadata"]["labels"].pop("zone", None)
        return manifest

    original_node = spread.spread_node
    SpreadScore.pre_score, SpreadScore.score_all = pre_score, score_all  # type: ignore[method-assign]
    spread.spread_node = node
    try:
        return spread.decide_both(seed, nodes, rounds)
    finally:
        SpreadScore.pre_score, SpreadScore.score_all = original_pre, original_all  # type: ignore[method-assign]
        spread.spread_node = original_node


def test_kept_first_pass_and_score_all_as_every_node() -> None:
    seen: list[int] = []
    bound = sum(b for seed in range(30) for b in decide_checked(seed, 2 + seed % 11, 1 + seed % 5, seen))
    assert bound > 50
    assert len(seen) > 30 and sum(n > 2 for n in seen) > 10


def _node(name: str, labels: dict[str, str]) -> NodeState:
    return NodeState(name=name, group="g", manifest={"metadata": {"name": name, "labels": labels}},
                     allocatable={}, created_t=0, ready_at=0, ready=True)


def test_a_relabelled_or_added_node_is_seen() -> None:
    plugin = SpreadScore()
    nodes = [_node("a", {"zone": "z1"}), _node("b", {"zone": "z2"}), _node("c", {})]
    first = plugin._domains_of(("zone",), nodes)
    assert first.ignored == {"c"} and first.values == [("z1", "z2")]
    assert plugin._domains_of(("zone",), nodes) == first  # the same answer (each node's values kept)
    assert plugin._domains_of(("zone",), nodes[:1]).values == [("z1",)]  # the nodes given, not every node
    nodes[2].manifest = {"metadata": {"name": "c", "labels": {"zone": "z3"}}}  # the fold replaces a manifest
    second = plugin._domains_of(("zone",), nodes)
    assert second.ignored == frozenset() and second.values == [("z1", "z2", "z3")]
    nodes.append(_node("d", {"zone": "z4"}))  # the same list object, one node more
    assert plugin._domains_of(("zone",), nodes).values == [("z1", "z2", "z3", "z4")]
    assert plugin._domains_of(("zone", HOSTNAME), nodes).ignored == {"a", "b", "c", "d"}

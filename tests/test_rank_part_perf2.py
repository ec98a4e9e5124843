"""A set-wise pod's pointwise plugins (NodeResourcesFit, NodeResourcesBalancedAllocation: normalize a no-op)
are summed per node from the per-shape cache (feasibility_cache.py, key PodScore.part_key) and only the
set-wise plugins score per pod (scoring.PodScore.rank's `part`): a benchmark optimisation that must change no
total. Over random clusters (test_scoring_fast_paths.py's rounds, with test_spread_score_counts_perf2's spread
pods and its nodes, soft taints, preferred node affinity, images, finished pods, NodeTaintsChanged), every rank
given cached sums must group the nodes exactly as the rank that scores every plugin on every found node.

Seen to fail on deliberate breaks: the cached sum taken as 0 (node_search's `part[name] = value`), and the
cache key without the pod's NonZeroRequested additions (PodScore.part_key). The same rounds compare the fast
paths with the plain loop (plain.py): a pointwise pod with a DoNotSchedule constraint reads its fit and score
from the cache and then its spread filter; seen to fail with that filter skipped."""

from __future__ import annotations

from typing import Any

import test_scoring_fast_paths as scoring
import test_spread_score_counts_perf2 as spread

from dralab.core.scheduler.scoring import PodScore


def decide_both(seed: int, nodes: int, rounds: int, seen: list[int]) -> list[int]:
    """test_scoring_fast_paths.decide_both under the default profile with spread pods, every rank given
    cached sums checked against the full rank; `seen` counts those ranks."""
    original = PodScore.rank

    def rank(self: PodScore, found: Any, part: Any = None) -> Any:
        got = original(self, found, part)
        if part is not None:
            assert got == original(self, found), f"{self.pod.key}: the cached pointwise sums ranked otherwise"
            seen.append(len(found))
        return got

    PodScore.rank = rank  # type: ignore[method-assign]
    scoring.random_pod, scoring.random_node = spread.spread_pod, spread.spread_node
    try:
        return scoring.decide_both(seed, nodes, rounds, "default")
    finally:
        PodScore.rank = original  # type: ignore[method-assign]
        scoring.random_pod, scoring.random_node = spread.PLAIN_POD, spread.PLAIN_NODE


def test_cached_pointwise_sums_rank_as_every_plugin() -> None:
    seen: list[int] = []
    bound = sum(b for seed in range(40) for b in decide_both(seed, 3 + seed % 10, 1 + seed % 5, seen))
    assert bound > 50
    assert len(seen) > 50 and sum(n > 1 for n in seen) > 20  # ranks over several nodes checked

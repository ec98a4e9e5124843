"""PodTopologySpread's PreScore reads its counts per domain from the Filter side's incremental counts
(placement.CyclePods.spread_counts, restricted to the filtered nodes' values) instead of walking every pod on
every domain node: a benchmark optimisation that must change no score. Over random clusters (test_scoring_fast_
paths.py's rounds: zone-labelled nodes, NotReady ones, soft taints, finished pods) and pods carrying
ScheduleAnyway constraints (zone, hostname or both, nodeTaintsPolicy Honor, nodeAffinityPolicy Ignore, mixed
with DoNotSchedule ones so that the Filter's counts are made first too), every PreScore must give the same state
as the walk (spread_counts hidden from the pod view). Some pods have a zone nodeSelector, so that some domains are
not eligible (a zero count for the walk).

Seen to fail on deliberate breaks: counts not brought up to date with the decision's moves
(placement.py's `applied < len(moves)` branch skipped) and a zone count taken without the restriction to the
filtered nodes' values.
"""

from __future__ import annotations

import random
from typing import Any

import test_scoring_fast_paths as scoring
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dralab.core.scheduler.placement import CyclePods
from dralab.core.scheduler.plugins.pod_topology_spread import HOSTNAME, SpreadScore

APPS = ("a", "b", "c")
PLAIN_POD = scoring.random_pod
PLAIN_NODE = scoring.random_node
ZONES = ("a", "b", "c")


def spread_node(r: random.Random) -> dict[str, Any]:
    """test_scoring_fast_paths' node with a third zone and, mostly, a hostname label (a node without it is
    ignored by a pod spreading on both keys)."""
    node = PLAIN_NODE(r)
    labels = node["metadata"].setdefault("labels", {})
    if r.random() < 0.3:
        labels["zone"] = "c"
    if r.random() < 0.8:
        labels[HOSTNAME] = f"h{r.getrandbits(32)}"
    return node


def spread_pod(r: random.Random, i: int) -> dict[str, Any]:
    manifest = PLAIN_POD(r, i)
    app = r.choice(APPS)
    manifest["metadata"]["labels"] = {"app": app}
    if r.random() < 0.3:  # other zones' nodes not eligible under nodeAffinityPolicy Honor: zero-count domains
        manifest["spec"]["nodeSelector"] = {"zone": r.choice(ZONES)}
    if r.random() < 0.7:
        keys = r.choice((("zone",), (HOSTNAME,), ("zone", HOSTNAME)))
        manifest["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": r.choice((1, 2, 3)), "topologyKey": key,
            "whenUnsatisfiable": r.choice(("ScheduleAnyway", "ScheduleAnyway", "DoNotSchedule")),
            "labelSelector": {"matchLabels": {"app": r.choice((app, *APPS))}},
            **({"nodeTaintsPolicy": "Honor"} if r.random() < 0.3 else {}),
            **({"nodeAffinityPolicy": "Ignore"} if r.random() < 0.2 else {})} for key in keys]
    return manifest


def _state(state: Any) -> Any:
    return None if state is None else (state.ignored, state.counts, state.weights)


def checked_pre_score(seen: list[int]) -> Any:
    """SpreadScore.pre_score that also computes the walk and asserts the same state; `seen` counts the calls
    where a zone domain had matching pods."""
    original = SpreadScore.pre_score

    def pre_score(self: SpreadScore, cycle: Any, pod: Any, nodes: Any) -> Any:
        got = original(self, cycle, pod, nodes)
        saved = CyclePods.spread_counts
        del CyclePods.spread_counts  # type: ignore[attr-defined]
        try:
            want = original(self, cycle, pod, nodes)
        finally:
            CyclePods.spread_counts = saved  # type: ignore[method-assign]
        assert _state(got) == _state(want), f"{pod.key}: the kept counts scored otherwise"
        if got is not None and any(v for i, c in enumerate(got.constraints) if c.key != HOSTNAME
                                   for v in got.counts[i].values()):
            seen.append(1)
        return got

    return pre_score


def decide_both(seed: int, nodes: int, rounds: int, seen: list[int] | None = None) -> list[int]:
    """test_scoring_fast_paths.decide_both with spread_pod's pods under the default profile, every PreScore
    checked (checked_pre_score); per round, the pods bound."""
    seen = [] if seen is None else seen
    original = SpreadScore.pre_score
    SpreadScore.pre_score = checked_pre_score(seen)  # type: ignore[method-assign]
    scoring.random_pod, scoring.random_node = spread_pod, spread_node
    try:
        return scoring.decide_both(seed, nodes, rounds, "default")
    finally:
        SpreadScore.pre_score = original  # type: ignore[method-assign]
        scoring.random_pod, scoring.random_node = PLAIN_POD, PLAIN_NODE


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), nodes=st.integers(0, 12), rounds=st.integers(1, 5))
def test_kept_counts_score_as_the_walk_over_every_pod(seed: int, nodes: int, rounds: int) -> None:
    decide_both(seed, nodes, rounds)


def test_the_check_binds_pods_and_sees_zone_counts() -> None:
    seen: list[int] = []
    assert sum(b for seed in range(4) for b in decide_both(seed, 8, 3, seen)) > 10
    assert len(seen) > 10

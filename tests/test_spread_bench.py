"""The spread / affinity benchmark (benchmarks/spread_bench.py) at a small size: every workload schedules every
measured pod and reports its figures (the targets live in the benchmark and docs/scheduler.md, not in a timed
test); the required anti-affinity workload puts at most one of its pods on a node, the spread one keeps its
zones within maxSkew, and the preferred-affinity one puts its pods onto the nodes holding the init pods."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import spread_bench  # noqa: E402

from dralab.core.scenario.load import parse_scenario  # noqa: E402
from dralab.replay.simulation.sim import simulate  # noqa: E402


@pytest.mark.parametrize("case", sorted(spread_bench.TABLE))
def test_every_measured_pod_is_scheduled_and_reported(case: str) -> None:
    row = spread_bench.run(case, 30, 20, 20)
    assert row["measured_scheduled"] == 20
    assert row["pods_per_s"] > 0 and row["target"] == 2 * spread_bench.TABLE[case][3]


def _placed(case: str, nodes: int, init: int, measure: int) -> tuple[object, list[str]]:
    result = simulate(parse_scenario(spread_bench.scenario(case, nodes, init, measure), "bench"), 1)
    measured = [p.node for p in result.state.pods.values() if "init-" not in p.key and "default-pod" not in p.key]
    assert all(measured)
    return result, [n for n in measured if n is not None]


def test_anti_affinity_one_measured_pod_a_node() -> None:
    _, nodes = _placed("anti-affinity", 40, 10, 30)
    assert max(Counter(nodes).values()) == 1


def test_spread_keeps_zones_within_max_skew() -> None:
    result, nodes = _placed("spread", 30, 20, 45)
    zones = Counter(result.state.nodes[n].manifest["metadata"]["labels"][spread_bench.ZONE]  # type: ignore[attr-defined]
                    for n in nodes)
    assert len(zones) == 3 and max(zones.values()) - min(zones.values()) <= 5


def test_preferred_affinity_joins_the_init_pods_nodes() -> None:
    result, nodes = _placed("preferred-affinity", 40, 5, 10)
    init_nodes = {p.node for p in result.state.pods.values() if "init-" in p.key}  # type: ignore[attr-defined]
    assert init_nodes and set(nodes) <= init_nodes  # InterPodAffinity's 0..100 (weight 2) outweighs the spare room

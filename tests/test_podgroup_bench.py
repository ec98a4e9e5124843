"""The PodGroup benchmark (benchmarks/podgroup_bench.py) at a small size: every workload schedules every pod, TAS
keeps each group inside one rack, and the figures it reports are there (the targets live in the benchmark and
docs/scheduler.md, not in a timed test)."""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import podgroup_bench  # noqa: E402

from dralab.core.scenario.load import parse_scenario  # noqa: E402
from dralab.replay.simulation.sim import simulate  # noqa: E402


@pytest.mark.parametrize(("case", "groups", "per_group"), [("gang", 30, 3), ("basic", 30, 3), ("tas", 20, 4),
                                                          ("tas", 2, 60)])
def test_every_pod_is_scheduled_and_reported(case: str, groups: int, per_group: int) -> None:
    row = podgroup_bench.run(case, 100, groups, per_group)
    assert row["scheduled"] == row["pods"] == groups * per_group
    assert row["scheduler_pods_per_s"] > 0 and row["scheduler_cpu_s"] <= row["cpu_s"]


def test_tas_keeps_each_group_in_one_rack() -> None:
    result = simulate(parse_scenario(podgroup_bench.scenario("tas", 200, 30, 4), "bench"), 1)
    racks: dict[str, set[str]] = defaultdict(set)
    for pod in result.state.pods.values():
        assert pod.node is not None
        labels = result.state.nodes[pod.node].manifest["metadata"]["labels"]
        racks[pod.manifest["spec"]["schedulingGroup"]["podGroupName"]].add(labels[podgroup_bench.RACK])
    assert len(racks) == 30 and all(len(r) == 1 for r in racks.values())
    assert result.violations == []

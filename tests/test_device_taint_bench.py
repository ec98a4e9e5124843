"""The DeviceTaintRules benchmark (benchmarks/device_taint_bench.py) at a small size: every pod is scheduled, none
on a device a rule taints, and the figures it reports are there (the figures live in docs/scheduler.md)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import device_taint_bench  # noqa: E402

from dralab.core.scenario.load import parse_scenario  # noqa: E402
from dralab.replay.simulation.sim import simulate  # noqa: E402


def test_the_bench_schedules_every_pod_and_reports() -> None:
    row = device_taint_bench.run(20, 60, 3)
    assert row["scheduled"] == 60 and row["scheduler_pods_per_s"] > 0 and row["patch_ms"] > 0


def test_no_pod_gets_a_tainted_device() -> None:
    """Rule 0 taints gpu-0 of every pool, rules 1 and 2 every device of pools gpu-8x-1 and gpu-8x-2: 20 nodes x 7
    untainted GPUs less 2 x 7 leave 126 for 130 pods, so exactly 4 stay pending."""
    state = simulate(parse_scenario(device_taint_bench.scenario(20, 130, 3), "bench"), 1).state
    devices = [(r["pool"], r["device"]) for c in state.dra.claims.values() if c.allocation
               for r in c.allocation["devices"]["results"]]
    assert len(devices) == 126 and len(set(devices)) == 126
    assert not any(d == "gpu-0" or p in ("gpu-8x-1", "gpu-8x-2") for p, d in devices)
    assert sum(1 for p in state.pods.values() if p.node is None) == 4

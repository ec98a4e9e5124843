"""`dralab run --ray ADDRESS` on a Ray cluster of two nodes (two raylets on this machine, made with Ray's
own ray.cluster_utils): the run completes in cluster mode, and the actors, the two driver shards above
all, are spread over both nodes (issue 6: "the driver shards spread over the workers"). The cluster is
made in a subprocess, since the test session holds a local Ray of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.live
@pytest.mark.timeout(420)
def test_run_on_a_two_node_ray_cluster_spreads_the_actors(redis_url: str) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "fixtures" / "two_node_ray.py"), redis_url,
                           str(ROOT / "scenarios" / "quickstart.yaml"), "2"],
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["completed"], out["error"]
    assert out["mode"] == "cluster"
    assert len(out["ray_nodes"]) == 2
    assert out["pods"] > 0 and out["scheduled"] == out["pods"]
    placed = out["placed"]
    assert {"drivers-0", "drivers-1", "scheduler", "autoscaler"} <= set(placed), placed
    assert set(placed.values()) <= set(out["ray_nodes"])
    # SPREAD is best effort: the actors use both nodes, though two shards may share one (seen here)
    assert len(set(placed.values())) == 2, placed
    cli = out["cli"]
    assert cli["status"] == 0, cli["stderr"]
    summary = json.loads(cli["stdout"])
    assert summary["pods"]["scheduled"] == summary["pods"]["total"] > 0

"""A chaos sweep on a local Ray cluster of one worker node and of two (issue 24: two workers >= 1.7x one).

    python benchmarks/ray_sweep_bench.py [--scenario scenarios/scale-down-race.yaml] [--seeds 1-200]
                                         [--rate 30] [--rounds 2]

Each cluster is a real multi-node Ray cluster on this machine (ray.cluster_utils.Cluster: a head with no CPUs
for the driver, then worker nodes of one CPU each, every raylet its own process), made anew per measurement,
loopback only, with token authentication (actors/ray_access.py). The sweep is what `dralab chaos --ray` runs
(cli/chaos_cmd.py run_seeds, the seeds as Ray tasks); its wall time is taken after the cluster is up, and the
rounds alternate one worker and two so that other load on the machine hits both alike. Prints one JSON line:
each round's seconds, the medians and the speed-up; and checks that every run gave the same digests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def sweep(workers: int, scenario: Any, seeds: list[int], options: Any) -> tuple[float, float, dict[int, str]]:
    """Wall seconds of the sweep on a fresh cluster of `workers` one-CPU nodes, CPU seconds its worker
    processes spent, and each seed's log digest."""
    import ray
    from ray.cluster_utils import Cluster

    from dralab.actors.ray_access import local_ray_environment
    from dralab.chaos_cmd import _Progress, run_seeds

    with local_ray_environment():
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        try:
            for _ in range(workers):
                cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
            assert int(ray.cluster_resources().get("CPU", 0)) == workers
            pid = ray.remote(num_cpus=1)(lambda: os.getpid())  # start the workers' Python processes first
            pids = set(ray.get([pid.remote() for _ in range(workers * 4)]))
            cpu0 = {p: _cpu_s(p) for p in pids}
            started = time.monotonic()
            results = run_seeds(scenario, seeds, options, workers, _Progress(len(seeds), True), ray=cluster.address)
            wall = time.monotonic() - started
            cpu = sum(_cpu_s(p) - cpu0[p] for p in pids)
        finally:
            ray.shutdown()
            cluster.shutdown()
    return wall, cpu, {r.seed: r.digest for r in results}


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    from dralab.chaos_cmd import parse_seeds
    from dralab.core.scenario.load import load_scenario
    from dralab.replay.simulation.chaos import DEFAULT_KINDS, ChaosOptions

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default=str(ROOT / "scenarios" / "scale-down-race.yaml"))
    ap.add_argument("--seeds", default="1-200")
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    scenario, seeds = load_scenario(args.scenario), parse_seeds(args.seeds)
    times: dict[int, list[float]] = {1: [], 2: []}
    cpus: dict[int, list[float]] = {1: [], 2: []}
    loads: list[float] = []
    digests = None
    with tempfile.TemporaryDirectory() as out:
        options = ChaosOptions(kinds=DEFAULT_KINDS, rate=args.rate, out_dir=out, shrink=False)
        for r in range(args.rounds):
            for workers in (1, 2) if r % 2 == 0 else (2, 1):
                loads.append(round(os.getloadavg()[0], 2))
                wall, cpu, got = sweep(workers, scenario, seeds, options)
                assert digests is None or got == digests, "a sweep gave other logs"
                digests = got
                times[workers].append(round(wall, 2))
                cpus[workers].append(round(cpu, 2))
                sys.stderr.write(f"ray sweep: {workers} worker(s): {wall:.1f}s wall, {cpu:.1f}s CPU in the workers\n")
    one, two = statistics.median(times[1]), statistics.median(times[2])
    # what the workers got of the machine: CPU seconds per wall second per worker (1.0: a core each, unshared)
    share = {w: round(statistics.median(c) / statistics.median(times[w]) / w, 2) for w, c in cpus.items()}
    print(json.dumps({"scenario": Path(args.scenario).name, "seeds": len(seeds), "rate": args.rate,
                      "one_worker_s": times[1], "two_workers_s": times[2], "speedup": round(one / two, 2),
                      "best_speedup": round(min(times[1]) / min(times[2]), 2),
                      "worker_cpu_s": cpus, "cpu_share_per_worker": share,
                      "cores": len(os.sched_getaffinity(0)), "load_avg_1m": loads}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

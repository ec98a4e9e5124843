"""`dralab chaos` throughput: simulated cluster-hours of a 200-node cluster per wall-clock minute (issue 8's
target: at least 100 on one core), and the speed-up of running the seeds on two processes.

    python benchmarks/chaos_bench.py [--hours 2] [--nodes 200] [--seeds 4] [--jobs 2] [--rate 6]

The scenario is day_bench's (built in memory for --hours and --nodes: two groups, a day-shaped stream of
CPU and GPU pods). Each chaos seed draws its own fault schedule (every kind but redis-restart, --rate
faults per simulated hour) and runs exactly as `dralab chaos` runs it (replay/simulation/chaos.py: the simulator
with its invariant monitor, then liveness over the log; a failing seed's log kept, not shrunk). First
the seeds on one process (in this one), then on --jobs worker processes (cli/chaos_cmd.py's pool,
which also pays for starting the workers). Prints both rates and the speed-up, and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any

from day_bench import scenario as day_scenario

from dralab.chaos_cmd import _Progress, run_seeds
from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.chaos import DEFAULT_KINDS, ChaosOptions


def run(hours: float, nodes: int, seeds: int, jobs: int, rate: float) -> dict[str, Any]:
    sc = parse_scenario(day_scenario(hours, nodes, 1), "chaos-bench")
    out: dict[str, Any] = {"hours": hours, "nodes": nodes, "seeds": seeds, "rate": rate}
    with tempfile.TemporaryDirectory() as tmp:
        options = ChaosOptions(kinds=DEFAULT_KINDS, rate=rate, out_dir=tmp, shrink=False)
        for label, n in (("one", 1), ("many", jobs)):
            started, cpu = time.perf_counter(), time.process_time()
            results = run_seeds(sc, list(range(1, seeds + 1)), options, n, _Progress(seeds, quiet=True))
            wall = time.perf_counter() - started
            cpu = time.process_time() - cpu  # this process only: meaningful for the one-job run
            cluster_hours = sum(r.sim_ms for r in results) / 3_600_000
            out[label] = {"jobs": n, "wall_s": round(wall, 2), "cluster_hours": round(cluster_hours, 2),
                          "per_minute": round(cluster_hours / (wall / 60), 1),
                          **({"cpu_s": round(cpu, 2), "per_cpu_minute": round(cluster_hours / (cpu / 60), 1)}
                             if n == 1 else {}),
                          "failed": sum(not r.ok for r in results),
                          "faults": sum(r.faults for r in results), "digests": [r.digest for r in results]}
    out["same_results"] = out["one"].pop("digests") == out["many"].pop("digests")
    out["speedup"] = round(out["one"]["wall_s"] / out["many"]["wall_s"], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hours", type=float, default=2)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rate", type=float, default=6.0)
    args = ap.parse_args()
    r = run(args.hours, args.nodes, args.seeds, args.jobs, args.rate)
    for label in ("one", "many"):
        x = r[label]
        print(f"{x['jobs']} job(s): {args.seeds} seeds x {args.hours:g} h of {args.nodes} nodes = "
              f"{x['cluster_hours']:g} cluster-hours in {x['wall_s']} s -> {x['per_minute']:g} cluster-hours per "
              f"wall minute ({x['faults']} faults, {x['failed']} seeds failed)")
    print(f"one job, CPU time: {r['one']['cpu_s']} s -> {r['one']['per_cpu_minute']:g} cluster-hours per CPU minute "
          "(on a shared machine the wall clock also counts the other jobs' time)")
    print(f"speed-up with {args.jobs} jobs: {r['speedup']:g}x; same results: {r['same_results']}")
    print(json.dumps(r))


if __name__ == "__main__":
    main()

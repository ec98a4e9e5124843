"""A day of a 1,000-node cluster in the simulator: how much faster than real time (issue 5, target B).

    python benchmarks/day_bench.py [--hours 24] [--nodes 1000] [--seed 1] [--no-invariants] [--profile]

Scenario (built in memory, deterministic for a seed): two node groups, `cpu-32` (32 cpu, 128Gi) and
`gpu-8x` (96 cpu, 8 nvidia.com/gpu, tainted), starting with 70% and 30% of `--nodes`, each able to
shrink to a tenth and grow by 40%. A steady state's worth of pods runs at the start (about 3,400 at
1,000 nodes, each with 1 minute to 3 hours left); then every minute a few arrivals of 1-10 pods each
come, 80% cpu pods (2-16 cpu) and 20% GPU pods (1-8 GPUs), each running 10 minutes to 3 hours. The
arrival rate follows the day (the run starts at 06:00 at the mean rate, 1.6x the mean at noon, 0.4x
at midnight), so the autoscaler adds nodes in the day and scales empty ones down at night. The whole
run: the simulator with every reactor (scheduler, autoscaler, cloud, lifecycle, drivers, claims) and,
unless --no-invariants, the invariant checks after every record, as `dralab sim` runs. Prints the wall
time, the speed-up over real time (simulated seconds per wall second) and a digest of the log (the
same seed must give the same digest).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import pstats
import random
import time
from typing import Any

from _common import last_cpu_s, timed_run

from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import Simulator

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _group(name: str, start: int, allocatable: dict[str, str], cost: float, taint: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]} \
        if taint else {}
    return {
        "name": name, "min": max(start // 10, 1), "max": start + start * 2 // 5,
        "provisionDelay": {"min": "60s", "max": "150s"}, "costPerHour": cost,
        "template": {"apiVersion": "v1", "kind": "Node", "metadata": {"labels": {"pool": name}}, "spec": spec,
                     "status": {"allocatable": allocatable}},
    }


def _pod(name: str, gpus: int, cpu: int) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": str(cpu), "memory": f"{cpu * 3}Gi"}}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "work:1", "resources": resources}]}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
        spec["tolerations"] = [GPU_TOLERATION]
        spec["nodeSelector"] = {"pool": "gpu-8x"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name.split("-")[0]}},
            "spec": spec}


def _arrival(rng: random.Random, at: str, count: int, minutes: int, suffix: str) -> dict[str, Any]:
    gpu = rng.random() < 0.2
    gpus = rng.choice((1, 1, 2, 4, 8)) if gpu else 0
    cpu = gpus * 10 if gpu else rng.choice((2, 4, 4, 8, 16))
    return {"at": at, "count": count, "runFor": f"{minutes}m",
            "pod": _pod(f"{'train' if gpu else 'job'}-{suffix}", gpus, cpu)}


def scenario(hours: float, nodes: int, seed: int) -> dict[str, Any]:
    rng = random.Random(f"day-bench/{seed}")
    cpu_nodes, gpu_nodes = nodes * 7 // 10, nodes - nodes * 7 // 10
    # Mean arrivals per minute so that the cluster is about as big as it started at the daily mean.
    per_minute = 36.0 * nodes / 1000
    workload: list[dict[str, Any]] = []
    # What runs at the start: a steady state's worth of pods, each with what is left of its run.
    left = per_minute * 95
    j = 0
    while left > 0:
        count = min(rng.randint(1, 10), max(1, round(left)))
        left -= count
        workload.append(_arrival(rng, "0s", count, rng.randint(1, 180), f"start-{j}"))
        j += 1
    for minute in range(int(hours * 60)):
        day = minute / (24 * 60) + 0.25  # the run starts at 06:00
        rate = per_minute * (1 - 0.6 * math.cos(2 * math.pi * day))  # 0.4x at midnight, 1.6x at noon
        left = rate
        j = 0
        while left > 0:
            count = min(rng.randint(1, 10), max(1, round(left)))
            left -= count
            workload.append(_arrival(rng, f"{minute * 60 + rng.randint(0, 59)}s", count, rng.randint(10, 180),
                                     f"{minute}-{j}"))
            j += 1
    return {
        "apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "day-bench"},
        "spec": {
            "seed": seed,
            "duration": f"{int(hours * 3600)}s",
            "policy": {"autoscaler": "count"},
            "scheduler": {"score": "most-allocated"},
            "autoscaler": {"scanInterval": "10s", "expander": "least-waste"},
            "nodeGroups": [
                _group("cpu-32", cpu_nodes, {"cpu": "32", "memory": "128Gi", "pods": "110"}, 1.5, False),
                _group("gpu-8x", gpu_nodes, {"cpu": "96", "memory": "1100Gi", "pods": "110", "nvidia.com/gpu": "8"},
                       32.77, True),
            ],
            "nodes": [{"group": "cpu-32", "count": cpu_nodes}, {"group": "gpu-8x", "count": gpu_nodes}],
            "workload": workload,
        },
    }


def run(hours: float, nodes: int, seed: int, invariants: bool, profile: bool, log: str | None = None) -> dict[str, Any]:
    built = time.perf_counter()
    sc = parse_scenario(scenario(hours, nodes, seed), "day-bench")
    sim = Simulator(sc, seed, check_invariants=invariants)
    build_s = time.perf_counter() - built
    result, wall, prof = timed_run(sim, profile)
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    if log:  # the run's log, e.g. for `dralab report` (docs/report.md times a report of this day)
        from dralab.core.run.config import policies, run_config
        from dralab.replay.logs.logfile import make_header, write_log

        write_log(log, make_header(scenario=sc.name, seed=seed, policy=policies(run_config(sc)), mode="sim"),
                  result.entries)
    digest = hashlib.sha256()
    for offset, payload in result.entries:
        digest.update(offset.to_bytes(8, "big") + payload)
    state = result.state
    groups = {name: len(members) for name, members in state.nodes_by_group.items()}
    return {
        "hours": hours, "nodes": nodes, "pods": len(state.pods),
        "scheduled": sum(1 for p in state.pods.values() if p.bound_t >= 0),
        "pending": len(state.pods_by_phase["Pending"]), "records": len(result.entries),
        "scale_ups": len(state.scale_ups), "deleted": sum(g.deleted for g in state.node_groups.values()),
        "nodes_at_end": groups, "violations": len(result.violations), "build_s": round(build_s, 2),
        "wall_s": round(wall, 2), "speedup": round(hours * 3600 / wall, 1), "digest": digest.hexdigest()[:16],
        "cpu_s": round(last_cpu_s(), 2), "speedup_cpu": round(hours * 3600 / max(last_cpu_s(), 1e-9), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-invariants", action="store_true", help="skip the checks after every record")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--log", metavar="FILE", help="also write the run's .dralog (after timing it)")
    args = ap.parse_args()
    r = run(args.hours, args.nodes, args.seed, not args.no_invariants, args.profile, args.log)
    print(f"{r['hours']:g} h, {r['nodes']} nodes at start: {r['pods']} pods ({r['scheduled']} scheduled, "
          f"{r['pending']} pending at the end), {r['records']} records, {r['scale_ups']} scale-ups, "
          f"{r['deleted']} nodes scaled down, nodes at the end {r['nodes_at_end']}, "
          f"{r['violations']} invariant violations")
    print(f"built in {r['build_s']} s; simulated in {r['wall_s']} s -> {r['speedup']:g}x real time "
          f"(log digest {r['digest']})")
    print(f"CPU time {r['cpu_s']} s -> {r['speedup_cpu']:g}x real time per CPU second (one core)")


if __name__ == "__main__":
    main()

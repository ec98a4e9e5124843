"""Shrink a failing 1,000-node, multi-hour run down to the inputs that still show the double scale-up
(issue 7: `dralab shrink` in under 5 minutes).

    python benchmarks/shrink_bench.py [--nodes 1000] [--hours 4] [--train-at 3] [--seed 1]
                                      [--write-log FILE] [--write-scenario FILE] [--out SMALL] [--profile]

Scenario (built in memory, deterministic for a seed): day_bench.py's cluster at a lighter load (a steady
state of cpu and GPU pods arriving every minute and leaving 10 minutes to 3 hours later, `cpu-32` and
`gpu-8x` groups starting with 70% and 30% of `--nodes`), plus scenarios/late-resourceslices.yaml's
setup in its slow variant: an `h100` group, empty at the start, whose nodes are Ready 4 minutes after
a scale-up and whose driver publishes their 8-GPU ResourceSlice 3 minutes after that (tainted, so the
background never lands there), and two 8-GPU training pods arriving `--train-at` hours in. Under the
count autoscaler the second batch of h100 nodes turns Ready, empty of devices, after the first batch
published, and count scales up once more for the same two pods: the double scale-up.

The run is simulated (invariants checked), its log kept (and written with --write-log), then checked to
show `double-scale-up`, and shrunk with replay.shrink as `dralab shrink LOG --until double-scale-up`
runs it. Prints the inputs before -> after, the trials and the wall time.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import json
import pstats
import random
import sys
import time
from pathlib import Path
from typing import Any

import day_bench
from day_bench import _pod

from dralab.core.log.events import Record, decode_record
from dralab.core.run.config import policies, run_config
from dralab.core.scenario.load import parse_scenario
from dralab.replay.logs.logfile import make_header, write_log
from dralab.replay.simulation.outcomes import resolve_target
from dralab.replay.simulation.shrink import Shrinker, final_log
from dralab.replay.simulation.sim import Simulator

H100_TAINT = {"key": "example.com/h100", "value": "present", "effect": "NoSchedule"}
DRA_OBJECTS: list[dict[str, Any]] = [
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
     "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}},
    {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "eight-gpus"},
     "spec": {"spec": {"devices": {"requests": [
         {"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": 8}}]}}}},
]
H100_GROUP: dict[str, Any] = {
    "name": "h100", "max": 8, "provisionDelay": "4m", "costPerHour": 98.32,
    "drivers": [{"name": "gpu.example.com", "publishDelay": "3m"}],
    "template": {"metadata": {"labels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
                 "spec": {"taints": [H100_TAINT]},
                 "status": {"allocatable": {"cpu": "192", "memory": "2000Gi", "pods": "110"}}},
    "resourceSlices": [{"spec": {"driver": "gpu.example.com", "devices": [{"name": f"gpu-{i}"} for i in range(8)]}}],
}
TRAIN_POD: dict[str, Any] = {
    "metadata": {"name": "train"},
    "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}],
             "tolerations": [{"key": "example.com/h100", "operator": "Exists", "effect": "NoSchedule"}],
             "containers": [{"name": "trainer", "image": "trainer:1.0",
                             "resources": {"requests": {"cpu": "96", "memory": "1000Gi"},
                                           "claims": [{"name": "gpus"}]}}]},
}


def _group(name: str, start: int, allocatable: dict[str, str], cost: float, taint: bool) -> dict[str, Any]:
    """day_bench's group, never scaled down below its starting size (an over-provisioned background)."""
    return {**day_bench._group(name, start, allocatable, cost, taint), "min": start}


def _arrival(rng: random.Random, at: str, count: int, minutes: int, suffix: str) -> dict[str, Any]:
    """day_bench's arrivals, lighter: 15% GPU pods of 1-4 GPUs (no whole-node pods, so the background
    never waits on fragmentation and the count autoscaler never scales up twice for one of them)."""
    gpus = rng.choice((1, 1, 2, 4)) if rng.random() < 0.15 else 0
    cpu = gpus * 10 if gpus else rng.choice((2, 4, 4, 8, 16))
    return {"at": at, "count": count, "runFor": f"{minutes}m",
            "pod": _pod(f"{'infer' if gpus else 'job'}-{suffix}", gpus, cpu)}


def scenario(nodes: int, hours: float, train_at_h: float, seed: int, load: float = 0.4) -> dict[str, Any]:
    """The scenario document: `load` scales day_bench's arrival rate (0.4: the cluster never fills up)."""
    rng = random.Random(f"shrink-bench/{seed}")
    cpu_nodes, gpu_nodes = nodes * 7 // 10, nodes - nodes * 7 // 10
    per_minute = 36.0 * nodes / 1000 * load
    workload: list[dict[str, Any]] = []
    left, j = per_minute * 95, 0
    while left > 0:  # what runs at the start
        count = min(rng.randint(1, 10), max(1, round(left)))
        left -= count
        workload.append(_arrival(rng, "0s", count, rng.randint(1, 180), f"start-{j}"))
        j += 1
    for minute in range(int(hours * 60)):
        left, j = per_minute, 0
        while left > 0:
            count = min(rng.randint(1, 10), max(1, round(left)))
            left -= count
            workload.append(_arrival(rng, f"{minute * 60 + rng.randint(0, 59)}s", count, rng.randint(10, 180),
                                     f"{minute}-{j}"))
            j += 1
    workload.append({"at": f"{int(train_at_h * 3600)}s", "count": 2, "pod": copy.deepcopy(TRAIN_POD)})
    return {
        "apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "shrink-bench"},
        "spec": {
            "seed": seed, "duration": f"{int(hours * 3600)}s",
            "policy": {"autoscaler": "count"},
            "scheduler": {"score": "most-allocated"},
            "autoscaler": {"scanInterval": "10s", "expander": "least-waste"},
            "objects": copy.deepcopy(DRA_OBJECTS),
            "nodeGroups": [
                _group("cpu-32", cpu_nodes, {"cpu": "32", "memory": "128Gi", "pods": "110"}, 1.5, False),
                _group("gpu-8x", gpu_nodes, {"cpu": "96", "memory": "1100Gi", "pods": "110", "nvidia.com/gpu": "8"},
                       32.77, True),
                copy.deepcopy(H100_GROUP),
            ],
            "nodes": [{"group": "cpu-32", "count": cpu_nodes}, {"group": "gpu-8x", "count": gpu_nodes}],
            "workload": workload,
        },
    }


Entries = list[tuple[int, bytes]]
Header = dict[str, Any]


def failing_run(nodes: int, hours: float, train_at_h: float, seed: int) -> tuple[dict[str, Any], Entries, Header]:
    """The scenario document, its simulated log's entries and the log header."""
    doc = scenario(nodes, hours, train_at_h, seed)
    sc = parse_scenario(doc, "shrink-bench")
    result = Simulator(sc, seed).run()
    header = make_header(scenario=sc.name, seed=seed, policy=policies(run_config(sc)), mode="sim")
    return doc, result.entries, header


def scenario_records(entries: list[tuple[int, bytes]]) -> list[Record]:
    records = (decode_record(payload, offset) for offset, payload in entries)
    return [r for r in records if r.source == "scenario"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--hours", type=float, default=4)
    ap.add_argument("--train-at", type=float, default=3, help="hours in when the two training pods arrive")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--write-log", metavar="FILE", help="write the failing run's log (.dralog)")
    ap.add_argument("--write-scenario", metavar="FILE", help="write the failing run's scenario (YAML)")
    ap.add_argument("--out", metavar="FILE", help="write the shrunk log")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    started = time.perf_counter()
    doc, entries, header = failing_run(args.nodes, args.hours, args.train_at, args.seed)
    sim_s = time.perf_counter() - started
    print(f"failing run: {args.nodes} nodes, {args.hours:g} h, {len(entries)} records, simulated in {sim_s:.1f} s",
          flush=True)
    if args.write_scenario:
        import yaml

        Path(args.write_scenario).write_text(yaml.safe_dump(doc, sort_keys=False))
    if args.write_log:
        write_log(args.write_log, header, entries)

    def progress(p: dict[str, Any]) -> None:
        sys.stderr.write(f"trial {p['trial']}: {'holds' if p['holds'] else 'gone'} {p['units']} "
                         f"{p['duration_s']:g}s ({p['elapsed_s']} s)\n")

    prof = cProfile.Profile() if args.profile else None
    if prof:
        prof.enable()
    shrinker = Shrinker(scenario_records(entries), resolve_target("double-scale-up"), progress=progress)
    result = shrinker.run()
    if prof:
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    if not result.reproduced:
        print("the full run does not show double-scale-up")
        sys.exit(1)
    small = final_log(result)
    if args.out:
        write_log(args.out, {**header, "shrunk_from": args.write_log or "shrink-bench"}, small.entries)
    print(json.dumps(result.to_json()))
    inputs = ("arrivals", "nodes", "node_groups", "objects", "other")  # pods are inside arrivals
    print(f"external inputs {sum(result.before[k] for k in inputs)} -> {sum(result.after[k] for k in inputs)} "
          f"({result.before} -> "
          f"{result.after}), duration {result.duration_before_ms / 1000:g} s -> {result.duration_after_ms / 1000:g} s, "
          f"{result.trials} trials, {result.wall_s:.1f} s wall; small log {len(small.entries)} records")


if __name__ == "__main__":
    main()

"""DefaultPreemption throughput in the simulator, on upstream scheduler_perf's preemption workloads (issue 21).

    python benchmarks/preemption_bench.py                 # the table below, one process, one core
    python benchmarks/preemption_bench.py --case async --nodes 500 --init 2000 --measure 500 [--profile]

Workloads (test/integration/scheduler_perf/default_preemption/performance-config.yaml, kubernetes/kubernetes
05606fafeccbbe7c6d34459f820098e8c0af1a69), restated with dralab's scenario objects (release 1.37):
- `basic` (PreemptionBasic): N nodes (4 cpu, 32Gi, 110 pods), 4N low-priority pods (900m cpu; priority 1), then N
  high-priority pods (3 cpu; priority 10) measured: each must preempt 3 of a node's 4 pods. No threshold upstream.
- `async` (PreemptionAsync): the same cluster, high-priority preemptors arriving at 5/s (churn, 200 ms), and M
  default pods (100m) measured; threshold 570 pods/s (5000Nodes).
- `unschedulable` (Unschedulable): N nodes, I default pods, high-priority pods too large for any node (churn, 5/s,
  each one a preemption attempt that loops over every pod and finds nothing), M default pods measured; threshold
  600 pods/s (5kNodes/20kInit/10kPods).
The figure is upstream's SchedulingThroughput of the measured pods: those scheduled per second of the scheduler
reactor's own CPU time in the decisions of the measured phase (from 1 s: the measured pods and, in async and
unschedulable, the preemptors arriving beside them; the initial pods' placement is not counted, as upstream's
collector runs over the measured op only); the simulator also folds the log and runs the other reactors: its wall
time and whole-run CPU are shown too;
the target is twice upstream's threshold, on one core.
"""

from __future__ import annotations

import argparse
import json
import pstats
from typing import Any

from _common import last_cpu_s, timed_scheduler_run

from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import Simulator

# (case, nodes, initial pods, measured pods, upstream threshold in pods/s or None)
TABLE = (
    ("basic", 1000, 4000, 1000, None),
    ("async", 5000, 20000, 5000, 570),
    ("unschedulable", 5000, 20000, 10000, 600),
)
CHURN_MS = 200  # the churn op's intervalMilliseconds
CHURN_FOR_MS = 10_000  # how long preemptors keep arriving (upstream: for the whole measured phase)


def _pod(name: str, cpu: str, priority: int, memory: str = "500Mi") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"priority": priority, "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}


def scenario(case: str, nodes: int, init: int, measure: int) -> dict[str, Any]:
    workload: list[dict[str, Any]] = []
    if case == "unschedulable":
        workload.append({"at": "0s", "count": init, "pod": _pod("init", "100m", 0, "100Mi")})
    else:
        workload.append({"at": "0s", "count": init, "pod": _pod("low", "900m", 1)})
    if case == "basic":
        workload.append({"at": "1s", "count": measure, "pod": _pod("measured", "3", 10)})
    else:
        big = _pod("preemptor", "3", 10) if case == "async" else _pod("large", "9", 10)
        workload += [{"at": f"{1000 + t}ms", "pod": {**big, "metadata": {"name": f"{big['metadata']['name']}-{i}"}}}
                     for i, t in enumerate(range(0, CHURN_FOR_MS, CHURN_MS))]
        workload.append({"at": "1s", "count": measure, "pod": _pod("measured", "100m", 0, "100Mi")})
    return {
        "apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": f"scheduler-perf-{case}"},
        "spec": {
            "duration": "2m",
            "kubernetes": {"version": "1.37"},
            "nodeGroups": [{"name": "default", "min": 0, "max": nodes, "template": {
                "apiVersion": "v1", "kind": "Node",
                "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}}}],
            "nodes": [{"group": "default", "count": nodes}],
            "workload": workload,
        },
    }


def run(case: str, nodes: int, init: int, measure: int, threshold: int | None, profile: bool = False,
        since_ms: int = 1000) -> dict[str, Any]:
    sc = parse_scenario(scenario(case, nodes, init, measure), "bench")
    sim = Simulator(sc, 1, check_invariants=False)
    # upstream's SchedulingThroughput is collected over the measured op only: the decisions from 1 s on (the
    # measured pods and the preemptors arriving beside them), not the initial pods' placement (`since_ms` 0:
    # every decision, this script's figure before 2026-12-05's wave 3)
    result, wall, prof, spent = timed_scheduler_run(sim, profile, since_ms=since_ms)
    pods = result.state.pods.values()
    scheduled = sum(1 for p in pods if p.node and "/measured-" in p.key)
    preemptions = sum(1 for p in pods if (p.manifest.get("metadata") or {}).get("deletionTimestamp"))
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    rate = round(scheduled / max(spent, 1e-9), 1)
    return {"case": case, "nodes": nodes, "init": init, "measured": measure, "scheduled": scheduled,
            "victims": preemptions, "wall_s": round(wall, 2), "cpu_s": round(last_cpu_s(), 2),
            "scheduler_cpu_s": round(spent, 2), "scheduler_pods_per_s": rate, "threshold": threshold,
            "meets_target": threshold is None or rate >= 2 * threshold}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=("basic", "async", "unschedulable"))
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--init", type=int, default=2000)
    ap.add_argument("--measure", type=int, default=500)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--since-ms", type=int, default=1000,
                    help="count the scheduler's CPU in the decisions from this cluster time (0: the whole run)")
    ap.add_argument("-o", "--output", choices=("text", "json"), default="text")
    args = ap.parse_args()
    rows = ([run(args.case, args.nodes, args.init, args.measure, None, args.profile, args.since_ms)] if args.case
            else [run(*row, since_ms=args.since_ms) for row in TABLE])
    if args.output == "json":
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        target = f"target {2 * r['threshold']}" if r["threshold"] else "no upstream threshold"
        print(f"{r['case']:13} {r['nodes']} nodes, {r['init']} initial pods: {r['scheduled']}/{r['measured']} measured "
              f"pods scheduled, {r['victims']} victims; simulator {r['wall_s']} s, scheduler {r['scheduler_cpu_s']} s "
              f"CPU ({r['scheduler_pods_per_s']} pods/s, {target}{'' if r['meets_target'] else ', BELOW it'})")


if __name__ == "__main__":
    main()

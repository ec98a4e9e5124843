"""PodGroup scheduling throughput in the simulator, on upstream scheduler_perf's PodGroup workloads (issue 20).

    python benchmarks/podgroup_bench.py                          # the table below, one process, one core
    python benchmarks/podgroup_bench.py --case gang --nodes 5000 --groups 1000 --per-group 3 [--profile]

Workloads (test/integration/scheduler_perf/podgroup/{gangscheduling,basicscheduling,tas}/performance-config.yaml,
restated: tests/workload_cases/SCHEDULER_PERF.md): N default nodes (4 cpu, 32Gi, 110 pods; for TAS labelled
`topology.kubernetes.io/rack`, 10 nodes a rack here, since upstream's stored config leaves nodesPerRack unset), G
`scheduling.k8s.io/v1beta1` PodGroups `gang-<i>` (gang: minCount = pods per group; basic; TAS: gang with a rack
topology constraint), and G x P pods of 100m cpu / 100Mi naming their group, all created at t=0. The figure is
upstream's SchedulingThroughput: pods scheduled per second of the scheduler's work (here: the simulator's wall
time, which also folds the log and runs the other reactors).
"""

from __future__ import annotations

import argparse
import json
import pstats
from typing import Any

from _common import last_cpu_s, timed_run

from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import Simulator

RACK = "topology.kubernetes.io/rack"
# (case, nodes, groups, pods per group): upstream's performance workloads with 5000 nodes, and their
# integration-test sizes
TABLE = (
    ("gang", 5000, 1000, 3), ("gang", 5000, 3, 1000), ("basic", 5000, 1000, 3), ("tas", 5000, 750, 4),
    ("tas", 5000, 3, 1000),
)


def scenario(case: str, nodes: int, groups: int, per_group: int, nodes_per_rack: int = 10) -> dict[str, Any]:
    gates = {"GenericWorkload": True, **({"TopologyAwareWorkloadScheduling": True} if case == "tas" else {})}
    policy = {"basic": {}} if case == "basic" else {"gang": {"minCount": per_group}}
    objects = []
    for g in range(groups):
        spec: dict[str, Any] = {"schedulingPolicy": policy}
        if case == "tas":
            spec["schedulingConstraints"] = {"topology": [{"key": RACK}]}
        objects.append({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                        "metadata": {"name": f"gang-{g}"}, "spec": spec})
    racks = max(1, nodes // nodes_per_rack) if case == "tas" else 1
    node_groups = []
    for r in range(racks):
        labels = {RACK: f"rack-{r}"} if case == "tas" else {}
        count = nodes // racks + (1 if r < nodes % racks else 0)
        node_groups.append({"name": f"rack-{r}" if case == "tas" else "default", "min": 0, "max": count,
                            "template": {"apiVersion": "v1", "kind": "Node", "metadata": {"labels": labels},
                                         "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}}})
    workload = [{"at": "0s", "count": per_group, "pod": {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"gang-{g}-pod"},
        "spec": {"schedulingGroup": {"podGroupName": f"gang-{g}"},
                 "containers": [{"name": "c", "image": "pause",
                                 "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]}}}
        for g in range(groups)]
    return {
        "apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": f"scheduler-perf-{case}"},
        "spec": {
            "duration": "1h",
            "kubernetes": {"version": "1.37", "featureGates": gates,
                           "runtimeConfig": {"scheduling.k8s.io/v1beta1": True}},
            "objects": objects,
            "nodeGroups": node_groups,
            "nodes": [{"group": g["name"], "count": g["max"]} for g in node_groups],
            "workload": workload,
        },
    }


def run(case: str, nodes: int, groups: int, per_group: int, profile: bool = False) -> dict[str, Any]:
    sc = parse_scenario(scenario(case, nodes, groups, per_group), "bench")
    sim = Simulator(sc, 1, check_invariants=False)
    result, wall, prof = timed_run(sim, profile)
    scheduled = sum(1 for p in result.state.pods.values() if p.node)
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    return {"case": case, "nodes": nodes, "groups": groups, "pods_per_group": per_group,
            "pods": groups * per_group, "scheduled": scheduled, "wall_s": round(wall, 2),
            "cpu_s": round(last_cpu_s(), 2), "pods_per_s": round(scheduled / wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=("gang", "basic", "tas"))
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--per-group", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("-o", "--output", choices=("text", "json"), default="text")
    args = ap.parse_args()
    rows = ([run(args.case, args.nodes, args.groups, args.per_group, args.profile)] if args.case
            else [run(*row) for row in TABLE])
    if args.output == "json":
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        print(f"{r['case']:5} {r['nodes']} nodes, {r['groups']} groups x {r['pods_per_group']}: "
              f"{r['scheduled']}/{r['pods']} scheduled in {r['wall_s']} s -> {r['pods_per_s']} pods/s")


if __name__ == "__main__":
    main()

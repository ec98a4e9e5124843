"""PodGroup scheduling throughput in the simulator, on upstream scheduler_perf's PodGroup workloads (issue 20).

    python benchmarks/podgroup_bench.py                          # the table below, one process, one core
    python benchmarks/podgroup_bench.py --case gang --nodes 5000 --groups 1000 --per-group 3 [--profile]

Workloads (test/integration/scheduler_perf/podgroup/{gangscheduling,basicscheduling,tas}/performance-config.yaml,
restated: tests/workload_cases/SCHEDULER_PERF.md): N default nodes (4 cpu, 32Gi, 110 pods; for TAS labelled
`topology.kubernetes.io/rack`, 10 nodes a rack here, or enough for a group of 1000, since upstream's stored config
leaves nodesPerRack unset), G
`scheduling.k8s.io/v1beta1` PodGroups `gang-<i>` (gang: minCount = pods per group; basic; TAS: gang with a rack
topology constraint), and G x P pods of 100m cpu / 100Mi naming their group, all created at t=0. The figure is
upstream's SchedulingThroughput: pods scheduled per second of the scheduler's work (here: the simulator's wall
time, which also folds the log and runs the other reactors, and the scheduler reactor's own CPU time, the figure
compared with the target: twice upstream's threshold, on one core).
"""

from __future__ import annotations

import argparse
import json
import pstats
from typing import Any

from _common import last_cpu_s, timed_scheduler_run

from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import Simulator

RACK = "topology.kubernetes.io/rack"
# (case, nodes, groups, pods per group): upstream's performance workloads with 5000 nodes
TABLE = (
    ("gang", 5000, 1000, 3), ("gang", 5000, 3, 1000), ("basic", 5000, 1000, 3), ("basic", 5000, 3, 1000),
    ("tas", 5000, 750, 4), ("tas", 5000, 3, 1000),
)
# Upstream gives these workloads no threshold (tests/workload_cases/SCHEDULER_PERF.md); the stand-in is the
# nearest workload that has one, SchedulingBasic/5000Nodes_10000Pods (680 pods/s), and the target twice that.
UPSTREAM_THRESHOLD = 680
TARGET = 2 * UPSTREAM_THRESHOLD


def rack_size(per_group: int) -> int:
    """Nodes a rack: 10, or enough 4-cpu nodes (40 pods of 100m each) for one group with some room to spare
    (upstream's stored config leaves nodesPerRack unset)."""
    return max(10, 2 * -(-per_group // 40))


def scenario(case: str, nodes: int, groups: int, per_group: int) -> dict[str, Any]:
    nodes_per_rack = rack_size(per_group)
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
            "duration": "10m",
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
    result, wall, prof, scheduler_s = timed_scheduler_run(sim, profile)
    scheduled = sum(1 for p in result.state.pods.values() if p.node)
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    return {"case": case, "nodes": nodes, "groups": groups, "pods_per_group": per_group,
            "pods": groups * per_group, "scheduled": scheduled, "wall_s": round(wall, 2),
            "cpu_s": round(last_cpu_s(), 2), "pods_per_s": round(scheduled / wall, 1),
            "scheduler_cpu_s": round(scheduler_s, 2),
            "scheduler_pods_per_s": round(scheduled / max(scheduler_s, 1e-9), 1)}


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
    for r in rows:
        r["meets_target"] = r["scheduler_pods_per_s"] >= TARGET
    if args.output == "json":
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        print(f"{r['case']:5} {r['nodes']} nodes, {r['groups']} groups x {r['pods_per_group']}: "
              f"{r['scheduled']}/{r['pods']} scheduled; simulator {r['wall_s']} s ({r['pods_per_s']} pods/s), "
              f"scheduler {r['scheduler_cpu_s']} s CPU ({r['scheduler_pods_per_s']} pods/s"
              f"{'' if r['meets_target'] else f', BELOW the target {TARGET}'})")


if __name__ == "__main__":
    main()

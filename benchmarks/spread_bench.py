"""PodTopologySpread and InterPodAffinity scheduling throughput in the simulator, on upstream scheduler_perf's
workloads (issue 21).

    python benchmarks/spread_bench.py                       # the table below, one process, one core
    python benchmarks/spread_bench.py --case spread --nodes 500 --init 1000 --measure 1000 [--profile]

Workloads, restated from kubernetes/kubernetes test/integration/scheduler_perf (facts only):
- spread: topology_spreading/performance-config.yaml TopologySpreading/5000Nodes_5000Pods, threshold 460
  pods/s: 5000 default nodes (4 cpu, 32Gi, 110 pods) labelled topology.kubernetes.io/zone moon-1..3 in turn,
  5000 default pods (100m cpu, 500Mi), then 5000 measured pods with `maxSkew: 5, topologyKey: zone,
  DoNotSchedule` over `color: blue` (templates/pod-with-topology-spreading.yaml).
- anti-affinity: affinity/performance-config.yaml SchedulingPodAntiAffinity/5000Nodes_2000Pods, threshold 60:
  5000 default nodes, 1000 pods in namespace sched-0 then 2000 measured in sched-1, each with required
  anti-affinity on kubernetes.io/hostname against `color: green` (templates/pod-with-pod-anti-affinity.yaml;
  here without the template's `namespaces` list, so each pod's term covers its own namespace).
- affinity: affinity/performance-config.yaml SchedulingPodAffinity/5000Nodes_5000Pods, threshold 35: 5000
  default nodes all in zone1, 5000 pods in sched-0 then 5000 measured in sched-1, each with required affinity
  on the zone to `color: blue` in namespaces sched-0 and sched-1 (templates/pod-with-pod-affinity.yaml).
- preferred-spread: PreferredTopologySpreading/5000Nodes_5000Pods, threshold 340: as spread, the measured pods'
  constraint `ScheduleAnyway` (templates/pod-with-preferred-topology-spreading.yaml): a score only.
- preferred-affinity: SchedulingPreferredPodAffinity/5000Nodes_5000Pods, threshold 90: 5000 default nodes, 5000
  pods in sched-0 then 5000 measured in sched-1, each with a preferred pod affinity (weight 1) on
  kubernetes.io/hostname to `color: red` in sched-0 and sched-1 (templates/pod-with-preferred-pod-affinity.yaml).

Every workload scores with the release's default KubeSchedulerConfiguration (1.37: LeastAllocated,
BalancedAllocation, TaintToleration, NodeAffinity, PodTopologySpread, InterPodAffinity, ImageLocality), as
upstream's scheduler_perf runs the default profile.

The figure is upstream's SchedulingThroughput for the measured pods: measured pods scheduled per second of the
scheduler reactor's own CPU time in the decisions after the initial pods are placed (the init pods arrive at
t=0, the measured ones at t=1s); the simulator's wall time for the whole run is printed too. Target: twice
upstream's threshold, on one core.
"""

from __future__ import annotations

import argparse
import json
import pstats
from typing import Any

from _common import timed_scheduler_run

from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import Simulator

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
# case -> (nodes, init pods, measured pods, upstream threshold)
TABLE: dict[str, tuple[int, int, int, int]] = {
    "spread": (5000, 5000, 5000, 460),
    "anti-affinity": (5000, 1000, 2000, 60),
    "affinity": (5000, 5000, 5000, 35),
    "preferred-spread": (5000, 5000, 5000, 340),
    "preferred-affinity": (5000, 5000, 5000, 90),
}


def _pod(name: str, ns: str, labels: dict[str, str], extra: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {**extra, "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                              "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}


def measured_pod(case: str) -> dict[str, Any]:
    if case == "preferred-spread":
        return _pod("spreading-pod", "default", {"color": "blue"}, {"topologySpreadConstraints": [
            {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": {"color": "blue"}}}]})
    if case == "preferred-affinity":
        return _pod("preferred-affinity-pod", "sched-1", {"color": "red"}, {"affinity": {"podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"color": "red"}}, "topologyKey": HOSTNAME,
                "namespaces": ["sched-1", "sched-0"]}}]}}})
    if case == "spread":
        return _pod("spreading-pod", "default", {"color": "blue"}, {"topologySpreadConstraints": [
            {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"color": "blue"}}}]})
    if case == "anti-affinity":
        return _pod("anti-affinity-pod", "sched-1", {"color": "green"}, {"affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": HOSTNAME}]}}})
    return _pod("affinity-pod", "sched-1", {"color": "blue"}, {"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"color": "blue"}}, "topologyKey": ZONE,
             "namespaces": ["sched-0", "sched-1"]}]}}})


def init_pod(case: str) -> dict[str, Any]:
    if case in ("spread", "preferred-spread"):
        return _pod("default-pod", "default", {}, {})
    pod = measured_pod(case)
    pod["metadata"] = {**pod["metadata"], "name": f"init-{pod['metadata']['name']}", "namespace": "sched-0"}
    return pod


def scenario(case: str, nodes: int, init: int, measure: int) -> dict[str, Any]:
    zones = ("moon-1", "moon-2", "moon-3") if case in ("spread", "preferred-spread") else ("zone1",)
    groups = [{"name": z, "min": 0, "max": nodes // len(zones) + (1 if i < nodes % len(zones) else 0),
               "template": {"apiVersion": "v1", "kind": "Node", "metadata": {"labels": {ZONE: z}},
                            "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}}}
              for i, z in enumerate(zones)]
    return {
        "apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": f"scheduler-perf-{case}"},
        "spec": {
            "duration": "10m",
            "kubernetes": {"version": "1.37"},
            "nodeGroups": groups,
            "nodes": [{"group": g["name"], "count": g["max"]} for g in groups],
            "workload": [{"at": "0s", "count": init, "pod": init_pod(case)},
                         {"at": "1s", "count": measure, "pod": measured_pod(case)}],
        },
    }


def run(case: str, nodes: int, init: int, measure: int, profile: bool = False) -> dict[str, Any]:
    sc = parse_scenario(scenario(case, nodes, init, measure), "bench")
    sim = Simulator(sc, 1, check_invariants=False)
    result, wall, prof, spent = timed_scheduler_run(sim, profile, since_ms=1000)  # the measured pods' decisions
    pods = result.state.pods.values()
    measured = sum(1 for p in pods if p.node and "init-" not in p.key and "default-pod" not in p.key)
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    threshold = TABLE[case][3]
    rate = round(measured / max(spent, 1e-9), 1)
    return {"case": case, "nodes": nodes, "init": init, "measure": measure, "measured_scheduled": measured,
            "wall_s": round(wall, 2), "scheduler_cpu_s": round(spent, 2), "pods_per_s": rate,
            "threshold": threshold, "target": 2 * threshold, "meets_target": rate >= 2 * threshold}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=tuple(TABLE))
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--init", type=int)
    ap.add_argument("--measure", type=int)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("-o", "--output", choices=("text", "json"), default="text")
    args = ap.parse_args()
    cases = [args.case] if args.case else list(TABLE)
    rows = []
    for case in cases:
        nodes, init, measure, _ = TABLE[case]
        rows.append(run(case, args.nodes or nodes, args.init if args.init is not None else init,
                        args.measure or measure, args.profile))
    if args.output == "json":
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        print(f"{r['case']:13} {r['nodes']} nodes, {r['init']} init + {r['measure']} measured pods: "
              f"{r['measured_scheduled']} measured scheduled; simulator {r['wall_s']} s; scheduler "
              f"{r['scheduler_cpu_s']} s CPU for the measured pods = {r['pods_per_s']} pods/s (upstream threshold "
              f"{r['threshold']}, target {r['target']}{'' if r['meets_target'] else ': BELOW'})")


if __name__ == "__main__":
    main()

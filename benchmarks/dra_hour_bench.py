"""The hour-long 2,000-pod DRA workload (issue 24): how the simulator's cost grows with the cluster.

    python benchmarks/dra_hour_bench.py [--nodes 1000 10000] [--pods 2000] [--profile] [--json]

Workload: upstream scheduler_perf's DRA shape (test/integration/scheduler_perf/dra, kubernetes/kubernetes:
every node one ResourceSlice of one driver, one DeviceClass, a ResourceClaimTemplate asking one device,
pods referencing it), stretched over an hour so that the run also carries what a real hour does: N nodes
of 8 devices each, 2,000 pods arriving in 200 waves of 10 spread evenly over the hour, each running 10
minutes, and the autoscaler's scale-down on (its default: empty nodes are removed after the unneeded time,
so most of the cluster is deleted during the hour). The scenario names no release (legacy profile).

Figures per cluster size: CPU seconds of `sim.run()` (process time: the machine is shared, the wall
clock counts other jobs too), wall seconds, pods scheduled per wall second, nodes deleted; and the CPU
ratio of each size to the first one, measured in the same process (the target of issue 24: 10,000 nodes
at most 6x the CPU of 1,000 nodes).
"""

from __future__ import annotations

import argparse
import json
import pstats
from typing import Any

from _common import last_cpu_s, timed_run

from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import Simulator

DRIVER = "test-driver.cdi.k8s.io"
WAVES = 200


def scenario(nodes: int, pods: int) -> dict[str, Any]:
    devices = [{"name": f"dev-{i}"} for i in range(8)]
    per_wave, rest = divmod(pods, WAVES)
    waves = []
    for w in range(WAVES):
        count = per_wave + (1 if w < rest else 0)
        if count:
            waves.append({"at": f"{w * 3600 // WAVES}s", "count": count, "runFor": "10m", "pod": {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{w}"},
                "spec": {"resourceClaims": [{"name": "dev", "resourceClaimTemplateName": "test-claim-template"}],
                         "containers": [{"name": "c", "image": "pause",
                                         "resources": {"requests": {"cpu": "10m"}, "claims": [{"name": "dev"}]}}]},
            }})
    return {
        "apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "dra-hour"},
        "spec": {
            "duration": "1h",
            "objects": [
                {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "test-class"},
                 "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
                {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": "test-claim-template"},
                 "spec": {"spec": {"devices": {"requests": [
                     {"name": "dev", "exactly": {"deviceClassName": "test-class"}}]}}}},
            ],
            "nodeGroups": [{
                "name": "dra", "min": 0, "max": nodes,
                "template": {"apiVersion": "v1", "kind": "Node",
                             "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}},
                "resourceSlices": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                    "spec": {"driver": DRIVER, "devices": devices}}],
            }],
            "nodes": [{"group": "dra", "count": nodes}],
            "workload": waves,
        },
    }


def run(nodes: int, pods: int, profile: bool) -> dict[str, Any]:
    sim = Simulator(parse_scenario(scenario(nodes, pods), "bench"), 1, check_invariants=False)
    result, wall, prof = timed_run(sim, profile)
    cpu = last_cpu_s()
    scheduled = sum(1 for p in result.state.pods.values() if p.node)
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    return {"nodes": nodes, "pods": pods, "scheduled": scheduled, "nodes_left": len(result.state.nodes),
            "cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "pods_per_s": round(scheduled / wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = [run(n, args.pods, args.profile) for n in args.nodes]
    for r in rows:
        r["cpu_ratio"] = round(r["cpu_s"] / rows[0]["cpu_s"], 2)
    if args.json:
        print(json.dumps(rows))
        return
    for r in rows:
        print(f"{r['nodes']:>6} nodes: {r['scheduled']} of {r['pods']} scheduled, {r['nodes_left']} nodes left; "
              f"CPU {r['cpu_s']} s ({r['cpu_ratio']}x), wall {r['wall_s']} s, {r['pods_per_s']} pods/s")


if __name__ == "__main__":
    main()

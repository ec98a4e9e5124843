"""Scheduler throughput in the simulator on upstream's scheduler_perf DRA workloads (issue 4).

    python benchmarks/scheduler_bench.py [--nodes 500] [--pods 2500] [--match] [--score POLICY] [--profile]

Workload (test/integration/scheduler_perf/dra): N nodes, each with one ResourceSlice of 10 devices
from one driver, one DeviceClass, a ResourceClaimTemplate asking one device (with --match: two
devices with a matchAttribute constraint on a per-device attribute that pairs them), and pods that
reference the template, all arriving at t=0. Reports pods scheduled per wall second of the
simulator (claim creation, allocation and binding included). The scenario names no release (1.37) and no
score: the release's default scheduler configuration scores (core/scheduler/scoring.py); `--score
most-allocated` scores with dralab's single policy instead, as before scheduler configurations existed.
"""

from __future__ import annotations

import argparse
import pstats
from typing import Any

from _common import timed_run

from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import Simulator


def scenario(nodes: int, pods: int, match: bool, score: str | None = None) -> dict[str, Any]:
    devices = [{"name": f"dev-{i}", "attributes": {"pair": {"int": i // 2}}} for i in range(10)]
    request: dict[str, Any] = {"name": "dev", "exactly": {"deviceClassName": "test-class", "count": 2 if match else 1}}
    claim_spec: dict[str, Any] = {"devices": {"requests": [request]}}
    if match:
        claim_spec["devices"]["constraints"] = [{"matchAttribute": "test-driver.cdi.k8s.io/pair"}]
    return {
        "apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "scheduler-perf"},
        "spec": {
            "duration": "1h",
            **({"scheduler": {"score": score}} if score else {}),
            "objects": [
                {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "test-class"},
                 "spec": {"selectors": [{"cel": {"expression": 'device.driver == "test-driver.cdi.k8s.io"'}}]}},
                {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": "test-claim-template"}, "spec": {"spec": claim_spec}},
            ],
            "nodeGroups": [{
                "name": "scheduler-perf", "min": 0, "max": nodes,
                "template": {"apiVersion": "v1", "kind": "Node",
                             "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}},
                "resourceSlices": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                    "spec": {"driver": "test-driver.cdi.k8s.io", "devices": devices}}],
            }],
            "nodes": [{"group": "scheduler-perf", "count": nodes}],
            "workload": [{"at": "0s", "count": pods, "pod": {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod"},
                "spec": {"resourceClaims": [{"name": "dev", "resourceClaimTemplateName": "test-claim-template"}],
                         "containers": [{"name": "c", "image": "pause",
                                         "resources": {"requests": {"cpu": "10m"}, "claims": [{"name": "dev"}]}}]},
            }}],
        },
    }


def run(nodes: int, pods: int, match: bool, profile: bool, score: str | None = None) -> dict[str, Any]:
    sc = parse_scenario(scenario(nodes, pods, match, score), "bench")
    sim = Simulator(sc, 1, check_invariants=False)
    result, wall, prof = timed_run(sim, profile)
    scheduled = sum(1 for p in result.state.pods.values() if p.node)
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    return {"nodes": nodes, "pods": pods, "match": match, "scheduled": scheduled, "wall_s": round(wall, 2),
            "pods_per_s": round(scheduled / wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=2500)
    ap.add_argument("--match", action="store_true", help="two devices per claim with a matchAttribute constraint")
    ap.add_argument("--score", choices=("most-allocated", "least-allocated"),
                    help="dralab's single score policy instead of the release's default scheduler configuration")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    r = run(args.nodes, args.pods, args.match, args.profile, args.score)
    print(f"{r['nodes']} nodes, {r['pods']} pods{' (matchAttribute)' if r['match'] else ''}: "
          f"{r['scheduled']} scheduled in {r['wall_s']} s -> {r['pods_per_s']} pods/s")


if __name__ == "__main__":
    main()

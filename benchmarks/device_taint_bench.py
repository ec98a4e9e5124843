"""What DeviceTaintRules cost the scheduler: DRA pods scheduled with and without rules, in the simulator, one core.

    python benchmarks/device_taint_bench.py                       # the table in docs/scheduler.md ("Device taints")
    python benchmarks/device_taint_bench.py --nodes 1000 --pods 4000 --rules 10 [--profile]

N nodes of 8 GPUs (one ResourceSlice each, driver gpu.example.com), P pods of one GPU each (a claim from a
template) created at t=0, and R DeviceTaintRules: one NoSchedule rule on `gpu-0` of every pool (driver and device
set), the others NoSchedule on every device of one pool each. The scheduler sees the slices with the rules' taints
(core/state/device_taints.py): the patched index is made once per change of the slices or the rules, so with the
slices published once the rules cost one patch and the allocator's taint checks. Figures: pods scheduled per
second of the scheduler reactor's CPU time, and the time of one patch of all slices (patch_slices + SliceIndex).
"""

from __future__ import annotations

import argparse
import json
import pstats
import time
from typing import Any

from _common import timed_scheduler_run

from dralab.core.dra.convert import convert_slice
from dralab.core.dra.pools import SliceIndex
from dralab.core.dra.taint_rules import convert_rule, patch_slices
from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import Simulator

TABLE = ((1000, 4000, 0), (1000, 4000, 1), (1000, 4000, 10))
DRIVER = "gpu.example.com"


def rules(count: int) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        selector = {"driver": DRIVER, "device": "gpu-0"} if i == 0 else {"driver": DRIVER, "pool": f"gpu-8x-{i}"}
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": f"rule-{i}"},
                    "spec": {"deviceSelector": selector, "taint": {"key": "example.com/t", "effect": "NoSchedule"}}})
    return out


def scenario(nodes: int, pods: int, n_rules: int) -> dict[str, Any]:
    return {"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "device-taint-bench"},
            "spec": {
                "duration": "10m", "kubernetes": {"version": "1.37"},
                "objects": [
                    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
                    {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one"},
                     "spec": {"spec": {"devices": {"requests": [
                         {"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}},
                    *rules(n_rules)],
                "nodeGroups": [{"name": "gpu-8x", "min": 0, "max": nodes, "template": {
                    "apiVersion": "v1", "kind": "Node",
                    "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}}},
                    "resourceSlices": [{"spec": {"driver": DRIVER,
                                                 "devices": [{"name": f"gpu-{d}"} for d in range(8)]}}]}],
                "nodes": [{"group": "gpu-8x", "count": nodes}],
                "workload": [{"at": "0s", "count": pods, "pod": {
                    "metadata": {"name": "p"},
                    "spec": {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one"}],
                             "containers": [{"name": "c", "image": "pause", "resources": {
                                 "requests": {"cpu": "1"}, "claims": [{"name": "g"}]}}]}}}],
            }}


def patch_ms(nodes: int, n_rules: int) -> float:
    """One patch of every slice: what a change of the slices or the rules costs the next decision."""
    slices = [convert_slice({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                             "metadata": {"name": f"gpu-8x-{i}-{DRIVER}-0"},
                             "spec": {"driver": DRIVER, "nodeName": f"gpu-8x-{i}",
                                      "pool": {"name": f"gpu-8x-{i}", "generation": 1, "resourceSliceCount": 1},
                                      "devices": [{"name": f"gpu-{d}"} for d in range(8)]}}, "")
              for i in range(nodes)]
    converted = sorted((convert_rule(r, "") for r in rules(n_rules)), key=lambda r: r.name)
    start = time.perf_counter()
    for _ in range(10):
        SliceIndex.build(patch_slices(slices, converted))
    return (time.perf_counter() - start) * 100


def run(nodes: int, pods: int, n_rules: int, profile: bool = False) -> dict[str, Any]:
    sim = Simulator(parse_scenario(scenario(nodes, pods, n_rules), "bench"), 1, check_invariants=False)
    result, wall, prof, scheduler_s = timed_scheduler_run(sim, profile)
    scheduled = sum(1 for p in result.state.pods.values() if p.node)
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    return {"nodes": nodes, "pods": pods, "rules": n_rules, "scheduled": scheduled, "wall_s": round(wall, 2),
            "scheduler_cpu_s": round(scheduler_s, 2),
            "scheduler_pods_per_s": round(scheduled / max(scheduler_s, 1e-9), 1),
            "patch_ms": round(patch_ms(nodes, n_rules), 1) if n_rules else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--pods", type=int, default=4000)
    ap.add_argument("--rules", type=int, default=1)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("-o", "--output", choices=("text", "json"), default="text")
    args = ap.parse_args()
    rows = [run(args.nodes, args.pods, args.rules, args.profile)] if args.nodes else [run(*row) for row in TABLE]
    if args.output == "json":
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        print(f"{r['nodes']} nodes x 8 GPUs, {r['pods']} pods, {r['rules']} rules: {r['scheduled']} scheduled; "
              f"scheduler {r['scheduler_cpu_s']} s CPU ({r['scheduler_pods_per_s']} pods/s); "
              f"one patch of every slice {r['patch_ms']} ms")


if __name__ == "__main__":
    main()

"""One large scale-up decided by the autoscaler in the simulator: N pending 8-GPU pods, an empty node
group, and the autoscaler's first loop asking for N nodes (its binpacking onto template nodes).

    python benchmarks/scaleup_bench.py [--pods 5000] [--policy count|dra|atomic]

The run covers 20 s of cluster time: the scheduler marks the pods Unschedulable, the autoscaler's loop
at 10 s binpacks them onto N template nodes, the cloud accepts them. Prints the wall and CPU time of
the whole simulated run and a digest of its log (the same seed must give the same digest).
"""

from __future__ import annotations

import argparse
import hashlib

from _common import last_cpu_s, timed_run

from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import Simulator

GPU_NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {},
            "status": {"allocatable": {"cpu": "192", "memory": "2000Gi", "pods": "110", "nvidia.com/gpu": "8"}}}
POD = {"metadata": {"name": "p"}, "spec": {"containers": [
    {"name": "c", "image": "x", "resources": {"requests": {"cpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}


def scenario(pods: int, policy: str) -> dict[str, object]:
    return {"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "scaleup"},
            "spec": {"duration": "20s", "policy": {"autoscaler": policy}, "autoscaler": {"scanInterval": "10s"},
                     "nodeGroups": [{"name": "gpu", "min": 0, "max": pods + 100, "provisionDelay": "60s",
                                     "template": GPU_NODE}],
                     "workload": [{"at": "0s", "count": pods, "pod": POD}]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--policy", choices=("count", "dra", "atomic"), default="count")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    sim = Simulator(parse_scenario(scenario(args.pods, args.policy)), args.seed)
    result, wall, _ = timed_run(sim, args.profile)
    digest = hashlib.sha256(b"".join(p for _, p in result.entries)).hexdigest()[:16]
    print(f"{args.policy}: {args.pods} pods -> {result.state.node_groups['gpu'].requested} nodes asked; "
          f"simulated in {wall:.2f} s (CPU {last_cpu_s():.2f} s), log digest {digest}")


if __name__ == "__main__":
    main()

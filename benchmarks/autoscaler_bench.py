"""One autoscaler loop over a large cluster (issue 5, target A; cluster-autoscaler's scalability test:
1,000 nodes x 30 pods per node, every loop under 10 s).

    python benchmarks/autoscaler_bench.py [--nodes 1000] [--pods 30000] [--pending 500] [--policy dra]
                                          [--repeat 3] [--profile]

The cluster, folded into a ClusterState from records built here (deterministic): N Ready nodes of a
group `gpu-8x` (96 cpu, 8 GPUs as one ResourceSlice of 8 devices published by the node's driver), each
running pods/N pods: 8 of them hold one GPU each through a claim made from a ResourceClaimTemplate
(allocated, reserved), the others ask for cpu only. `--pending` more pods, each with a claim from a
template asking for 1, 2 or 4 GPUs, are pending with PodScheduled=False/Unschedulable, as the scheduler
leaves them on a full cluster. A second, empty group `cpu-32` gives the expander a choice. Timed: one
`Autoscaler(policy=...).react(view, now, rng)` (FilterOutSchedulable over every node, binpacking per
group, the expander), best of --repeat, each on a fresh reactor (no warm cache), as the simulator calls
it. `count` treats the claims as device counts, `dra` runs the allocator on the nodes' slices.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import time
from typing import Any

from dralab.core.autoscaler.reactor import Autoscaler
from dralab.core.controllers.claims import claim_manifest
from dralab.core.kube.versions import make_profile, profile_config
from dralab.core.log.events import (
    AnyEvent,
    ClaimAllocated,
    PodBound,
    PodCreated,
    PodUnschedulable,
    Record,
    ResourceClaimCreated,
    pod_key,
)
from dralab.core.run.inputs import setup_record
from dralab.core.scenario.load import parse_scenario
from dralab.core.state.cluster import ClusterState

DRIVER = "gpu.example.com"
GPUS_PER_NODE = 8


def scenario(nodes: int, policy: str) -> dict[str, Any]:
    devices = [{"name": f"gpu-{i}", "attributes": {"nvlinkDomain": {"int": i // 4}}} for i in range(GPUS_PER_NODE)]
    templates = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": f"gpu-{n}"},
         "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
             "deviceClassName": DRIVER, "count": n}}]}}}}
        for n in (1, 2, 4)
    ]
    return {
        "apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "autoscaler-bench"},
        "spec": {
            "duration": "1h",
            "policy": {"autoscaler": policy},
            "objects": [
                {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
                 "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
                *templates,
            ],
            "nodeGroups": [
                {"name": "gpu-8x", "min": 0, "max": nodes * 2, "costPerHour": 32.77,
                 "template": {"apiVersion": "v1", "kind": "Node",
                              "status": {"allocatable": {"cpu": "96", "memory": "1100Gi", "pods": "110"}}},
                 "resourceSlices": [{"spec": {"driver": DRIVER, "devices": devices}}]},
                {"name": "cpu-32", "min": 0, "max": 200, "costPerHour": 1.5,
                 "template": {"apiVersion": "v1", "kind": "Node",
                              "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}}},
            ],
            "nodes": [{"group": "gpu-8x", "count": nodes}],
        },
    }


def _pod(name: str, cpu: str, template: str | None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "work:1", "resources": {"requests": {"cpu": cpu}}}
    spec: dict[str, Any] = {"containers": [container]}
    if template:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
        container["resources"]["claims"] = [{"name": "gpu"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def build(nodes: int, pods: int, pending: int, policy: str) -> ClusterState:
    """The cluster as the autoscaler's view: a fold of the records that made it."""
    sc = parse_scenario(scenario(nodes, policy), "bench")
    state = ClusterState()
    offset = 1
    state.apply(offset, setup_record(sc, 1))
    rng = random.Random("autoscaler-bench")
    templates = state.dra.templates

    def append(events: list[AnyEvent], source: str = "bench") -> None:
        nonlocal offset
        offset += 1
        state.apply(offset, Record(id=f"{source}/{offset}", source=source, view=offset - 1, t=0, events=tuple(events)))

    names = list(state.nodes)
    per_node = pods // max(len(names), 1)
    for i, node in enumerate(names):
        events: list[AnyEvent] = []
        for j in range(per_node):
            gpu = j < GPUS_PER_NODE
            name = f"run-{i}-{j}"
            manifest = _pod(name, "1" if gpu else "2", "gpu-1" if gpu else None)
            key = pod_key("default", name)
            events.append(PodCreated(pod=manifest))
            if gpu:
                claim = claim_manifest(templates["default/gpu-1"], _Stub(manifest), "gpu",  # type: ignore[arg-type]
                                       f"{name}-gpu")
                events.append(ResourceClaimCreated(manifest=claim, pod=key, pod_claim="gpu"))
        append(events)
        bind: list[AnyEvent] = []
        for j in range(per_node):
            key = pod_key("default", f"run-{i}-{j}")
            bind.append(PodBound(pod=key, node=node))
            if j < GPUS_PER_NODE:
                allocation = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node,
                                                       "device": f"gpu-{j}"}]},
                              "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                  {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}
                bind.append(ClaimAllocated(claim=f"claim/default/run-{i}-{j}-gpu", allocation=allocation, pod=key))
        append(bind)
    events = []
    for k in range(pending):
        name = f"pending-{k}"
        template = rng.choice(("gpu-1", "gpu-2", "gpu-4"))
        manifest = _pod(name, "4", template)
        key = pod_key("default", name)
        events.append(PodCreated(pod=manifest))
        events.append(ResourceClaimCreated(
            manifest=claim_manifest(templates[f"default/{template}"], _Stub(manifest), "gpu",  # type: ignore[arg-type]
                                    f"{name}-gpu"),
            pod=key, pod_claim="gpu"))
    append(events)
    append([PodUnschedulable(pod=pod_key("default", f"pending-{k}"), reason="Unschedulable",
                             message=f"0/{nodes} nodes are available: {nodes} cannot allocate all claims.",
                             cause="capacity") for k in range(pending)], "scheduler")
    assert not state.anomalies, state.anomalies[:3]
    return state


class _Stub:
    def __init__(self, manifest: dict[str, Any]) -> None:
        self.manifest = manifest


def run(nodes: int, pods: int, pending: int, policy: str, repeat: int, profile: bool,
        kubernetes: str = "1.37") -> dict[str, Any]:
    built = time.perf_counter()
    state = build(nodes, pods, pending, policy)
    build_s = time.perf_counter() - built
    times = []
    decision = None
    for i in range(repeat):
        # the release emulated (every cluster-autoscaler flag at its default; the pending pods older than its 30 s
        # GPU buffer), or dralab's model from before release profiles (`legacy`, as this script measured until issue 22)
        autoscaler = Autoscaler(policy=policy, kubernetes=None if kubernetes == "legacy"
                                else profile_config(make_profile(kubernetes)))
        prof = cProfile.Profile() if profile and i == 0 else None
        start = time.perf_counter()
        if prof:
            prof.enable()
        decision = autoscaler.react(state, 10_000 if kubernetes == "legacy" else 60_000, random.Random(1))
        if prof:
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(20)
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        times.append(time.perf_counter() - start)
    assert decision is not None
    scale_up = [e for e in decision.events if type(e).__name__ == "ScaleUpRequested"]
    return {"nodes": len(state.nodes), "pods": len(state.pods) - pending, "pending": pending, "policy": policy,
            "build_s": round(build_s, 2), "loop_s": round(min(times), 3), "loops_s": [round(t, 3) for t in times],
            "scale_up": [(e.group, e.delta, len(e.pods)) for e in scale_up]}  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=30000, help="running pods, spread evenly over the nodes")
    ap.add_argument("--pending", type=int, default=500)
    ap.add_argument("--policy", choices=("count", "dra", "atomic"), default="dra")
    ap.add_argument("--repeat", type=int, default=3, help="loops timed (best of)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--kubernetes", default="1.37", choices=("1.34", "1.35", "1.36", "1.37", "legacy"),
                    help="the release emulated (default 1.37), or `legacy` (dralab's model before release profiles)")
    args = ap.parse_args()
    r = run(args.nodes, args.pods, args.pending, args.policy, args.repeat, args.profile, args.kubernetes)
    print(f"Kubernetes {args.kubernetes}, policy {r['policy']}: {r['nodes']} nodes, {r['pods']} running pods, "
          f"{r['pending']} pending "
          f"(built in {r['build_s']} s): one loop {r['loop_s']} s (best of {r['loops_s']}); "
          f"scale-up (group, nodes, pods): {r['scale_up']}")


if __name__ == "__main__":
    main()

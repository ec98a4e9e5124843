"""The three allocator figures of issue 3, on the issue's workloads.

Run: python benchmarks/dra_bench.py [--repeat N] [--nodes N] [--json]

1. n+1 devices asked when only n fit. Upstream 1.35 tries every ordering of the n devices before it
   gives up (kubernetes#131730: >30 s in a reported case; its unit-test variant, 6 asked of 5, ~0.07 s).
   dralab must refuse without searching: the figure is allocate-one calls and time, with the number
   of calls 1.35 would make (every ordered selection; computed, not measured) for comparison. Two
   shapes: exactly n devices; 2n devices of which every other one is held by a claim in use.
2. The scheduler_perf backtracking workload: one slice of 8 partitionable devices sharing a 70Gi memory
   counter (device-1 consumes 20Gi, the others 10Gi) and a claim for 7 devices. Every set with
   device-1 overdraws the counter at the 7th device only. Target: under 10 ms.
3. matchAttribute, "4 GPUs on one NVLink domain", over nodes of 8 GPUs x 2 NUMA domains x 4 PCIe roots
   (NVLink domain = NUMA domain, 4 GPUs each; 2 GPUs per PCIe root). Satisfiable: a free node.
   Unsatisfiable: GPU 0 and GPU 4 are in use, so 6 GPUs are free but no domain has 4. One Allocator
   for all nodes, as in one scheduling cycle; the figure is per node. Target: under 1 ms per node.

Timing: time.perf_counter around `Allocator(...)` + `allocate(node, claims)` (per node for 3), on
objects freshly parsed for every repetition, so selector results are never served from an earlier run
(compiled CEL programs are reused, as the scheduler's CEL cache does). Figures are medians over
--repeat runs; min and max are shown too. Unsatisfiable answers include dralab's explanation work.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing: not needed when installed
    sys.path.insert(0, str(ROOT))

from dralab.core.dra.allocated import AllocatedState  # noqa: E402
from dralab.core.dra.allocator import Allocator  # noqa: E402
from dralab.core.dra.api import parse_documents  # noqa: E402
from dralab.core.dra.cel import CelMatcher  # noqa: E402
from dralab.core.dra.model import Inventory  # noqa: E402

DRIVER = "gpu.example.com"
V1 = "resource.k8s.io/v1"


# ------------------------------------------------------------------------------------------ manifests


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def device_class() -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def claim(name: str, count: int, constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": count}}]}
    if constraints:
        devices["constraints"] = constraints
    return {"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": devices}}


def in_use(name: str, pool: str, devices: list[str]) -> dict[str, Any]:
    c = claim(name, len(devices))
    c["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpus", "driver": DRIVER, "pool": pool, "device": d} for d in devices]}}}
    return c


def plain_slice(node_name: str, n: int) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": f"{node_name}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(n)]}}


def backtracking_docs() -> list[dict[str, Any]]:
    """scheduler_perf's PartitionableBacktracking shape, in the 1.35 layout (counters in their own slice)."""
    pool = {"name": "node-1", "generation": 1, "resourceSliceCount": 2}
    devices = []
    for i in range(1, 9):
        memory = "20Gi" if i == 1 else "10Gi"
        devices.append({"name": f"device-{i}", "capacity": {"memory": {"value": memory}},
                        "consumesCounters": [{"counterSet": "gpu-memory", "counters": {"memory": {"value": memory}}}]})
    return [
        node("node-1"), device_class(),
        {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "node-1-counters"},
         "spec": {"driver": DRIVER, "nodeName": "node-1", "pool": pool,
                  "sharedCounters": [{"name": "gpu-memory", "counters": {"memory": {"value": "70Gi"}}}]}},
        {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "node-1-devices"},
         "spec": {"driver": DRIVER, "nodeName": "node-1", "pool": pool, "devices": devices}},
        claim("seven", 7),
    ]


def topology_slice(node_name: str) -> dict[str, Any]:
    devices = []
    for i in range(8):
        numa = i // 4
        devices.append({"name": f"gpu-{i}", "attributes": {
            "index": {"int": i},
            "numa": {"int": numa},
            "nvlinkDomain": {"string": f"{node_name}-nvl-{numa}"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i // 2:02x}"},
            "model": {"string": "H100-SXM5-80GB"},
        }, "capacity": {"memory": {"value": "80Gi"}}})
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": f"{node_name}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def topology_docs(nodes: int, busy: bool) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [device_class()]
    for n in range(nodes):
        name = f"node-{n}"
        docs += [node(name), topology_slice(name)]
        if busy:
            docs.append(in_use(f"busy-{n}", name, ["gpu-0", "gpu-4"]))
    docs.append(claim("four-on-nvlink", 4, [{"requests": ["gpus"], "matchAttribute": f"{DRIVER}/nvlinkDomain"}]))
    return docs


# ------------------------------------------------------------------------------------------ running


def pending_and_state(inv: Inventory) -> tuple[list[Any], AllocatedState]:
    claims = list(inv.claims.values())
    return [c for c in claims if c.allocation is None], AllocatedState.from_claims(c for c in claims if c.allocation)


def time_single(docs: Callable[[], list[dict[str, Any]]], node_name: str, matcher: CelMatcher,
                repeat: int) -> dict[str, Any]:
    times, outcome, stats = [], None, {}
    for _ in range(repeat):
        inv = parse_documents(docs(), "<bench>")
        pending, state = pending_and_state(inv)
        t0 = time.perf_counter()
        alloc = Allocator(list(inv.slices.values()), inv.classes, state, matcher)
        out = alloc.allocate(inv.nodes[node_name], pending)
        times.append(time.perf_counter() - t0)
        outcome, stats = out.outcome, dict(out.stats)
    return {"outcome": outcome, "stats": stats, **summary(times)}


def time_per_node(docs: Callable[[], list[dict[str, Any]]], matcher: CelMatcher, repeat: int) -> dict[str, Any]:
    times, outcomes, calls = [], set(), []
    for _ in range(repeat):
        inv = parse_documents(docs(), "<bench>")
        pending, state = pending_and_state(inv)
        alloc = Allocator(list(inv.slices.values()), inv.classes, state, matcher)
        for n in inv.nodes.values():
            t0 = time.perf_counter()
            out = alloc.allocate(n, pending)
            times.append(time.perf_counter() - t0)
            outcomes.add(out.outcome)
            calls.append(out.stats.get("allocate_one_calls", 0))
    return {"outcome": "/".join(sorted(outcomes)), "stats": {"allocate_one_calls (median)": statistics.median(calls)},
            **summary(times)}


def summary(times: list[float]) -> dict[str, Any]:
    return {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3, "max_ms": max(times) * 1e3,
            "samples": len(times)}


def upstream_orderings(n: int) -> int:
    """allocateOne calls 1.35 makes for one ExactCount request of n+1 when n devices fit: one per ordered
    selection of 0..n devices (sum of n!/(n-j)!), before it can say no."""
    return sum(math.perm(n, j) for j in range(n + 1))


# ------------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=30, help="repetitions per figure (default 30)")
    parser.add_argument("--nodes", type=int, default=32, help="nodes for the matchAttribute figure (default 32)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    args = parser.parse_args(argv)
    matcher = CelMatcher()
    results: dict[str, Any] = {"n_plus_one": [], "backtracking": None, "match_attribute": {}}

    for n in (5, 8, 16, 31):
        r = time_single(lambda n=n: [node("node-1"), device_class(), plain_slice("node-1", n), claim("c", n + 1)],
                        "node-1", matcher, args.repeat)
        r.update(n=n, asked=n + 1, devices=n, upstream_allocate_one_calls=upstream_orderings(n))
        results["n_plus_one"].append(r)
    for n in (5, 16):  # n free out of 2n: the other n are held by a claim in use
        r = time_single(lambda n=n: [node("node-1"), device_class(), plain_slice("node-1", 2 * n), claim("c", n + 1),
                                     in_use("held", "node-1", [f"gpu-{i}" for i in range(0, 2 * n, 2)])],
                        "node-1", matcher, args.repeat)
        r.update(n=n, asked=n + 1, devices=2 * n, upstream_allocate_one_calls=upstream_orderings(n))
        results["n_plus_one"].append(r)
    results["backtracking"] = time_single(backtracking_docs, "node-1", matcher, args.repeat)
    reps = max(1, args.repeat // 5)
    results["match_attribute"]["satisfiable"] = time_per_node(lambda: topology_docs(args.nodes, False), matcher, reps)
    results["match_attribute"]["unsatisfiable"] = time_per_node(lambda: topology_docs(args.nodes, True), matcher, reps)

    if args.json:
        print(json.dumps(results, indent=2, default=str))
        return 0
    print(f"dralab allocator benchmark (python {sys.version.split()[0]}; medians of {args.repeat} runs, "
          f"per-node figures over {args.nodes} nodes x {reps} runs)\n")
    print("1. n+1 devices asked, n fit: refused without search")
    print(f"   {'fit':>3} {'asked':>5} {'devices':>7} {'outcome':>14} {'allocateOne':>11} {'median ms':>10} "
          f"{'min ms':>8} {'upstream 1.35 allocateOne (computed)':>38}")
    for r in results["n_plus_one"]:
        print(f"   {r['n']:>3} {r['asked']:>5} {r['devices']:>7} {r['outcome']:>14} "
              f"{r['stats'].get('allocate_one_calls', 0):>11} "
              f"{r['median_ms']:>10.3f} {r['min_ms']:>8.3f} {r['upstream_allocate_one_calls']:>38.3g}")
    b = results["backtracking"]
    print("\n2. backtracking: 8 partitionable devices sharing 70Gi (device-1 20Gi, others 10Gi), claim for 7"
          "  [target < 10 ms]")
    print(f"   outcome {b['outcome']}, allocateOne {b['stats'].get('allocate_one_calls')}, "
          f"median {b['median_ms']:.3f} ms (min {b['min_ms']:.3f}, max {b['max_ms']:.3f})"
          f"  {'OK' if b['median_ms'] < 10 else 'OVER TARGET'}")
    print("\n3. matchAttribute: 4 GPUs on one NVLink domain, 8 GPUs x 2 NUMA x 4 PCIe roots per node"
          "  [target < 1 ms per node]")
    for kind in ("satisfiable", "unsatisfiable"):
        m = results["match_attribute"][kind]
        print(f"   {kind:<14} outcome {m['outcome']:<14} allocateOne {m['stats']['allocate_one_calls (median)']:<5} "
              f"median {m['median_ms']:.3f} ms/node (min {m['min_ms']:.3f}, max {m['max_ms']:.3f})"
              f"  {'OK' if m['median_ms'] < 1 else 'OVER TARGET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

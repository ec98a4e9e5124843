"""End-to-end speed of `dralab audit` and `dralab schedule` on a synthetic cluster dump (issue 4, Speed).

Run: python benchmarks/audit_bench.py [--nodes N] [--pending P] [--seed S] [--skip-schedule] [--profile]
[--profile-schedule]

The dump (built in memory, deterministic for a seed): N nodes with 64 cpu, each with one ResourceSlice
of 8 GPUs in 2 NVLink domains (4 GPUs each; each GPU with a unique uuid, as drivers publish); a
DeviceClass ``gpu``; ResourceClaimTemplates asking
1, 2, 4 or 9 GPUs, 4 GPUs with ``matchAttribute: gpu.example.com/nvlinkDomain``, and 1 device of a class
that does not exist. Every other node runs a bound pod whose allocated claim holds 2 or 3 GPUs (GPU 0
and GPU 4, so no NVLink domain keeps 4 free). P pending pods, in
shapes that exercise every path of the audit: 4 GPUs on one NVLink domain (topology on the busy nodes,
fits on the idle ones); 2 GPUs with a cpu request no node has (resources); 4 GPUs restricted by a
nodeSelector to busy nodes (topology); 1 GPU (fits); a claim naming a class that does not exist
(missing); 9 GPUs, more than a node has (fragmentation). Pods use templates (no generated claims
yet), as pods pending on a fresh cluster do.

Timing: time.perf_counter around `audit(inv)` and `schedule(inv)` (parsing excluded; each on its own
freshly parsed inventory). One run per figure: at these sizes runs last seconds.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import sys
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing: not needed when installed
    sys.path.insert(0, str(ROOT))

from dralab.core.analysis.audit import audit, schedule  # noqa: E402
from dralab.core.dra.api import parse_documents  # noqa: E402
from dralab.core.dra.model import Inventory  # noqa: E402

DRIVER = "gpu.example.com"
V1 = "resource.k8s.io/v1"
NS = "default"


def node(name: str, busy: bool) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "busy": str(busy).lower()}},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def gpu_slice(node_name: str) -> dict[str, Any]:
    devices = [{"name": f"gpu-{i}", "attributes": {
        "index": {"int": i}, "nvlinkDomain": {"string": f"nvl-{i // 4}"},
        "uuid": {"string": f"GPU-{zlib.crc32(f'{node_name}/{i}'.encode()):08x}"},
        "pciBusID": {"string": f"0000:{0x18 + 0x10 * i:02x}:00.0"},
        "model": {"string": "H100-SXM5-80GB"}}, "capacity": {"memory": {"value": "80Gi"}}} for i in range(8)]
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": f"{node_name}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def device_class() -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def claim_spec(count: int, cls: str = "gpu", nvlink: bool = False) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [{"name": "gpus", "exactly": {"deviceClassName": cls, "count": count}}]}
    if nvlink:
        devices["constraints"] = [{"requests": ["gpus"], "matchAttribute": f"{DRIVER}/nvlinkDomain"}]
    return {"devices": devices}


def template(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": NS},
            "spec": {"spec": spec}}


def pod(name: str, cpu: str, claims: list[dict[str, Any]], node_name: str | None = None,
        selector: dict[str, str] | None = None, created: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox",
                                            "resources": {"requests": {"cpu": cpu, "memory": "8Gi"}}}],
                            "resourceClaims": claims}
    if node_name:
        spec["nodeName"] = node_name
    if selector:
        spec["nodeSelector"] = selector
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "creationTimestamp": f"2026-01-01T00:{created // 60 % 60:02d}:"
                                                                             f"{created % 60:02d}Z"},
            "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}}


SHAPES = ("nvlink4", "cpu-hog", "busy-nvlink4", "one", "missing-class", "nine")


def build_docs(nodes: int, pending: int, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = [device_class(),
                                  template("one-gpu", claim_spec(1)), template("two-gpus", claim_spec(2)),
                                  template("four-gpus", claim_spec(4)),
                                  template("four-nvlink", claim_spec(4, nvlink=True)),
                                  template("no-such-class", claim_spec(1, cls="tpu")),
                                  template("nine-gpus", claim_spec(9))]
    for n in range(nodes):
        name = f"node-{n:05d}"
        busy = n % 2 == 0
        docs += [node(name, busy), gpu_slice(name)]
        if busy:  # a running pod holding 1-3 GPUs spread over both domains: no domain keeps 4 free
            held = [0, 4] + ([rng.choice([1, 2, 5, 6])] if rng.random() < 0.5 else [])
            cname = f"run-{n:05d}-gpus"
            docs.append({"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": cname, "namespace": NS},
                         "spec": claim_spec(len(held)),
                         "status": {"allocation": {"devices": {"results": [
                             {"request": "gpus", "driver": DRIVER, "pool": name, "device": f"gpu-{i}"}
                             for i in held]}},
                             "reservedFor": [{"resource": "pods", "name": f"run-{n:05d}", "uid": f"uid-{n}"}]}})
            docs.append(pod(f"run-{n:05d}", "16", [{"name": "gpus", "resourceClaimName": cname}], node_name=name))
    for p in range(pending):
        shape = SHAPES[p % len(SHAPES)]
        ref = {"nvlink4": "four-nvlink", "cpu-hog": "two-gpus", "busy-nvlink4": "four-nvlink", "one": "one-gpu",
               "missing-class": "no-such-class", "nine": "nine-gpus"}[shape]
        docs.append(pod(f"wait-{p:05d}", "128" if shape == "cpu-hog" else "4",
                        [{"name": "gpus", "resourceClaimTemplateName": ref}],
                        selector={"busy": "true"} if shape == "busy-nvlink4" else None, created=p))
    return docs


def parse(nodes: int, pending: int, seed: int) -> Inventory:
    return parse_documents(build_docs(nodes, pending, seed), "<audit-bench>")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=500, help="nodes (default 500)")
    parser.add_argument("--pending", type=int, default=100, help="pending pods (default 100)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-schedule", action="store_true", help="time audit only")
    parser.add_argument("--profile", action="store_true", help="cProfile audit; print the top 25 by cumtime")
    parser.add_argument("--profile-schedule", action="store_true", help="cProfile schedule, likewise")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    inv = parse(args.nodes, args.pending, args.seed)
    parse_s = time.perf_counter() - t0
    rows = [("step", "seconds", "result")]
    rows.append(("parse", f"{parse_s:.2f}", f"{len(inv.nodes)} nodes, {len(inv.pods)} pods, "
                                             f"{len(inv.slices)} slices"))
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
    t0 = time.perf_counter()
    report = audit(inv)
    audit_s = time.perf_counter() - t0
    if args.profile:
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    reasons = Counter(p["reason"] or "fits" for p in report["pods"] if p["node"] is None)
    rows.append(("audit", f"{audit_s:.2f}", ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()))
                 + f"; devices {report['devices']}"))
    if not args.skip_schedule:
        inv = parse(args.nodes, args.pending, args.seed)
        if args.profile_schedule:
            prof = cProfile.Profile()
            prof.enable()
        t0 = time.perf_counter()
        sched = schedule(inv)
        sched_s = time.perf_counter() - t0
        if args.profile_schedule:
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
            pstats.Stats(prof).sort_stats("tottime").print_stats(15)
        rows.append(("schedule", f"{sched_s:.2f}",
                     f"{len(sched['bindings'])} bound, {len(sched['pending'])} still pending"))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    print(f"audit bench: {args.nodes} nodes x 8 GPUs, {args.pending} pending pods (seed {args.seed})")
    for r in rows:
        print(f"{r[0].ljust(widths[0])}  {r[1].rjust(widths[1])}  {r[2]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

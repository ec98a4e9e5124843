"""Bringing up 5,000 GPU nodes on the live path, drivers' ResourceSlices included (issue 6's target:
under 30 s; KWOK's benchmark creates 5,000 nodes, without devices, in under 60 s).

    python benchmarks/bringup_bench.py [--nodes 5000] [--gpus 8] [--shards 1,2,4] [--hosts 0]
                                       [--mode scale-up|start] [--repeat 1] [--speed 20] [-o json]

The scenario is built in memory: one node group `gpu` (`max` = `--nodes`, 192 cpu, 2000Gi, no
provisioning delay) whose nodes publish one ResourceSlice of `--gpus` devices through the DRA driver
`gpu.example.com` (`spec.nodeGroups[].resourceSlices`, as scenarios/late-resourceslices.yaml declares
its H100 nodes), a DeviceClass for it, no pods.

- `--mode scale-up` (the default): the nodes come through the reactors that bring nodes up. When
  the run starts the benchmark appends, as an external input, one `ScaleUpRequested` of `--nodes`
  nodes for the group (what the autoscaler would ask for; its own cost of deciding that is not
  measured here): the cloud actor answers with one `NodeProvisioning` per node, the lifecycle actor
  registers them and turns them Ready, and the drivers actors (`--shards` of them, each hosting the
  drivers of the nodes whose name hashes to it) publish each node's slice.
- `--mode start`: the scenario's starting nodes (`spec.nodes: [{group: gpu, count: N}]`): they come
  with the setup record (Node, Ready and the drivers' slices at t=0), so this measures only the log
  and the folds, no reactor decision.

Each run is `dralab run`'s machinery (actors/live.py: real Ray actors, one per reactor, over a
private redis-server started here, never the shared one). The figure is the wall time from the
run's start (the clock's epoch, recorded in `RunStarted`: every actor listening, Ray's start not
included) until the driver's fold of the log holds every node Ready with every slice of its drivers
published; the times of the intermediate stages are read from the same fold. `redis-benchmark`
(XADD, unpipelined and pipelined 16, as benchmarks/live_bench.py) runs on the same server in the same
run, and every figure is also given as a ratio: the bring-up time times redis-benchmark's XADD/s, i.e.
how many unpipelined XADDs redis-benchmark does in the time the bring-up takes (lower is better; it
compares a noisy machine with itself).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from _common import redis_benchmark

from dralab.actors.live import LiveOptions, LiveRun
from dralab.actors.live_runtime import live_bus, ray_runtime
from dralab.actors.reactor_loop import SnapshotPolicy
from dralab.actors.redis_server import private_redis_server
from dralab.core.log.events import Record, ScaleUpRequested
from dralab.core.scenario.load import Scenario, parse_scenario

GROUP = "gpu"
DRIVER = "gpu.example.com"


def scenario(nodes: int, gpus: int = 8, mode: str = "scale-up") -> dict[str, Any]:
    """The benchmark's scenario, as a scenario document."""
    group = {
        "name": GROUP, "max": nodes, "provisionDelay": "0s", "costPerHour": 98.32,
        "template": {"metadata": {"labels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
                     "status": {"allocatable": {"cpu": "192", "memory": "2000Gi", "pods": "110"}}},
        "resourceSlices": [{"spec": {"driver": DRIVER, "devices": [
            {"name": f"gpu-{i}", "attributes": {"index": {"int": i}, "nvlinkDomain": {"int": 0}},
             "capacity": {"memory": {"value": "80Gi"}}} for i in range(gpus)]}}],
    }
    spec: dict[str, Any] = {
        "seed": 0, "duration": "1h", "policy": {"autoscaler": "dra"},
        "autoscaler": {"scaleDown": {"enabled": False}},
        "nodeGroups": [group],
        "objects": [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
                     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}],
    }
    if mode == "start":
        spec["nodes"] = [{"group": GROUP, "count": nodes}]
    return {"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "bringup"}, "spec": spec}


def scale_up_record(nodes: int) -> Record:
    """The external input of `--mode scale-up`: the scale-up the autoscaler would have decided."""
    return Record(id="bench/scale-up", source="scenario", view=-1, t=0,
                  events=(ScaleUpRequested(group=GROUP, delta=nodes),))


@dataclass
class Watch:
    """Follows the driver's fold (called after every batch it folds) and notes when each stage is done."""

    nodes: int
    slices: int  # slices every node publishes
    mode: str
    stages: dict[str, float] = field(default_factory=dict)  # stage -> wall seconds since the run's start
    injected: bool = False

    async def __call__(self, live: LiveRun) -> None:
        if self.mode == "scale-up" and not self.injected:
            self.injected = True
            live.inputs.append(scale_up_record(self.nodes))  # the driver appends it as the world's input
        if "done" in self.stages:
            return
        now = time.time() - live.clock.epoch
        s = live.state
        checks = {
            "provisioning": len(s.provisioning_nodes) + len(s.nodes) >= self.nodes,
            "registered": len(s.nodes) >= self.nodes,
            "ready": len(s.nodes) >= self.nodes and all(n.ready for n in s.nodes.values()),
            "published": len(s.dra.slices) >= self.nodes * self.slices,
        }
        for stage, ok in checks.items():
            if ok and stage not in self.stages:
                self.stages[stage] = now
        if checks["ready"] and checks["published"]:
            self.stages["done"] = now
            self.stages["offset"] = s.offset


class BenchRun(LiveRun):
    """`dralab run`'s LiveRun, that also waits for the bring-up to be complete before it calls the
    run settled (a run with no pods is otherwise settled as soon as every node is Ready)."""

    watch: Watch

    def settled(self) -> bool:
        return "done" in self.watch.stages and super().settled()


async def run_live(sc: Scenario, options: LiveOptions, watch: Watch) -> Any:
    """actors/live.py's run_live_async, with BenchRun."""
    async with live_bus(options, sc) as (bus, spec):
        live = BenchRun(sc, options, bus, spec)
        live.watch = watch
        return await live.run(watch)


async def run_once(sc: Scenario, nodes: int, shards: int, mode: str, url: str, speed: float = 20.0,
                   timeout_s: float = 300.0, hosts: int = 0) -> dict[str, Any]:
    """One live bring-up (Ray must be initialised): its figures, read from the driver's fold.
    `hosts`: LiveOptions.hosts where the live path has it (reactors dealt into that many actors)."""
    options = LiveOptions(seed=0, redis_url=url, speed=speed, timeout_s=timeout_s, progress_every_s=0,
                          log_format="json", drivers_shards=shards, trim_every_s=0,
                          snapshots=SnapshotPolicy())
    if hosts:
        if not hasattr(options, "hosts"):
            raise SystemExit("--hosts: this dralab's live path has no LiveOptions.hosts")
        options.hosts = hosts
    watch = Watch(nodes, len(sc.node_groups[0].resource_slices), mode)
    started = time.monotonic()
    result = await run_live(sc, options, watch)
    total = time.monotonic() - started
    state = result.state
    done = watch.stages.get("done")
    actors = result.extra.get("actors", {})
    return {
        "nodes": nodes, "shards": shards, "hosts": hosts, "mode": mode,
        "seconds": round(done, 2) if done is not None else None,
        "stages_s": {k: round(v, 2) for k, v in watch.stages.items() if k not in ("done", "offset")},
        "ready": sum(1 for n in state.nodes.values() if n.ready), "slices": len(state.dra.slices),
        "devices": sum(len(s.devices) for s in state.dra.slices.values()),
        "records": len(result.entries), "bytes": sum(len(p) for _, p in result.entries),
        "run_wall_s": round(total, 2), "completed": result.completed, "error": result.error,
        "anomalies": list(state.anomalies),
        "decisions": {n: a.get("decisions") for n, a in actors.items()},
        "snapshots": {n: a.get("snapshots_saved") for n, a in actors.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--gpus", type=int, default=8, help="devices in each node's slice")
    ap.add_argument("--shards", default="1,2,4", help="drivers shards to measure, comma-separated")
    ap.add_argument("--hosts", default="0", help="host actors to measure, comma-separated (0: one actor per "
                    "reactor; N: `dralab run --hosts N`, where the live path has it)")
    ap.add_argument("--mode", choices=["scale-up", "start"], default="scale-up")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each shard count")
    ap.add_argument("--speed", type=float, default=20.0, help="cluster seconds per wall second (as dralab run)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds before a run is given up")
    ap.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = ap.parse_args()
    shards = [int(s) for s in args.shards.split(",") if s]
    hosts = [int(h) for h in args.hosts.split(",") if h]
    sc = parse_scenario(scenario(args.nodes, args.gpus, args.mode), "bringup-bench")
    rows: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    with private_redis_server() as url, ray_runtime(None, "json"):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        rb = redis_benchmark(port)
        for _ in range(args.repeat):
            for h in hosts:
                for n in shards:
                    rows.append(asyncio.run(run_once(sc, args.nodes, n, args.mode, url, args.speed, args.timeout, h)))
                    print(f"  shards {n} hosts {h}: {rows[-1]['seconds']} s", file=sys.stderr, flush=True)
        rb_after = redis_benchmark(port)
    xadd = (rb.get("xadd_per_s", 0) + rb_after.get("xadd_per_s", 0)) / 2
    xadd_p = (rb.get("xadd_pipelined_per_s", 0) + rb_after.get("xadd_pipelined_per_s", 0)) / 2
    for row in rows:
        row["x_redis_xadd"] = round(row["seconds"] * xadd) if row["seconds"] and xadd else None
        row["x_redis_xadd_pipelined"] = round(row["seconds"] * xadd_p) if row["seconds"] and xadd_p else None
    out = {"nodes": args.nodes, "gpus": args.gpus, "mode": args.mode, "speed": args.speed,
           "redis_benchmark": {"before": rb, "after": rb_after}, "load_before": [round(x, 2) for x in load_before],
           "load_after": [round(x, 2) for x in os.getloadavg()], "runs": rows,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if args.output == "json":
        print(json.dumps(out))
        return
    print(f"{args.nodes:,} nodes x {args.gpus} GPUs, mode {args.mode}, {out['date']}, load "
          f"{out['load_before']} -> {out['load_after']}")
    print(f"redis-benchmark XADD: {xadd:,.0f}/s unpipelined, {xadd_p:,.0f}/s pipelined 16 "
          f"(mean of before/after the runs)")
    print(f"{'shards':>6} {'hosts':>5} {'all up (s)':>10} {'target':>7} {'xRB XADDs':>10} {'cloud':>6} {'regd':>6} "
          f"{'ready':>6} {'slices':>6} {'records':>7} {'MB':>6} {'run wall':>8}")
    for r in rows:
        st = r["stages_s"]
        ok = "met" if r["seconds"] is not None and r["seconds"] < 30 else "MISSED"
        print(f"{r['shards']:>6} {r['hosts']:>5} {r['seconds'] if r['seconds'] is not None else '-':>10} {ok:>7} "
              f"{r['x_redis_xadd'] or '-':>10} {st.get('provisioning', '-'):>6} {st.get('registered', '-'):>6} "
              f"{st.get('ready', '-'):>6} {st.get('published', '-'):>6} {r['records']:>7} "
              f"{r['bytes'] / 1e6:>6.1f} {r['run_wall_s']:>8}")
    print("stage columns: wall seconds from the run's start until every node was accepted by the cloud, "
          "registered, Ready, and had its slices published (the driver's fold); "
          "xRB XADDs: the bring-up time x redis-benchmark's unpipelined XADD/s")


if __name__ == "__main__":
    main()

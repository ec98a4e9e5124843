"""The live path's event throughput and latency: append to Redis, every reactor actor's loop reads, decodes
and folds each entry into its view and acknowledges it (issue 6's targets: >= 20,000 events/s from append
to every consumer having applied it; p99 append-to-apply latency under 50 ms at 5,000 events/s).

    python benchmarks/live_bench.py [--events 20000] [--rates 1000,5000] [--layouts 0,2,1] [--repeat 2]

A private redis-server (never the shared one), started here. Each consumer is a separate process running
the real `ReactorLoop` of actors/reactor_actor.py (read_group, fold, decide, ack, snapshots with the
default policy) on a `RedisBus`, hosting the six reactors of a run (scheduler, autoscaler, cloud,
lifecycle, drivers, claims) laid out as `dralab run --hosts N` lays them out (actors/hosts.py):
`--layouts 0` is one process per reactor (six consumer groups, six folds: the default), `2` two host
processes of three reactors each, `1` one host of all six. The only thing not real is the reactors: here
each is a no-op that is asked to decide on every new view (as the scheduler is) and never appends, so the
figures are the live path's (the bus, the fold, the loop), not a scheduler's. The writer appends
`PodCreated` records with `append_many` (the optimistic-concurrency Lua script, one call per batch), as
a scenario's inputs are appended. Per layout:
- throughput: the writer appends `--events` as fast as it can (batches of `--batch`); the figure is
  events / (time until the last consumer has folded the last event);
- latency at each `--rates` value: the writer appends a batch every 10 ms at that rate; each consumer
  notes, per event, the time from the append call to the end of the fold of the batch it came in
  (clocks of one machine: `time.time()` in every process).
`redis-benchmark` (XADD, unpipelined and pipelined 16) runs on the same server before and after, and
every throughput is also given as a ratio to its unpipelined figure (the mean of the two), so a noisy
machine compares with itself. `uptime`'s load is printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from typing import Any

from _common import redis_benchmark

from dralab.actors.bus import RECORDER_GROUP, Entry
from dralab.actors.gc_tuning import TENURE_EVERY
from dralab.actors.hosts import host_layout
from dralab.actors.logs import configure
from dralab.actors.memory_bus import MemoryBus
from dralab.actors.reactor_loop import Hosted, ReactorLoop
from dralab.actors.redis_bus import RedisBus
from dralab.actors.redis_server import private_redis_server
from dralab.core.engine.contract import Decision
from dralab.core.log.events import PodCreated, Record, RunStarted, encode_record
from dralab.core.state.cluster import ClusterState

REACTORS = ["scheduler", "autoscaler", "cloud", "lifecycle", "drivers", "claims"]
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "default"},
       "spec": {"containers": [{"name": "main", "image": "w:1", "resources": {"requests": {"cpu": "1"}}}]}}


def record(i: int, t_ms: int) -> bytes:
    pod = {**POD, "metadata": {"name": f"p-{i}", "namespace": "default"}}
    return encode_record(Record(id=f"bench/{i}", source="scenario", view=-1, t=t_ms, events=(PodCreated(pod=pod),)))


class NoOp:
    """A reactor that decides on every new view and never has anything to do."""

    trigger = "events"

    def __init__(self, name: str) -> None:
        self.name = name

    def react(self, view: ClusterState, now: int, rng: Any) -> Decision:
        return Decision()


_RUN = Record(id="warm/run", source="scenario", view=-1, t=0,
              events=(RunStarted(scenario="warm", seed=0, config={}, mode="local", speed=1.0, epoch=0.0),))
WARM_UP = [Entry(1, encode_record(_RUN)), *(Entry(i, record(i, 0)) for i in range(2, 50))]
_FOLDED_T: list[int] = []  # cluster time (here: the append's wall time, ms) of each record folded


class TimedState(ClusterState):
    def apply(self, offset: int, record: Record) -> bool:
        done = super().apply(offset, record)
        if done:
            _FOLDED_T.append(record.t)
        return done


class BenchLoop(ReactorLoop):
    """The real loop, with no-op reactors, noting when each entry's fold ended; stops at ``total``."""

    def __init__(self, *args: Any, total: int, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.state = TimedState()
        self.total = total
        self.lags: list[float] = []
        self.done_at = 0.0

    def _set_run(self, run: RunStarted) -> None:
        super_hosted = {n: Hosted(NoOp(n)) for n in self.names}  # type: ignore[arg-type]
        self.seed = run.seed
        self.hosted = super_hosted

    async def _fold(self, entries: list[Entry]) -> None:
        await super()._fold(entries)
        if _FOLDED_T:
            now = time.time()
            self.lags += [now - t / 1000 for t in _FOLDED_T]
            _FOLDED_T.clear()
            self.done_at = now
        if self.state.offset >= self.total:
            self.stopping = True


def consumer(url: str, stream: str, name: str, reactors: list[str], total: int, tenure_every: int, ready: Any,
             out: Any) -> None:
    async def go() -> None:
        configure("console", "info")  # as a reactor actor does (debug lines filtered out)
        bus = await RedisBus.connect(url, stream)
        loop = BenchLoop(name, bus, name, f"{name}-0", reactors=reactors, total=total, tenure_every=tenure_every)
        warm = BenchLoop(name, MemoryBus(), name, f"{name}-0", reactors=reactors, total=0)
        await warm._fold(WARM_UP)  # first calls (imports, caches) off the clock, as the driver's
        task = asyncio.create_task(loop.run())
        while not loop.stats.get("ready"):  # rebuilt and tenured (actors/gc_tuning.py), as an actor at start
            await asyncio.sleep(0.01)
        ready.put(name)
        cpu0 = time.process_time()
        await task
        cpu = time.process_time() - cpu0
        await bus.close()
        out.put((name, loop.done_at, loop.lags, cpu, loop.tenure.count, loop.tenure.last_ms))
    asyncio.run(go())


def recorder(url: str, stream: str, total: int, tenure_every: int, ready: Any, out: Any) -> None:
    """The driver's side of a run (actors/live.py): the real ``LiveRun._record`` (the recorder group's
    read, the driver's fold with the invariant monitor, the acknowledgement), a consumer like the others."""
    async def go() -> None:
        from pathlib import Path

        from dralab.actors.bus_factory import BusSpec
        from dralab.actors.live import LiveOptions, LiveRun
        from dralab.core.scenario.load import load_scenario

        configure("console", "info")
        bus = await RedisBus.connect(url, stream)
        scenario = load_scenario(Path(__file__).resolve().parent.parent / "scenarios" / "quickstart.yaml")
        spec = BusSpec("redis", url=url, stream=stream)
        run = LiveRun(scenario, LiveOptions(gc_tenure_every=tenure_every), bus, spec)
        warm = LiveRun(scenario, LiveOptions(), MemoryBus(), spec)  # first calls (imports, caches) off the clock
        warm._fold(WARM_UP)
        run.state = TimedState()
        run.tenure.maybe(0, now=True)  # as LiveRun._run does before the inputs
        lags: list[float] = []
        done_at = 0.0
        ready.put("driver")
        cpu0 = time.process_time()
        while run.state.offset < total:
            await run._record(1000)
            run.tenure.maybe(run.state.offset)  # as LiveRun._run does
            if _FOLDED_T:
                done_at = time.time()
                lags += [done_at - t / 1000 for t in _FOLDED_T]
                _FOLDED_T.clear()
        cpu = time.process_time() - cpu0
        await bus.close()
        out.put(("driver", done_at, lags, cpu, run.tenure.count, run.tenure.last_ms))
    asyncio.run(go())


async def write(url: str, stream: str, total: int, batch: int, rate: float | None) -> tuple[float, float]:
    bus = await RedisBus.connect(url, stream)
    start = time.time()
    run = Record(id="bench/run", source="scenario", view=-1, t=int(start * 1000),
                 events=(RunStarted(scenario="bench", seed=0, config={}, mode="local", speed=1.0, epoch=start),))
    await bus.append_many([(encode_record(run), run.id, {}, ())])
    i = 1
    while i < total:
        n = min(batch, total - i)
        now_ms = int(time.time() * 1000)
        await bus.append_many([(record(i + k, now_ms), f"bench/{i + k}", {}, ()) for k in range(n)])
        i += n
        if rate:
            ahead = start + i / rate - time.time()
            if ahead > 0:
                await asyncio.sleep(ahead)
    end = time.time()
    await bus.close()
    return start, end


def one_run(url: str, total: int, hosts: int, batch: int, rate: float | None,
            tenure_every: int = TENURE_EVERY, with_recorder: bool = True) -> dict[str, Any]:
    stream = f"bench:{time.time_ns()}"
    layout = host_layout(REACTORS, hosts)
    ctx = mp.get_context("spawn")
    out, ready = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=consumer, args=(url, stream, name, hosted, total, tenure_every, ready, out))
             for name, hosted in layout.items()]
    if with_recorder:
        async def group() -> None:  # before anything is appended, as the driver does
            bus = await RedisBus.connect(url, stream)
            await bus.create_group(RECORDER_GROUP)
            await bus.close()
        asyncio.run(group())
        procs.append(ctx.Process(target=recorder, args=(url, stream, total, tenure_every, ready, out)))
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    start, appended = asyncio.run(write(url, stream, total, batch, rate))
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(30)
    last = max(r[1] for r in results)
    lags = sorted(lag for r in results for lag in r[2])
    cpu = sum(r[3] for r in results)
    return {"layout": "separate" if hosts <= 0 else f"hosts={len(layout)}", "processes": len(procs),
            "events": total, "rate": rate, "seconds": last - start, "events_per_s": total / (last - start),
            "append_s": appended - start, "consumer_cpu_us_per_event": 1e6 * cpu / total,
            "p50_ms": 1000 * lags[len(lags) // 2], "p99_ms": 1000 * lags[int(len(lags) * 0.99)],
            "max_ms": 1000 * lags[-1], "mean_ms": 1000 * statistics.fmean(lags),
            "gc_tenures": [r[4] for r in results], "gc_tenure_last_ms": [r[5] for r in results],
            "p99_ms_by_consumer": {r[0]: 1000 * sorted(r[2])[int(len(r[2]) * 0.99)] for r in results if r[2]},
            "worst_ms_by_tenth": {r[0]: [round(1000 * max(r[2][k * len(r[2]) // 10:(k + 1) * len(r[2]) // 10]))
                                         for k in range(10)] for r in results if len(r[2]) >= 10}}


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--layouts", default="0,2,1", help="hosts per run, comma-separated (0: one process per reactor)")
    ap.add_argument("--rates", default="1000,5000", help="events/s of the latency runs, comma-separated")
    ap.add_argument("--batch", type=int, default=200, help="events per append_many call (throughput run)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds (each round runs every layout once)")
    ap.add_argument("--tenure-every", type=int, default=TENURE_EVERY,
                    help="GC tenure period of the consumers, as in a reactor actor (0: Python's defaults)")
    ap.add_argument("--no-recorder", action="store_true",
                    help="leave the driver's recorder (a 7th consumer in a real run) out")
    ap.add_argument("--json", metavar="FILE", help="also write every figure to FILE")
    args = ap.parse_args()
    layouts = [int(x) for x in args.layouts.split(",")]
    rates = [float(x) for x in args.rates.split(",") if x]
    print(f"start: {time.strftime('%Y-%m-%d %H:%M:%S')}, {os.cpu_count()} cores, {load()}", flush=True)
    runs: list[dict[str, Any]] = []
    with private_redis_server() as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        rb = [redis_benchmark(port)]
        for _ in range(args.repeat):
            for hosts in layouts:
                rec = not args.no_recorder
                runs.append(one_run(url, args.events, hosts, args.batch, None, args.tenure_every, rec))
                for rate in rates:
                    runs.append(one_run(url, min(args.events, int(rate * 4)), hosts, max(1, int(rate / 100)), rate,
                                        args.tenure_every, rec))
        rb.append(redis_benchmark(port))
    xadd = statistics.fmean(r["xadd_per_s"] for r in rb if r.get("xadd_per_s")) if any(rb) else 0.0
    print(f"end: {time.strftime('%Y-%m-%d %H:%M:%S')}, {load()}")
    print("redis-benchmark XADD unpipelined: " + ", ".join(f"{r.get('xadd_per_s', 0):,.0f}/s" for r in rb)
          + "; pipelined 16: " + ", ".join(f"{r.get('xadd_pipelined_per_s', 0):,.0f}/s" for r in rb))
    print("| layout | processes | run | events/s applied by all | x redis-benchmark XADD | p50 ms | p99 ms | "
          "consumer CPU us/event |")
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        what = "throughput" if r["rate"] is None else f"at {r['rate']:,.0f}/s"
        ratio = f"{r['events_per_s'] / xadd:.2f}x" if xadd and r["rate"] is None else ""
        print(f"| {r['layout']} | {r['processes']} | {what} | {r['events_per_s']:,.0f} | {ratio} | "
              f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['consumer_cpu_us_per_event']:.0f} |")
    print("targets: >= 20,000 events/s applied by every consumer; p99 < 50 ms at 5,000 events/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"redis_benchmark": rb, "runs": runs}, f, indent=1)
    sys.stdout.flush()


if __name__ == "__main__":
    main()

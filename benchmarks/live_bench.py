"""The live path's event throughput and latency: append to Redis, every consumer group reads, decodes and
folds each entry into its view, and acknowledges it (issue 6's targets: >= 20,000 events/s from append
to every consumer having applied it; p99 append-to-apply latency under 50 ms at 5,000 events/s).

    python benchmarks/live_bench.py [--events 60000] [--consumers 6] [--rate 5000] [--batch 200]

A private redis-server (never the shared one), started here. The consumers are separate processes (one
per reactor of a run: six by default), each a `RedisBus` consumer group doing what `ReactorLoop` does
with an entry (read_group, decode_record, ClusterState.apply, ack), without deciding. The writer
appends `PodCreated` records with `append_many` (the optimistic-concurrency Lua script, one call per
batch) as a scenario's inputs are appended. Two runs:
- throughput: the writer appends as fast as it can; the figure is events / (time until the last
  consumer has applied the last event);
- latency: the writer paces batches to `--rate` events/s; each consumer notes, per event, the time from
  its append to its apply (clocks of one machine: `time.time()` in both processes).
`redis-benchmark` (XADD, unpipelined and pipelined 16) runs on the same server first, and every figure
is also given as a ratio to it, so a noisy machine compares with itself.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import re
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

from dralab.actors.redis_bus import RedisBus
from dralab.actors.redis_server import private_redis_server
from dralab.core.events import PodCreated, Record, RunStarted, decode_record, encode_record
from dralab.core.state import ClusterState

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "default"},
       "spec": {"containers": [{"name": "main", "image": "w:1", "resources": {"requests": {"cpu": "1"}}}]}}


def record(i: int, t_ms: int) -> bytes:
    pod = {**POD, "metadata": {"name": f"p-{i}", "namespace": "default"}}
    return encode_record(Record(id=f"bench/{i}", source="scenario", view=-1, t=t_ms, events=(PodCreated(pod=pod),)))


def consumer(url: str, stream: str, name: str, total: int, out: Any) -> None:
    """One consumer group: fold every entry, ack it; report (append wall time, apply wall time) pairs."""
    async def go() -> None:
        bus = await RedisBus.connect(url, stream)
        await bus.create_group(name)
        state = ClusterState()
        lags: list[float] = []
        done_at = 0.0
        while state.offset < total:
            entries = await bus.read_group(name, f"{name}-0", 500, 1000)
            for entry in entries:
                rec = decode_record(entry.payload, entry.offset)
                state.apply(entry.offset, rec)
                lags.append(time.time() - rec.t / 1000)  # t carries the append's wall time (ms) here
            if entries:
                await bus.ack(name, [e.offset for e in entries])
                done_at = time.time()
        await bus.close()
        out.put((name, done_at, lags))
    asyncio.run(go())


async def write(url: str, stream: str, total: int, batch: int, rate: float | None) -> float:
    bus = await RedisBus.connect(url, stream)
    start = time.time()
    run = Record(id="bench/run", source="scenario", view=-1, t=int(start * 1000),
                 events=(RunStarted(scenario="bench", seed=0, config={}),))
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
    await bus.close()
    return start


def one_run(url: str, total: int, consumers: int, batch: int, rate: float | None) -> dict[str, Any]:
    stream = f"bench:{time.time_ns()}"
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=consumer, args=(url, stream, f"c{k}", total, out)) for k in range(consumers)]
    # groups first, so that none misses the head of the stream
    async def groups() -> None:
        bus = await RedisBus.connect(url, stream)
        for k in range(consumers):
            await bus.create_group(f"c{k}")
        await bus.close()
    asyncio.run(groups())
    for p in procs:
        p.start()
    time.sleep(2.0)  # let the consumers import and connect
    start = asyncio.run(write(url, stream, total, batch, rate))
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(30)
    last = max(done for _, done, _ in results)
    lags = sorted(lag for _, _, ls in results for lag in ls)
    return {"events": total, "seconds": last - start, "events_per_s": total / (last - start),
            "p50_ms": 1000 * lags[len(lags) // 2], "p99_ms": 1000 * lags[int(len(lags) * 0.99)],
            "mean_ms": 1000 * statistics.fmean(lags)}


def redis_benchmark(port: int) -> dict[str, float]:
    """XADD/s from redis-benchmark on the same server: unpipelined and pipelined 16."""
    if shutil.which("redis-benchmark") is None:
        return {}
    out = {}
    for label, pipe in (("xadd_per_s", "1"), ("xadd_pipelined_per_s", "16")):
        text = subprocess.run(["redis-benchmark", "-p", str(port), "-q", "-n", "100000", "-P", pipe,
                               "XADD", "rb:bench", "*", "f", "v"], capture_output=True, text=True, check=False).stdout
        m = re.findall(r"([\d.]+) requests per second", text)
        if m:
            out[label] = float(m[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=60_000)
    ap.add_argument("--consumers", type=int, default=6)
    ap.add_argument("--rate", type=float, default=5000.0, help="events/s of the latency run")
    ap.add_argument("--batch", type=int, default=200, help="events per append_many call")
    args = ap.parse_args()
    with private_redis_server() as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        rb = redis_benchmark(port)
        peak = one_run(url, args.events, args.consumers, args.batch, None)
        paced = one_run(url, min(args.events, int(args.rate * 10)), args.consumers, max(1, int(args.rate / 100)),
                        args.rate)
    print(f"redis-benchmark XADD: {rb.get('xadd_per_s', 0):,.0f}/s unpipelined, "
          f"{rb.get('xadd_pipelined_per_s', 0):,.0f}/s pipelined 16")
    print(f"throughput: {peak['events']:,} events to {args.consumers} consumer groups in {peak['seconds']:.2f} s: "
          f"{peak['events_per_s']:,.0f} events/s applied by every consumer (target >= 20,000)"
          + (f"; {peak['events_per_s'] / rb['xadd_per_s']:.2f}x redis-benchmark's unpipelined XADD"
             if rb.get("xadd_per_s") else ""))
    print(f"latency at {args.rate:,.0f} events/s: p50 {paced['p50_ms']:.1f} ms, p99 {paced['p99_ms']:.1f} ms, "
          f"mean {paced['mean_ms']:.1f} ms append to apply (target p99 < 50 ms)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

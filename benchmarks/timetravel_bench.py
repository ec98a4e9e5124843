"""Time travel in a big `.dralog` (issue 7): write a 10-million-event log with snapshots, fold it, jump in it.

    python benchmarks/timetravel_bench.py [--events 10000000] [--quick] [--nodes 1000] [--pods 20000]
        [--snapshot-every N] [--compression zstd|zlib|none] [--travels 20] [--seed 1] [--out FILE] [--keep]
        [--no-gc] [--profile]

The log is synthesized directly with the event types of core/log/events.py (the simulator would take hours
to make 10 million events): `--nodes` nodes of 8 GPUs, then cycles in which one pod per node is created
(8 GPUs), the nodes are cordoned for maintenance (a taint), the scheduler writes each pending pod's
Unschedulable condition on every attempt while the maintenance controller flaps the taints, the taints
go, the pods are bound and finish. Pods are never deleted from the fold, so the state (what a snapshot
holds, and what time travel must decode) grows with the pods made: `--pods` in all (default 20,000, the
size of a 6-hour day of a 1,000-node cluster), and the scheduling attempts and taint flaps make up the
rest of the events. Records carry 10 events (a job's pods, a scheduling cycle's conditions). The log
must fold without anomalies (checked).

Measures: the file's size and write time (LogWriter with the decoded records, so the writer folds
without decoding), the fold speed over the whole file (open_log, read every block, decode_record,
ClusterState.apply: events/s; `--no-gc` with the collector off), and `--travels` time travels to random
offsets (open_log + state_at, each in a fresh reader): max and median seconds. `--quick`: 300,000 events, 3,000 pods.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from dralab.core.log.events import (
    NodeCreated,
    NodeReady,
    NodeTaintsChanged,
    PodBound,
    PodCreated,
    PodFinished,
    PodUnschedulable,
    Record,
    RunStarted,
    decode_record,
    encode_record,
)
from dralab.core.state.cluster import ClusterState
from dralab.replay.logs.logfile import DEFAULT_SNAPSHOT_EVERY, LogWriter, make_header
from dralab.replay.logs.logfile_reader import open_log

PER_RECORD = 10
MAINTENANCE = ({"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"},)


def _node(name: str) -> dict[str, Any]:
    alloc = {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "a"}},
            "status": {"capacity": alloc, "allocatable": alloc}}


def _pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "train"},
            "spec": {"containers": [{"name": "main", "image": "trainer:1",
                                     "resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "8"}}}]}}


def records(events: int, nodes: int, pods: int, seed: int) -> Iterator[Record]:
    """The synthetic log, in order; about `events` events (whole cycles)."""
    rng = random.Random(seed)
    t = 0
    view = 0

    def rec(source: str, evs: list[Any] | tuple[Any, ...]) -> Record:
        nonlocal t, view
        t += rng.randint(1, 200)
        view += 1
        return Record(id=f"{source}@{view}", source=source, view=view - 1 if source != "scenario" else -1, t=t,
                      events=tuple(evs))

    yield rec("scenario", [RunStarted(scenario="timetravel-bench", seed=seed, config={})])
    names = [f"gpu-{i}" for i in range(nodes)]
    for i in range(0, nodes, PER_RECORD // 2):
        chunk = names[i:i + PER_RECORD // 2]
        yield rec("scenario", [e for n in chunk for e in (NodeCreated(n, "", _node(n), initial=True), NodeReady(n))])
    cycles = max(1, pods // nodes)
    per_cycle = max(events // cycles, 5 * nodes)
    rounds = max(0, (per_cycle - 5 * nodes) // (2 * nodes))  # attempts and flaps per cycle
    cordon = [NodeTaintsChanged(n, MAINTENANCE) for n in names]
    uncordon = [NodeTaintsChanged(n, ()) for n in names]

    def batches(evs: list[Any]) -> Iterator[list[Any]]:
        for i in range(0, len(evs), PER_RECORD):
            yield evs[i:i + PER_RECORD]

    for cycle in range(cycles):
        keys = [f"pod/train/job-{cycle}-{i}" for i in range(nodes)]
        for b in batches([PodCreated(_pod(k.rsplit("/", 1)[1]), run_for_ms=-1) for k in keys]):
            yield rec("scenario", b)
        for b in batches(cordon):
            yield rec("maintenance", b)
        waiting = [PodUnschedulable(k, "Unschedulable", f"0/{nodes} nodes are available: {nodes} node(s) had "
                                    "untolerated taint {example.com/maintenance: true}.", "taint") for k in keys]
        for r in range(rounds):
            for b in batches(waiting):
                yield rec("scheduler", b)
            for b in batches(uncordon if r % 2 == 0 else cordon):
                yield rec("maintenance", b)
        for b in batches(uncordon):
            yield rec("maintenance", b)
        for b in batches([PodBound(k, n) for k, n in zip(keys, names, strict=True)]):
            yield rec("scheduler", b)
        for b in batches([PodFinished(k) for k in keys]):
            yield rec("lifecycle", b)


class Clock:
    """Wall and CPU seconds since it was made (the machine may be shared: CPU time is the steadier figure)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def write(path: str, args: argparse.Namespace) -> tuple[int, int, tuple[float, float], int]:
    """Write the log; (records, events, (wall, cpu) seconds, snapshots)."""
    header = make_header(scenario="timetravel-bench", seed=args.seed, policy={"autoscaler": "none"}, mode="sim")
    n_events = 0
    clock = Clock()
    with LogWriter(path, header, compression=args.compression, snapshot_every=args.snapshot_every) as writer:
        for offset, record in enumerate(records(args.events, args.nodes, args.pods, args.seed), start=1):
            writer.write(offset, encode_record(record), record)
            n_events += len(record.events)
    assert writer.snapshot_error is None, writer.snapshot_error
    return writer.count, n_events, clock.stop(), writer.snapshots


def fold_all(path: str, no_gc: bool) -> tuple[ClusterState, tuple[float, float], tuple[float, float]]:
    """The whole file folded (read, decode, apply): the state, the (wall, cpu) seconds, and those of reading
    blocks and decoding records alone (a second pass, no apply). `no_gc`: the collector off for the fold."""
    if no_gc:
        gc.disable()
    clock = Clock()
    state = ClusterState()
    with open_log(path) as reader:
        for offset, payload in reader.entries_from(0):
            state.apply(offset, decode_record(payload, offset))
        assert reader.damage is None, reader.damage
    total = clock.stop()
    gc.enable()
    clock = Clock()
    with open_log(path) as reader:
        for offset, payload in reader.entries_from(0):
            decode_record(payload, offset)
    return state, total, clock.stop()


def travel(path: str, offset: int) -> tuple[tuple[float, float], int]:
    clock = Clock()
    with open_log(path) as reader:
        state = reader.state_at(offset)
    assert state.offset == offset and not state.anomalies, (offset, state.offset, state.anomalies[:3])
    return clock.stop(), len(state.pods)


def rate(n: int, seconds: tuple[float, float]) -> str:
    return f"{seconds[0]:.1f} s wall / {seconds[1]:.1f} s CPU ({n / seconds[0]:,.0f} / {n / seconds[1]:,.0f} events/s)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=10_000_000)
    p.add_argument("--quick", action="store_true", help="300,000 events, 3,000 pods")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=20_000)
    p.add_argument("--snapshot-every", type=int, default=DEFAULT_SNAPSHOT_EVERY)
    p.add_argument("--compression", choices=["zstd", "zlib", "none"], default=None)
    p.add_argument("--travels", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", help="log file to write (default: a temporary file, removed unless --keep)")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--no-gc", action="store_true", help="the garbage collector off for the whole-file fold")
    p.add_argument("--profile", action="store_true", help="cProfile the whole-file fold, top 25 by own time")
    args = p.parse_args()
    if args.quick:
        args.events, args.pods = 300_000, 3_000
    path = args.out or os.path.join(tempfile.mkdtemp(prefix="timetravel-"), "bench.dralog")
    n_records, n_events, write_s, snaps = write(path, args)
    size = os.path.getsize(path)
    print(f"log        {n_events:,} events in {n_records:,} records, {snaps} snapshots, "
          f"{size / 1e6:,.1f} MB ({size / n_events:.1f} B/event)")
    print(f"write      {rate(n_events, write_s)}, folding for the snapshots included")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
    state, fold_s, decode_s = fold_all(path, args.no_gc)
    if args.profile:
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    assert state.anomalies == [] and state.offset == n_records, state.anomalies[:5]
    label = "fold gc off" if args.no_gc else "fold      "
    print(f"{label} {rate(n_events, fold_s)}; read + decode alone {rate(n_events, decode_s)}; "
          f"{len(state.pods):,} pods at the end")
    rng = random.Random(args.seed)
    offsets = sorted(rng.randint(1, n_records) for _ in range(args.travels))
    walls, cpus, pods = [], [], 0
    for offset in offsets:
        (wall, cpu), pods = travel(path, offset)
        walls.append(wall)
        cpus.append(cpu)
    print(f"travel     {args.travels} random offsets: median {statistics.median(walls):.3f} s wall / "
          f"{statistics.median(cpus):.3f} s CPU, max {max(walls):.3f} s wall / {max(cpus):.3f} s CPU "
          f"(open + nearest snapshot + fold of the tail; {pods:,} pods at the last)")
    if not args.keep and not args.out:
        os.remove(path)
        os.rmdir(os.path.dirname(path))


if __name__ == "__main__":
    main()

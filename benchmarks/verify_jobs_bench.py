"""Verify in parallel (issue 24: on two cores >= 1.7x the one-process check), and the fold, on one real log.

    python benchmarks/verify_jobs_bench.py [--hours 2] [--nodes 1000] [--seed 1] [--jobs 2] [--rounds 2]
                                           [--snapshot-every 5000] [--log FILE]

Builds the day-bench run (benchmarks/day_bench.py) in the simulator and writes its `.dralog` (snapshots
every `--snapshot-every` records, the writer's default 5,000), or reads `--log FILE`; then, in the same
process and alternating so that the machine's load falls on both alike:
- the one-pass check (`verify` over the file as a stream, what `dralab replay --verify` runs);
- the parallel check (what `--jobs N` runs: verify_parallel's steps), its result asserted equal;
- the fold of the file (decode + apply of every record), events/s;
- a calibration: two units of pure-Python work in one process, then in two (what the machine's other
  load leaves of the second core: 2.0x on an idle 2-core machine).
Wall ratio: what a user sees now. CPU critical-path ratio: the one-pass CPU seconds over this process's
CPU plus the parts' critical path (the parts dealt to `jobs` workers as they free up), i.e. the wall
ratio on as many free cores as jobs (the figure a shared, loaded machine can still measure). CPU in
total shows what the split costs (each part's fold to its start, its fresh reactors, the survey, the
merge).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import tempfile
import time
from typing import Any

import day_bench

from dralab.core.log.events import decode_record
from dralab.core.scenario.load import parse_scenario
from dralab.core.state.cluster import ClusterState
from dralab.replay.logs.gc_policy import collector_paused
from dralab.replay.logs.logfile import LogStream, make_header, write_log
from dralab.replay.simulation.sim import Simulator
from dralab.replay.simulation.verify import verify
from dralab.replay.simulation.verify_parts import END, check_part, merge, plan, run_tasks, survey


def cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Any) -> tuple[Any, float, float]:
    wall, c = time.perf_counter(), cpu()
    out = fn()
    return out, time.perf_counter() - wall, cpu() - c


def fold(entries: list[tuple[int, bytes]], paused: bool) -> tuple[int, float]:
    """Events folded and the CPU seconds of decode + apply; `paused`: the collector paused, as the readers
    that fold a log run it (LogReader.state_at: time travel, a part's start), else running (as
    replay_bench.fold_rate and the one-pass verify's fold)."""
    start = time.process_time()
    events = 0
    state = ClusterState()
    with collector_paused() if paused else contextlib.nullcontext():
        for offset, payload in entries:
            record = decode_record(payload, offset)
            events += len(record.events)
            state.apply(offset, record)
    return events, time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=2)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--snapshot-every", type=int, default=5000)
    ap.add_argument("--log", metavar="FILE", help="verify this log instead of building the day-bench one")
    ap.add_argument("--keep", metavar="FILE", help="write the built log here (to verify it again with --log)")
    args = ap.parse_args()
    path = args.log
    if path is None:
        sim = Simulator(parse_scenario(day_bench.scenario(args.hours, args.nodes, args.seed), "day"), args.seed,
                        check_invariants=False)
        entries = sim.run().entries
        path = args.keep or os.path.join(tempfile.mkdtemp(prefix="verify-jobs-"), "day.dralog")
        write_log(path, make_header(scenario="day", seed=args.seed, policy={}, mode="sim"), entries,
                  snapshot_every=args.snapshot_every)
    found = survey(LogStream(path))
    cuts = plan(found.views, args.jobs)
    print(f"log {path}: {os.path.getsize(path):,} bytes, {len(found.views)} decisions, parts from {cuts}; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    rows: list[dict[str, float]] = []
    for _ in range(args.rounds):
        one, seq_w, seq_c = timed(lambda: verify(LogStream(path)))
        mine = resource.getrusage(resource.RUSAGE_SELF)
        (two, parts), par_w, par_c = timed(lambda: split_check(path, args.jobs))
        after = resource.getrusage(resource.RUSAGE_SELF)
        parent = (after.ru_utime + after.ru_stime) - (mine.ru_utime + mine.ru_stime)
        assert (one.ok, one.checked, one.sources) == (two.ok, two.checked, two.sources)
        assert (one.divergence is None) == (two.divergence is None)
        entries = list(LogStream(path))
        events, running_s = fold(entries, False)
        _, paused_s = fold(entries, True)
        one_p, two_p = calibrate()
        rows.append({"seq_w": seq_w, "seq_c": seq_c, "par_w": par_w, "par_c": par_c, "parent": parent,
                     "longest": max(p.cpu_s for p in parts),
                     "critical": critical_path([p.cpu_s for p in parts[::-1]], args.jobs), "fold": events / running_s,
                     "fold_paused": events / paused_s, "machine": one_p / two_p})
    print(f"decisions {one.checked}  by reactor {one.sources}")
    for r in rows:
        critical = r["parent"] + r["critical"]
        print(f"one pass {r['seq_w']:6.2f} s wall {r['seq_c']:6.2f} s cpu | "
              f"--jobs {args.jobs} {r['par_w']:6.2f} s wall "
              f"{r['par_c']:6.2f} s cpu (this process {r['parent']:.2f}, "
              f"parts' critical path {r['critical']:.2f}, longest part {r['longest']:.2f}) | "
              f"wall ratio {r['seq_w'] / r['par_w']:.2f}x, cpu critical path ratio {r['seq_c'] / critical:.2f}x | "
              f"machine: 2 processes of pure Python ran {r['machine']:.2f}x one | fold {r['fold']:,.0f} events/s "
              f"(collector running), {r['fold_paused']:,.0f} (paused)")
    print(f"fold: {events:,} events")


def critical_path(costs: list[float], jobs: int) -> float:
    """When the last of `jobs` workers, taking the parts in order as each frees up, is done."""
    free = [0.0] * jobs
    for cost in costs:
        i = free.index(min(free))
        free[i] += cost
    return max(free)


def split_check(path: str, jobs: int) -> tuple[Any, list[Any]]:
    """What verify_parallel does, its parts' results kept (each part's CPU seconds in its worker)."""
    found = survey(LogStream(path))
    cuts = plan(found.views, jobs)
    assert found.unsafe is None and found.first is not None and len(cuts) > 1
    bounds = list(zip(cuts, [*cuts[1:], END], strict=True))
    calls = [(path, lo, hi, found.lag, found.first[1]) for lo, hi in bounds]
    parts = run_tasks(check_part, calls[::-1], jobs, None)[::-1]
    return merge(path, parts, None), parts


def _burn(n: int) -> float:
    start = time.perf_counter()
    x = 0
    for i in range(n):
        x += i * i
    return time.perf_counter() - start


def calibrate(n: int = 5_000_000) -> tuple[float, float]:
    """Wall seconds of 2 units of pure-Python work in one process, then in two: how much of a second core
    the machine's other load leaves (2.0 on an idle 2-core machine)."""
    start = time.perf_counter()
    _burn(n)
    _burn(n)
    one = time.perf_counter() - start
    start = time.perf_counter()
    run_tasks(_burn, [(n,), (n,)], 2, None)
    return one, time.perf_counter() - start


if __name__ == "__main__":
    main()

"""Verify in parallel (issue 24: on two cores >= 1.7x the one-process check), and the fold, on one real log.

    python benchmarks/verify_jobs_bench.py [--hours 2] [--nodes 1000] [--seed 1] [--jobs 2] [--rounds 2]
                                           [--snapshot-every 5000] [--log FILE]

Builds the day-bench run (benchmarks/day_bench.py) in the simulator and writes its `.dralog` (snapshots
every `--snapshot-every` records, the writer's default 5,000), or reads `--log FILE`; then, in the same
process and alternating so that the machine's load falls on both alike:
- the one-pass check (`verify` over the file as a stream, what `dralab replay --verify` runs);
- the parallel check (`verify_parallel(path, jobs)`, what `--jobs N` runs), its result asserted equal;
- the fold of the file (decode + apply of every record), events/s.
Wall seconds are the figure that parallelism improves; CPU seconds (this process and its children) show
what the split costs in total (a snapshot decoded per part, the survey round, the merge).
"""

from __future__ import annotations

import argparse
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
from dralab.replay.simulation.verify_parts import plan, survey, verify_parallel


def cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Any) -> tuple[Any, float, float]:
    wall, c = time.perf_counter(), cpu()
    out = fn()
    return out, time.perf_counter() - wall, cpu() - c


def fold(path: str) -> tuple[int, float]:
    """Events folded and the wall seconds of decode + apply (the file read first, as replay_bench does)."""
    entries = list(LogStream(path))
    start = time.perf_counter()
    events = 0
    state = ClusterState()
    with collector_paused():
        for offset, payload in entries:
            record = decode_record(payload, offset)
            events += len(record.events)
            state.apply(offset, record)
    return events, time.perf_counter() - start


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
    seq_w, seq_c, par_w, par_c, fold_rates = [], [], [], [], []
    for _ in range(args.rounds):
        one, w, c = timed(lambda: verify(LogStream(path)))
        seq_w.append(w)
        seq_c.append(c)
        (two, why), w, c = timed(lambda: verify_parallel(path, args.jobs))
        assert why is None, why
        par_w.append(w)
        par_c.append(c)
        assert one.ok == two.ok and one.checked == two.checked and one.sources == two.sources
        events, s = fold(path)
        fold_rates.append(events / s)
    print(f"decisions {one.checked}  by reactor {one.sources}")
    print(f"one pass   wall {min(seq_w):7.2f} s  cpu {min(seq_c):7.2f} s  {one.checked / min(seq_w):8,.0f} decisions/s")
    print(f"--jobs {args.jobs}  wall {min(par_w):7.2f} s  cpu {min(par_c):7.2f} s  {one.checked / min(par_w):8,.0f} "
          f"decisions/s")
    ratios = [a / b for a, b in zip(seq_w, par_w, strict=True)]
    print(f"speed-up (wall, per round): {', '.join(f'{r:.2f}x' for r in ratios)}; best-of ratio "
          f"{min(seq_w) / min(par_w):.2f}x")
    print(f"fold: {events:,} events, best {max(fold_rates):,.0f} events/s")


if __name__ == "__main__":
    main()

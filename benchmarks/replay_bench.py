"""Folding and verifying a recorded log (issue 7: fold >= 200,000 events/s, verify >= 50,000 decisions/s).

    python benchmarks/replay_bench.py [--hours 2] [--nodes 1000] [--seed 1] [--repeat 3]

Builds the day-bench run (benchmarks/day_bench.py: a 1,000-node cluster with a day's arrivals, every
reactor) in the simulator, then measures on its log, in the same process:
- fold: decode + apply of every record (`decode_record`, `ClusterState.apply`), best of `--repeat`;
  events/s and records/s;
- verify: `replay.verify.verify` (every recorded decision recomputed from its view and compared byte
  for byte), decisions/s overall and per reactor (each reactor's recomputations timed apart), and the
  ratio of verify time to the simulation's own time (verify recomputes only the decisions that were
  recorded; the simulator also ran every reactor call that decided nothing).
A second log, a 2,000-node scale-up (scaleup_bench's scenario: the cloud's, lifecycle's decisions
dominate), shows the rate for cheap decisions.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any

import day_bench
import scaleup_bench

from dralab.core.log.events import decode_record
from dralab.core.scenario.load import parse_scenario
from dralab.core.state.cluster import ClusterState
from dralab.replay.logs.gc_policy import collector_paused
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import Simulator
from dralab.replay.simulation.verify import verify


def fold_rate(entries: list[tuple[int, bytes]], repeat: int) -> dict[str, float]:
    """Best of `repeat` folds with the collector running (the one-pass verify's fold), and with it paused
    as the readers that fold a log run it (LogReader.state_at: time travel, a parallel verify part's
    start; replay/logs/gc_policy.py): on real logs the collector's passes over the growing state are
    most of the gap to a synthetic log's rate (issue 24)."""
    best = paused = float("inf")
    events = 0
    for _ in range(repeat):
        for pause in (False, True):
            start = time.perf_counter()
            state = ClusterState()
            events = 0
            with collector_paused() if pause else contextlib.nullcontext():
                for offset, payload in entries:
                    record = decode_record(payload, offset)
                    events += len(record.events)
                    state.apply(offset, record)
            took = time.perf_counter() - start
            if pause:
                paused = min(paused, took)
            else:
                best = min(best, took)
    return {"records": len(entries), "events": events, "fold_s": round(best, 3),
            "events_per_s": round(events / best), "records_per_s": round(len(entries) / best),
            "events_per_s_paused": round(events / paused)}


def verify_rate(entries: list[tuple[int, bytes]], sim_s: float) -> dict[str, Any]:
    timings: dict[str, float] = {}
    start = time.perf_counter()
    result = verify(LogFile("bench", {}, entries), timings)
    wall = time.perf_counter() - start
    assert result.ok, result.divergence and result.divergence.render()
    per = {name: {"decisions": n, "s": round(timings.get(name, 0.0), 3),
                  "decisions_per_s": round(n / timings[name]) if timings.get(name) else None}
           for name, n in sorted(result.sources.items())}
    return {"decisions": result.checked, "verify_s": round(wall, 3),
            "decisions_per_s": round(result.checked / wall), "verify_vs_sim": round(wall / sim_s, 2),
            "by_reactor": per}


def measure(label: str, spec: dict[str, Any], seed: int, repeat: int) -> dict[str, Any]:
    sim = Simulator(parse_scenario(spec, label), seed, check_invariants=False)
    start = time.perf_counter()
    result = sim.run()
    sim_s = time.perf_counter() - start
    return {"log": label, "sim_s": round(sim_s, 2), **fold_rate(result.entries, repeat),
            **verify_rate(result.entries, sim_s)}


def show(r: dict[str, Any]) -> None:
    print(f"{r['log']}: {r['records']} records, {r['events']} events (simulated in {r['sim_s']} s)")
    print(f"  fold    {r['fold_s']} s: {r['events_per_s']:,} events/s, {r['records_per_s']:,} records/s; "
          f"collector paused {r['events_per_s_paused']:,} events/s")
    print(f"  verify  {r['verify_s']} s: {r['decisions']} decisions, {r['decisions_per_s']:,} decisions/s "
          f"({r['verify_vs_sim']}x the simulation's time)")
    for name, p in r["by_reactor"].items():
        rate = f"{p['decisions_per_s']:,}/s" if p["decisions_per_s"] else "-"
        print(f"    {name:<12} {p['decisions']:>6} decisions in {p['s']:>7} s  {rate}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=2)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scaleup-pods", type=int, default=2000)
    args = ap.parse_args()
    show(measure(f"day-bench {args.hours:g} h, {args.nodes} nodes",
                 day_bench.scenario(args.hours, args.nodes, args.seed), args.seed, args.repeat))
    spec = scaleup_bench.scenario(args.scaleup_pods, "count")
    spec["spec"]["duration"] = "5m"  # long enough for the nodes to register and turn Ready
    show(measure(f"scale-up of {args.scaleup_pods} nodes", spec, args.seed, args.repeat))


if __name__ == "__main__":
    main()

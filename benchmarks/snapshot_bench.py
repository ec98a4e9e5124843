"""State snapshots vs refolding the log (issue 6): what a restarted actor saves by starting from a snapshot.

    python benchmarks/snapshot_bench.py [--hours 1] [--nodes 1000] [--seed 1] [--repeat 3]

Simulates day_bench's cluster (its scenario builder, `--hours` of the day from 06:00, `--nodes` nodes,
invariants off), then times, on the state at the end of the run:
- refolding the whole log as a restarted actor does today (decode every record, apply it);
- `encode_state` and `decode_state` (core/state/codec.py), and the snapshot's size;
- a restart from a snapshot taken 90% of the way: decode it, then fold the last 10% of the log.
Each time is the best of `--repeat` runs. The decoded state is checked to encode to the same bytes.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TypeVar

from day_bench import scenario

from dralab.core.log.events import decode_record
from dralab.core.scenario.load import parse_scenario
from dralab.core.state.cluster import ClusterState
from dralab.core.state.codec import decode_state, encode_state
from dralab.replay.logs.gc_policy import collector_paused
from dralab.replay.simulation.sim import Simulator

T = TypeVar("T")


def best(repeat: int, fn: Callable[[], T]) -> tuple[T, float]:
    """The result of `fn` and its best wall time over `repeat` runs."""
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    assert out is not None
    return out, min(times)


def fold(entries: list[tuple[int, bytes]], state: ClusterState | None = None) -> ClusterState:
    """What ReactorLoop.rebuild does: decode each entry and apply it."""
    state = state if state is not None else ClusterState()
    for offset, payload in entries:
        state.apply(offset, decode_record(payload, offset))
    return state


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=1)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    start = time.perf_counter()
    sim = Simulator(parse_scenario(scenario(args.hours, args.nodes, args.seed), "day-bench"), args.seed,
                    check_invariants=False)
    entries = sim.run().entries
    sim_s = time.perf_counter() - start
    log_bytes = sum(len(p) for _, p in entries)

    state, fold_s = best(args.repeat, lambda: fold(entries))
    data, enc_s = best(args.repeat, lambda: encode_state(state))
    def decoded(snapshot: bytes) -> ClusterState:
        with collector_paused():  # as its callers decode (replay/logs/gc_policy.py, actors/gc_tuning.py)
            return decode_state(snapshot)

    restored, dec_s = best(args.repeat, lambda: decoded(data))
    assert encode_state(restored) == data, "the decoded state must encode to the same bytes"

    cut = len(entries) * 9 // 10
    snap = encode_state(fold(entries[:cut]))
    resumed, resume_s = best(args.repeat, lambda: fold(entries[cut:], decoded(snap)))
    assert encode_state(resumed) == data, "snapshot + tail must be the whole fold"

    print(f"{args.hours:g} h, {args.nodes} nodes (seed {args.seed}): simulated in {sim_s:.1f} s; "
          f"{len(entries)} records, log {log_bytes / 1e6:.1f} MB; at the end {len(state.pods)} pods, "
          f"{len(state.nodes)} nodes")
    print(f"refold the whole log:        {fold_s * 1000:8.0f} ms")
    print(f"encode_state:                {enc_s * 1000:8.0f} ms   snapshot {len(data) / 1e6:.1f} MB "
          f"({len(data) / log_bytes:.0%} of the log)")
    print(f"decode_state:                {dec_s * 1000:8.0f} ms   -> {fold_s / dec_s:.1f}x faster than the refold")
    print(f"decode at 90% + fold tail:   {resume_s * 1000:8.0f} ms   -> {fold_s / resume_s:.1f}x faster than the "
          f"refold ({len(entries) - cut} records of tail)")


if __name__ == "__main__":
    main()

"""Verify in parallel: the log split at its snapshots, each part checked in its own process (or Ray task).

`replay.simulation.verify` checks a decision when its fold reaches the decision's view, and checks the
objects it wrote when the fold reaches the decision itself. A `.dralog` file carries a snapshot of the
fold every `snapshot_every` records (5,000 unless the writer was told otherwise; `dralab run
--snapshot-every` sets the live recorder's), so the log splits at snapshot offsets into parts, each
owning the decisions whose view lies in `[lo, hi)`: a worker decodes the snapshot at `lo`, folds on from
there, recomputes its own decisions and follows each to its offset (at most `lag` records past `hi`).

Two rounds, as the sequential check makes two passes:
1. survey: every part's records decoded (a bad one is the LogDecodeError of the lowest offset, raised
   before any decision is recomputed), giving the first record, the largest distance between a decision
   and its view, and anything that makes the split unsafe;
2. check: every part recomputes its decisions and says, for each check it passed and for its first
   divergence, where the sequential fold would have been (`state.offset`, then check-view before
   write-check, then the decision's place in its view's list).

The merge takes the first divergence in that order and counts the checks before it, so the result is
the sequential one (tests/test_verify_parts.py compares both on real logs, with and without a divergence).
Logs the split cannot serve exactly - no snapshot, a damaged block, offsets that do not grow, a decision
whose view is not before it - are checked sequentially (`plan` says why).
"""

from __future__ import annotations

import os
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dralab.core.engine.contract import Reactor, decide, expectations
from dralab.core.log.events import LogDecodeError, RunStarted, decode_record, encode_record, record_to_builtins
from dralab.core.run.config import build_reactors
from dralab.core.state.cluster import ClusterState
from dralab.replay.logs.gc_policy import collector_paused
from dralab.replay.logs.logfile_reader import open_log

from .verify import Divergence, VerifyResult, verify

END = 1 << 62  # the position past the last record: "view offset beyond the end of the log"
Key = tuple[int, int, int]  # (fold position, 0 check-view | 1 write-check, index in the view's list)
T = TypeVar("T")
R = TypeVar("R")


@dataclass
class Survey:
    """Round 1 of one part: records (lo, hi] decoded."""
    first: tuple[int, bytes] | None = None
    lag: int = 0
    unsafe: str | None = None  # why this log must be checked sequentially
    error: tuple[int, str] | None = None  # the first record that does not decode (offset, detail)


@dataclass
class PartResult:
    """Round 2 of one part: where each passed check happened, and the part's first divergence."""
    passed: list[tuple[Key, str]] = field(default_factory=list)
    divergence: tuple[Key, Divergence] | None = None
    leftover: tuple[int, Divergence] | None = None  # the lowest view the fold never reached
    timings: dict[str, float] = field(default_factory=dict)


def _records(path: str, lo: int, hi: int) -> Any:
    """(offset, payload) of the records after `lo` up to `hi` included; the reader's damage as a flag."""
    with open_log(path) as reader:
        for pair in reader.entries_from(lo + 1):
            if pair[0] > hi:
                break
            yield pair
        if reader.damage:
            raise _Damaged(reader.damage)


class _Damaged(Exception):
    pass


def survey_part(path: str, lo: int, hi: int) -> Survey:
    out = Survey()
    previous = lo
    try:
        for offset, payload in _records(path, lo, hi):
            try:
                record = decode_record(payload, offset)
            except LogDecodeError as exc:
                out.error = (exc.offset, exc.detail)
                return out
            if out.first is None:
                out.first = (offset, payload)
            if offset <= previous:
                out.unsafe = out.unsafe or f"offset {offset} does not grow"
            previous = offset
            if record.source != "scenario":
                if record.view >= offset:
                    out.unsafe = out.unsafe or f"offset {offset}: view {record.view} is not before the decision"
                out.lag = max(out.lag, offset - record.view)
    except _Damaged as exc:
        out.unsafe = out.unsafe or f"damaged: {exc}"
    return out


def check_part(path: str, lo: int, hi: int, lag: int, first: bytes, timed: bool = False) -> PartResult:
    """Recompute the decisions whose view is in [lo, hi), as `verify` would, from the snapshot at `lo`."""
    import time

    run = decode_record(first, 0).events[0]
    assert isinstance(run, RunStarted)
    reactors: dict[str, Reactor] = {r.name: r for r in build_reactors(run.config)}
    out = PartResult()
    with open_log(path) as reader:
        state = reader.state_at(lo) if lo else ClusterState()
    source = _records(path, lo, hi - 1 + lag if hi < END else END)
    by_view: dict[int, list[tuple[int, Any, bytes]]] = defaultdict(list)
    ahead: deque[tuple[int, Any]] = deque()
    expected: dict[int, dict[str, int]] = {}
    last_read = lo

    def read_ahead(upto: int) -> None:
        nonlocal last_read
        while not ahead or last_read < upto:
            pair = next(source, None)
            if pair is None:
                return
            offset, payload = pair
            record = decode_record(payload, offset)
            last_read = offset
            ahead.append((offset, record))
            if record.source != "scenario" and lo <= record.view < hi:
                by_view[record.view].append((offset, record, payload))

    def check_view() -> tuple[Key, Divergence] | None:
        position = state.offset
        for i, (offset, record, payload) in enumerate(by_view.pop(position, ())):
            key = (position, 0, i)
            reactor = reactors.get(record.source)
            if reactor is None:
                why = f"no reactor named {record.source!r}"
                return key, Divergence(offset, record.source, record.view, record.t, why)
            started = time.perf_counter() if timed else 0.0
            with collector_paused():
                recomputed, _ = decide(reactor, state, record.t, run.seed)
            if timed:
                out.timings[record.source] = out.timings.get(record.source, 0.0) + time.perf_counter() - started
            if recomputed is None or encode_record(recomputed) != payload:
                why = "recomputed nothing" if recomputed is None else "recomputed a different decision"
                return key, Divergence(offset, record.source, record.view, record.t, why, record_to_builtins(record),
                                       record_to_builtins(recomputed) if recomputed is not None else None)
            expected[offset] = expectations(record, state)
            out.passed.append((key, record.source))
        return None

    with collector_paused():  # the fold's objects live on (replay/logs/gc_policy.py)
        while True:
            read_ahead(state.offset + lag)
            if not ahead or (state.offset >= hi and not expected):
                break
            offset, record = ahead.popleft()
            if lo <= state.offset < hi and (div := check_view()) is not None:
                out.divergence = div
                return out
            if offset in expected:
                stale = {k: v for k, v in expected.pop(offset).items() if state.version(k) != v}
                if stale:
                    out.divergence = ((state.offset, 1, 0), Divergence(
                        offset, record.source, record.view, record.t,
                        f"objects changed between view and append: {sorted(stale)}"))
                    return out
            state.apply(offset, record)
    if not ahead and lo <= state.offset < hi and (div := check_view()) is not None:
        out.divergence = div
    elif by_view:
        view = min(by_view)
        offset, record, _ = by_view[view][0]
        out.leftover = (view, Divergence(offset, record.source, view, record.t,
                                         "view offset beyond the end of the log"))
    return out


# ------------------------------------------------------------------ where the parts run

def run_tasks(fn: Callable[..., R], calls: Sequence[tuple[Any, ...]], jobs: int, ray: str | None) -> list[R]:
    """`fn(*call)` for every call, results in call order: in `jobs` local processes, or as Ray tasks on
    the cluster this process is connected to (the CLI connects it: actors/live_runtime.ray_runtime), else
    on the one at address `ray`; its workers must read the log at the same path."""
    if ray is not None:
        import ray as ray_mod

        if not ray_mod.is_initialized():
            ray_mod.init(address=ray, log_to_driver=False)
        task = ray_mod.remote(num_cpus=1)(fn)
        return list(ray_mod.get([task.remote(*call) for call in calls]))
    if jobs <= 1 or len(calls) <= 1:
        return [fn(*call) for call in calls]
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(min(jobs, len(calls))) as pool:
        return pool.starmap(fn, calls, chunksize=1)


def plan(path: str, jobs: int) -> tuple[list[int], str | None]:
    """The part boundaries (snapshot offsets, starting with 0), about two parts per job so a slow part
    does not hold the others back; or no split and why."""
    with open_log(path) as reader:
        if reader.damage:
            return [], f"damaged: {reader.damage}"
        snaps = [b.first for b in reader.snapshot_blocks]
        last = reader.last_offset
    if not snaps:
        return [], "the log has no snapshots (written with snapshot_every 0, or format 1)"
    want = max(1, min(2 * jobs, len(snaps) + 1))
    cuts = [0]
    for k in range(1, want):  # the snapshot nearest each k/want of the records
        target = last * k // want
        best = min(snaps, key=lambda s: abs(s - target))
        if best > cuts[-1]:
            cuts.append(best)
    return cuts, None


def verify_parallel(path: str, jobs: int = os.cpu_count() or 1, ray: str | None = None,
                    timings: dict[str, float] | None = None, stream: Any = None) -> tuple[VerifyResult, str | None]:
    """The sequential `verify` of the file at `path`, computed in parts; and why it ran sequentially
    (None: it was split), then over `stream` (a LogStream of the file, made if not given, whose `damage`
    and `count` the pass sets). Raises LogDecodeError for the first record that does not decode."""
    cuts, why = plan(path, jobs)
    if why is None:
        bounds = list(zip(cuts, [*cuts[1:], END], strict=True))
        surveys = run_tasks(survey_part, [(path, lo, hi) for lo, hi in bounds], jobs, ray)
        errors = [s.error for s in surveys if s.error is not None]
        if errors:
            raise LogDecodeError(*min(errors))
        why = next((s.unsafe for s in surveys if s.unsafe), None)
    if why is not None:
        from dralab.replay.logs.logfile import LogStream

        return verify(stream if stream is not None else LogStream(path), timings), why
    first = surveys[0].first
    if first is None or not decode_record(first[1], first[0]).events \
            or not isinstance(decode_record(first[1], first[0]).events[0], RunStarted):
        return VerifyResult(0, ClusterState(), Divergence(first[0] if first else 0, "", -1, 0,
                                                          "the log does not start with RunStarted")), None
    lag = max(s.lag for s in surveys)
    parts = run_tasks(check_part, [(path, lo, hi, lag, first[1], timings is not None) for lo, hi in bounds], jobs, ray)
    return merge(path, parts, timings), None


def merge(path: str, parts: list[PartResult], timings: dict[str, float] | None) -> VerifyResult:
    """The sequential result from the parts': the first divergence in fold order, the checks before it."""
    divs = [p.divergence for p in parts if p.divergence is not None]
    first_div = min(divs, key=lambda d: d[0]) if divs else None
    leftovers = [p.leftover for p in parts if p.leftover is not None]
    stop: Key = first_div[0] if first_div else (END, 0, 0)
    result = VerifyResult(0, ClusterState())
    # in fold order, so `sources` gains its reactors in the order the sequential check first met them
    for _, name in sorted(pair for part in parts for pair in part.passed if pair[0] < stop):
        result.checked += 1
        result.sources[name] = result.sources.get(name, 0) + 1
    if timings is not None:
        for part in parts:
            for name, s in part.timings.items():
                timings[name] = timings.get(name, 0.0) + s
    if first_div is not None:
        result.divergence = first_div[1]
    elif leftovers:
        result.divergence = min(leftovers, key=lambda lv: lv[0])[1]
    with open_log(path) as reader:
        result.state = reader.state_at(first_div[0][0] if first_div else reader.last_offset)
        result.records = reader.count
    return result


"""Verify in parallel: the log split into parts, each checked in its own process (or Ray task).

`replay.simulation.verify` checks a decision when its fold reaches the decision's view, and checks the
objects it wrote when the fold reaches the decision itself. So the log splits at fold positions into
parts, each owning the decisions whose view lies in `[lo, hi)`: a worker takes the state at `lo` (the
nearest snapshot at or before it, then the records after it: `LogReader.state_at`), folds on, recomputes
its own decisions and follows each to its offset (at most `lag` records past `hi`). A `.dralog` file
carries a snapshot every `snapshot_every` records (the writer's default 5,000), which bounds the fold a
worker repeats; a file without snapshots still splits, each worker folding from the start (folding is
~100x cheaper per record than recomputing a decision, benchmarks/verify_jobs_bench.py).

The survey is the sequential check's first pass, in this process: every record decoded (LogDecodeError
for the first bad one, before any decision is recomputed), the largest distance between a decision and
its view, every decision's view (to share decisions out evenly), and anything that makes the split
unsafe. Each part then says, for each check it passed and for its first divergence, where the sequential
fold would have been: `state.offset`, then check-at-view before write-check-at-offset, then the
decision's place in its view's list. The merge takes the first divergence in that order and counts the
checks before it, so the result is the sequential one (tests/test_verify_parts.py compares both on real
logs, with divergences in the first, a middle and the last part). Logs the split cannot serve exactly -
a damaged block, offsets that do not grow, a decision whose view is not before it, no RunStarted first -
are checked in one pass (`verify_parallel` says why).
"""

from __future__ import annotations

import os
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dralab.core.engine.contract import Reactor, decide, expectations
from dralab.core.log.events import RunStarted, decode_record, encode_record, record_to_builtins
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
    """The first pass over the whole log (as `verify`'s): what the split needs to know."""
    first: tuple[int, bytes] | None = None
    lag: int = 0
    unsafe: str | None = None  # why this log must be checked in one pass
    views: list[int] = field(default_factory=list)  # every decision's view, in log order


@dataclass
class PartResult:
    """Round 2 of one part: where each passed check happened, and the part's first divergence."""
    passed: list[tuple[Key, str]] = field(default_factory=list)
    divergence: tuple[Key, Divergence] | None = None
    leftover: tuple[int, Divergence] | None = None  # the lowest view the fold never reached
    timings: dict[str, float] = field(default_factory=dict)
    cpu_s: float = 0.0  # the part's CPU seconds in its worker (benchmarks/verify_jobs_bench.py: the critical path)


def _records(path: str, lo: int, hi: int) -> Iterator[tuple[int, bytes]]:
    """(offset, payload) of the records after `lo` up to `hi` included."""
    with open_log(path) as reader:
        for pair in reader.entries_from(lo + 1):
            if pair[0] > hi:
                break
            yield pair


def survey(entries: Iterable[tuple[int, bytes]]) -> Survey:
    """Every record decoded (LogDecodeError for the first bad one, before any decision is recomputed)."""
    out = Survey()
    previous = 0
    for offset, payload in entries:
        record = decode_record(payload, offset)
        if out.first is None:
            out.first = (offset, payload)
        if offset <= previous:
            out.unsafe = out.unsafe or f"offset {offset} does not grow"
        previous = offset
        if record.source != "scenario":
            if record.view >= offset:
                out.unsafe = out.unsafe or f"offset {offset}: view {record.view} is not before the decision"
            out.lag = max(out.lag, offset - record.view)
            out.views.append(record.view)
    return out


def check_part(path: str, lo: int, hi: int, lag: int, first: bytes, timed: bool = False) -> PartResult:
    """Recompute the decisions whose view is in [lo, hi), as `verify` would, from the snapshot at `lo`."""
    import time

    cpu = time.process_time()
    out = _check_part(path, lo, hi, lag, first, timed)
    out.cpu_s = time.process_time() - cpu
    return out


def _check_part(path: str, lo: int, hi: int, lag: int, first: bytes, timed: bool) -> PartResult:
    import time

    run = decode_record(first, 0).events[0]
    assert isinstance(run, RunStarted)
    reactors: dict[str, Reactor] = {r.name: r for r in build_reactors(run.config)}
    out = PartResult()
    with open_log(path) as reader:
        state = reader.state_at(lo) if lo else ClusterState()
    source = _records(path, lo, hi - 1 + lag if hi < END else END)  # a decision lies at most `lag` past its view
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

    while True:  # as `verify`: the collector paused in decisions only (a whole pass paused would keep their
        # garbage cycles, ~140 objects a decision on the day-bench log, until the end)
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


def plan(views: list[int], jobs: int) -> list[int]:
    """Where the parts start: fold positions that share the decisions out evenly, two parts per job. A
    decision's cost is its recomputation, and it is not even: on the 12-hour day-bench log the last half of
    the decisions cost 2.2x the first (the cluster is larger), so one part per job leaves a worker idle;
    each part also folds from the nearest snapshot before it (at most `snapshot_every` records) and builds
    its reactors afresh, which six parts on two jobs made ~30% more CPU on the 4-hour log
    (benchmarks/verify_jobs_bench.py). `run_tasks` hands the later parts out first."""
    ordered = sorted(views)
    want = min(2 * jobs if jobs > 1 else 1, len(ordered))
    cuts = [0]
    for k in range(1, want):
        cut = ordered[len(ordered) * k // want]
        if cut > cuts[-1]:
            cuts.append(cut)
    return cuts


def verify_parallel(path: str, jobs: int = os.cpu_count() or 1, ray: str | None = None,
                    timings: dict[str, float] | None = None, stream: Any = None) -> tuple[VerifyResult, str | None]:
    """The sequential `verify` of the file at `path`, computed in parts; and why it ran in one pass
    instead (None: it was split). `stream`: a LogStream of the file (made if not given); the survey's
    pass over it sets its `damage` and `count`. Raises LogDecodeError for the first record that does
    not decode, before any decision is recomputed."""
    if stream is None:
        from dralab.replay.logs.logfile import LogStream

        stream = LogStream(path)
    found = survey(stream)
    why = found.unsafe or (f"damaged: {stream.damage}" if stream.damage else None)
    first = found.first
    if why is None and (first is None or not isinstance(next(iter(decode_record(first[1], first[0]).events), None),
                                                        RunStarted)):
        why = "the log does not start with RunStarted"
    cuts = plan(found.views, jobs) if why is None else []
    if why is None and (jobs <= 1 and ray is None or len(cuts) < 2):
        why = "one part"
    if why is not None:
        return verify(stream, timings), why
    assert first is not None
    bounds = list(zip(cuts, [*cuts[1:], END], strict=True))
    calls = [(path, lo, hi, found.lag, first[1], timings is not None) for lo, hi in bounds]
    # the later parts first: the state grows along a log, and so does a decision's cost
    parts = run_tasks(check_part, calls[::-1], jobs, ray)[::-1]
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


"""Verify: recompute every recorded decision from the view it was made on, and compare.

A decision record says which reactor made it (`source`), on which view (`view`, a log offset) and at
what time (`t`). Verify folds the log once; when the fold reaches a view offset it rebuilds each
decision made on that view with the reactors the run was configured with (from `RunStarted`) and the
same seeded random source, and compares the encoded records byte for byte. It also checks the
optimistic-concurrency promise: every object a decision wrote was unchanged between its view and
its append. This is the regression test for reactor changes, as Temporal's replayer is for
workflow code. It reads the log as a stream (twice: see `verify`), so its memory is bounded by how far
decisions lag behind their views, not by the log's length.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from dralab.core.engine.contract import Reactor, decide, expectations
from dralab.core.log.events import Record, RunStarted, decode_record, encode_record, record_to_builtins
from dralab.core.run.config import build_reactors
from dralab.core.state.cluster import ClusterState
from dralab.replay.logs.gc_policy import collector_paused


@dataclass
class Divergence:
    offset: int
    source: str
    view: int
    t: int
    reason: str
    recorded: dict[str, Any] | None = None
    recomputed: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    def render(self) -> str:
        lines = [
            f"divergence at offset {self.offset}: decision of {self.source} on view {self.view} at t={self.t} ms",
            f"  {self.reason}",
        ]
        rec = (self.recorded or {}).get("events", [])
        new = (self.recomputed or {}).get("events", [])
        for i in range(max(len(rec), len(new))):
            a = rec[i] if i < len(rec) else None
            b = new[i] if i < len(new) else None
            if a != b:
                lines.append(f"  first differing event #{i}:")
                lines.append(f"    recorded:   {a}")
                lines.append(f"    recomputed: {b}")
                break
        return "\n".join(lines)


@dataclass
class VerifyResult:
    checked: int
    state: ClusterState
    divergence: Divergence | None = None
    sources: dict[str, int] = field(default_factory=dict)
    records: int | None = None  # set by the parallel check (verify_parts): the records of the file's blocks

    @property
    def ok(self) -> bool:
        return self.divergence is None


class Entries(Protocol):
    """What verify reads: a log whose `entries` can be iterated more than once (a LogFile's list, a
    LogStream that reads the file anew at each pass)."""

    @property
    def entries(self) -> Iterable[tuple[int, bytes]]: ...


def _survey(entries: Iterable[tuple[int, bytes]]) -> tuple[tuple[int, Record] | None, int | None]:
    """The first pass: every record decoded (LogDecodeError for a bad one, before any decision is
    recomputed), giving the first record and how far behind its own offset a decision's view lies at most
    (None when offsets do not grow: then the second pass must read the whole log ahead)."""
    first: tuple[int, Record] | None = None
    lag: int | None = 0
    previous = None
    for offset, payload in entries:
        record = decode_record(payload, offset)
        if first is None:
            first = (offset, record)
        if previous is not None and offset <= previous:
            lag = None
        previous = offset
        if lag is not None and record.source != "scenario":
            lag = max(lag, offset - record.view)
    return first, lag


def verify(log: Entries, timings: dict[str, float] | None = None) -> VerifyResult:
    """Raises LogDecodeError (naming the offset) for an entry that does not decode. `timings`, if
    given, gains the wall seconds spent recomputing each reactor's decisions (benchmarks/replay_bench.py).

    Two passes over `log.entries`, so a log read as a stream is never held whole: the first decodes
    every record and measures the largest distance between a decision and its view; the second folds
    the log keeping only that many records ahead of the fold (a decision is checked when the fold
    reaches its view, which comes before it in the log)."""
    first, lag = _survey(log.entries)
    state = ClusterState()
    if first is None or not first[1].events or not isinstance(first[1].events[0], RunStarted):
        return VerifyResult(0, state, Divergence(first[0] if first else 0, "", -1, 0,
                                                 "the log does not start with RunStarted"))
    run = first[1].events[0]
    assert isinstance(run, RunStarted)
    reactors: dict[str, Reactor] = {r.name: r for r in build_reactors(run.config)}
    by_view: dict[int, list[tuple[int, Record, bytes]]] = defaultdict(list)
    ahead: deque[tuple[int, Record]] = deque()  # read, not folded yet
    source = iter(log.entries)
    last_read: list[int | None] = [None]

    def read_ahead(upto: int | None) -> None:
        """Read records until every one at or before offset `upto` is read (None: the whole log)."""
        while not ahead or lag is None or upto is None or (last_read[0] is not None and last_read[0] < upto):
            pair = next(source, None)
            if pair is None:
                return
            offset, payload = pair
            record = decode_record(payload, offset)
            last_read[0] = offset
            ahead.append((offset, record))
            if record.source != "scenario":
                by_view[record.view].append((offset, record, payload))

    expected: dict[int, dict[str, int]] = {}
    result = VerifyResult(0, state)

    def check_view() -> Divergence | None:
        for offset, record, payload in by_view.pop(state.offset, ()):
            reactor = reactors.get(record.source)
            if reactor is None:
                return Divergence(offset, record.source, record.view, record.t, f"no reactor named {record.source!r}")
            if record.view >= offset:
                return Divergence(offset, record.source, record.view, record.t, "view is not before the decision")
            started = time.perf_counter() if timings is not None else 0.0  # no clock unless asked (test_purity)
            with collector_paused():  # as the run decided it (replay/logs/gc_policy.py)
                recomputed, _ = decide(reactor, state, record.t, run.seed)
            if timings is not None:
                timings[record.source] = timings.get(record.source, 0.0) + time.perf_counter() - started
            if recomputed is None or encode_record(recomputed) != payload:
                why = "recomputed nothing" if recomputed is None else "recomputed a different decision"
                return Divergence(offset, record.source, record.view, record.t, why, record_to_builtins(record),
                                  record_to_builtins(recomputed) if recomputed is not None else None)
            expected[offset] = expectations(record, state)
            result.checked += 1
            result.sources[record.source] = result.sources.get(record.source, 0) + 1
        return None

    while True:
        read_ahead(None if lag is None else state.offset + lag)
        if not ahead:
            break
        offset, record = ahead.popleft()
        if (div := check_view()) is not None:
            result.divergence = div
            return result
        stale = {k: v for k, v in expected.pop(offset, {}).items() if state.version(k) != v}
        if stale:
            result.divergence = Divergence(offset, record.source, record.view, record.t,
                                           f"objects changed between view and append: {sorted(stale)}")
            return result
        state.apply(offset, record)
    if (div := check_view()) is not None:
        result.divergence = div
    elif by_view:
        view = min(by_view)
        offset, record, _ = by_view[view][0]
        result.divergence = Divergence(offset, record.source, view, record.t, "view offset beyond the end of the log")
    return result

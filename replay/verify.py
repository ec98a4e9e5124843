"""Verify: recompute every recorded decision from the view it was made on, and compare.

A decision record says which reactor made it (`source`), on which view (`view`, a log offset) and at
what time (`t`). Verify folds the log once; when the fold reaches a view offset it rebuilds each
decision made on that view with the reactors the run was configured with (from `RunStarted`) and the
same seeded random source, and compares the encoded records byte for byte. It also checks the
optimistic-concurrency promise: every object a decision wrote was unchanged between its view and
its append. This is the regression test for reactor changes, as Temporal's replayer is for
workflow code.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from dralab.core.config import build_reactors
from dralab.core.events import Record, RunStarted, encode_record, record_to_builtins
from dralab.core.reactor import Reactor, decide, expectations
from dralab.core.state import ClusterState

from .logfile import LogFile


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

    @property
    def ok(self) -> bool:
        return self.divergence is None


def verify(log: LogFile, timings: dict[str, float] | None = None) -> VerifyResult:
    """Raises LogDecodeError (naming the offset) for an entry that does not decode. `timings`, if
    given, gains the wall seconds spent recomputing each reactor's decisions (benchmarks/replay_bench.py)."""
    records = list(log.records())
    state = ClusterState()
    if not records or not isinstance(records[0][1].events[0], RunStarted):
        return VerifyResult(0, state, Divergence(records[0][0] if records else 0, "", -1, 0,
                                                 "the log does not start with RunStarted"))
    run = records[0][1].events[0]
    assert isinstance(run, RunStarted)
    reactors: dict[str, Reactor] = {r.name: r for r in build_reactors(run.config)}
    by_view: dict[int, list[tuple[int, Record, bytes]]] = defaultdict(list)
    for (offset, record), (_, payload) in zip(records, log.entries, strict=True):
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
            if timings is None:
                recomputed, _ = decide(reactor, state, record.t, run.seed)
            else:
                started = time.perf_counter()
                recomputed, _ = decide(reactor, state, record.t, run.seed)
                timings[record.source] = timings.get(record.source, 0.0) + time.perf_counter() - started
            if recomputed is None or encode_record(recomputed) != payload:
                why = "recomputed nothing" if recomputed is None else "recomputed a different decision"
                return Divergence(offset, record.source, record.view, record.t, why, record_to_builtins(record),
                                  record_to_builtins(recomputed) if recomputed is not None else None)
            expected[offset] = expectations(record, state)
            result.checked += 1
            result.sources[record.source] = result.sources.get(record.source, 0) + 1
        return None

    for offset, record in records:
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

"""Check every invariant over a log in one pass: `check_records(records)`.

Used by `dralab check FILE`, by tests and by whoever has a log's records. One pass over the records:
each is looked at before it is applied (record-level invariants: sequence, idempotency ids, claims
allocated twice), folded, then the state invariants are checked incrementally (`InvariantMonitor`:
the same violations, offsets and order as a full check after every record), then the checks that need
the record and the new state (pending pods without a reason after a scheduler decision), then liveness
on samples (liveness.py). The cost is linear in the log's length for a bounded cluster
(docs/invariants.md has the measurements).

The invariant names are stable (other tools take them as arguments, e.g. `dralab shrink --until NAME`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..log.events import Record, RunStarted
from ..scheduler.reactor import Scheduler
from ..state.cluster import ClusterState
from .invariants import INVARIANTS, InvariantMonitor, Violation
from .liveness import DEFAULT_BOUND_MS, Liveness
from .records import Finding, RecordChecks

RECORD_INVARIANTS = ("claim-allocated-once", "pending-pods-have-reasons", "no-entry-lost", "no-entry-applied-twice")
LOG_INVARIANTS = (*RECORD_INVARIANTS, "liveness")  # RECORD_INVARIANTS: what RecordChecks finds
ALL_INVARIANTS: tuple[str, ...] = (*INVARIANTS, *LOG_INVARIANTS)


class LogCheckError(ValueError):
    """A record the checker could not process (a log no reactor wrote, say); names the offset."""

    def __init__(self, offset: int, detail: str) -> None:
        super().__init__(f"log entry at offset {offset}: cannot check: {detail}")
        self.offset = offset


@dataclass
class CheckResult:
    records: int = 0
    violations: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # invariant -> violations (every checked one listed)
    first_offset: dict[str, int] = field(default_factory=dict)
    liveness_samples: int = 0
    state: ClusterState | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return not self.violations

    def add(self, finding: Finding) -> None:
        if finding.invariant not in self.counts:
            return  # not asked for
        self.violations.append(finding)
        self.counts[finding.invariant] += 1
        self.first_offset.setdefault(finding.invariant, finding.offset)

    def to_json(self) -> dict[str, Any]:
        """`held` is null for every invariant when no record was checked: nothing held, nothing was seen."""
        return {
            "records": self.records,
            "ok": self.ok,
            "invariants": {name: {"held": n == 0 if self.records else None, "violations": n,
                                  "first_offset": self.first_offset.get(name)}
                           for name, n in self.counts.items()},
            "violations": [{"invariant": v.invariant, "offset": v.offset, "t": v.t, "message": v.message}
                           for v in self.violations],
        }


def unknown_invariants(names: Iterable[str]) -> list[str]:
    return sorted(set(names) - set(ALL_INVARIANTS))


def check_records(records: Iterable[tuple[int, Record]], *, only: Sequence[str] | None = None,
                  liveness_bound_ms: int = DEFAULT_BOUND_MS) -> CheckResult:
    """Fold `records` (offset, Record) and check the invariants named in `only` (None: all of them).

    Violations come in log order; a state invariant's violation is reported at the first offset it is
    seen at, once per distinct message. Raises ValueError for an unknown name or a bound below 1 ms, and
    LogCheckError (naming the offset) for a record the checks cannot process."""
    unknown = unknown_invariants(only or ())
    if unknown:
        raise ValueError(f"unknown invariant {unknown}; expected some of {list(ALL_INVARIANTS)}")
    if liveness_bound_ms < 1:
        raise ValueError(f"liveness bound must be at least 1 ms, got {liveness_bound_ms}")
    wanted = list(ALL_INVARIANTS) if not only else [n for n in ALL_INVARIANTS if n in set(only)]
    result = CheckResult(counts=dict.fromkeys(wanted, 0))
    state = ClusterState()
    monitor = InvariantMonitor() if any(n in INVARIANTS for n in wanted) else None
    # RecordChecks only when one of its invariants is wanted: `dralab chaos` asks for liveness alone
    checks = RecordChecks() if any(n in RECORD_INVARIANTS for n in wanted) else None
    liveness = Liveness(liveness_bound_ms) if "liveness" in wanted else None
    seen = 0
    offset = 0
    try:
        for offset, record in records:
            result.records += 1
            if liveness is not None and offset > state.offset:  # the state that held until this record
                for finding in _gap_findings(liveness, state, record.t):
                    result.add(finding)
            if checks is not None:
                for finding in checks.before(offset, record, state):
                    result.add(finding)
            if not state.apply(offset, record):
                continue
            if liveness is not None and offset == 1:
                liveness.scheduler = _scheduler(offset, record)
            if monitor is not None:
                monitor.observe(state)
                if len(monitor) > seen:
                    for v in monitor.violations[seen:]:
                        result.add(Finding(v.invariant, v.offset, state.t, v.message))
                    seen = len(monitor)
            if checks is not None:
                for finding in checks.after(offset, record, state):
                    result.add(finding)
            if liveness is not None:
                _liveness(result, liveness, state, final=False)
        if liveness is not None and state.offset:
            _liveness(result, liveness, state, final=True)
            result.liveness_samples = liveness.samples
    except LogCheckError:
        raise
    except (ArithmeticError, AttributeError, KeyError, LookupError, TypeError, ValueError) as exc:
        # The fold is total, but the checks run the scheduler's code on whatever the log holds: a log
        # that makes it fail is reported with the offset, not as a crash.
        raise LogCheckError(offset, f"{type(exc).__name__}: {exc}") from exc
    result.state = state
    return result


def _liveness(result: CheckResult, liveness: Liveness, state: ClusterState, *, final: bool) -> None:
    for finding in _liveness_findings(liveness, state, final=final):
        result.add(finding)


def _liveness_findings(liveness: Liveness, state: ClusterState, *, final: bool) -> list[Finding]:
    return [Finding("liveness", state.offset, state.t,
                    f"pod {pod} could be scheduled since offset {offset} (t={t / 1000:g}s) and is still "
                    f"pending {(state.t - t) / 1000:g}s later (bound {liveness.bound_ms / 1000:g}s)")
            for pod, offset, t in liveness.observe(state, final=final)]


def _gap_findings(liveness: Liveness, state: ClusterState, next_t: int) -> list[Finding]:
    """Liveness between records: pods overdue in the gap from `state`'s record to the next, at `next_t`."""
    bound = liveness.bound_ms
    return [Finding("liveness", state.offset, t + bound,
                    f"pod {pod} could be scheduled since offset {offset} (t={t / 1000:g}s) and was still pending "
                    f"{bound / 1000:g}s later, at t={(t + bound) / 1000:g}s, in a gap with no record from "
                    f"t={state.t / 1000:g}s to t={next_t / 1000:g}s (bound {bound / 1000:g}s)")
            for pod, offset, t in liveness.observe_gap(state, next_t)]


def _scheduler(offset: int, record: Record) -> Scheduler:
    """The scheduler the run's RunStarted configured (its feature gates decide what fits); the default one
    when the log configured none (no RunStarted, or no scheduler settings in it). Settings that do not make
    a Scheduler are a LogCheckError naming the offset, not a silent default: liveness judged with another
    scheduler's idea of what fits would report (or miss) pods that the run's scheduler saw otherwise."""
    first = record.events[0] if record.events else None
    if not isinstance(first, RunStarted) or not isinstance(first.config, dict):
        return Scheduler()
    settings = first.config.get("scheduler")
    if settings is None:
        return Scheduler()
    if not isinstance(settings, dict):
        raise LogCheckError(offset, f"RunStarted's scheduler settings are not a map: {str(settings)[:80]!r}")
    try:
        return Scheduler(**settings, kubernetes=first.config.get("kubernetes"))  # the release emulated
    except (TypeError, ValueError) as exc:
        raise LogCheckError(offset, f"RunStarted's scheduler settings are invalid ({exc}); liveness needs the "
                                    "run's scheduler") from None


class RunChecks:
    """Every invariant that can be checked as a run appends, for the simulator and the live driver: the
    state invariants (`InvariantMonitor`, incremental) and the record-level ones (`RecordChecks`: no entry
    lost or applied twice, claims allocated once, pending pods with a reason). Liveness needs samples of
    cluster time and stays with `check_records` / `dralab check`, unless `liveness_bound_ms` is given:
    then it is checked here too, on the same samples (`dralab chaos` saves a second fold of the log
    that way). Use: `before` each record is applied, `after` it, `finish` after the last; `violations`
    lists each distinct violation once, in the order they were first seen."""

    def __init__(self, liveness_bound_ms: int | None = None) -> None:
        self.monitor = InvariantMonitor()
        self.records = RecordChecks()
        self._found: list[Violation] = []
        self._seen = 0
        self.liveness = Liveness(liveness_bound_ms) if liveness_bound_ms is not None else None

    def before(self, offset: int, record: Record, state: ClusterState) -> None:
        if self.liveness is not None and offset > state.offset:
            self._found += [Violation(f.invariant, f.offset, f.message)
                            for f in _gap_findings(self.liveness, state, record.t)]
        self._found += [Violation(f.invariant, f.offset, f.message) for f in self.records.before(offset, record, state)]

    def after(self, offset: int, record: Record, state: ClusterState) -> None:
        self.monitor.observe(state)
        if len(self.monitor) > self._seen:
            self._found += self.monitor.violations[self._seen:]
            self._seen = len(self.monitor)
        self._found += [Violation(f.invariant, f.offset, f.message) for f in self.records.after(offset, record, state)]
        if self.liveness is not None:
            if offset == 1:
                self.liveness.scheduler = _scheduler(offset, record)
            self._live(state, final=False)

    def finish(self, state: ClusterState) -> None:
        """The end of the log: liveness's last sample (pods still pending past the bound)."""
        if self.liveness is not None and state.offset:
            self._live(state, final=True)

    def _live(self, state: ClusterState, *, final: bool) -> None:
        assert self.liveness is not None
        self._found += [Violation(f.invariant, f.offset, f.message)
                        for f in _liveness_findings(self.liveness, state, final=final)]

    @property
    def violations(self) -> list[Violation]:
        return list(self._found)

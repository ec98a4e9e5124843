"""Shrink a failing run: the fewest external inputs (and the shortest run) that still show a target.

Delta debugging (Zeller and Hildebrandt's ddmin) over the log's external inputs (replay/simulation/shrink_units.py).
A *trial* simulates a candidate set of inputs with the reactors of the log's `RunStarted` config and its
seed (`Simulator.from_inputs`, invariant checks on) and says whether the target (replay/simulation/outcomes.py)
still happens. Order of work, each step kept only when the target still happens:

1. reproduce: the full inputs, for the run's duration (the log's `RunStarted.config.duration_ms`, or its
   last record's time). A target the simulator does not reproduce ends the shrink (`reproduced=False`);
2. shorten: a target seen as records are appended stops the trial there, and a trial that shows it at
   time t fixes the duration to t and drops every later input (a prefix of a deterministic run is the
   same run: no extra trial). A target judged at the end is shortened by bisecting the duration;
3. ddmin, complement first (remove one of n chunks, n starting at 2, back to max(n-1, 2) after a
   success, doubled when nothing can go), preceded by one trial removing every unit of the kind, over
   whole arrivals, then starting nodes, node groups left without starting nodes, other records, single
   pods of the arrivals left, then the setup's objects (DRA classes, claim templates...), and again
   until nothing more goes (a fixpoint);
4. shift: move the inputs after the setup earlier so that the first comes at t=0 (dead time dropped).

Trials are cached by (atoms kept, duration, shift), so a candidate is never simulated twice. The
result is deterministic for a log (a `timeout` aside: where the wall clock stops the search depends on
the machine; `max_trials` does not).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dralab.core.log.events import Record
from dralab.replay.simulation.outcomes import Target, Watch
from dralab.replay.simulation.shrink_units import KINDS, Atom, InputSet
from dralab.replay.simulation.sim import SimResult, SimulationStuck, Simulator

Unit = tuple[Atom, ...]
Progress = Callable[[dict[str, Any]], None]


class _Hit(Exception):
    """The target happened: the trial stops here."""


class _OutOfBudget(Exception):
    """max_trials or the timeout reached: the search stops with the best candidate found so far."""


class _Probe(Simulator):  # type: ignore[misc,unused-ignore]
    """The simulator, watching the target after every appended record (the log is not changed)."""

    watch: Watch
    hit: tuple[int, int] | None = None

    def append(self, record: Record) -> int:
        offset: int = super().append(record)
        violations = self.monitor.violations if self.monitor is not None else []
        if self.watch.step(offset, record, self.state, violations):
            self.hit = (offset, record.t)
            raise _Hit
        return offset


@dataclass(frozen=True)
class Trial:
    holds: bool
    offset: int = 0  # where the target happened (early targets) or the last record (others)
    t: int = 0
    records: int = 0
    error: str = ""  # the candidate broke the simulation (a livelock, a reactor error): does not hold


@dataclass
class Candidate:
    kept: frozenset[Atom]
    duration_ms: int
    shift_ms: int = 0
    trial: Trial = field(default_factory=lambda: Trial(False))


@dataclass
class ShrinkResult:
    target: str
    reproduced: bool
    before: dict[str, int]
    after: dict[str, int]
    duration_before_ms: int
    duration_after_ms: int
    shift_ms: int
    trials: int
    cache_hits: int
    wall_s: float
    stopped: str  # "fixpoint" | "max-trials" | "timeout" | "not-reproduced"
    inputs: list[Record]  # the smallest failing inputs (the full ones when not reproduced)
    seed: int
    where: Trial
    removed: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target, "reproduced": self.reproduced, "stopped": self.stopped,
            "units_before": self.before, "units_after": self.after, "removed": self.removed,
            "duration_before_s": self.duration_before_ms / 1000, "duration_after_s": self.duration_after_ms / 1000,
            "shifted_earlier_s": self.shift_ms / 1000, "trials": self.trials, "cache_hits": self.cache_hits,
            "wall_s": round(self.wall_s, 2), "seed": self.seed,
            **({"error": self.where.error} if self.where.error else {}),  # the full run broke the simulator
        }


class Shrinker:
    def __init__(self, records: Sequence[Record], target: Target, *, duration_ms: int | None = None,
                 max_trials: int = 2000, timeout_s: float = 0.0, progress: Progress | None = None) -> None:
        self.inputs = InputSet.from_records(list(records))
        run = self.inputs.records[0].events[0]
        self.seed = int(getattr(run, "seed", 0))
        config = getattr(run, "config", {}) or {}
        last = max(r.t for r in records)
        self.duration_ms = int(duration_ms if duration_ms is not None else max(config.get("duration_ms", 0), last))
        self.target = target
        self.max_trials = max_trials
        self.timeout_s = timeout_s
        self.progress = progress
        self.cache: dict[tuple[frozenset[Atom], int, int], Trial] = {}
        self.trials = 0
        self.cache_hits = 0
        self.started = 0.0
        self.best: Candidate | None = None

    # ------------------------------------------------------------------ one trial

    def simulate(self, kept: frozenset[Atom], duration_ms: int, shift_ms: int = 0) -> Trial:
        key = (kept, duration_ms, shift_ms)
        cached = self.cache.get(key)
        if cached is not None:
            self.cache_hits += 1
            return cached
        if self.trials >= self.max_trials:
            raise _OutOfBudget("max-trials")
        if self.timeout_s and time.monotonic() - self.started > self.timeout_s:
            raise _OutOfBudget("timeout")
        self.trials += 1
        trial = run_trial(self.inputs.build(kept, duration_ms, shift_ms), self.seed, duration_ms, self.target)
        self.cache[key] = trial
        if self.progress is not None:
            units = self.inputs.counts(kept, duration_ms + shift_ms)
            self.progress({"trial": self.trials, "holds": trial.holds, "units": units, "duration_s": duration_ms / 1000,
                           "elapsed_s": round(time.monotonic() - self.started, 1)})
        return trial

    def test(self, kept: frozenset[Atom], duration_ms: int | None = None, shift_ms: int | None = None) -> bool:
        """Does the target still happen with `kept`? If so, that is the new best candidate (with the
        duration cut to where the target happened, for an early target)."""
        assert self.best is not None
        duration = self.best.duration_ms if duration_ms is None else duration_ms
        shift = self.best.shift_ms if shift_ms is None else shift_ms
        kept = self.inputs.alive(kept, duration + shift)  # inputs after the end never come
        trial = self.simulate(kept, duration, shift)
        if not trial.holds:
            return False
        if self.target.early:
            duration = trial.t
            kept = self.inputs.alive(kept, duration + shift)
        self.best = Candidate(kept, duration, shift, trial)
        return True

    # ------------------------------------------------------------------ the search

    def run(self) -> ShrinkResult:
        self.started = time.monotonic()
        everything = self.inputs.all_atoms()
        before = self.inputs.counts(everything)
        stopped = "fixpoint"
        self.best = Candidate(everything, self.duration_ms)
        try:
            if not self.test(everything):
                stopped = "not-reproduced"
                self.best.trial = next(iter(self.cache.values()))  # what the full run did (an error, say)
            else:
                if not self.target.early:
                    self._bisect_duration()
                self._fixpoint()
                self._shift()
        except _OutOfBudget as exc:
            stopped = str(exc)
        best = self.best
        after = self.inputs.counts(best.kept, best.duration_ms + best.shift_ms)
        reproduced = stopped != "not-reproduced"
        if not reproduced:
            after = before
        return ShrinkResult(
            target=self.target.name, reproduced=reproduced, before=before, after=after,
            duration_before_ms=self.duration_ms, duration_after_ms=best.duration_ms, shift_ms=best.shift_ms,
            trials=self.trials, cache_hits=self.cache_hits, wall_s=time.monotonic() - self.started,
            stopped=stopped, inputs=self.inputs.build(best.kept, best.duration_ms, best.shift_ms), seed=self.seed,
            where=best.trial, removed={k: before[k] - after[k] for k in KINDS},
        )

    def _fixpoint(self) -> None:
        passes: list[Callable[[frozenset[Atom]], list[Unit]]] = [
            self.inputs.arrival_units, self.inputs.node_units, self.inputs.removable_groups,
            self.inputs.other_units, self.inputs.pod_units, self.inputs.object_units,
        ]
        while True:
            assert self.best is not None
            start = (self.best.kept, self.best.duration_ms)
            for units_of in passes:
                self._ddmin(units_of)
            if (self.best.kept, self.best.duration_ms) == start:
                return

    def _ddmin(self, units_of: Callable[[frozenset[Atom]], list[Unit]]) -> None:
        """ddmin over the units `units_of` lists for the best candidate, the other atoms fixed."""
        assert self.best is not None
        units = units_of(self.best.kept)
        if not units:
            return
        fixed = self.best.kept - {a for u in units for a in u}

        def test(subset: list[Unit]) -> bool:
            return self.test(fixed | {a for u in subset for a in u})

        if test([]):
            return
        n = 2
        while len(units) >= 2:
            chunks = _split(units, n)
            for i in range(len(chunks)):  # complements first: remove one chunk
                complement = [u for j, c in enumerate(chunks) if j != i for u in c]
                if test(complement):
                    units, n = self._still_kept(complement), max(n - 1, 2)
                    break
            else:
                if n > 2 and (chunk := next((c for c in chunks if test(c)), None)) is not None:
                    units, n = self._still_kept(chunk), 2
                elif n >= len(units):
                    return
                else:
                    n = min(len(units), n * 2)

    def _still_kept(self, units: list[Unit]) -> list[Unit]:
        """Units after a success: those whose atoms survived the duration cut it may have made."""
        assert self.best is not None
        kept = self.best.kept
        return [u for u in (tuple(a for a in unit if a in kept) for unit in units) if u]

    def _bisect_duration(self) -> None:
        """A target judged at the end: the shortest duration (to 1 s, at most 16 trials) still showing it."""
        assert self.best is not None
        lo, hi = 0, self.best.duration_ms
        for _ in range(16):
            if hi - lo <= 1000:
                return
            mid = (lo + hi) // 2
            if self.test(self.best.kept, duration_ms=mid):
                hi = mid
            else:
                lo = mid

    def _shift(self) -> None:
        """Drop dead time: the first input after the setup at t=0 (not with other records kept: they may
        carry times of their own)."""
        assert self.best is not None
        first = self.inputs.first_later_t(self.best.kept)
        if first and not self.inputs.has_other(self.best.kept):
            duration = self.best.duration_ms - first
            if duration >= 0:
                self.test(self.best.kept, duration_ms=duration, shift_ms=self.best.shift_ms + first)


def _split(units: list[Unit], n: int) -> list[list[Unit]]:
    size, extra = divmod(len(units), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(units[start:end])
        start = end
    return [c for c in out if c]


def run_trial(inputs: list[Record], seed: int, duration_ms: int, target: Target) -> Trial:
    """Simulate `inputs` for `duration_ms` and judge the target (stopping where an early target happens)."""
    probe = _Probe.from_inputs(inputs, seed, duration_ms)
    assert isinstance(probe, _Probe)
    probe.watch = target.watch()
    try:
        result: SimResult = probe.run()
    except _Hit:
        assert probe.hit is not None
        return Trial(True, probe.hit[0], probe.hit[1], len(probe.entries))
    except SimulationStuck as exc:
        return Trial(False, records=len(probe.entries), error=str(exc))
    except Exception as exc:  # noqa: BLE001 - an edited input may break a reactor: that candidate fails
        return Trial(False, records=len(probe.entries), error=f"{type(exc).__name__}: {exc}")
    last = result.entries[-1][0] if result.entries else 0
    holds = probe.watch.final(result.entries, result.state, result.violations, duration_ms)
    offset, t = probe.watch.where or (last, duration_ms)
    return Trial(holds, offset, t, len(result.entries))


def final_log(result: ShrinkResult, duration_ms: int | None = None) -> SimResult:
    """The simulator's full log for the shrunk inputs (run to the end of the shrunk duration)."""
    return Simulator.from_inputs(result.inputs, result.seed,
                                 result.duration_after_ms if duration_ms is None else duration_ms).run()

"""Runtime faults in the simulator: what `spec.faults` of kind `who == "runtime"` do to the reactors.

The cluster faults are written into the log by the chaos reactor; the runtime faults are not cluster
state, they are how the reactors are run, so the simulator plays them (a live driver would play them
on its actors). Everything here is driven by the faults in the log's own state (`ClusterState.faults`,
folded from the `FaultInjected` inputs), by their times only (not by the chaos reactor's markers, so
pausing the chaos reactor changes nothing here), so the same log replays to the same bytes. Every
decision still carries the view it was made on and its time, so `replay.verify` recomputes it exactly,
however stale its view was:

- `reactor-pause`, `reactor-kill`, `partition`: the reactor is not run while the fault is active; when
  it ends the reactor decides at once on the current view (it catches up). Reactors keep no memory, so
  the three are the same thing in the simulator; they differ only in live runs (a pause freezes the
  process, a kill makes Ray restart it from its snapshot and the log, a partition cuts it off the bus).
- `stale-view` (`lag` records) and `delay` (`delay` ms): the reactor decides on a lagging state folded
  from the log's entries: `lag` records behind the end, or only the records appended at least `delay`
  ms ago. Its records carry that view's offset; a stale decision whose objects moved is refused by
  optimistic concurrency (a conflict, as in the live log). A refused lagging reactor does not retry at
  once on the same view (it would be refused again forever at one instant): it waits until its view
  moves or until its own next wake time; one that asks to be woken at once on its old view waits for the
  view to move too (else it would make the same decision forever).
- `duplicate`: the reactor decides twice on each view it is given; the copies have the same
  idempotency id, and an id already appended is a no-op (as the live log's Lua script does): counted
  in `duplicates`, never appended twice.
- `clock-skew` (`skew` ms): the reactor's `now` is the simulator's plus `skew` (so the record's `t`,
  which verify uses); the wake times it asks for are read on its clock too.
- `swizzle` (`reactors`, `step`): FoundationDB's swizzle-clogging: from the fault's time the listed
  reactors are paused one by one, one every `step`, then resumed one by one, one every `step`, in an
  order drawn from `random.Random` seeded with the run's seed and the fault's id; the fault's `for`, if
  any, ends every pause.
- `redis-restart`: nothing here; only a live run has a Redis to restart.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from typing import Protocol

from dralab.core.cluster.runtime_faults import Effect, is_runtime, runtime_effects, swizzle_pauses
from dralab.core.engine.contract import Reactor, decide, expectations
from dralab.core.log.events import FaultInjected, Record, decode_record
from dralab.core.run.config import build_reactors
from dralab.core.state.cluster import ClusterState, FaultState
from dralab.replay.logs.gc_policy import collector_paused

NEVER = 2**62


class SimulationStuck(RuntimeError):
    """Reactors kept producing decisions at one instant: a livelock in the modelled system (raised by the
    simulator's settle loop, plain or with runtime faults; replay/simulation/sim.py exports it)."""


class Simulator(Protocol):
    """What the faulted settle loop drives (replay/simulation/sim.py's Simulator, which imports this module): the
    reactors and their fold, when each last looked and next wakes, and the log it appends to."""

    seed: int
    state: ClusterState
    reactors: list[Reactor]
    entries: list[tuple[int, bytes]]
    order_rng: random.Random
    conflicts: int
    decisions: dict[str, int]
    seen: dict[str, int]
    wake: dict[str, int]

    def append(self, record: Record) -> int: ...


def runtime_fault_inputs(inputs: list[Record]) -> bool:
    """Whether any input injects a runtime fault (else the simulator keeps its plain, faster loop)."""
    return any(is_runtime(e.kind) for r in inputs if r.events for e in r.events[:1] if isinstance(e, FaultInjected))


class RuntimeFaults:
    """The simulator's settle loop with the runtime faults applied (replaces `Simulator._settle`)."""

    def __init__(self, sim: Simulator, config: dict[str, object]) -> None:
        self.sim = sim
        self.times: list[int] = []  # when each entry was appended (simulator time), by offset - 1
        self.lagging: dict[str, ClusterState] = {}  # reactor -> its lagging view
        # A lagging view is handed to a separate instance of the reactor, so that the caches a reactor
        # keeps between decisions (never their answers) follow one view each.
        self.shadows: dict[str, Reactor] = {r.name: r for r in build_reactors(config)}
        self.blocked: set[str] = set()
        # Reactors refused on a lagging view, or that asked to be woken at once on one: due again once
        # their view moves (the fault's end moves it too), not at once on the same view.
        self.retry: set[str] = set()
        self.ids: set[str] = set()  # decision ids appended (the idempotency the live log has)
        self.duplicates = 0
        self._swizzles: dict[str, list[tuple[str, int, int]]] = {}
        # The runtime faults not over yet (faults are only ever added to the fold's `faults`, and the
        # simulator's time only moves on, so one that ended stays ended); `_known` of `faults` seen.
        self._open: list[FaultState] = []
        self._known = 0
        # Lagging views no reactor uses any more (their fault ended): a new lagging view starts from one
        # of them (folded forward: the fold is the same whatever state it starts from at an offset)
        # rather than from an empty state folded over the whole log.
        self._spares: list[ClusterState] = []

    # ------------------------------------------------------------------ what is active

    def _sync(self, now: int) -> None:
        missing = len(self.sim.entries) - len(self.times)
        if missing:
            self.times.extend([now] * missing)

    def _runtime_faults(self, now: int) -> list[FaultState]:
        """The runtime faults that may still act at `now` or later (the order and the ended ones change
        no effect: `runtime_effects` takes a max, a sum or an or per reactor)."""
        faults = self.sim.state.faults
        if len(faults) != self._known:
            added = list(faults.values())[self._known:]  # a dict keeps insertion order: the new ones last
            self._known = len(faults)
            self._open += [f for f in added if is_runtime(f.kind)]
        if any(0 <= self._end(f) <= now for f in self._open):
            self._open = [f for f in self._open if not 0 <= self._end(f) <= now]
        return self._open

    def _end(self, fault: FaultState) -> int:
        """When the fault stops acting (-1: never): its `for`, or a swizzle's last resume."""
        if fault.kind == "swizzle":
            ends = [b for _, _, b in self._swizzle(fault)]  # each already cut at the fault's end, if any
            return max(ends) if ends else fault.until_ms
        return fault.until_ms

    def _swizzle(self, fault: FaultState) -> list[tuple[str, int, int]]:
        pauses = self._swizzles.get(fault.fault)
        if pauses is None:
            pauses = self._swizzles[fault.fault] = swizzle_pauses(fault, self.sim.seed)
        return pauses

    def effects(self, now: int) -> dict[str, Effect]:
        return runtime_effects(self._runtime_faults(now), now, self._swizzle)

    def next_time(self, now: int) -> int:
        """The earliest time after `now` something is due: a reactor's wake (not a blocked one's), a
        fault's boundary, a record becoming visible to a delayed reactor."""
        effects = self.effects(now)
        best = min((w for name, w in self.sim.wake.items() if not effects.get(name, Effect()).blocked),
                   default=NEVER)
        for fault in self._runtime_faults(now):
            points = [fault.start_ms, fault.until_ms]
            if fault.kind == "swizzle":
                points += [t for _, a, b in self._swizzle(fault) for t in (a, b)]
            best = min([best, *(t for t in points if t > now)])
        for e in effects.values():
            if e.delay and not e.blocked:
                visible = bisect_right(self.times, now - e.delay)
                if visible < len(self.times):
                    best = min(best, self.times[visible] + e.delay)
        return best

    # ------------------------------------------------------------------ views

    def view(self, name: str, e: Effect, now: int) -> ClusterState:
        state = self.sim.state
        if not e.lag and not e.delay:
            old = self.lagging.pop(name, None)
            if old is not None:
                self._spares.append(old)
            return state
        target = state.offset
        if e.lag:
            target = min(target, max(0, state.offset - e.lag))
        if e.delay:
            target = min(target, bisect_right(self.times, now - e.delay))
        lag = self.lagging.get(name)
        if lag is None or lag.offset > target:
            if lag is not None:
                self._spares.append(lag)
            lag = self.lagging[name] = self._spare_at(target)
        for offset, payload in self.sim.entries[lag.offset:target]:
            lag.apply(offset, decode_record(payload, offset))
        return lag

    def _spare_at(self, target: int) -> ClusterState:
        """The spare state furthest along but not past `target` (taken from the spares), else a new one."""
        best = max((s for s in self._spares if s.offset <= target), key=lambda s: s.offset, default=None)
        if best is None:
            return ClusterState()
        self._spares.remove(best)
        return best

    # ------------------------------------------------------------------ the loop

    def settle(self, now: int, max_rounds: int) -> None:
        """`Simulator._settle` with the faults: blocked reactors skipped, lagging views, skewed clocks,
        duplicated deliveries, idempotent appends."""
        sim = self.sim
        for _ in range(max_rounds):
            self._sync(now)
            effects = self.effects(now)
            due: list[tuple[Reactor, Effect, ClusterState]] = []
            for reactor in sim.reactors:
                name = reactor.name
                e = effects.get(name) or Effect()
                if e.blocked:
                    self.blocked.add(name)
                    continue
                if name in self.blocked:  # back from a pause, a kill or a partition: catch up now
                    self.blocked.discard(name)
                    sim.wake[name] = now
                view = self.view(name, e, now)
                seen = sim.seen[name]
                # its view moved (a lagging one may move backwards, when its fault starts); one that was
                # refused or asked to be woken at once on a lagging view waits for this (see `retry`)
                moved = view.offset > seen if view is sim.state else view.offset != seen
                if (moved and (reactor.trigger == "events" or name in self.retry)) or sim.wake[name] <= now:
                    due.append((reactor, e, view))
            if not due:
                return
            proposals = []
            for reactor, e, view in due:  # all on their views, as concurrent actors would
                lagging = view is not sim.state
                runner = self.shadows[reactor.name] if lagging else reactor
                for _copy in range(2 if e.duplicate else 1):  # a duplicated delivery: the same view twice
                    with collector_paused():  # replay/logs/gc_policy.py
                        record, wake = decide(runner, view, now + e.skew, sim.seed)
                    if record is not None:
                        proposals.append((reactor, record, expectations(record, view), lagging))
                sim.seen[reactor.name] = view.offset
                sim.wake[reactor.name] = NEVER if wake is None else wake - e.skew
                self.retry.discard(reactor.name)
                if lagging and sim.wake[reactor.name] <= now:
                    # Overdue on its old view (a fault to end it does not see ended, say): deciding again
                    # at once would see the same view and make the same decision forever.
                    sim.wake[reactor.name] = NEVER
                    self.retry.add(reactor.name)
            sim.order_rng.shuffle(proposals)
            for reactor, record, expect, lagging in proposals:
                if record.id in self.ids:  # the same decision again: the log keeps the first
                    self.duplicates += 1
                elif all(sim.state.version(k) == v for k, v in expect.items()):
                    sim.append(record)
                    self.ids.add(record.id)
                    sim.decisions[reactor.name] += 1
                else:
                    sim.conflicts += 1
                    if lagging:
                        self.retry.add(reactor.name)  # again once its view moves, not on the same view
                    else:
                        sim.wake[reactor.name] = now  # lost the race: decide again on the fresh view
        raise SimulationStuck(f"reactors still busy after {max_rounds} rounds at t={now} ms (runtime faults)")

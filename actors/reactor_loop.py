"""The loop of a reactor actor (actors/reactor_actor.py hosts it in a Ray actor): consume the log, fold it
into the view, let each hosted reactor decide, append.

Why the shape:
- On start the view is rebuilt from the log up to what the consumer group had been given, then
  the entries delivered but not acknowledged are processed again, then new ones. Entries are
  acknowledged only after the decision made on them is appended. A crash in between makes the
  restarted actor decide again, on a view rebuilt up to the end of the log, which includes what it
  appended before dying; an append that was in flight then conflicts on the versions it expected.
- The fold skips offsets it has already applied, so a redelivered entry is never applied twice.
  An entry delivered after a gap (entries given to another consumer of the group, or claimed out
  of order) makes the fold read the gap from the log first: the view never skips an offset.
- An entry that does not decode (or has a newer schema version) is folded as an applied no-op,
  logged, set aside in the dead-letter stream (before it is acknowledged) and acknowledged: bad
  input never stops the actor (actors/wire.py).
- Entries another consumer of the group read but did not acknowledge for ``reclaim_idle_ms`` are
  claimed (XAUTOCLAIM) on start and every ``reclaim_every_s``, then processed like new ones.
- A decision that lost an optimistic-concurrency race is dropped; the actor reads on and decides
  again on the fresher view.
- An actor may host several reactors (``dralab run --hosts N``, actors/hosts.py): one consumer group
  (named after the actor), one read and one fold per entry, then every hosted reactor decides on
  that view in turn, exactly as a reactor alone would: each decision carries its own record id
  (the reactor's name), the view's offset, and its own optimistic-concurrency expectations. Two
  hosted reactors deciding on the same view are two concurrent writers, as in separate actors and
  in the simulator (which folds once for all reactors too).
- Every ``SnapshotPolicy.every`` applied entries (and at least every ``max_age_s`` while entries
  arrive, at most every ``min_gap_s``) the view is saved as a state snapshot next to the log
  (``Bus.put_snapshot``, core/state/codec.py). A restart decodes the latest one and folds only
  the tail; a snapshot that cannot be used (corrupt, another format, ahead of the log, another
  run) is ignored and the view refolded from the start of the log. The driver trims the log only
  below every reactor's latest snapshot (actors/live.py), so the tail is always there.
"""


from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from dralab.core.cluster.runtime_faults import Effect
from dralab.core.engine.contract import Reactor, decide, expectations
from dralab.core.log.events import LogDecodeError, RunStarted, decode_record, encode_record
from dralab.core.run.config import build_reactors
from dralab.core.state.cluster import ClusterState
from dralab.core.state.codec import SnapshotError, decode_state, encode_state

from .bus import Bus, Conflict, Entry
from .gc_tuning import Tenure, collector_paused
from .live_faults import ActorFaults
from .wire import decode_or_skip, set_aside

log = structlog.get_logger("dralab.actor")
READ_CHUNK = 500
RECLAIM_IDLE_MS = 30_000  # an entry unacknowledged this long by its consumer is claimed by another
RECLAIM_EVERY_S = 5.0  # how often a running loop looks for such entries
SNAPSHOT_MAX_BYTES = 256 * 1024 * 1024  # a bigger view is not snapshotted (a restart refolds the log)


@dataclass(frozen=True)
class SnapshotPolicy:
    """When a reactor loop saves its view as a snapshot: once ``every`` entries were applied since
    the last one, or once ``max_age_s`` passed with at least one applied; never twice within
    ``min_gap_s`` (encoding a 1,000-node state takes about 60-250 ms). ``every <= 0``: never."""

    every: int = 5000
    max_age_s: float = 10.0
    min_gap_s: float = 2.0


@dataclass(frozen=True)
class Clock:
    """Cluster time of a live run: wall time since the run's epoch, times the speed-up."""

    epoch: float
    speed: float

    def now_ms(self) -> int:
        return int((time.time() - self.epoch) * self.speed * 1000)

    def wall_s(self, cluster_ms: float) -> float:
        return cluster_ms / 1000 / self.speed


@dataclass
class Hosted:
    """One reactor of a loop and when it decides next (its counters: ``stats["reactors"][name]``)."""

    reactor: Reactor
    wake: int | None = 0  # cluster time it asked to be woken at (None: only on new entries)
    seen: int = -1  # view offset it last decided on


class ReactorLoop:
    """The consume-decide-append loop (separate from Ray so it is testable on its own).

    ``name`` names the loop (its snapshot, its log lines); ``reactors`` the reactors it hosts on its
    one view (default: the reactor called ``name``)."""

    def __init__(self, name: str, bus: Bus, group: str, consumer: str, *,
                 reclaim_idle_ms: int = RECLAIM_IDLE_MS, reclaim_every_s: float = RECLAIM_EVERY_S,
                 snapshots: SnapshotPolicy | None = None, reactors: Sequence[str] | None = None,
                 tenure_every: int = 0) -> None:
        self.name = name
        self.names = list(reactors) if reactors else [name]
        self.hosted: dict[str, Hosted] = {}  # by reactor name, once the run's RunStarted is known
        self.bus = bus
        self.clock: Clock | None = None  # from the run's RunStarted record, so a restart finds it again
        self.group = group
        self.consumer = consumer
        self.state = ClusterState()
        self.seed = 0
        self.stats: dict[str, Any] = {
            "pid": os.getpid(), "rebuilt": 0, "redelivered": 0, "applied": 0, "duplicates_skipped": 0,
            "decisions": 0, "duplicate_appends": 0, "conflicts": 0, "acked": 0, "resumed_from": 0,
            "reclaimed": 0, "dead_letters": 0, "gap_reads": 0,
            # how the view was rebuilt on start: "snapshot" (decoded at snapshot_offset, then
            # `rebuilt` entries of the tail folded) or "log" (all `rebuilt` entries folded)
            "rebuilt_from": "log", "snapshot_offset": 0, "snapshot_discarded": None, "rebuild_ms": 0.0,
            "snapshots_saved": 0, "snapshot_bytes": 0, "snapshot_ms": 0.0, "snapshot_errors": 0,
            "reactors": {n: {"decisions": 0, "conflicts": 0, "duplicate_appends": 0} for n in self.names},
        }
        self.snapshots = snapshots or SnapshotPolicy()
        self._snap_offset = 0  # offset of the latest snapshot saved or restored
        self._snap_at = time.monotonic()
        self.reclaim_idle_ms = reclaim_idle_ms
        self.reclaim_every_s = reclaim_every_s
        self._next_reclaim = 0.0
        self._bad: list[tuple[Entry, str]] = []  # met, not yet set aside
        self.stopping = False
        self.tenure = Tenure(tenure_every)  # process-wide GC tuning (actors/gc_tuning.py): actors only
        self.faults = ActorFaults(self.names)  # the runtime faults it plays on itself (actors/live_faults.py)
        self.stats["faults"] = self.faults.stats

    @property
    def reactor(self) -> Reactor | None:
        """The (first) hosted reactor, None until the run's RunStarted is known."""
        return next(iter(self.hosted.values())).reactor if self.hosted else None

    def _apply(self, entries: Sequence[Entry]) -> None:
        state, apply, stats = self.state, self.state.apply, self.stats
        applied = skipped = 0
        lagging = bool(self.faults.lagging)  # some reactor decides on a lagging copy: it sees these later
        arrived = self.now_ms() if lagging else 0
        for entry in entries:
            if entry.offset <= state.offset:
                skipped += 1
                continue
            try:
                record = decode_record(entry.payload, entry.offset)
            except LogDecodeError:
                record, bad = decode_or_skip(entry, state, self.consumer)  # logs it; the no-op record
                self._bad.append((entry, bad or "undecodable"))
            apply(entry.offset, record)
            applied += 1
            if lagging:
                self.faults.note(entry.offset, entry.payload, arrived)
            if not self.hosted and record.events and isinstance(record.events[0], RunStarted):
                self._set_run(record.events[0])
        stats["applied"] += applied
        stats["duplicates_skipped"] += skipped

    async def _fold(self, entries: list[Entry]) -> None:
        """Fold delivered entries in order, reading any gap before one from the log first, then set
        the bad ones aside (before the caller acknowledges them)."""
        if entries and entries[0].offset <= self.state.offset + 1 and \
                entries[-1].offset - entries[0].offset == len(entries) - 1:
            self._apply(entries)  # the usual case: ascending, no gap (one pass, no read)
            entries = []
        for entry in entries:
            while entry.offset > self.state.offset + 1:
                want = min(READ_CHUNK, entry.offset - 1 - self.state.offset)
                gap = [e for e in await self.bus.read(self.state.offset, want) if e.offset < entry.offset]
                if not gap:
                    break  # trimmed away: the fold records the gap as an anomaly
                self._apply(gap)
                self.stats["gap_reads"] += len(gap)
            self._apply([entry])
        await self._set_aside()

    async def _set_aside(self) -> None:
        bad, self._bad = self._bad, []
        for entry, reason in bad:
            await set_aside(self.bus, entry, reason, self.consumer)
            self.stats["dead_letters"] += 1

    async def _claim(self, now: float) -> list[Entry]:
        """Entries of the group idle for ``reclaim_idle_ms`` (a consumer stopped acknowledging),
        now this consumer's; looked for at most every ``reclaim_every_s``."""
        if now < self._next_reclaim:
            return []
        self._next_reclaim = now + self.reclaim_every_s
        claimed: list[Entry] = []
        while batch := await self.bus.claim_stale(self.group, self.consumer, self.reclaim_idle_ms, READ_CHUNK):
            claimed += batch
            if len(batch) < READ_CHUNK:
                break
        if claimed:
            self.stats["reclaimed"] += len(claimed)
            log.warning("entries.reclaimed", reactor=self.name, consumer=self.consumer, count=len(claimed),
                        first=claimed[0].offset, last=claimed[-1].offset)
        return claimed

    async def rebuild(self) -> list[Entry]:
        """Rebuild the view from the log, up to its current end (not only up to what the group was
        given: a decision this actor appended just before it died must be in the view it decides on
        next, or it could decide the same thing twice); returns the entries to acknowledge again:
        those delivered to this consumer and not acknowledged, and those claimed from consumers
        that stopped acknowledging."""
        started = time.monotonic()
        await self.bus.create_group(self.group)
        info = await self.bus.group_info(self.group)
        self.stats["resumed_from"] = info.last_delivered
        end = await self.bus.last_offset()
        if self.state.offset == 0:
            await self._restore(end)
        while self.state.offset < end:
            chunk = await self.bus.read(self.state.offset, min(READ_CHUNK, end - self.state.offset))
            if not chunk:
                break
            self._apply(chunk)
            self.stats["rebuilt"] += len(chunk)
        await self._set_aside()
        self.stats["rebuild_ms"] = round((time.monotonic() - started) * 1000, 1)
        if self.stats["snapshot_discarded"] is not None and self.state.offset > 0:
            await self._save_snapshot()  # replace the unusable one now, rather than keep it around
        pending = await self.bus.pending(self.group, self.consumer)
        self.stats["redelivered"] = len(pending)
        claimed = await self._claim(time.monotonic())
        return _merge(pending, claimed)

    async def _restore(self, end: int) -> None:
        """Start the view from this reactor's latest snapshot if it is usable for this log (else,
        the latest usable one of another reactor: they all fold the same log into the same state);
        a snapshot ahead of the log's end, of another run, or that does not decode is ignored."""
        names = [self.name] + sorted((await self.bus.snapshot_offsets()).keys() - {self.name})
        first = await self.bus.read(0, 1)
        run_at_1 = None
        if first and first[0].offset == 1:
            try:
                events = decode_record(first[0].payload, 1).events
                run_at_1 = events[0] if events and isinstance(events[0], RunStarted) else None
            except LogDecodeError:
                pass
        for name in names:
            got = await self.bus.get_snapshot(name)
            if got is None:
                continue
            offset, data = got
            reason = None
            try:
                with collector_paused():  # objects that live on (gc_tuning.py)
                    state = decode_state(data, max_bytes=SNAPSHOT_MAX_BYTES)
            except SnapshotError as exc:
                reason = f"does not decode: {exc}"
            else:
                if state.offset != offset or state.offset > end:
                    reason = f"ahead of the log (snapshot at {state.offset}, log ends at {end})"
                elif state.run is None or (run_at_1 is not None and state.run != run_at_1):
                    reason = "of another run"
                elif first and first[0].offset > state.offset + 1:
                    reason = f"the log was trimmed past it (starts at {first[0].offset})"
            if reason is not None:
                if name == self.name:
                    self.stats["snapshot_discarded"] = reason
                log.warning("snapshot.discarded", reactor=self.name, snapshot_of=name, offset=offset,
                            reason=reason[:300])
                continue
            self.state = state
            assert state.run is not None
            self._set_run(state.run)
            self._snap_offset = state.offset
            self._snap_at = time.monotonic()
            self.stats["rebuilt_from"] = "snapshot"
            self.stats["snapshot_offset"] = state.offset
            self.stats["snapshot_of"] = name
            log.info("snapshot.restored", reactor=self.name, snapshot_of=name, offset=state.offset, log_end=end,
                     bytes=len(data))
            return

    def _set_run(self, run: RunStarted) -> None:
        self.seed = run.seed
        self.clock = Clock(run.epoch, run.speed)
        built = {r.name: r for r in build_reactors(run.config)}
        self.hosted = {n: Hosted(built[n]) for n in self.names}

    async def _maybe_snapshot(self) -> None:
        policy = self.snapshots
        since = self.state.offset - self._snap_offset
        if policy.every <= 0 or since <= 0 or self.state.run is None:
            return
        age = time.monotonic() - self._snap_at
        if age >= policy.min_gap_s and (since >= policy.every or age >= policy.max_age_s):
            await self._save_snapshot()

    async def _save_snapshot(self) -> None:
        started = time.monotonic()
        self._snap_at = started
        try:
            data = encode_state(self.state, max_bytes=SNAPSHOT_MAX_BYTES)
        except SnapshotError as exc:  # too large: a restart refolds the log; trimming stays below
            self.stats["snapshot_errors"] += 1
            log.warning("snapshot.skipped", reactor=self.name, offset=self.state.offset, reason=str(exc)[:300])
            return
        await self.bus.put_snapshot(self.name, self.state.offset, data)
        self._snap_offset = self.state.offset
        self.stats["snapshots_saved"] += 1
        self.stats["snapshot_bytes"] = len(data)
        self.stats["snapshot_ms"] = round((time.monotonic() - started) * 1000, 1)
        self.stats["snapshot_at"] = self.state.offset
        log.debug("snapshot.saved", reactor=self.name, offset=self.state.offset, bytes=len(data),
                  ms=self.stats["snapshot_ms"])

    def now_ms(self) -> int:
        return self.clock.now_ms() if self.clock is not None else 0

    def _due(self, h: Hosted, view: ClusterState, now: int) -> bool:
        # a lagging view may move backwards (when its fault begins): any move makes an events reactor due
        changed = h.reactor.trigger == "events" and view.offset != h.seen
        return changed or (h.wake is not None and h.wake <= now)

    async def _decide_all(self) -> None:
        """Every hosted reactor that is due decides on its view, in turn (the actor's view, or the
        lagging one a runtime fault gives it; none while it is partitioned: actors/live_faults.py)."""
        effects = self.faults.effects(self.state, self.now_ms())
        for h in self.hosted.values():
            e = effects.get(h.reactor.name)
            if self.faults.back(h.reactor.name, e):
                h.wake = self.now_ms()  # back from a partition: catch up at once
            if e is None:
                if self._due(h, self.state, self.now_ms()):
                    await self._decide(h, self.state)
            elif not e.blocked:
                view = self.faults.view(h.reactor.name, e, self.state, self.now_ms())
                if self._due(h, view, self.now_ms() + e.skew):
                    await self._decide(h, view, e)

    async def _decide(self, h: Hosted, view: ClusterState, e: Effect | None = None) -> None:
        """Decide on `view` once; a decision that lost a race is decided again later (on a lagging view,
        only once that view moves: on the same view it would be refused again, forever)."""
        reactor = h.reactor
        skew = e.skew if e is not None else 0
        now = self.now_ms() + skew
        with collector_paused():  # a decision makes objects that live on (gc_tuning.py)
            record, wake = decide(reactor, view, now, self.seed)
        lagging = view is not self.state
        h.seen, h.wake = view.offset, (None if wake is None else wake - skew)
        if lagging and h.wake is not None and h.wake <= now - skew:
            h.wake = None  # overdue on its old view: wait for the view to move
        if record is None:
            return
        if e is not None:
            self.faults.stats["stale_decisions"] += lagging
            self.faults.stats["skewed_decisions"] += bool(skew)
        expect = expectations(record, view)
        for copy in range(2 if e is not None and e.duplicate else 1):
            try:
                appended = await self.bus.append(encode_record(record), id=record.id, expect=expect,
                                                 writes=record.writes())
            except Conflict as exc:
                self._count(h, "conflicts", 1)
                log.info("decision.conflict", reactor=reactor.name, view=record.view, offset=self.state.offset,
                         key=exc.key, record=record.id, keys=list(record.writes()[:10]))
                h.wake = None if lagging else now - skew  # decide again once fresher entries are folded in
                return
            self.faults.stats["duplicates_sent"] += copy
            self._count(h, "decisions", int(copy == 0))
            self._count(h, "duplicate_appends", int(appended.duplicate))
            log.debug("decision.appended", reactor=reactor.name, offset=appended.offset, view=record.view,
                      record=record.id, events=len(record.events), keys=list(record.writes()[:10]),
                      duplicate=appended.duplicate)

    def _count(self, h: Hosted, key: str, n: int) -> None:
        self.stats[key] += n
        self.stats["reactors"][h.reactor.name][key] += n

    def _block_ms(self) -> int:
        """How long the next read may wait: 1 s, or until the earliest wake of a hosted reactor."""
        wakes = [h.wake for h in self.hosted.values() if h.wake is not None]
        if not wakes or self.clock is None:
            return 1000
        return max(1, min(1000, int(self.clock.wall_s(min(wakes) - self.now_ms()) * 1000) + 1))

    async def run(self) -> None:
        todo = await self.rebuild()
        self.tenure.maybe(self.state.offset, now=True)
        self.stats["ready"] = True
        log.info("actor.ready", reactor=self.name, offset=self.state.offset, resumed_from=self.stats["resumed_from"],
                 rebuilt_from=self.stats["rebuilt_from"], rebuilt=self.stats["rebuilt"], redelivered=len(todo))
        while True:
            await self._fold(todo)
            await self._decide_all()
            if todo:
                await self.bus.ack(self.group, [e.offset for e in todo])
                self.stats["acked"] += len(todo)
            await self._maybe_snapshot()
            self.tenure.maybe(self.state.offset)
            if self.stopping:
                return
            cut_off = self.faults.cut_off_ms(self.state, self.now_ms())
            if cut_off is not None:  # partitioned from the stream: read nothing until the fault ends
                self.faults.stats["partitioned_reads"] += 1
                wait = 1.0 if cut_off < 0 or self.clock is None else self.clock.wall_s(cut_off)
                await asyncio.sleep(min(1.0, max(0.01, wait)))
                todo = []
                continue
            todo = await self.bus.read_group(self.group, self.consumer, READ_CHUNK, self._block_ms())
            todo = _merge(todo, await self._claim(time.monotonic()))

def _merge(a: list[Entry], b: list[Entry]) -> list[Entry]:
    """Two delivered batches as one, ascending, each offset once."""
    if not b:
        return a
    return sorted({e.offset: e for e in (*a, *b)}.values(), key=lambda e: e.offset)

"""Runtime faults in a live run: the same `spec.faults` the simulator plays (replay/simulation/sim_faults.py), played
on real processes and a real Redis.

Who plays what, and why:
- The actor plays on itself what only changes how it reads and decides (`ActorFaults`, used by
  actors/reactor_loop.py): `partition` (it stops reading the stream and deciding; when the fault
  ends it reads on from where its consumer group stopped: it catches up), `stale-view` and `delay`
  (the reactor decides on a lagging copy of the view, `lag` entries behind, or holding only the
  entries that arrived at least `delay` of cluster time ago), `duplicate` (each decision appended
  twice: the second has the same id, so the bus's idempotent append keeps one), `clock-skew` (its
  clock, so its records' `t` and its wake times, `skew` off). It learns of them from its own view:
  the `FaultInjected` records are in the log like everything else, and a restarted actor finds
  them again. A fault's end is a cluster time, which a partitioned actor reads off its clock.
- The driver plays what needs a hand from outside the process (`DriverFaults`, called from
  actors/live.py's loop): `reactor-kill` (SIGKILL of the process hosting the reactor; Ray restarts it,
  and it rebuilds its view from its snapshot and the log's tail), `reactor-pause` (SIGSTOP, SIGCONT
  when the fault ends), `swizzle` (FoundationDB's: SIGSTOP the listed reactors' processes one by one,
  SIGCONT them in a seeded order, the simulator's schedule, `swizzle_pauses`), and `redis-restart`
  (SIGKILL of the run's private redis-server, started again with its AOF on the same port after the
  fault's `for`, wall time, capped at MAX_REDIS_OUTAGE_S; every actor loses its connection and exits
  for a Ray restart, the driver waits for the bus: docs/delivery.md).

What differs from the simulator, by nature: a live kill is a crash and a restart (the process is down
for as long as Ray takes to bring it back, not for the fault's `for`); a pause and a swizzle also
freeze a host's other reactors (a process is what stops); a redis-restart needs a Redis the run
started itself (`dralab run` / `dralab chaos --live` without `--redis`): with a Redis it was given,
or the embedded bus, it is skipped and said so. docs/chaos.md#live.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from dralab.core.cluster.runtime_faults import Effect, is_active, runtime_effects, swizzle_pauses
from dralab.core.log.events import LogDecodeError, decode_record
from dralab.core.state.cluster import ClusterState, FaultState
from dralab.core.state.codec import decode_state, encode_state

from .bus import Bus, BusUnavailable
from .gc_tuning import collector_paused
from .redis_bus import RedisBus
from .wire import skip_record

if TYPE_CHECKING:
    from .redis_server import RedisServer


class LiveRunView(Protocol):
    """What the driver's faults act on in a live run (actors/live.py's LiveRun, which imports this module):
    its options, bus and fold, the reactor actors and where each reactor lives, the run's clock, the actors'
    last known pids and since when the bus is unreachable."""

    options: Any
    bus: Bus
    state: ClusterState
    actors: dict[str, Any]
    clock: Any
    layout: dict[str, list[str]]
    reactor_names: list[str]
    lost_since: float | None
    pids: dict[str, int]

log = structlog.get_logger("dralab.faults")
ACTOR_KINDS = frozenset({"partition", "stale-view", "delay", "duplicate", "clock-skew"})
DRIVER_KINDS = frozenset({"reactor-kill", "reactor-pause", "swizzle", "redis-restart", "foreign-writer"})
MAX_REDIS_OUTAGE_S = 5.0
MIN_REDIS_OUTAGE_S = 0.5


def hits(target: str, reactor: str) -> bool:
    """Whether a fault on `target` hits `reactor`: itself, or one of its shards (`drivers` hits `drivers-1`)."""
    if reactor == target:
        return True
    head, _, tail = reactor.rpartition("-")
    return head == target and tail.isdigit()


def _no_swizzle(_fault: FaultState) -> list[tuple[str, int, int]]:
    return []


@dataclass
class _Lagging:
    """A reactor's lagging view: a copy of the actor's view taken when the fault began, moved forward
    only over the entries old enough to be seen (`arrived`: what came after the copy, with when)."""

    view: ClusterState
    arrived: deque[tuple[int, bytes, int]] = field(default_factory=deque)  # (offset, payload, cluster ms)


class ActorFaults:
    """The runtime faults an actor plays on itself, read off its own view (see the module docstring)."""

    def __init__(self, reactors: Iterable[str]) -> None:
        self.reactors = list(reactors)
        self.lagging: dict[str, _Lagging] = {}
        self.blocked: set[str] = set()
        self.stats: dict[str, int] = {"stale_decisions": 0, "skewed_decisions": 0, "duplicates_sent": 0,
                                      "partitioned_reads": 0}

    def _mine(self, state: ClusterState) -> list[FaultState]:
        return [f for f in state.faults.values()
                if f.kind in ACTOR_KINDS and any(hits(f.target, r) for r in self.reactors)]

    def effects(self, state: ClusterState, now: int) -> dict[str, Effect]:
        """Effect by hosted reactor name ({} without a fault: the usual path pays one dict check)."""
        if not state.faults:
            return {}
        mine = self._mine(state)
        if not mine:
            return {}
        by_target = runtime_effects(mine, now, _no_swizzle)
        out = {r: e for t, e in by_target.items() for r in self.reactors if hits(t, r)}
        for name in list(self.lagging):
            e = out.get(name)
            if e is None or not (e.lag or e.delay):
                del self.lagging[name]  # back on the actor's own view
        return out

    def back(self, name: str, effect: Effect | None) -> bool:
        """True once when `name` was blocked (partitioned) and no longer is: it decides at once."""
        if effect is not None and effect.blocked:
            self.blocked.add(name)
            return False
        if name in self.blocked:
            self.blocked.discard(name)
            return True
        return False

    def cut_off_ms(self, state: ClusterState, now: int) -> int | None:
        """While every hosted reactor is partitioned: how much cluster time is left (-1: for good);
        None when the actor may read."""
        if not state.faults:
            return None
        ends: dict[str, int] = {}
        for f in self._mine(state):
            if f.kind == "partition" and is_active(f, now):
                for r in self.reactors:
                    if hits(f.target, r):
                        end = -1 if f.until_ms < 0 else f.until_ms - now
                        ends[r] = -1 if ends.get(r, 0) < 0 or end < 0 else max(ends.get(r, 0), end)
        if len(ends) < len(self.reactors):
            return None
        return -1 if any(v < 0 for v in ends.values()) else min(ends.values())

    def note(self, offset: int, payload: bytes, now: int) -> None:
        """An entry the actor folded: lagging views will see it once it is old enough."""
        for lag in self.lagging.values():
            lag.arrived.append((offset, payload, now))

    def view(self, name: str, effect: Effect, state: ClusterState, now: int) -> ClusterState:
        """The view `name` decides on under `effect`: the actor's own, or its lagging copy moved to
        `lag` entries behind the end / to the entries at least `delay` old."""
        if not (effect.lag or effect.delay):
            return state
        lag = self.lagging.get(name)
        if lag is None:  # the fault begins: freeze a copy of the view as it is now
            with collector_paused():  # objects that live on (gc_tuning.py)
                lag = self.lagging[name] = _Lagging(decode_state(encode_state(state)))
        target = state.offset
        if effect.lag:
            target = min(target, max(0, state.offset - effect.lag))
        arrived = lag.arrived
        while arrived and arrived[0][0] <= target and (not effect.delay or arrived[0][2] <= now - effect.delay):
            offset, payload, _ = arrived.popleft()
            if offset > lag.view.offset:
                try:
                    record = decode_record(payload, offset)
                except LogDecodeError:  # set aside by the actor's own fold already: the same no-op here
                    record = skip_record(lag.view, offset)
                lag.view.apply(offset, record)
        return lag.view


class DriverFaults:
    """The runtime faults the driver plays on the actors' processes and on Redis (module docstring)."""

    def __init__(self, run: LiveRunView, redis: RedisServer | None = None) -> None:
        self.run = run
        self.redis = redis
        self.done: set[str] = set()  # one-shot faults (kill, redis-restart) already played
        self.stopped: dict[int, tuple[str, int]] = {}  # pid -> (actor, cluster ms), SIGSTOPped by us
        self.played: list[dict[str, Any]] = []  # what was done, for the run's summary
        self.skipped: list[dict[str, Any]] = []
        self.downtime_ms: dict[str, int] = {}  # reactor -> cluster ms it was down (kills, pauses, Redis)
        self._tasks: list[asyncio.Task[None]] = []  # Redis restarts: awaited at the end
        self._timers: list[asyncio.Task[None]] = []  # restarts being timed: cancelled at the end
        self._swizzles: dict[str, list[tuple[str, int, int]]] = {}
        self._foreign: dict[str, tuple[list[dict[str, str]], list[int]]] = {}  # foreign-writer: written, refused

    # ----------------------------------------------------------------- which actor hosts what

    def actors_of(self, target: str) -> list[str]:
        return [a for a, hosted in self.run.layout.items() if any(hits(target, r) for r in hosted)]

    async def _pid(self, actor: str) -> int | None:
        """The actor's current pid: the one we stopped, else asked afresh (a Redis restart or a kill
        since the last status poll gave it a new process), else the last one seen."""
        for pid, (name, _) in self.stopped.items():
            if name == actor:
                return pid
        handle = self.run.actors.get(actor)
        if handle is not None:
            with contextlib.suppress(Exception):
                status = await asyncio.wait_for(handle.status.remote(), timeout=3)
                if status.get("pid") is not None:
                    self.run.pids[actor] = int(status["pid"])
        return self.run.pids.get(actor)

    def _note(self, kind: str, fault: str, **fields: Any) -> None:
        entry = {"fault": fault, "kind": kind, "t_ms": self.run.clock.now_ms(), **fields}
        self.played.append(entry)
        log.info("fault.played", **entry)

    def _hold(self, reactors: Iterable[str], ms: int) -> None:
        for r in reactors:
            self.downtime_ms[r] = self.downtime_ms.get(r, 0) + max(0, ms)

    # ----------------------------------------------------------------- the step

    async def step(self) -> None:
        """Called on every turn of the driver's loop: play what the log's faults ask for now."""
        state = self.run.state
        if not state.faults:
            return
        now = self.run.clock.now_ms()
        mine = [f for f in state.faults.values() if f.kind in DRIVER_KINDS and f.start_ms <= now]
        want_stopped: set[str] = set()
        for f in mine:
            if f.kind == "reactor-kill" and f.fault not in self.done:
                self.done.add(f.fault)
                await self._kill(f)
            elif f.kind == "redis-restart" and f.fault not in self.done:
                self.done.add(f.fault)
                self._restart_redis(f)
            elif f.kind == "foreign-writer" and f.fault not in self.done and await self._write_foreign(f):
                self.done.add(f.fault)
            elif f.kind == "reactor-pause" and is_active(f, now):
                want_stopped.update(self.actors_of(f.target))
            elif f.kind == "swizzle":
                pauses = self._swizzles.get(f.fault)
                if pauses is None:
                    pauses = self._swizzles[f.fault] = swizzle_pauses(f, self.run.options.seed)
                for name, start, end in pauses:
                    if start <= now < end:
                        want_stopped.update(self.actors_of(name))
        await self._pause(want_stopped)

    async def _kill(self, fault: FaultState) -> None:
        for actor in self.actors_of(fault.target):
            pid = await self._pid(actor)
            if pid is None:
                self.skipped.append({"fault": fault.fault, "kind": fault.kind, "why": f"{actor}: pid not known yet"})
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            if (was := self.stopped.pop(pid, None)) is not None:
                self._hold(self.run.layout.get(actor, [actor]), self.run.clock.now_ms() - was[1])
            self._note("reactor-kill", fault.fault, actor=actor, pid=pid)
            self._timers.append(asyncio.create_task(self._time_restart(actor, pid)))

    async def _time_restart(self, actor: str, old_pid: int) -> None:
        """How long the killed actor was away: until Ray's restart of it answers, ready, with a new pid
        (or until the run ends: `finish` cancels the wait)."""
        started = time.monotonic()
        handle = self.run.actors.get(actor)
        try:
            while handle is not None and time.monotonic() - started < 120:
                with contextlib.suppress(Exception):
                    status = await asyncio.wait_for(handle.status.remote(), timeout=5)
                    if status.get("pid") not in (None, old_pid) and status.get("ready"):
                        self.run.pids[actor] = status["pid"]
                        break
                await asyncio.sleep(0.2)
        finally:
            wall = time.monotonic() - started
            self._hold(self.run.layout.get(actor, [actor]), int(wall * self.run.options.speed * 1000))

    async def _pause(self, actors: set[str]) -> None:
        """SIGSTOP the processes of `actors`, SIGCONT the others we stopped."""
        want: dict[int, str] = {}
        for actor in sorted(actors):
            if (pid := await self._pid(actor)) is not None:  # one we stopped answers from `stopped`
                want[pid] = actor
        now = self.run.clock.now_ms()
        for pid, (actor, since) in list(self.stopped.items()):
            if pid not in want:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
                del self.stopped[pid]
                self._hold(self.run.layout.get(actor, [actor]), now - since)
                self._note("resume", "", actor=actor, pid=pid)
        for pid, actor in want.items():
            if pid not in self.stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                self.stopped[pid] = (actor, now)
                self._note("pause", "", actor=actor, pid=pid)

    def _restart_redis(self, fault: FaultState) -> None:
        if self.redis is None:
            why = "the run's Redis was given to it (or the bus is embedded): only a Redis the run started is restarted"
            self.skipped.append({"fault": fault.fault, "kind": fault.kind, "why": why})
            log.warning("fault.skipped", fault=fault.fault, kind=fault.kind, why=why)
            return
        if self.redis.pid is None:  # already down (two restarts at one instant): one outage
            self.skipped.append({"fault": fault.fault, "kind": fault.kind, "why": "Redis is already restarting"})
            return
        speed = self.run.options.speed
        span = (fault.until_ms - fault.start_ms) if fault.until_ms >= 0 else 0
        outage = min(MAX_REDIS_OUTAGE_S, max(MIN_REDIS_OUTAGE_S, span / 1000 / speed))
        server = self.redis
        server.kill()  # SIGKILL: what was acknowledged is in the AOF file (written before each reply)
        self._note("redis-restart", fault.fault, outage_s=round(outage, 2))

        async def start_again() -> None:
            await asyncio.sleep(outage)
            await asyncio.to_thread(server.start)

        self._tasks.append(asyncio.create_task(start_again()))
        # every actor is down for the outage, then for its restart by Ray (not timed here: the bus outage
        # the driver measures, and each actor's rebuild, are in the run's summary)
        self._hold(self.run.reactor_names, int(outage * speed * 1000))

    async def _write_foreign(self, fault: FaultState) -> bool:
        """A stranger appends `entries` junk entries to the run's stream: the `no-payload` ones first (at
        the run's next offsets: every consumer folds a no-op there and sets it aside), then the `auto-id`
        ones (far above every offset: the bus sets each aside, once, and repairs the stream). A
        `no-payload` write that meets an `auto-id` entry not set aside yet is refused, and noted. While
        the bus is away (a redis-restart) the stranger waits, and writes the rest once it is back:
        False until every entry was written (or refused)."""
        bus = self.run.bus
        if not isinstance(bus, RedisBus):
            why = "the bus is embedded (no Redis stream a stranger could write to)"
            self.skipped.append({"fault": fault.fault, "kind": fault.kind, "why": why})
            log.warning("fault.skipped", fault=fault.fault, kind=fault.kind, why=why)
            return True
        n, form = int(fault.params["entries"]), str(fault.params.get("form", "both"))
        forms = [form] * n if form != "both" else ["no-payload"] * ((n + 1) // 2) + ["auto-id"] * (n // 2)
        written, refused = self._foreign.setdefault(fault.fault, ([], [0]))
        if self.run.lost_since is not None or (self.redis is not None and self.redis.pid is None):
            return False  # the bus is away: try again on a later step
        for i in range(len(written) + refused[0], n):
            try:
                sid = await bus.write_foreign(forms[i], f"junk from foreign-writer {fault.fault} #{i}".encode())
            except BusUnavailable:
                return False
            if sid is None:
                refused[0] += 1
            else:
                written.append({"form": forms[i], "id": sid})
        self._note("foreign-writer", fault.fault, written=written, refused=refused[0])
        return True

    async def finish(self) -> None:
        """Resume every process we stopped, wait for a Redis being restarted (the driver reads the rest of
        the log from it), stop timing restarts (an actor still away counts as away until now)."""
        await self._pause(set())
        for task in self._tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, timeout=60)
        for timer in self._timers:
            timer.cancel()
        if self._timers:
            await asyncio.wait(self._timers, timeout=2)

    def summary(self) -> dict[str, Any]:
        return {"played": self.played, "skipped": self.skipped, "downtime_ms": dict(self.downtime_ms)}

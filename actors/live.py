"""`dralab run`: the scenario live, its reactors as Ray actors, its events on Redis (or the embedded bus).

The driver plays the world: it appends the scenario's external inputs when their cluster time comes,
follows the log with a fold of its own to show progress and decide when the run is over, and keeps
every entry it folds (for the summary and `--log`). It never talks to a reactor except to start it,
ask its status and stop it: everything else goes through the log.

The driver is also the run's recorder: it reads the log through the consumer group ``recorder`` and
acknowledges each batch once it holds it, and every ``trim_every_s`` it trims the stream below what
every consumer group (the recorder's included) has acknowledged and below every reactor's latest
snapshot (a reactor that restarts needs the tail after its snapshot). If the bus goes away (Redis
restarting) the driver waits up to ``reconnect_s`` for it and carries on; the reactor actors exit
and Ray restarts them (crash-only), each waiting for the bus in turn. See docs/delivery.md.

While the run goes on, one background task polls every actor's ``status()`` and the consumer
groups' positions (about once a second with ``metrics_port``, else every ``progress_every_s``: never
one Ray call per event); with ``metrics_port`` the driver serves Prometheus metrics at /metrics, and
every ``progress_every_s`` it shows a progress line: in place on a terminal (console logs), else as a
``run.progress`` log line (actors/observability.py, docs/deploy.md#observability).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import ray
import structlog

from dralab.core.checks.invariants import Violation
from dralab.core.checks.log_check import RunChecks
from dralab.core.log.events import Record, encode_record
from dralab.core.run.config import build_reactors, run_config
from dralab.core.run.inputs import scenario_inputs
from dralab.core.scenario.load import Scenario
from dralab.core.state.cluster import ClusterState

from .bus import RECORDER_GROUP, Bus, BusUnavailable, Entry, GroupInfo
from .bus_factory import BusSpec
from .gc_tuning import Tenure
from .hosts import host_layout
from .live_faults import DriverFaults
from .live_runtime import RAY_NAMESPACE, ServiceUnavailable, live_bus, probe_redis, ray_runtime
from .live_runtime import LiveOptions as LiveOptions  # re-exported: the run's callers import it from here
from .log_sink import RecordSink
from .logs import clear_status, show_status, stdout_to_stderr
from .observability import MetricsServer, Observation, progress, progress_text
from .reactor_actor import ReactorActor
from .reactor_loop import READ_CHUNK, Clock
from .redis_server import RedisServer, redis_server_available
from .wire import decode_or_skip, set_aside_soon

log = structlog.get_logger("dralab.run")
RECORDER = "driver"  # the driver's consumer name in the recorder group


@dataclass
class LiveResult:
    state: ClusterState
    violations: list[Violation]
    entries: list[tuple[int, bytes]]
    completed: bool
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


Hook = Callable[["LiveRun"], Awaitable[None]]


class LiveRun:
    """One live run: inputs fed on the wall clock, reactors as actors, the driver's own fold."""

    def __init__(self, scenario: Scenario, options: LiveOptions, bus: Bus, spec: BusSpec,
                 sink: RecordSink | None = None) -> None:
        self.scenario, self.options, self.bus, self.spec = scenario, options, bus, spec
        self.sink = sink  # the run's .dralog, written as records are folded (actors/log_sink.py)
        self.inputs: list[Record] = []  # made at start, when the clock's epoch is known
        self.reactor_names = [r.name for r in build_reactors(run_config(scenario,
                                                                        drivers_shards=options.drivers_shards))]
        # actor name (its consumer group and snapshot) -> the reactors it hosts
        self.layout = host_layout(self.reactor_names, options.hosts)
        self.tenure = Tenure(options.gc_tenure_every)  # the driver keeps every entry and folds them all
        self.state = ClusterState()
        self.monitor = RunChecks()  # state and record-level invariants, as the simulator checks them
        self.entries: list[tuple[int, bytes]] = []
        self.actors: dict[str, Any] = {}
        self.clock = Clock(time.time(), options.speed)
        self._fed = 0
        self.stop_requested = False  # SIGTERM / Ctrl-C: end the run cleanly, keep what was recorded
        self.error: str | None = None  # the bus failed mid-run
        self.mode = "cluster" if options.ray_address else "local"
        self.trimmed = 0  # entries removed from the stream by trimming
        self.outages: list[float] = []  # seconds the bus was unreachable, per outage
        self.lost_since: float | None = None
        self._recover = False  # re-read the recorder's pending entries (a reply may have been lost)
        # What the observer task and the fold gather for metrics and the progress line.
        self.records_by_source: Counter[str] = Counter()
        self.events_by_source: Counter[str] = Counter()
        self.statuses: dict[str, dict[str, Any]] = {}  # latest status() per actor
        self.restarts: Counter[str] = Counter()  # restarts seen (the actor's pid changed)
        self.pids: dict[str, int] = {}
        self.groups: dict[str, GroupInfo] = {}
        self.log_end = 0
        self.metrics: MetricsServer | None = None
        self._observer: asyncio.Task[None] | None = None  # polls actors and groups (metrics, progress)
        self._observing = False
        self._rate_at: tuple[float, int] = (time.monotonic(), 0)  # (when, events) of the last progress line
        self.faults = DriverFaults(self)  # runtime faults played on processes and Redis (actors/live_faults.py)

    async def _feed(self) -> None:
        now = self.clock.now_ms()
        due = []
        while self._fed < len(self.inputs) and self.inputs[self._fed].t <= now:
            due.append(self.inputs[self._fed])
            self._fed += 1
        if due:
            # External inputs expect nothing; their ids make a retried append harmless. The inputs
            # count as fed only once the append succeeded (a lost reply: they are sent again).
            self._fed -= len(due)
            await self.bus.append_many([(encode_record(r), r.id, {}, r.writes()) for r in due])
            self._fed += len(due)

    async def _record(self, block_ms: int) -> list[Entry]:
        """Read the next entries through the recorder group, fold them in order (reading any gap
        from the log first: a reply lost to a broken connection left entries pending), and
        acknowledge them: the driver holds them now, so trimming may remove them."""
        delivered: list[Entry] = []
        if self._recover:
            delivered = await self.bus.pending(RECORDER_GROUP, RECORDER)
            self._recover = False
        if not delivered:
            delivered = await self.bus.read_group(RECORDER_GROUP, RECORDER, 1000, block_ms)
        new: list[Entry] = []
        for entry in delivered:
            while entry.offset > self.state.offset + 1:
                gap = [e for e in await self.bus.read(self.state.offset, min(READ_CHUNK, entry.offset - 1
                       - self.state.offset)) if e.offset < entry.offset]
                if not gap:
                    break  # not there any more: the fold records the gap as an anomaly
                self._fold(gap)
                new += gap
            if entry.offset > self.state.offset:
                self._fold([entry])
                new.append(entry)
        if delivered:
            await self.bus.ack(RECORDER_GROUP, [e.offset for e in delivered])
        return new

    async def trim(self) -> int:
        """Trim the stream below what every consumer group (the recorder's included) has
        acknowledged and below every reactor's latest snapshot (+1: its tail starts there); a
        reactor actor (a host's) without a snapshot yet keeps the whole log."""
        offsets = await self.bus.snapshot_offsets()
        keep = min(min((offsets.get(n, 0) for n in self.layout), default=0) + 1, self.state.offset + 1)
        if keep <= 1:
            return 0
        removed = await self.bus.trim_acknowledged(keep)
        self.trimmed += removed
        if removed:
            log.debug("log.trimmed", removed=removed, keep_from=keep)
        return removed

    def _bus_lost(self, exc: BusUnavailable) -> bool:
        """Note an outage of the bus; False once it has lasted longer than ``reconnect_s``."""
        now = time.monotonic()
        self._recover = True
        if self.lost_since is None:
            self.lost_since = now
            log.warning("run.bus_unreachable", error=str(exc)[:300], waiting_s=self.options.reconnect_s)
        if now - self.lost_since > self.options.reconnect_s:
            self.error = f"the log became unreachable mid-run: {exc}"
            log.error("run.bus_lost", error=str(exc), records_kept=len(self.entries))
            return False
        return True

    def _bus_back(self) -> None:
        if self.lost_since is not None:
            lasted = time.monotonic() - self.lost_since
            self.outages.append(round(lasted, 2))
            log.warning("run.bus_back", after_s=round(lasted, 2), offset=self.state.offset)
            self.lost_since = None

    def _fold(self, entries: list[Entry]) -> None:
        for entry in entries:
            record, bad = decode_or_skip(entry, self.state, "driver")
            payload = entry.payload
            if bad is not None:  # set aside; the run keeps the no-op every consumer folded instead
                set_aside_soon(self.bus, entry, bad, "driver")
                payload = encode_record(record)
            self.monitor.before(entry.offset, record, self.state)
            self.state.apply(entry.offset, record)
            self.records_by_source[record.source] += 1
            self.events_by_source[record.source] += len(record.events)
            self.entries.append((entry.offset, payload))
            if self.sink is not None:
                self.sink.write(entry.offset, payload)
            self.monitor.after(entry.offset, record, self.state)

    def settled(self) -> bool:
        """Nothing left that could change the outcome: inputs all in, no pod pending, no node coming."""
        s = self.state
        if self._fed < len(self.inputs) or s.pending_pods():
            return False
        if any(not n.ready for n in s.nodes.values()) or any(g.outstanding for g in s.node_groups.values()):
            return False
        return not any(s.pods[k].run_for_ms >= 0 for k in s.pods_by_phase["Running"])

    async def start_actors(self, timeout_s: float = 120.0) -> None:
        """Start one actor per reactor (or per host) and wait until each is consuming the log."""
        for name, hosted in self.layout.items():
            # SPREAD: on a Ray cluster the actors (driver shards above all) go to different nodes (best
            # effort: Ray may still put two shards on one node; tests/test_ray_cluster_live.py)
            self.actors[name] = ReactorActor.options(  # type: ignore[attr-defined]
                name=f"dralab-{name}-{uuid.uuid4().hex[:6]}", namespace=RAY_NAMESPACE, scheduling_strategy="SPREAD"
            ).remote(name, self.spec, self.options.log_format, self.options.snapshots, hosted)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            status = await self.actor_status()
            errors = {n: s["error"] for n, s in status.items() if s.get("error") and s.get("alive") is False}
            if errors:
                raise ServiceUnavailable(f"reactor actors failed to start: {errors}")
            if all(s.get("ready") for s in status.values()):
                return
            await asyncio.sleep(0.1)
        raise ServiceUnavailable(f"reactor actors not ready after {timeout_s:.0f}s")

    async def actor_status(self) -> dict[str, Any]:
        refs = {name: a.status.remote() for name, a in self.actors.items()}
        out = {}
        for name, ref in refs.items():
            try:
                out[name] = await asyncio.wait_for(ref, timeout=10)
            except Exception as exc:  # a restarting actor may not answer yet
                out[name] = {"error": f"{type(exc).__name__}: {exc}"}
        for name, status in out.items():
            pid = status.get("pid")
            if pid is None:
                continue
            if self.pids.get(name, pid) != pid:
                self.restarts[name] += 1
            self.pids[name] = pid
        return out

    async def poll(self) -> None:
        """Every actor's status and every consumer group's position, for metrics and progress."""
        self.statuses = await self.actor_status()
        try:
            end = await self.bus.last_offset()
            groups = {g: await self.bus.group_info(g) for g in (*self.layout, RECORDER_GROUP)}
        except Exception:  # the bus is away (the run loop says so) or a group is not there yet
            return
        self.log_end, self.groups = end, groups

    async def _stop_observer(self) -> None:
        """Stop the observer, and do not wait long for it: a cancellation can be swallowed by a bus
        call that it interrupts (and then turned into an error poll() ignores), so the loop also
        checks a flag; a status call to an actor being killed may take a while to fail."""
        task, self._observer = self._observer, None
        self._observing = False
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=2)

    async def _observe(self, every_s: float) -> None:
        while self._observing:
            with contextlib.suppress(Exception):
                await self.poll()
            await asyncio.sleep(every_s)

    def observation(self) -> Observation:
        """What the driver knows now (call from the event loop's thread)."""
        return Observation(
            state=self.state, cluster_time_s=max(0, self.clock.now_ms()) / 1000 if self.inputs else 0.0,
            records_by_source=dict(self.records_by_source), events_by_source=dict(self.events_by_source),
            actors=dict(self.statuses), restarts=dict(self.restarts), groups=dict(self.groups),
            log_end=max(self.log_end, self.state.offset), trimmed=self.trimmed,
        )

    def start_metrics(self) -> None:
        opts = self.options
        if opts.metrics_port <= 0:
            return
        try:
            self.metrics = MetricsServer(opts.metrics_host, opts.metrics_port, asyncio.get_running_loop(),
                                         self.observation)
        except OSError as exc:
            raise ServiceUnavailable(f"--metrics-port: cannot serve metrics on "
                                     f"{opts.metrics_host}:{opts.metrics_port}: {exc.strerror or exc}") from None
        log.info("run.metrics", url=f"http://{opts.metrics_host}:{self.metrics.port}/metrics")

    async def stop_actors(self) -> None:
        """Stop every actor at once (each finishes its step, up to a blocked read of 1 s), then kill.
        After runtime faults were played an actor may still be restarting (a kill, a Redis restart): the
        log holds all it appended, so it gets 1 s rather than 5 to finish its step."""
        timeout = 1.0 if self.faults.played else 5.0

        async def stop(actor: Any) -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(actor.stop.remote(), timeout=timeout)

        await asyncio.gather(*(stop(a) for a in self.actors.values()))
        for actor in self.actors.values():
            ray.kill(actor, no_restart=True)

    async def run(self, hook: Hook | None = None) -> LiveResult:
        self.start_metrics()
        try:
            await self.bus.create_group(RECORDER_GROUP)  # before anything is appended: it sees every entry
            await self.start_actors()
            opts = self.options
            if opts.metrics_port > 0 or opts.progress_every_s > 0:
                every = 1.0 if opts.metrics_port > 0 else max(1.0, opts.progress_every_s)
                self._observing = True
                self._observer = asyncio.create_task(self._observe(every))
            return await self._run(hook)
        except BaseException:
            await self._abandon()
            raise
        finally:
            await self._stop_observer()
            clear_status()
            if self.metrics is not None:
                self.metrics.close()

    async def _abandon(self) -> None:
        """The run failed (an exception, Ctrl-C before the handler, a log that cannot be written): resume
        what the faults paused and kill the actors, best effort and briefly; the caller closes the log
        file with what it holds and says so."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.faults.finish(), timeout=10)
        for actor in self.actors.values():
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)

    async def _run(self, hook: Hook | None) -> LiveResult:
        opts = self.options
        # The clock starts once every reactor listens; its epoch is recorded in RunStarted (offset 1).
        self.clock = Clock(time.time(), opts.speed)
        self.inputs = scenario_inputs(
            self.scenario, opts.seed, mode=self.mode, speed=opts.speed, epoch=self.clock.epoch,
            drivers_shards=opts.drivers_shards,
        )
        await self._feed()
        deadline = time.monotonic() + opts.timeout_s
        in_place = opts.progress_in_place
        if in_place is None:
            in_place = opts.log_format == "console" and sys.stderr.isatty()
        every_progress = min(opts.progress_every_s, 0.5) if in_place else opts.progress_every_s
        next_progress = time.monotonic()
        self._rate_at = (time.monotonic(), self.state.events_applied)
        self.tenure.maybe(self.state.offset, now=True)  # the imports, once, before the stream flows
        next_trim = time.monotonic() + opts.trim_every_s
        quiet_since = time.monotonic()
        completed = False
        while time.monotonic() < deadline and not self.stop_requested:
            new: list[Entry] = []
            try:
                await self._feed()
                new = await self._record(100)
                self.tenure.maybe(self.state.offset)
                if opts.trim_every_s > 0 and time.monotonic() >= next_trim:
                    next_trim = time.monotonic() + opts.trim_every_s
                    await self.trim()
                self._bus_back()
            except BusUnavailable as exc:
                if not self._bus_lost(exc):
                    break
                await asyncio.sleep(0.2)
            if new:
                quiet_since = time.monotonic()
            if self.sink is not None:
                self.sink.maybe_flush()
            await self.faults.step()  # also while the bus is away: a pause must end on time
            if hook is not None:
                await hook(self)
            if opts.progress_every_s > 0 and time.monotonic() >= next_progress:
                next_progress = time.monotonic() + every_progress
                self._progress(in_place)
            if self.lost_since is not None:
                continue  # never end a run on a view that may be behind the log
            if self.clock.now_ms() > self.scenario.duration_ms:
                completed = True
                break
            if self.settled() and time.monotonic() - quiet_since > 0.5:
                completed = True
                break
        await self.faults.finish()  # every process we paused resumed, a Redis being restarted back
        await self._stop_observer()  # the last status is taken here; then the actors go
        status = await self.actor_status()
        await self.stop_actors()
        if self.error is None:
            self._fold(await self._patiently(self._read_rest))
        if self.stop_requested:
            log.warning("run.interrupted", cluster_time_s=self.clock.now_ms() / 1000, records=len(self.entries))
        elif not completed:
            log.error("run.timeout", timeout_s=opts.timeout_s, cluster_time_s=self.clock.now_ms() / 1000)
        keys = ("decisions", "conflicts", "error", "rebuilt_from", "snapshot_offset", "rebuilt", "snapshots_saved")
        extra = {
            "mode": self.mode,
            "interrupted": self.stop_requested,
            "bus": self.spec.describe(),
            "wall_s": round(time.time() - self.clock.epoch, 2),
            "actors": {n: {k: s.get(k) for k in keys} for n, s in status.items()},
            "trimmed": self.trimmed,
            "bus_outages_s": self.outages,
            "faults": self.faults.summary(),
        }
        return LiveResult(self.state, self.monitor.violations, self.entries, completed, extra, self.error)

    async def _patiently(self, read: Callable[[], Awaitable[list[Entry]]]) -> list[Entry]:
        """``read()``, retried while the bus is unreachable for up to ``reconnect_s``; [] (and
        ``error`` set) after that."""
        while True:
            try:
                out = await read()
                self._bus_back()
                return out
            except BusUnavailable as exc:
                if not self._bus_lost(exc):
                    self.error = f"the log became unreachable at the end of the run: {exc}"
                    return []
                await asyncio.sleep(0.2)

    async def _read_rest(self) -> list[Entry]:
        out: list[Entry] = []
        after = self.state.offset
        while chunk := await self.bus.read(after, 1000):
            out.extend(chunk)
            after = chunk[-1].offset
        return out

    def _progress(self, in_place: bool) -> None:
        """The progress line: cluster time, events in the log and their rate, pending pods by reason,
        nodes, actors restarted; in place on a terminal, else a ``run.progress`` log line."""
        now, events = time.monotonic(), self.state.events_applied
        then, before = self._rate_at
        rate = (events - before) / (now - then) if now - then > 0.05 else 0.0
        self._rate_at = (now, events)
        fields = progress(self.observation(), rate)
        if in_place:
            show_status(progress_text(fields))
        else:
            log.info("run.progress", **fields)


async def run_live_async(scenario: Scenario, options: LiveOptions, hook: Hook | None = None,
                         sink: RecordSink | None = None) -> LiveResult:
    """Needs Ray initialised (see ray_runtime). With ``sink`` every record goes to the log file as it
    is folded, and the file is closed however the run ends (the caller reads ``sink.kept()``)."""
    with structlog.contextvars.bound_contextvars(actor="driver"):
        return await _run_live(scenario, options, hook, sink)


async def _run_live(scenario: Scenario, options: LiveOptions, hook: Hook | None,
                    sink: RecordSink | None) -> LiveResult:
    restartable: list[RedisServer] = []
    async with live_bus(options, scenario, restartable) as (bus, spec):
        if sink is not None:  # Redis and Ray answer: the file is made now, before the run starts
            sink.open()
        log.info("run.start", scenario=scenario.name, seed=options.seed, bus=spec.describe(), speed=options.speed)
        live = LiveRun(scenario, options, bus, spec, sink)
        live.faults.redis = restartable[0] if restartable else None
        loop = asyncio.get_running_loop()
        stoppable = threading.current_thread() is threading.main_thread()
        if stoppable:  # docker compose stop / kubectl delete send SIGTERM: stop and keep the log
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, lambda: setattr(live, "stop_requested", True))
        try:
            result = await live.run(hook)
        finally:
            if sink is not None:  # every ending: a valid, closed .dralog up to the last record held
                sink.close()
            if stoppable:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
    return result


def run_live(scenario: Scenario, options: LiveOptions, sink: RecordSink | None = None) -> LiveResult:
    """The whole run. stdout is the caller's (the summary): whatever Ray prints on the driver (an actor's
    lines, ``(raylet) A worker died ...``) goes to stderr while Ray is up."""
    if options.redis_url and not options.embedded:
        asyncio.run(probe_redis(options.redis_url))
    elif not options.embedded and not redis_server_available():
        options.embedded = True  # no Redis given and none installed: the embedded bus
    with stdout_to_stderr(), ray_runtime(options.ray_address, options.log_format):
        return asyncio.run(run_live_async(scenario, options, sink=sink))

"""`dralab record`, the Redis side: copy a live run's stream into a `.dralog` file while the run goes on.

Why a consumer group of its own: the run (actors/live.py) trims its stream below what *every* consumer
group has acknowledged (and below every reactor's snapshot). The recorder registers a group
``record-<pid>-<hex>`` at offset 0 as soon as the stream exists, reads through it and acknowledges an
entry only once it is written to the file (and flushed, where the writer can), so trimming never
removes an entry the recorder does not hold yet. The group is destroyed when the recorder ends; a
recorder killed with SIGKILL leaves it behind, and that group then holds trimming of that stream at
its last acknowledged entry until someone runs ``XGROUP DESTROY`` (docs/cli.md, "Recording a live run").

The file's header comes from the first record (``RunStarted``: scenario, seed, config, mode), so the
file is created only once offset 1 has arrived. A stream already trimmed below offset 1 cannot be
recorded whole: ``StreamTrimmed`` says which offsets are gone. An entry that arrives out of order
(its offset is not last+1: a lost reply) makes the recorder read the gap from the stream; what is no
longer there is reported as a gap, never invented.

The file itself is written by whatever ``open_writer`` the caller hands in (the CLI passes
replay/logs/logfile.py's LogWriter: actors/ never imports replay/). Nothing here reads a clock for the log's
sake: wall time only decides when to stop (``until_idle_s``) and when to print progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from dralab.core.log.events import LogDecodeError, RunStarted, decode_record, encode_record
from dralab.core.run.config import policies

from .bus import BusUnavailable, Entry
from .redis_bus import RedisBus, _secrets, redact_url
from .wire import no_op, set_aside

log = structlog.get_logger("dralab.record")
CONSUMER = "recorder"  # the consumer's name inside the recorder's own group
READ_COUNT = 1000  # entries per XREADGROUP


class RecordError(Exception):
    """The stream cannot be recorded as asked (trimmed below offset 1, not a dralab run)."""


class StreamTrimmed(RecordError):
    """The stream's first entry is past offset 1: the start of the run is gone."""

    def __init__(self, stream: str, first: int) -> None:
        gone = "offset 1" if first == 2 else f"offsets 1 to {first - 1}"
        super().__init__(
            f"--stream: {stream} was already trimmed when recording started: {gone} "
            f"{'is' if first == 2 else 'are'} gone (the first entry left is offset {first}); start `dralab record` "
            "before the run, or record with `dralab run --log FILE`")
        self.first = first


@dataclass
class RecordOptions:
    stream: str
    path: str
    wait_s: float = 30.0  # how long to wait for the stream and its first record (RunStarted)
    until_idle_s: float = 10.0  # stop after this long without a new entry (0: never)
    max_entries: int = 0  # stop after this many records (0: no limit)
    progress_every_s: float = 5.0  # record.progress log line this often (0: never)
    reconnect_s: float = 30.0  # how long to wait for an unreachable Redis mid-recording
    block_ms: int = 200  # longest blocking read: how fast a stop request is seen
    group: str = field(default_factory=lambda: f"record-{os.getpid()}-{uuid.uuid4().hex[:6]}")


@dataclass
class RecordResult:
    file: str | None  # None: nothing was written (no run appeared, or stopped before its first record)
    stream: str
    group: str
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    gaps: list[list[int]] = field(default_factory=list)  # [first, last] offset ranges missing from the file
    stopped: str = ""  # idle | signal | max_entries | unavailable | no_run
    header: dict[str, Any] | None = None
    error: str | None = None
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file, "stream": self.stream, "group": self.group, "records": self.records,
            "first_offset": self.first_offset, "last_offset": self.last_offset, "gaps": self.gaps,
            "stopped": self.stopped, "header": self.header, "error": self.error, "wall_s": self.wall_s,
        }


class Writer(Protocol):
    """What the recorder writes to: replay/logs/logfile.py's LogWriter (actors/ never imports replay/, so the
    caller hands it in). A ``flush()``, if the writer has one, makes what was written durable."""

    def write(self, offset: int, payload: bytes) -> None: ...

    def close(self) -> None: ...


# path, the run's RunStarted -> the writer (creating the file) and the header it wrote
OpenWriter = Callable[[str, RunStarted], tuple[Writer, dict[str, Any]]]


def run_started(payload: bytes, stream: str) -> RunStarted:
    """The run's first record (offset 1) must be ``RunStarted``: the file's header comes from it."""
    try:
        record = decode_record(payload, 1)
    except LogDecodeError as exc:
        raise RecordError(f"--stream: {stream}: {exc} (is it a dralab run?)") from None
    first = record.events[0] if record.events else None
    if not isinstance(first, RunStarted):
        found = type(first).__name__ if first is not None else "no event"
        raise RecordError(f"--stream: {stream}: offset 1 holds {found}, not RunStarted: not the start of a dralab run")
    return first


def header_fields(first: RunStarted) -> dict[str, Any]:
    """The keyword arguments of ``make_header`` (replay/logs/logfile.py) for a run that started with ``first``."""
    return {"scenario": first.scenario, "seed": first.seed, "policy": policies(first.config), "mode": first.mode}


class Recorder:
    """Records one stream; ``stop()`` (from a signal handler) ends it cleanly at the next read."""

    def __init__(self, bus: RedisBus, options: RecordOptions, open_writer: OpenWriter) -> None:
        self.bus, self.options = bus, options
        self.result = RecordResult(None, options.stream, options.group)
        self._open_writer = open_writer
        self._writer: Writer | None = None
        self._stop = False
        self._group_made = False
        self._recover = False  # re-read our pending entries (a reply lost to a broken connection)
        self._previous = b""  # payload of the last entry written (a no-op in place of a bad one takes its time)

    def stop(self) -> None:
        self._stop = True

    async def run(self) -> RecordResult:
        started = time.monotonic()
        try:
            await self._record()
        finally:
            if self._writer is not None:
                self._writer.close()  # renames FILE.part to FILE: everything received is kept
            if self._group_made:
                await self._drop_group()
            self.result.wall_s = round(time.monotonic() - started, 2)
        return self.result

    # -- the phases ----------------------------------------------------------------------------

    async def _record(self) -> None:
        opts = self.options
        deadline = time.monotonic() + opts.wait_s
        if not await self._wait_for_stream(deadline):
            return
        await self.bus.create_group(opts.group)  # at offset 0: trimming keeps what we have not acknowledged
        self._group_made = True
        log.info("record.start", stream=opts.stream, group=opts.group, file=opts.path)
        first: list[Entry] = []
        while not first:
            if self._stop:
                self.result.stopped = "signal"
                return
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                self.result.stopped = "no_run"
                return
            first = await self.bus.read_group(opts.group, CONSUMER, self._count(), min(opts.block_ms, left_ms))
        if first[0].offset != 1:
            raise StreamTrimmed(opts.stream, first[0].offset)
        self._writer, self.result.header = self._open_writer(opts.path, run_started(first[0].payload, opts.stream))
        self.result.file = opts.path
        await self._take(first)
        await self._follow()

    async def _wait_for_stream(self, deadline: float) -> bool:
        """Wait until the stream exists (a run creates it with its first consumer group, before any
        append); a recorder never creates a stream itself, so a mistyped name leaves nothing behind."""
        waiting_logged = False
        while not await self._exists():
            if self._stop:
                self.result.stopped = "signal"
                return False
            if time.monotonic() >= deadline:
                self.result.stopped = "no_run"
                return False
            if not waiting_logged:
                log.info("record.waiting", stream=self.options.stream, wait_s=self.options.wait_s)
                waiting_logged = True
            await asyncio.sleep(0.1)
        return True

    async def _follow(self) -> None:
        opts = self.options
        last_new = time.monotonic()
        next_progress = time.monotonic() + opts.progress_every_s
        rate_at = (time.monotonic(), self.result.records)
        lost_since: float | None = None
        while True:
            if self._stop:
                self.result.stopped = "signal"
                return
            if opts.max_entries and self.result.records >= opts.max_entries:
                self.result.stopped = "max_entries"
                return
            if opts.until_idle_s > 0 and time.monotonic() - last_new >= opts.until_idle_s:
                self.result.stopped = "idle"
                return
            try:
                if self._recover:
                    delivered = await self.bus.pending(opts.group, CONSUMER)
                    self._recover = False
                else:
                    delivered = await self.bus.read_group(opts.group, CONSUMER, self._count(), opts.block_ms)
                if await self._take(delivered):
                    last_new = time.monotonic()
                if lost_since is not None:
                    log.warning("record.bus_back", after_s=round(time.monotonic() - lost_since, 2))
                    lost_since = None
            except BusUnavailable as exc:
                self._recover = True
                now = time.monotonic()
                if lost_since is None:
                    lost_since = now
                    log.warning("record.bus_unreachable", error=str(exc)[:300], waiting_s=opts.reconnect_s)
                if now - lost_since > opts.reconnect_s:
                    self.result.stopped, self.result.error = "unavailable", str(exc)
                    return
                await asyncio.sleep(0.2)
                last_new = time.monotonic()  # an outage is not idleness
            if opts.progress_every_s > 0 and time.monotonic() >= next_progress:
                now = time.monotonic()
                then, before = rate_at
                rate = (self.result.records - before) / (now - then) if now > then else 0.0
                log.info("record.progress", offset=self.result.last_offset, records=self.result.records,
                         entries_per_s=round(rate, 1))
                rate_at, next_progress = (now, self.result.records), now + opts.progress_every_s

    async def _take(self, delivered: list[Entry]) -> bool:
        """Write the delivered entries in offset order (a gap before one is read from the stream
        first), make them durable where the writer can, then acknowledge them. True if any was new."""
        wrote = 0
        limit = self.options.max_entries or None
        for entry in sorted(delivered, key=lambda e: e.offset):
            last = self.result.last_offset or 0
            if entry.offset <= last:
                continue  # delivered again after a lost reply: already in the file
            if limit is not None and self.result.records >= limit:
                break
            if entry.offset > last + 1 and last > 0:
                wrote += await self._fill_gap(last, entry.offset)
                if limit is not None and self.result.records >= limit:
                    break
            self._write(entry.offset, await self._payload(entry))
            wrote += 1
        if wrote:
            flush = getattr(self._writer, "flush", None)
            if callable(flush):
                flush()
        if delivered:
            await self.bus.ack(self.options.group, [e.offset for e in delivered])
        return wrote > 0

    async def _fill_gap(self, last: int, upto: int) -> int:
        """Read offsets last+1 .. upto-1 from the stream; what is gone becomes a reported gap."""
        wrote = 0
        while last + 1 < upto:
            chunk = [e for e in await self.bus.read(last, min(READ_COUNT, upto - 1 - last)) if e.offset < upto]
            if not chunk:
                break
            for entry in chunk:
                if entry.offset > last + 1:
                    self._gap(last + 1, entry.offset - 1)
                self._write(entry.offset, await self._payload(entry))
                wrote += 1
                last = entry.offset
        if last + 1 < upto:
            self._gap(last + 1, upto - 1)
        return wrote

    async def _payload(self, entry: Entry) -> bytes:
        """What the file holds at ``entry``'s offset: its payload; for a malformed entry (``flaw``:
        fields other than dralab's, see actors/redis_bus.py) the no-op every consumer folds in its
        place (actors/wire.py), at the cluster time of the record before it, as the driver's own
        ``--log`` holds it, after setting the entry aside (once per offset, whoever meets it first).
        Foreign ids never get here: the bus sets them aside itself."""
        if entry.flaw is None:
            self._previous = entry.payload
            return entry.payload
        log.error("entry.set_aside", offset=entry.offset, reason=entry.flaw, consumer=CONSUMER,
                  size=len(entry.payload), action="recorded as the no-op every consumer folds, dead-lettered")
        await set_aside(self.bus, entry, entry.flaw, CONSUMER)
        try:
            t = decode_record(self._previous, entry.offset - 1).t
        except LogDecodeError:
            t = 0
        payload: bytes = encode_record(no_op(entry.offset, t))
        return payload

    def _gap(self, first: int, last: int) -> None:
        log.warning("record.gap", first=first, last=last, reason="not in the stream any more")
        self.result.gaps.append([first, last])

    def _write(self, offset: int, payload: bytes) -> None:
        assert self._writer is not None
        self._writer.write(offset, payload)
        self.result.records += 1
        if self.result.first_offset is None:
            self.result.first_offset = offset
        self.result.last_offset = offset

    def _count(self) -> int:
        if self.options.max_entries:
            return max(1, min(READ_COUNT, self.options.max_entries - self.result.records))
        return READ_COUNT

    # -- Redis commands the Bus interface does not have ----------------------------------------
    # (RedisBus's own clients and its error wrapper, so messages name host:port, never a password)

    async def _exists(self) -> bool:
        with self.bus._unavailable("exists"):
            return bool(await self.bus._cmd.exists(self.bus.log_key))

    async def _drop_group(self) -> None:
        """Best effort: a group left behind holds trimming of the stream (docs/cli.md says how to drop it)."""
        try:
            with self.bus._unavailable("xgroup destroy"):
                await self.bus._cmd.xgroup_destroy(self.bus.log_key, self.options.group)
            self._group_made = False
        except Exception as exc:  # noqa: BLE001 - reported, never raised over the recording's own outcome
            log.warning("record.group_left", group=self.options.group, stream=self.options.stream,
                        error=str(exc)[:300],
                        remove_with=f"XGROUP DESTROY {self.bus.log_key} {self.options.group}")


async def record(url: str, options: RecordOptions, open_writer: OpenWriter,
                 on_recorder: Callable[[Recorder], None] | None = None, connect_timeout_s: float = 3.0) -> RecordResult:
    """Connect (``BusUnavailable`` if Redis does not answer), record, close. ``on_recorder`` gets the
    recorder before it starts (the CLI hooks its signal handlers to ``stop``)."""
    try:
        bus = await RedisBus.connect(url, options.stream, connect_timeout_s=connect_timeout_s)
    except ValueError as exc:  # a URL redis-py cannot parse: say so, without its password
        text = str(exc)
        for secret in _secrets(url):
            text = text.replace(secret, "***")
        raise RecordError(f"--redis: bad Redis URL {redact_url(url)}: {text}") from None
    try:
        recorder = Recorder(bus, options, open_writer)
        if on_recorder is not None:
            on_recorder(recorder)
        return await recorder.run()
    finally:
        with contextlib.suppress(Exception):
            await bus.close()

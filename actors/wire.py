"""Bad input on the wire: what a consumer does with a log entry it cannot use.

An entry that does not decode, or whose record has a schema version newer than this dralab, must
not stop a consumer, and must not make consumers disagree on offsets. So every consumer (each
reactor actor's fold, the driver's fold) does the same with it:

1. folds it as an **applied no-op** (``skip_record``: no event, no write, the cluster time
   unchanged), so the view's offset moves past it exactly as it moves past a good entry. The
   no-op is an external input (source ``scenario``, view -1) with the id ``dead-letter/<offset>``;
   the driver records it in the run's ``.dralog`` in place of the bad entry, so the file holds
   what every consumer folded, and its summary and verify work as for any run;
2. logs one ``entry.set_aside`` error line with the offset, the reason and the consumer (never the
   payload: it is untrusted and may be large);
3. sets it aside with ``Bus.dead_letter`` (once per offset, whoever meets it first; the payload is
   cut to 64 KiB), before acknowledging it, so a crash in between meets it again;
4. acknowledges it like any other entry and carries on.

See docs/delivery.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

from dralab.core.log.events import LogDecodeError, Record, decode_record
from dralab.core.state.cluster import ClusterState

from .bus import Bus, Entry

__all__ = ["SKIPPED_ID_PREFIX", "decode_or_skip", "drain", "no_op", "set_aside", "set_aside_soon", "skip_record"]

log = structlog.get_logger("dralab.wire")
SKIPPED_ID_PREFIX = "dead-letter/"  # id of the no-op record folded in place of a bad entry: + offset

# Dead letters written in the background by synchronous folds (the driver's): kept here so the
# event loop does not drop a running task (it only holds weak references).
_background: set[asyncio.Task[Any]] = set()


def skip_record(state: ClusterState, offset: int) -> Record:
    """The record folded in place of the bad entry at ``offset``: no events, writes nothing, keeps
    the view's cluster time."""
    return no_op(offset, state.t)


def no_op(offset: int, t: int) -> Record:
    """The no-op in place of the bad entry at ``offset``, at cluster time ``t`` (the recorder, which
    does not fold, takes the time of the record before it: the view's time after folding it)."""
    return Record(id=f"{SKIPPED_ID_PREFIX}{offset}", source="scenario", view=-1, t=t, events=())


def decode_or_skip(entry: Entry, state: ClusterState, consumer: str) -> tuple[Record, str | None]:
    """The entry's record and None; or, for a bad entry, ``skip_record`` and the reason (the
    ``entry.set_aside`` error line is logged here)."""
    try:
        if entry.flaw is not None:  # malformed fields (actors/redis_bus.py): its payload is text
            raise LogDecodeError(entry.offset, entry.flaw)
        return decode_record(entry.payload, entry.offset), None
    except LogDecodeError as exc:
        reason = exc.detail
        log.error("entry.set_aside", offset=entry.offset, reason=reason, consumer=consumer,
                  size=len(entry.payload), action="skipped, dead-lettered and acknowledged")
        return skip_record(state, entry.offset), reason


async def set_aside(bus: Bus, entry: Entry, reason: str, consumer: str) -> bool:
    """Write the dead letter (idempotent per offset); True if this call stored it."""
    return await bus.dead_letter(entry.offset, entry.payload, reason, consumer)


def set_aside_soon(bus: Bus, entry: Entry, reason: str, consumer: str) -> None:
    """``set_aside`` from synchronous code running in an event loop: as a background task
    (without a running loop: not written; the reactor actors, which consume every entry, write
    it anyway). A failure is logged, never raised."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    task = loop.create_task(_quietly(set_aside(bus, entry, reason, consumer), entry.offset))
    _background.add(task)
    task.add_done_callback(_background.discard)


async def drain() -> None:
    """Wait for the background dead letters of this loop (tests, and a clean end of a run)."""
    here = asyncio.get_running_loop()
    mine = [t for t in _background if t.get_loop() is here]
    if mine:
        await asyncio.gather(*mine, return_exceptions=True)


async def _quietly(write: Coroutine[Any, Any, bool], offset: int) -> None:
    try:
        await write
    except Exception as exc:  # a background task: say it, never raise into the loop's handler
        log.warning("entry.dead_letter_failed", offset=offset, error=f"{type(exc).__name__}: {exc}")

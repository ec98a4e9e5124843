"""The log ("bus") interface: an ordered, append-only log of opaque payloads.

The log is the single source of truth of a dralab cluster (docs/architecture.md, "One log, the single
source of truth"). The bus deliberately knows nothing about event schemas: it stores bytes, numbers
them with dense offsets starting at 1 (offset 0 means "nothing"), and keeps for every object key the
offset of the last entry that wrote it (its *version*). An append checks expected versions and an
idempotency id and bumps the versions of the keys it writes, all atomically -- the same optimistic
concurrency etcd gives the API server.
That makes a stale view a recordable conflict instead of a silent lost update, and makes retries
of an append (after a timeout, a crash, a redelivery) safe.

Three implementations share one contract test suite (tests/test_bus_contract.py):
``MemoryBus`` (in-process; hosted by the embedded bus), ``RedisBus`` (Redis Streams) and ``RayBus``
(a ``MemoryBus`` hosted by a Ray actor for ``dralab run`` without Redis).

Delivery on the wire (docs/delivery.md): consumer groups give at-least-once delivery; a consumer
that stops acknowledging has its entries claimed by its replacement (``claim_stale``); an entry
no consumer can decode is set aside once in a dead-letter stream (``dead_letter``); the log is
trimmed only below what every consumer group has acknowledged (``trim_acknowledged``); readers
keep state snapshots next to the log (``put_snapshot``/``get_snapshot``) so a restart folds only
the tail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "DEAD_LETTERS_MAXLEN",
    "MAX_DEAD_PAYLOAD",
    "MAX_DEAD_REASON",
    "RECORDER_GROUP",
    "AppendItem",
    "Appended",
    "Bus",
    "BusUnavailable",
    "Conflict",
    "DeadLetter",
    "Entry",
    "FlawedEntry",
    "GroupInfo",
    "UnknownGroup",
    "dead_letter_of",
]

MAX_DEAD_PAYLOAD = 64 * 1024  # bytes of a bad entry kept in its dead letter (payloads are untrusted)
MAX_DEAD_REASON = 1024  # characters of the reason kept
DEAD_LETTERS_MAXLEN = 10_000  # dead letters kept, about (the oldest go first); still set aside once each
RECORDER_GROUP = "recorder"  # the group a recorder (an exporter of the stream) reads and acknowledges with

# (payload, id, expect, writes): one element of ``Bus.append_many``.
AppendItem = tuple[bytes, str, Mapping[str, int], Sequence[str]]


@dataclass(frozen=True)
class Entry:
    """One log entry as read back."""

    offset: int
    payload: bytes

    @property
    def flaw(self) -> str | None:
        """Why the entry at this offset is not what dralab appends (``FlawedEntry``); None here."""
        return None


@dataclass(frozen=True)
class FlawedEntry(Entry):
    """The entry at a run's offset is not what dralab appends (RedisBus: fields other than ``p`` and
    ``i``, e.g. no payload field): its payload is the fields as text, which never decodes, and
    every consumer sets it aside with ``reason`` (actors/wire.py). A subclass, not a field of
    ``Entry``, so the read path's hot loop builds the two-field object it always did."""

    reason: str

    @property
    def flaw(self) -> str | None:
        return self.reason


@dataclass(frozen=True)
class Appended:
    """Result of an append.

    ``duplicate`` is True when the idempotency id had already been appended: nothing was written
    and ``offset`` is the offset of the original append, so a retry is indistinguishable from a
    success (apart from this flag).
    """

    offset: int
    duplicate: bool


class Conflict(Exception):
    """An expected version did not match: the writer decided on a stale view.

    ``appended`` holds the results of the items of an ``append_many`` batch that were appended
    before the conflicting one (empty for a single ``append``), so a caller knows what landed.
    """

    def __init__(self, key: str, expected: int, actual: int, appended: Sequence[Appended] = ()) -> None:
        super().__init__(f"version conflict on {key!r}: expected version {expected}, actual {actual}")
        self.key = key
        self.expected = expected
        self.actual = actual
        self.appended: list[Appended] = list(appended)

    def __reduce__(self) -> tuple[type[Conflict], tuple[str, int, int, list[Appended]]]:
        # Keep the attributes when pickled (Ray, multiprocessing); the default reduce would call
        # __init__ with the message only.
        return (Conflict, (self.key, self.expected, self.actual, self.appended))


@dataclass(frozen=True)
class GroupInfo:
    """State of a consumer group."""

    last_delivered: int  # highest offset delivered to the group (0: nothing yet)
    pending: int  # delivered but not acknowledged


@dataclass(frozen=True)
class DeadLetter:
    """An entry set aside because a consumer could not use it (it does not decode, or its schema
    version is newer than this dralab). One per log offset, however many consumers met it: the
    first one to set it aside names itself in ``consumer``.

    ``payload`` is the raw entry cut to ``MAX_DEAD_PAYLOAD`` bytes; ``size`` is its full length.
    A foreign entry (RedisBus: an id that is not an offset of the run) has ``offset`` 0 and its raw
    stream id in ``stream_id``; it is set aside by the bus itself (docs/delivery.md, "Foreign entries").
    """

    offset: int
    reason: str
    consumer: str
    payload: bytes
    size: int
    stream_id: str = ""


def dead_letter_of(offset: int, payload: bytes, reason: str, consumer: str) -> DeadLetter:
    """A ``DeadLetter`` with the payload and the reason cut to their bounds (every bus uses this)."""
    return DeadLetter(int(offset), str(reason)[:MAX_DEAD_REASON], str(consumer)[:MAX_DEAD_REASON],
                      bytes(payload[:MAX_DEAD_PAYLOAD]), len(payload))


class BusUnavailable(Exception):
    """The backing store cannot be reached. The message says where, never with a password."""


class UnknownGroup(LookupError):
    """A consumer-group operation named a group that was never created (Redis: NOGROUP)."""

    def __init__(self, group: str) -> None:
        super().__init__(f"no such consumer group {group!r} (call create_group first)")
        self.group = group

    def __reduce__(self) -> tuple[type[UnknownGroup], tuple[str]]:
        return (UnknownGroup, (self.group,))


@runtime_checkable
class Bus(Protocol):
    """The log as every component sees it. All methods are coroutines."""

    async def append(
        self, payload: bytes, *, id: str, expect: Mapping[str, int], writes: Sequence[str]
    ) -> Appended:
        """Atomically: if ``id`` was seen return ``Appended(original, True)``; elif any
        ``expect[k] != version(k)`` raise ``Conflict``; else append at ``last_offset()+1``, set
        ``version(k)`` to that offset for every ``k`` in ``writes`` and remember ``id``."""
        ...

    async def append_many(self, items: Sequence[AppendItem]) -> list[Appended]:
        """Append items in order, each exactly as ``append``; stop at the first conflict and
        raise it (items before it stay appended, listed in ``Conflict.appended``)."""
        ...

    async def read(self, after: int = 0, count: int | None = None, block_ms: int = 0) -> list[Entry]:
        """Entries with offset > ``after``, ascending, at most ``count``. If there are none and
        ``block_ms > 0``, wait up to ``block_ms`` for new ones (else return [])."""
        ...

    async def last_offset(self) -> int:
        """Offset of the last entry, 0 for an empty log."""
        ...

    async def version(self, key: str) -> int:
        """Offset of the last entry that wrote ``key``, 0 if never written."""
        ...

    async def create_group(self, group: str) -> None:
        """Create a consumer group positioned before offset 1. Idempotent."""
        ...

    async def read_group(
        self, group: str, consumer: str, count: int = 100, block_ms: int = 0
    ) -> list[Entry]:
        """Entries never delivered to ``group`` (XREADGROUP '>'); they become pending for
        ``consumer`` until acknowledged."""
        ...

    async def pending(self, group: str, consumer: str) -> list[Entry]:
        """Entries delivered to ``consumer`` and not acknowledged, ascending (XREADGROUP 0):
        what a restarted consumer must process again before reading new ones."""
        ...

    async def ack(self, group: str, offsets: Sequence[int]) -> None:
        """Acknowledge entries for the group. Unknown or already-acked offsets are ignored."""
        ...

    async def group_info(self, group: str) -> GroupInfo:
        """Delivery position and number of pending entries of a group."""
        ...

    async def claim_stale(
        self, group: str, consumer: str, min_idle_ms: int, count: int = 100
    ) -> list[Entry]:
        """Take over entries of ``group`` delivered (to any consumer) at least ``min_idle_ms``
        ago and still not acknowledged (XAUTOCLAIM): they become pending for ``consumer``, as
        if just delivered to it, and are returned ascending, at most ``count``. This is how a
        replacement consumer (a new name in the same group) finishes what a consumer that
        stopped acknowledging left behind. Reading one's own pending entries (``pending``)
        counts as a new delivery and restarts their idle time."""
        ...

    async def dead_letter(self, offset: int, payload: bytes, reason: str, consumer: str) -> bool:
        """Set the entry at ``offset`` aside in the dead-letter stream with ``reason`` and the
        name of the ``consumer`` that could not use it (payload and reason cut to their bounds,
        see ``dead_letter_of``). Idempotent per offset: True if this call stored it, False if
        that offset had already been set aside (by this or any other consumer)."""
        ...

    async def dead_letters(self) -> list[DeadLetter]:
        """The dead letters, in the order they were set aside (the latest ``DEAD_LETTERS_MAXLEN``
        or so: the oldest are dropped past that, though their offsets stay set aside)."""
        ...

    async def trim_acknowledged(self, keep_from: int | None = None) -> int:
        """Remove the entries every consumer group is done with and return how many went.

        The floor is the smallest, over all groups, of the group's oldest pending entry, or
        (nothing pending) its last delivered offset + 1, and of ``keep_from`` when given (what
        the caller still needs for other reasons: a snapshot's tail); entries below the floor are
        removed, none at or above it. With no group at all nothing is removed. A recorder counts as a
        group like any other (``RECORDER_GROUP``). Offsets keep their numbers: ``read(after)``,
        ``last_offset``, versions and idempotency ids are unaffected (a duplicate of a trimmed
        append is still recognised), and ``read(0)`` starts at the floor. A group created after
        a trim starts at the floor: it cannot see what was removed."""
        ...

    async def put_snapshot(self, name: str, offset: int, data: bytes) -> None:
        """Store ``data`` (a state snapshot at log ``offset``, see core/state/codec.py) as the
        latest snapshot of ``name`` (a reactor), replacing any earlier one whatever its offset.
        Snapshot and offset are written together (atomically): ``get_snapshot`` never sees one
        without the other. Snapshots are a cache of the log: trimming does not touch them."""
        ...

    async def get_snapshot(self, name: str) -> tuple[int, bytes] | None:
        """The latest snapshot of ``name`` as ``(offset, data)``, None if there is none."""
        ...

    async def snapshot_offsets(self) -> dict[str, int]:
        """Name -> offset of every stored snapshot (without the data): what a trimmer must keep
        the tail of (entries above each offset)."""
        ...

    async def close(self) -> None:
        """Release connections. The log itself is not affected."""
        ...

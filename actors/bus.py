"""The log ("bus") interface: an ordered, append-only log of opaque payloads.

The log is the single source of truth of a dralab cluster (see DESIGN.md). The bus deliberately
knows nothing about event schemas: it stores bytes, numbers them with dense offsets starting at 1
(offset 0 means "nothing"), and keeps for every object key the offset of the last entry that wrote
it (its *version*). An append checks expected versions and an idempotency id and bumps the versions
of the keys it writes, all atomically -- the same optimistic concurrency etcd gives the API server.
That makes a stale view a recordable conflict instead of a silent lost update, and makes retries
of an append (after a timeout, a crash, a redelivery) safe.

Three implementations share one contract test suite (tests/test_bus_contract.py):
``MemoryBus`` (in-process; hosted by the embedded bus), ``RedisBus`` (Redis Streams) and ``RayBus``
(a ``MemoryBus`` hosted by a Ray actor for ``dralab run`` without Redis).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "AppendItem",
    "Appended",
    "Bus",
    "BusUnavailable",
    "Conflict",
    "Entry",
    "GroupInfo",
    "UnknownGroup",
]

# (payload, id, expect, writes): one element of ``Bus.append_many``.
AppendItem = tuple[bytes, str, Mapping[str, int], Sequence[str]]


@dataclass(frozen=True)
class Entry:
    """One log entry as read back."""

    offset: int
    payload: bytes


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

    async def close(self) -> None:
        """Release connections. The log itself is not affected."""
        ...

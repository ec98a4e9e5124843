"""In-process bus: the log as Python lists and dicts.

Used by the deterministic simulator (so every operation also exists as a plain synchronous
``*_nowait`` method that needs no event loop and never yields) and, inside a Ray actor, as the
embedded bus. Blocked readers wait on futures created in *their* running loop and resolved by the
next append, so one ``MemoryBus`` is not tied to a single event loop.

Delivery times of pending entries (for ``claim_stale``) come from an injectable ``clock``
(``time.monotonic`` by default), so tests of reclaiming can use a fake one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .bus import (
    DEAD_LETTERS_MAXLEN,
    Appended,
    AppendItem,
    Conflict,
    DeadLetter,
    Entry,
    GroupInfo,
    UnknownGroup,
    dead_letter_of,
)

__all__ = ["MemoryBus"]


@dataclass
class _Group:
    last_delivered: int = 0
    pending: dict[int, tuple[str, float]] = field(default_factory=dict)  # offset -> (consumer, delivered at)


class MemoryBus:
    """A ``Bus`` held in memory. Not thread-safe; safe for any number of asyncio tasks."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._first = 1  # offset of _payloads[0]: 1 until the log is trimmed
        self._payloads: list[bytes] = []  # offset n is at index n - _first
        self._dead: dict[int, DeadLetter] = {}  # offset -> dead letter, in the order set aside
        self._dead_seen: set[int] = set()  # every offset ever set aside (the letters are capped)
        self._versions: dict[str, int] = {}
        self._ids: dict[str, int] = {}
        self._groups: dict[str, _Group] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._snapshots: dict[str, tuple[int, bytes]] = {}

    # -- synchronous core (the simulator calls these directly) ---------------------------------

    def append_nowait(
        self, payload: bytes, *, id: str, expect: Mapping[str, int], writes: Sequence[str]
    ) -> Appended:
        """``Bus.append`` without an event loop."""
        orig = self._ids.get(id)
        if orig is not None:
            return Appended(orig, True)
        versions = self._versions
        for key, want in expect.items():
            have = versions.get(key, 0)
            if have != want:
                raise Conflict(key, want, have)
        self._payloads.append(bytes(payload))
        offset = self._first - 1 + len(self._payloads)
        for key in writes:
            versions[key] = offset
        self._ids[id] = offset
        if self._waiters:
            self._wake()
        return Appended(offset, False)

    def append_many_nowait(self, items: Sequence[AppendItem]) -> list[Appended]:
        """``Bus.append_many`` without an event loop."""
        done: list[Appended] = []
        for payload, id_, expect, writes in items:
            try:
                done.append(self.append_nowait(payload, id=id_, expect=expect, writes=writes))
            except Conflict as c:
                raise Conflict(c.key, c.expected, c.actual, done) from None
        return done

    def read_nowait(self, after: int = 0, count: int | None = None) -> list[Entry]:
        """``Bus.read`` without blocking."""
        base = self._first - 1  # offset just before _payloads[0]
        start = max(after, base) - base
        size = len(self._payloads)
        stop = size if count is None else min(size, start + max(count, 0))
        return [Entry(base + i + 1, self._payloads[i]) for i in range(start, stop)]

    def last_offset_nowait(self) -> int:
        return self._first - 1 + len(self._payloads)

    def version_nowait(self, key: str) -> int:
        return self._versions.get(key, 0)

    def create_group_nowait(self, group: str) -> None:
        self._groups.setdefault(group, _Group())

    def read_group_nowait(self, group: str, consumer: str, count: int = 100) -> list[Entry]:
        """``Bus.read_group`` without blocking."""
        g = self._group(group)
        entries = self.read_nowait(g.last_delivered, count)
        now = self._clock() if entries else 0.0
        for e in entries:
            g.pending[e.offset] = (consumer, now)
        if entries:
            g.last_delivered = entries[-1].offset
        return entries

    def pending_nowait(self, group: str, consumer: str) -> list[Entry]:
        """``Bus.pending``; like XREADGROUP 0, this delivers them again (their idle time restarts)."""
        g = self._group(group)
        offsets = sorted(o for o, (c, _) in g.pending.items() if c == consumer)
        now = self._clock() if offsets else 0.0
        for o in offsets:
            g.pending[o] = (consumer, now)
        return [Entry(o, self._payload(o)) for o in offsets]

    def ack_nowait(self, group: str, offsets: Sequence[int]) -> None:
        g = self._groups.get(group)
        if g is None:  # like XACK: acking on a missing group is a no-op
            return
        for o in offsets:
            g.pending.pop(o, None)

    def group_info_nowait(self, group: str) -> GroupInfo:
        g = self._group(group)
        return GroupInfo(g.last_delivered, len(g.pending))

    def claim_stale_nowait(self, group: str, consumer: str, min_idle_ms: int, count: int = 100) -> list[Entry]:
        """``Bus.claim_stale`` without an event loop."""
        g = self._group(group)
        now = self._clock()
        idle_s = max(min_idle_ms, 0) / 1000
        claimed: list[Entry] = []
        for o in sorted(g.pending):
            if len(claimed) >= max(count, 0):
                break
            if now - g.pending[o][1] >= idle_s:
                g.pending[o] = (consumer, now)
                claimed.append(Entry(o, self._payload(o)))
        return claimed

    def dead_letter_nowait(self, offset: int, payload: bytes, reason: str, consumer: str) -> bool:
        """``Bus.dead_letter`` without an event loop."""
        if offset in self._dead_seen:
            return False
        self._dead_seen.add(offset)
        self._dead[offset] = dead_letter_of(offset, payload, reason, consumer)
        if len(self._dead) > DEAD_LETTERS_MAXLEN:
            del self._dead[next(iter(self._dead))]
        return True

    def dead_letters_nowait(self) -> list[DeadLetter]:
        return list(self._dead.values())

    def trim_acknowledged_nowait(self, keep_from: int | None = None) -> int:
        """``Bus.trim_acknowledged`` without an event loop."""
        if not self._groups:
            return 0
        floor = min(min(g.pending) if g.pending else g.last_delivered + 1 for g in self._groups.values())
        if keep_from is not None:
            floor = min(floor, keep_from)
        drop = min(max(floor - self._first, 0), len(self._payloads))
        if drop:
            del self._payloads[:drop]
            self._first += drop
        return drop

    def put_snapshot_nowait(self, name: str, offset: int, data: bytes) -> None:
        self._snapshots[name] = (int(offset), bytes(data))

    def get_snapshot_nowait(self, name: str) -> tuple[int, bytes] | None:
        return self._snapshots.get(name)

    def snapshot_offsets_nowait(self) -> dict[str, int]:
        return {name: off for name, (off, _) in self._snapshots.items()}

    # -- the async Bus -------------------------------------------------------------------------

    async def append(
        self, payload: bytes, *, id: str, expect: Mapping[str, int], writes: Sequence[str]
    ) -> Appended:
        return self.append_nowait(payload, id=id, expect=expect, writes=writes)

    async def append_many(self, items: Sequence[AppendItem]) -> list[Appended]:
        return self.append_many_nowait(items)

    async def read(self, after: int = 0, count: int | None = None, block_ms: int = 0) -> list[Entry]:
        entries = self.read_nowait(after, count)
        if entries or block_ms <= 0 or (count is not None and count <= 0):
            return entries
        deadline = time.monotonic() + block_ms / 1000
        while not entries and await self._wait_until(deadline):
            entries = self.read_nowait(after, count)
        return entries

    async def last_offset(self) -> int:
        return self.last_offset_nowait()

    async def version(self, key: str) -> int:
        return self.version_nowait(key)

    async def create_group(self, group: str) -> None:
        self.create_group_nowait(group)

    async def read_group(
        self, group: str, consumer: str, count: int = 100, block_ms: int = 0
    ) -> list[Entry]:
        entries = self.read_group_nowait(group, consumer, count)
        if entries or block_ms <= 0 or count <= 0:
            return entries
        deadline = time.monotonic() + block_ms / 1000
        while not entries and await self._wait_until(deadline):
            entries = self.read_group_nowait(group, consumer, count)
        return entries

    async def pending(self, group: str, consumer: str) -> list[Entry]:
        return self.pending_nowait(group, consumer)

    async def ack(self, group: str, offsets: Sequence[int]) -> None:
        self.ack_nowait(group, offsets)

    async def group_info(self, group: str) -> GroupInfo:
        return self.group_info_nowait(group)

    async def claim_stale(
        self, group: str, consumer: str, min_idle_ms: int, count: int = 100
    ) -> list[Entry]:
        return self.claim_stale_nowait(group, consumer, min_idle_ms, count)

    async def dead_letter(self, offset: int, payload: bytes, reason: str, consumer: str) -> bool:
        return self.dead_letter_nowait(offset, payload, reason, consumer)

    async def dead_letters(self) -> list[DeadLetter]:
        return self.dead_letters_nowait()

    async def trim_acknowledged(self, keep_from: int | None = None) -> int:
        return self.trim_acknowledged_nowait(keep_from)

    async def put_snapshot(self, name: str, offset: int, data: bytes) -> None:
        self.put_snapshot_nowait(name, offset, data)

    async def get_snapshot(self, name: str) -> tuple[int, bytes] | None:
        return self.get_snapshot_nowait(name)

    async def snapshot_offsets(self) -> dict[str, int]:
        return self.snapshot_offsets_nowait()

    async def close(self) -> None:
        """Nothing to release: the log lives as long as this object."""

    # -- helpers -------------------------------------------------------------------------------

    def _payload(self, offset: int) -> bytes:
        return self._payloads[offset - self._first]

    def _group(self, group: str) -> _Group:
        g = self._groups.get(group)
        if g is None:
            raise UnknownGroup(group)
        return g

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # appended from synchronous code (the simulator)
            here = None
        for fut in waiters:
            if fut.done():
                continue
            loop = fut.get_loop()
            if loop is here:
                fut.set_result(None)
            else:  # a waiter in another loop or thread: resolve it there
                with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                    loop.call_soon_threadsafe(_resolve, fut)

    async def _wait_until(self, deadline: float) -> bool:
        """Wait for the next append or the deadline; False once the deadline has passed."""
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            return False
        finally:
            if not fut.done():
                fut.cancel()
            if fut in self._waiters:
                self._waiters.remove(fut)
        return True


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)

"""The embedded bus: a ``MemoryBus`` hosted by a Ray actor, for ``dralab run`` without Redis.

Every reactor actor talks to the one ``LogActor`` through ``RayBus``, which has the same contract
as ``RedisBus`` (tests/test_bus_contract.py runs the same suite on both). The actor is async with
a large ``max_concurrency`` so a reader blocked in ``read``/``read_group`` never holds up appends
from others. It is not restartable: a restarted actor re-runs its constructor and would come
back with an empty log, silently rewriting history, so a dead log actor surfaces as
``BusUnavailable`` instead.

Domain errors (``Conflict``, ``UnknownGroup``) are returned by the actor as values and re-raised
here, so callers see the very same exception types and attributes as with the other buses,
not a ``RayTaskError`` wrapper.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import ray
from ray.actor import ActorHandle
from ray.exceptions import RayActorError

from .bus import Appended, AppendItem, BusUnavailable, Conflict, DeadLetter, Entry, GroupInfo, UnknownGroup
from .memory_bus import MemoryBus

__all__ = ["LogActor", "RayBus", "start_log_actor"]

T = TypeVar("T")
MAX_CONCURRENCY = 1000  # concurrent calls into the log actor, blocked readers included


@dataclass(frozen=True)
class _Raised:
    """A domain exception carried back as a value (see module docstring)."""

    exc: Exception


async def _guarded(aw: Awaitable[T]) -> T | _Raised:
    try:
        return await aw
    except (Conflict, UnknownGroup) as e:
        return _Raised(e)


@ray.remote
class LogActor:
    """Hosts one in-memory log. Every method is ``async def`` (a plain ``def`` would block the
    actor's event loop, and with it every blocked reader)."""

    def __init__(self) -> None:
        self._bus = MemoryBus()

    async def append(
        self, payload: bytes, id: str, expect: Mapping[str, int], writes: Sequence[str]
    ) -> Appended | _Raised:
        return await _guarded(self._bus.append(payload, id=id, expect=expect, writes=writes))

    async def append_many(self, items: Sequence[AppendItem]) -> list[Appended] | _Raised:
        return await _guarded(self._bus.append_many(items))

    async def read(self, after: int, count: int | None, block_ms: int) -> list[Entry]:
        return await self._bus.read(after, count, block_ms)

    async def last_offset(self) -> int:
        return await self._bus.last_offset()

    async def version(self, key: str) -> int:
        return await self._bus.version(key)

    async def create_group(self, group: str) -> None:
        await self._bus.create_group(group)

    async def read_group(self, group: str, consumer: str, count: int, block_ms: int) -> list[Entry] | _Raised:
        return await _guarded(self._bus.read_group(group, consumer, count, block_ms))

    async def pending(self, group: str, consumer: str) -> list[Entry] | _Raised:
        return await _guarded(self._bus.pending(group, consumer))

    async def ack(self, group: str, offsets: Sequence[int]) -> None:
        await self._bus.ack(group, offsets)

    async def group_info(self, group: str) -> GroupInfo | _Raised:
        return await _guarded(self._bus.group_info(group))

    async def claim_stale(
        self, group: str, consumer: str, min_idle_ms: int, count: int
    ) -> list[Entry] | _Raised:
        return await _guarded(self._bus.claim_stale(group, consumer, min_idle_ms, count))

    async def dead_letter(self, offset: int, payload: bytes, reason: str, consumer: str) -> bool:
        return await self._bus.dead_letter(offset, payload, reason, consumer)

    async def dead_letters(self) -> list[DeadLetter]:
        return await self._bus.dead_letters()

    async def trim_acknowledged(self, keep_from: int | None) -> int:
        return await self._bus.trim_acknowledged(keep_from)

    async def put_snapshot(self, name: str, offset: int, data: bytes) -> None:
        await self._bus.put_snapshot(name, offset, data)

    async def get_snapshot(self, name: str) -> tuple[int, bytes] | None:
        return await self._bus.get_snapshot(name)

    async def snapshot_offsets(self) -> dict[str, int]:
        return await self._bus.snapshot_offsets()

    async def ping(self) -> bool:
        return True


def start_log_actor(name: str) -> ActorHandle[Any]:
    """Start (or get, if it already runs) the named log actor; not detached, no CPU reserved."""
    return LogActor.options(  # type: ignore[attr-defined,no-any-return]
        name=name, get_if_exists=True, lifetime=None, num_cpus=0,
        max_concurrency=MAX_CONCURRENCY, max_restarts=0,
    ).remote()


class RayBus:
    """A ``Bus`` backed by a ``LogActor`` handle. Many ``RayBus`` objects may share one actor."""

    def __init__(self, handle: ActorHandle[Any]) -> None:
        self.handle = handle

    async def _call(self, method: str, *args: Any) -> Any:
        try:
            result = await getattr(self.handle, method).remote(*args)
        except RayActorError as e:
            raise BusUnavailable(f"cannot reach the log actor: {method}: {type(e).__name__}: {e}") from None
        if isinstance(result, _Raised):
            raise result.exc
        return result

    async def append(
        self, payload: bytes, *, id: str, expect: Mapping[str, int], writes: Sequence[str]
    ) -> Appended:
        result: Appended = await self._call("append", payload, id, dict(expect), list(writes))
        return result

    async def append_many(self, items: Sequence[AppendItem]) -> list[Appended]:
        batch = [(p, i, dict(e), list(w)) for p, i, e, w in items]
        result: list[Appended] = await self._call("append_many", batch)
        return result

    async def read(self, after: int = 0, count: int | None = None, block_ms: int = 0) -> list[Entry]:
        result: list[Entry] = await self._call("read", after, count, block_ms)
        return result

    async def last_offset(self) -> int:
        return int(await self._call("last_offset"))

    async def version(self, key: str) -> int:
        return int(await self._call("version", key))

    async def create_group(self, group: str) -> None:
        await self._call("create_group", group)

    async def read_group(
        self, group: str, consumer: str, count: int = 100, block_ms: int = 0
    ) -> list[Entry]:
        result: list[Entry] = await self._call("read_group", group, consumer, count, block_ms)
        return result

    async def pending(self, group: str, consumer: str) -> list[Entry]:
        result: list[Entry] = await self._call("pending", group, consumer)
        return result

    async def ack(self, group: str, offsets: Sequence[int]) -> None:
        await self._call("ack", group, list(offsets))

    async def group_info(self, group: str) -> GroupInfo:
        result: GroupInfo = await self._call("group_info", group)
        return result

    async def claim_stale(
        self, group: str, consumer: str, min_idle_ms: int, count: int = 100
    ) -> list[Entry]:
        result: list[Entry] = await self._call("claim_stale", group, consumer, min_idle_ms, count)
        return result

    async def dead_letter(self, offset: int, payload: bytes, reason: str, consumer: str) -> bool:
        return bool(await self._call("dead_letter", offset, bytes(payload), reason, consumer))

    async def dead_letters(self) -> list[DeadLetter]:
        result: list[DeadLetter] = await self._call("dead_letters")
        return result

    async def trim_acknowledged(self, keep_from: int | None = None) -> int:
        return int(await self._call("trim_acknowledged", keep_from))

    async def put_snapshot(self, name: str, offset: int, data: bytes) -> None:
        await self._call("put_snapshot", name, int(offset), bytes(data))

    async def get_snapshot(self, name: str) -> tuple[int, bytes] | None:
        result: tuple[int, bytes] | None = await self._call("get_snapshot", name)
        return result

    async def snapshot_offsets(self) -> dict[str, int]:
        result: dict[str, int] = await self._call("snapshot_offsets")
        return result

    async def close(self) -> None:
        """Drop nothing: the actor (and the log) outlive this handle wrapper."""

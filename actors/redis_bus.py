"""The bus on Redis Streams (Redis >= 7.0; no ``XADD ... IDMP`` needed).

Layout, for a stream named ``s`` (the hash tag keeps every key in one cluster slot, so the append
script may touch them all):

* ``{s}:log``  the stream; entry ID ``f"{offset}-0"`` so the ID *is* the offset; fields ``p``
  (payload) and ``i`` (idempotency id)
* ``{s}:seq``  last offset (INCR)
* ``{s}:ver``  hash key -> version (offset of its last writer)
* ``{s}:ids``  hash idempotency id -> offset (grows with the log; an emulator run is bounded;
  not trimmed with the log, so a resend of a trimmed append is still recognised)
* ``{s}:dead`` the dead-letter stream: one entry per bad log offset, fields ``offset``, ``reason``,
  ``consumer``, ``size`` and ``payload`` (cut to 64 KiB), and one per foreign entry (``offset`` 0 and
  its raw ``id``); capped to about ``DEAD_LETTERS_MAXLEN``
* ``{s}:deadidx`` hash offset -> 1 of the offsets set aside (makes ``dead_letter`` idempotent)
* ``{s}:snap:<name>`` the latest state snapshot of reader ``name`` (a reactor), a string
* ``{s}:snapoff`` hash name -> offset of that snapshot (written with it in one MULTI, so a trimmer
  reads the offsets without fetching the snapshots)

An append is one Lua script, so the version checks, the idempotency check, the XADD and the version
bumps are atomic. redis-py 8 retries timed-out commands by default; the append client has retries
off so we never silently resend, and the idempotency id makes an explicit resend safe anyway.
Blocking reads use their own connection pool whose socket timeout outlives the block time, and
block in chunks of at most ``MAX_BLOCK_MS`` so that timeout stays bounded.

Entries from anyone (docs/delivery.md, "Foreign entries"): every read also GETs ``{s}:seq`` in the same
round trip; an entry whose id is not ``N-0`` or whose N is above that sequence is not the run's, and is
set aside by ``_QUARANTINE_LUA`` (dead letter, XDEL, XACK, XSETID and XGROUP SETID back to the run's
last offset) before the reader returns; the append script repairs the same way when its XADD is refused.
An entry at a run's offset with fields other than ``p``/``i`` is delivered as a ``FlawedEntry``.
The Lua scripts are in actors/redis_lua.py, the parsing of replies in actors/redis_replies.py.

``claim_stale`` is XAUTOCLAIM (Redis >= 6.2). ``trim_acknowledged`` is one Lua script (XINFO
GROUPS, XPENDING per group, XTRIM MINID exact), so no group can move between the floor being
computed and the trim.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import redis.asyncio as aioredis
import structlog
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import KeyT, StreamIdT

from .bus import (
    DEAD_LETTERS_MAXLEN,
    Appended,
    AppendItem,
    BusUnavailable,
    Conflict,
    DeadLetter,
    Entry,
    GroupInfo,
    UnknownGroup,
    dead_letter_of,
)
from .redis_lua import _APPEND_LUA, _DEAD_LETTER_LUA, _FOREIGN_NO_PAYLOAD_LUA, _QUARANTINE_LUA, _TRIM_LUA
from .redis_replies import Parsed, _entries, _offset, _raw, _split_beyond, _text

__all__ = ["MAX_BLOCK_MS", "RedisBus", "redact_url"]

MAX_BLOCK_MS = 30_000  # longest single XREAD/XREADGROUP BLOCK; longer waits loop
_BATCH_ITEMS = 256  # append_many: items per script call (bounds the time Redis is busy)
_PAGE = 1000
log = structlog.get_logger("dralab.bus")


def redact_url(url: str) -> str:
    """``url`` with any password (userinfo or ``?password=``) replaced by ``***``, for messages."""
    try:
        parts = urlsplit(url)
        out = url
        if "@" in parts.netloc:
            userinfo, host = parts.netloc.rsplit("@", 1)
            user, sep, _pw = userinfo.partition(":")
            # "redis://secret@host" is ambiguous (user or password?): hide it too.
            netloc = f"{user}:***@{host}" if sep and user else f"***@{host}"
            out = out.replace(f"//{parts.netloc}", f"//{netloc}", 1)
        if parts.query:
            query = "&".join(
                f"{k}=***" if k.lower() in ("password", "pass", "pwd") else (f"{k}={v}" if eq else k)
                for k, eq, v in (p.partition("=") for p in parts.query.split("&"))
            )
            out = out.replace(f"?{parts.query}", f"?{query}", 1)
        return out
    except ValueError:
        return re.sub(r"//[^/@]*@", "//***@", re.sub(r"(?i)(password=)[^&]*", r"\1***", url))


def _where(url: str) -> str:
    """``host:port`` (or the socket path) of a Redis URL: what a user needs to see, no secrets."""
    try:
        parts = urlsplit(url)
        if parts.scheme == "unix":
            return parts.path
        return f"{parts.hostname or 'localhost'}:{parts.port or 6379}"
    except ValueError:
        return redact_url(url)


def _secrets(url: str) -> list[str]:
    """Strings of ``url`` that must never appear in a message (passwords, lone userinfo)."""
    try:
        parts = urlsplit(url)
        found = [parts.password or ""] if parts.password else []
        if parts.username and parts.password is None:
            found.append(parts.username)
        found += [v for k, _, v in (p.partition("=") for p in parts.query.split("&"))
                  if k.lower() in ("password", "pass", "pwd") and v]
        return [s for raw in found for s in {raw, unquote(raw)} if s]
    except ValueError:
        return []


class RedisBus:
    """A ``Bus`` on one Redis stream. Create with ``await RedisBus.connect(url, stream)``."""

    def __init__(self, url: str, stream: str, *, connect_timeout_s: float = 3.0,
                 command_timeout_s: float = 5.0) -> None:
        if "{" in stream or "}" in stream:
            raise ValueError(f"stream name must not contain braces: {stream!r}")
        self.url, self.stream = url, stream
        self.where = _where(url)
        self._secrets = _secrets(url)
        self.log_key, self.seq_key = f"{{{stream}}}:log", f"{{{stream}}}:seq"
        self.ver_key, self.ids_key = f"{{{stream}}}:ver", f"{{{stream}}}:ids"
        self.dead_key, self.dead_index_key = f"{{{stream}}}:dead", f"{{{stream}}}:deadidx"
        self.snapoff_key = f"{{{stream}}}:snapoff"
        common: dict[str, Any] = {"socket_connect_timeout": connect_timeout_s}
        no_retry = Retry(NoBackoff(), 0)
        # Reads, groups, acks: harmless to retry, so keep redis-py's default retries.
        self._cmd = aioredis.Redis.from_url(url, socket_timeout=command_timeout_s, **common)
        # Appends and XREADGROUP '>': never resent behind our back (a resent append could land
        # twice without its id; a resent '>' read would leave the first reply's entries pending).
        self._once = aioredis.Redis.from_url(
            url, socket_timeout=command_timeout_s, retry=no_retry, **common)
        # Blocking reads: their own connections, socket timeout longer than any single BLOCK.
        self._block = aioredis.Redis.from_url(
            url, socket_timeout=MAX_BLOCK_MS / 1000 + command_timeout_s, retry=no_retry, **common)
        for client in (self._cmd, self._once, self._block):  # raw stream replies: see _entries
            client.set_response_callback("XREAD", _raw)
            client.set_response_callback("XREADGROUP", _raw)
            client.set_response_callback("XAUTOCLAIM", _raw)
        self._append_script = self._once.register_script(_APPEND_LUA)
        self._dead_script = self._cmd.register_script(_DEAD_LETTER_LUA)  # idempotent: retries are fine
        self._trim_script = self._cmd.register_script(_TRIM_LUA)  # idempotent: retries are fine
        self._quarantine_script = self._cmd.register_script(_QUARANTINE_LUA)  # idempotent: retries are fine
        self._foreign_script = self._cmd.register_script(_FOREIGN_NO_PAYLOAD_LUA)

    @classmethod
    async def connect(cls, url: str, stream: str, *, connect_timeout_s: float = 3.0) -> RedisBus:
        """Connect and PING; raise ``BusUnavailable`` within about ``connect_timeout_s``."""
        bus = cls(url, stream, connect_timeout_s=connect_timeout_s)
        try:
            with bus._unavailable("connect"):
                try:
                    async with asyncio.timeout(connect_timeout_s):  # also when TCP connects, no reply
                        await bus._once.ping()
                except TimeoutError:
                    raise TimeoutError(f"no reply within {connect_timeout_s:g}s") from None
                except RedisError as e:  # e.g. something that is not Redis answers (a proxy)
                    if isinstance(e, RedisConnectionError | RedisTimeoutError):
                        raise
                    raise RedisConnectionError(f"{type(e).__name__}: {e} (is it a Redis server?)") from None
        except BaseException:
            await bus.close()
            raise
        return bus

    # -- appends -------------------------------------------------------------------------------

    async def append(
        self, payload: bytes, *, id: str, expect: Mapping[str, int], writes: Sequence[str]
    ) -> Appended:
        return (await self.append_many([(payload, id, expect, writes)]))[0]

    async def append_many(self, items: Sequence[AppendItem]) -> list[Appended]:
        """Batches of items per script call (one round trip each), in order; the first conflict
        stops the batch inside Redis, so later items are never appended."""
        done: list[Appended] = []
        for start in range(0, len(items), _BATCH_ITEMS):
            args: list[bytes | str | int] = []
            for payload, id_, expect, writes in items[start:start + _BATCH_ITEMS]:
                args += [payload, id_, len(expect)]
                for key, version in expect.items():
                    args += [key, str(int(version))]
                args.append(len(writes))
                args += list(writes)
            with self._unavailable("append", unknown_outcome=True):
                replies, fixed = await self._append_script(
                    keys=[self.log_key, self.seq_key, self.ver_key, self.ids_key, self.dead_key], args=args)
            self._log_set_aside(fixed, "append")
            for reply in replies:
                if int(reply[0]) == 2:
                    key = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
                    raise Conflict(key, int(reply[2]), int(reply[3]), done)
                done.append(Appended(int(reply[1]), int(reply[0]) == 1))
        return done

    # -- reads ---------------------------------------------------------------------------------

    async def read(self, after: int = 0, count: int | None = None, block_ms: int = 0) -> list[Entry]:
        if count is not None and count <= 0:
            return []
        streams: dict[KeyT, StreamIdT] = {self.log_key: f"{max(after, 0)}-0"}
        with self._unavailable("read"):
            if block_ms <= 0:
                while True:
                    resp, seq = await self._with_seq(self._cmd, "xread", streams, count=count)
                    entries, again = await self._sort_out(resp, seq, "read")
                    if not again:  # (again: the reply held only foreign entries, set aside now)
                        return entries
            deadline = time.monotonic() + block_ms / 1000
            while (chunk := self._chunk_ms(deadline)) > 0:
                resp, seq = await self._with_seq(
                    self._block, "xread", streams, count=count, block=chunk, transaction=False)
                entries, _again = await self._sort_out(resp, seq, "read")
                if entries:
                    return entries
        return []

    async def last_offset(self) -> int:
        with self._unavailable("last_offset"):
            value = await self._cmd.get(self.seq_key)
        return int(value or 0)

    async def version(self, key: str) -> int:
        with self._unavailable("version"):
            value = await self._cmd.hget(self.ver_key, key)
        return int(value or 0)

    # -- consumer groups -----------------------------------------------------------------------

    async def create_group(self, group: str) -> None:
        with self._unavailable("create_group"):
            try:
                await self._cmd.xgroup_create(self.log_key, group, id="0", mkstream=True)
            except ResponseError as e:
                if "BUSYGROUP" not in str(e):
                    raise

    async def read_group(
        self, group: str, consumer: str, count: int = 100, block_ms: int = 0
    ) -> list[Entry]:
        if count <= 0:
            return []
        streams: dict[KeyT, StreamIdT] = {self.log_key: ">"}
        with self._unavailable("read_group"), self._group_errors(group):
            if block_ms <= 0:
                while True:
                    resp, seq = await self._with_seq(self._once, "xreadgroup", group, consumer, streams, count=count)
                    entries, again = await self._sort_out(resp, seq, consumer)
                    if not again:
                        return entries
            deadline = time.monotonic() + block_ms / 1000
            while (chunk := self._chunk_ms(deadline)) > 0:
                resp, seq = await self._with_seq(
                    self._block, "xreadgroup", group, consumer, streams, count=count, block=chunk, transaction=False)
                entries, _again = await self._sort_out(resp, seq, consumer)
                if entries:
                    return entries
        return []

    async def pending(self, group: str, consumer: str) -> list[Entry]:
        out: list[Entry] = []
        last: bytes | str = "0"
        with self._unavailable("pending"), self._group_errors(group):
            while True:
                resp, seq = await self._with_seq(
                    self._cmd, "xreadgroup", group, consumer, {self.log_key: last}, count=_PAGE)
                parsed = _entries(resp)
                out += await self._drop_foreign(parsed, seq, consumer)
                if parsed.size < _PAGE or parsed.last_id is None:
                    return out
                last = parsed.last_id

    async def ack(self, group: str, offsets: Sequence[int]) -> None:
        ids = [b"%d-0" % o for o in offsets]
        with self._unavailable("ack"):
            for start in range(0, len(ids), _PAGE):
                await self._cmd.xack(self.log_key, group, *ids[start:start + _PAGE])

    async def group_info(self, group: str) -> GroupInfo:
        with self._unavailable("group_info"):
            try:
                groups = await self._cmd.xinfo_groups(self.log_key)
            except ResponseError as e:
                if "no such key" in str(e).lower():
                    raise UnknownGroup(group) from None
                raise
        for g in groups:
            name = g["name"].decode() if isinstance(g["name"], bytes) else g["name"]
            if name == group:
                return GroupInfo(_offset(g["last-delivered-id"]), int(g["pending"]))
        raise UnknownGroup(group)

    async def claim_stale(
        self, group: str, consumer: str, min_idle_ms: int, count: int = 100
    ) -> list[Entry]:
        """XAUTOCLAIM from the start of the group's pending list, page by page, until ``count``
        entries are claimed or the list has been scanned. Not retried behind our back: a resent
        claim would find its entries freshly claimed (not idle) and leave them pending, unsaid,
        for this consumer (``pending`` still returns them)."""
        out: list[Entry] = []
        start: str | bytes = "0-0"
        with self._unavailable("claim_stale"), self._group_errors(group):
            while len(out) < count:
                resp, seq = await self._with_seq(self._once, "xautoclaim", self.log_key, group, consumer,
                                                 max(min_idle_ms, 0), start, count=min(count - len(out), _PAGE))
                start, claimed = resp[0], resp[1]  # raw reply: [next, [[id, fields], ...], deleted ids]
                out += await self._drop_foreign(_entries([[b"", claimed]]), seq, consumer)
                if _text(start) == "0-0":
                    break
        return sorted(out, key=lambda e: e.offset)

    async def dead_letter(self, offset: int, payload: bytes, reason: str, consumer: str) -> bool:
        letter = dead_letter_of(offset, payload, reason, consumer)
        with self._unavailable("dead_letter"):
            stored = await self._dead_script(
                keys=[self.dead_key, self.dead_index_key],
                args=[letter.offset, letter.reason, letter.consumer, letter.payload, letter.size,
                      DEAD_LETTERS_MAXLEN])
        return bool(int(stored))

    async def write_foreign(self, form: str, junk: bytes) -> str | None:
        """Write to the stream as a stranger would (the live ``foreign-writer`` fault, tests): ``auto-id``
        is ``XADD {s}:log * p <junk>``; ``no-payload`` an entry at the run's next offset with a field
        ``x`` and no ``p``. Returns the stream id written, None if Redis refused it (see the script)."""
        with self._unavailable("write_foreign"):
            if form == "auto-id":
                return _text(await self._cmd.xadd(self.log_key, {"p": junk}))
            offset = int(await self._foreign_script(keys=[self.log_key, self.seq_key], args=[junk]))
        return f"{offset}-0" if offset else None

    async def dead_letters(self) -> list[DeadLetter]:
        out: list[DeadLetter] = []
        start = "-"
        with self._unavailable("dead_letters"):
            while True:
                page: Any = await self._cmd.xrange(self.dead_key, min=start, count=_PAGE)
                for _sid, f in page:
                    out.append(DeadLetter(int(f[b"offset"]), _text(f[b"reason"]), _text(f[b"consumer"]),
                                          bytes(f[b"payload"]), int(f[b"size"]), _text(f.get(b"id", b""))))
                if len(page) < _PAGE:
                    return out
                start = f"({_text(page[-1][0])}"

    async def trim_acknowledged(self, keep_from: int | None = None) -> int:
        keep = 0 if keep_from is None else max(int(keep_from), 1)
        with self._unavailable("trim_acknowledged"):
            removed, _floor = await self._trim_script(keys=[self.log_key], args=[keep])
        return int(removed)

    # -- snapshots -----------------------------------------------------------------------------

    async def put_snapshot(self, name: str, offset: int, data: bytes) -> None:
        async with self._cmd.pipeline(transaction=True) as tx:  # MULTI/EXEC: data and offset together
            tx.set(self.snap_key(name), data)
            tx.hset(self.snapoff_key, name, str(int(offset)))
            with self._unavailable("put_snapshot"):
                await tx.execute()

    async def get_snapshot(self, name: str) -> tuple[int, bytes] | None:
        async with self._cmd.pipeline(transaction=True) as tx:
            tx.hget(self.snapoff_key, name)
            tx.get(self.snap_key(name))
            with self._unavailable("get_snapshot"):
                offset, data = await tx.execute()
        if offset is None or data is None:
            return None
        return int(offset), bytes(data)

    async def snapshot_offsets(self) -> dict[str, int]:
        with self._unavailable("snapshot_offsets"):
            raw = await self._cmd.hgetall(self.snapoff_key)
        return {_text(k): int(v) for k, v in raw.items()}

    def snap_key(self, name: str) -> str:
        return f"{{{self.stream}}}:snap:{name}"

    async def close(self) -> None:
        for client in (self._cmd, self._once, self._block):
            with contextlib.suppress(RedisError, OSError):
                await client.aclose()

    # -- helpers -------------------------------------------------------------------------------

    async def _with_seq(self, client: aioredis.Redis, command: str, *args: Any, transaction: bool = True,
                        **kwargs: Any) -> tuple[Any, int]:
        """One round trip: the read ``command`` (a redis-py method name), then GET ``{s}:seq``, so the sequence is read
        after the entries (>= every offset the run had appended when they were read). Without a
        BLOCK the two are one MULTI (atomic); a blocking read cannot be, and runs first."""
        async with client.pipeline(transaction=transaction) as pipe:
            getattr(pipe, command)(*args, **kwargs)
            pipe.get(self.seq_key)
            resp, seq = await pipe.execute()
        return resp, int(seq or 0)

    async def _sort_out(self, resp: Any, seq: int, who: str) -> tuple[list[Entry], bool]:
        """The run's entries of a read reply; foreign ones are set aside first. The flag: the reply
        held foreign entries and nothing else (read again: they are gone now)."""
        parsed = _entries(resp)
        entries = await self._drop_foreign(parsed, seq, who)
        return entries, not entries and len(parsed.foreign) + len(parsed.entries) > 0

    async def _drop_foreign(self, parsed: Parsed, seq: int, who: str) -> list[Entry]:
        entries, foreign = _split_beyond(parsed, seq)
        if foreign:
            self._log_set_aside(await self._quarantine_script(
                keys=[self.log_key, self.seq_key, self.dead_key], args=[who, *foreign]), who)
        return entries

    @staticmethod
    def _log_set_aside(fixed: Any, who: str) -> None:
        """One error line per foreign entry this call set aside (another reader's call logs its own)."""
        for sid, reason, size in fixed or ():
            log.error("entry.foreign", stream_id=_text(sid), reason=_text(reason), consumer=who, size=int(size),
                      action="set aside in the dead-letter stream, deleted, stream position repaired")

    @staticmethod
    def _chunk_ms(deadline: float) -> int:
        """Next BLOCK time in ms (0: deadline passed); never 0 while time is left (0 = forever)."""
        left = deadline - time.monotonic()
        return 0 if left <= 0 else max(1, min(MAX_BLOCK_MS, int(left * 1000)))

    @contextlib.contextmanager
    def _unavailable(self, op: str, *, unknown_outcome: bool = False) -> Iterator[None]:
        """Turn connection errors and timeouts into ``BusUnavailable`` naming host:port only."""
        try:
            yield
        except (RedisConnectionError, RedisTimeoutError, OSError, TimeoutError) as e:
            text = str(e) or type(e).__name__
            for secret in self._secrets:
                text = text.replace(secret, "***")
            hint = " (outcome unknown: retry with the same id)" if unknown_outcome else ""
            raise BusUnavailable(f"cannot reach Redis at {self.where}: {op}: {text}{hint}") from None

    @staticmethod
    @contextlib.contextmanager
    def _group_errors(group: str) -> Iterator[None]:
        try:
            yield
        except ResponseError as e:
            if "NOGROUP" in str(e):
                raise UnknownGroup(group) from None
            raise

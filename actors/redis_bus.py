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
from typing import Any, NamedTuple
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
    MAX_DEAD_PAYLOAD,
    Appended,
    AppendItem,
    BusUnavailable,
    Conflict,
    DeadLetter,
    Entry,
    FlawedEntry,
    GroupInfo,
    UnknownGroup,
    dead_letter_of,
)

__all__ = ["MAX_BLOCK_MS", "RedisBus", "redact_url"]

MAX_BLOCK_MS = 30_000  # longest single XREAD/XREADGROUP BLOCK; longer waits loop
_BATCH_ITEMS = 256  # append_many: items per script call (bounds the time Redis is busy)
_PAGE = 1000
log = structlog.get_logger("dralab.bus")

# Foreign entries (docs/delivery.md, "Foreign entries"): an entry dralab did not append has an id that
# is not an offset (``N-0`` with N from the run's ``{s}:seq``). ``repair(log, dead, floor, ids, who,
# fixed)`` sets aside, atomically, the entries ``ids`` (foreign ids a reader met below the floor: a
# non-zero sequence part) and every entry above ``floor-0`` (nothing of the run's is: the append
# script INCRs seq before its XADD, and floor is that seq): one dead letter each (offset 0, the raw
# id, the reason, the payload cut to MAX_DEAD_PAYLOAD), XDEL, XACK in every group. Then it puts the
# stream's last id back to ``floor-0`` (XSETID: the next append's XADD of ``floor+1-0`` is accepted
# again) and every group that was delivered past it back to ``floor-0`` (XGROUP SETID: the next
# entry is delivered; everything up to floor had been delivered to such a group, in order). Each set
# aside entry is added to ``fixed`` as {id, reason, size}.
_REPAIR_LUA = """
local function id_parts(sid)
  local a, b = string.match(sid, '^(%d+)%-(%d+)$')
  return tonumber(a) or 0, tonumber(b) or 0
end

local function above(sid, floor)
  local ms, sq = id_parts(sid)
  return ms > floor or (ms == floor and sq > 0)
end

local function render(f)
  if f[1] == 'p' and (#f == 2 or (#f == 4 and f[3] == 'i')) then
    return f[2]
  end
  local parts = {}
  for j = 1, #f, 2 do
    parts[#parts + 1] = tostring(f[j]) .. '=' .. tostring(f[j + 1] or '')
  end
  return '\\193' .. table.concat(parts, '\\n')
end

local function repair(log, dead, floor, ids, who, fixed)
  if redis.call('EXISTS', log) == 0 then
    return
  end
  local groups = {}
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', log)) do
    local name, last
    for j = 1, #g, 2 do
      if g[j] == 'name' then name = g[j + 1] elseif g[j] == 'last-delivered-id' then last = g[j + 1] end
    end
    groups[#groups + 1] = {name, last}
  end
  local function drop(sid, fields, reason)
    local payload = render(fields)
    redis.call('XADD', dead, 'MAXLEN', '~', '@MAXLEN@', '*', 'offset', '0', 'id', sid, 'reason', reason,
               'consumer', who, 'size', #payload, 'payload', string.sub(payload, 1, @MAXPAY@))
    redis.call('XDEL', log, sid)
    for _, g in ipairs(groups) do
      redis.call('XACK', log, g[1], sid)
    end
    fixed[#fixed + 1] = {sid, reason, #payload}
  end
  for _, sid in ipairs(ids) do
    -- only an id with a non-zero sequence part here (those above the floor: the scan below). An N-0 a
    -- reader took for foreign may be the run's by now: the append that met it repaired, then appended N.
    local _, sq = id_parts(sid)
    local found = sq > 0 and redis.call('XRANGE', log, sid, sid) or {}
    if #found == 1 and not above(sid, floor) then
      drop(sid, found[1][2], 'foreign id ' .. sid .. ': not an offset of the run (its sequence part is not 0)')
    end
  end
  local top = string.format('%d', floor) .. '-0'
  while true do
    local found = redis.call('XRANGE', log, '(' .. top, '+', 'COUNT', 100)
    if #found == 0 then
      break
    end
    for _, e in ipairs(found) do
      drop(e[1], e[2], 'foreign id ' .. e[1] .. ': beyond the last offset the run appended ('
           .. string.format('%d', floor) .. ')')
    end
  end
  local info = redis.call('XINFO', 'STREAM', log)
  for j = 1, #info, 2 do
    if info[j] == 'last-generated-id' and above(info[j + 1], floor) then
      redis.call('XSETID', log, top)
    end
  end
  for _, g in ipairs(groups) do
    if above(g[2], floor) then
      redis.call('XGROUP', 'SETID', log, g[1], top)
    end
  end
end
""".replace("@MAXLEN@", str(DEAD_LETTERS_MAXLEN)).replace("@MAXPAY@", str(MAX_DEAD_PAYLOAD))

# KEYS: log, seq, dead.  ARGV: who, foreign id * n (met by a reader below the floor).  The floor is
# the run's seq, read here: GET after the read that met the entries, so >= every offset it read.
# Returns the entries set aside ({id, reason, size} each); none if another reader got there first.
_QUARANTINE_LUA = _REPAIR_LUA + """
local fixed = {}
local ids = {}
for j = 2, #ARGV do
  ids[#ids + 1] = ARGV[j]
end
repair(KEYS[1], KEYS[3], tonumber(redis.call('GET', KEYS[2]) or '0'), ids, ARGV[1], fixed)
return fixed
"""

# A stranger's entry at the run's next offset without the payload field (the foreign-writer fault's
# `no-payload` form, the reproduction). KEYS: log, seq.  ARGV: junk.  Returns the offset, or 0
# when the stream's top refused the id (a foreign entry above the run's offsets, not repaired yet):
# then seq is left alone, so the run never has an offset without an entry.
_FOREIGN_NO_PAYLOAD_LUA = """
local o = string.format('%d', tonumber(redis.call('GET', KEYS[2]) or '0') + 1)
local added = redis.pcall('XADD', KEYS[1], o .. '-0', 'x', ARGV[1])
if type(added) == 'table' and added.err then
  return 0
end
redis.call('INCR', KEYS[2])
return tonumber(o)
"""

# KEYS: log, seq, ver, ids, dead.  ARGV, repeated per item:
#   payload, id, n_expect, (key, version) * n_expect, n_writes, key * n_writes
# Returns {replies, set_aside}: one reply per item: {1, orig} duplicate, {0, offset} appended; on a
# conflict the last reply is {2, key, expected, actual} and the remaining items are not looked at.
# ``set_aside`` lists the foreign entries the repair took out of the way ({id, reason, size} each).
_APPEND_LUA = _REPAIR_LUA + """
local log, seq, ver, ids, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local out = {}
local fixed = {}
local i = 1
while i <= #ARGV do
  local payload, id = ARGV[i], ARGV[i + 1]
  local ne = tonumber(ARGV[i + 2])
  local w = i + 3 + 2 * ne
  local nw = tonumber(ARGV[w])
  local orig = redis.call('HGET', ids, id)
  if orig then
    out[#out + 1] = {1, tonumber(orig)}
  else
    for e = 0, ne - 1 do
      local key, want = ARGV[i + 3 + 2 * e], ARGV[i + 4 + 2 * e]
      local have = redis.call('HGET', ver, key) or '0'
      if have ~= want then
        out[#out + 1] = {2, key, want, have}
        return {out, fixed}
      end
    end
    local off = string.format('%d', redis.call('INCR', seq))
    local added = redis.pcall('XADD', log, off .. '-0', 'p', payload, 'i', id)
    if type(added) == 'table' and added.err then
      -- a foreign entry sits above the run's offsets (an auto id, say): set it aside, repair, append
      repair(log, dead, tonumber(off) - 1, {}, 'append', fixed)
      redis.call('XADD', log, off .. '-0', 'p', payload, 'i', id)
    end
    for k = w + 1, w + nw do
      redis.call('HSET', ver, ARGV[k], off)
    end
    redis.call('HSET', ids, id, off)
    out[#out + 1] = {0, tonumber(off)}
  end
  i = w + 1 + nw
end
return {out, fixed}
"""


# KEYS: dead stream, dead index.  ARGV: offset, reason, consumer, payload, size, maxlen.
# Returns 1 if stored, 0 if that offset had been set aside already.
_DEAD_LETTER_LUA = """
if redis.call('HSETNX', KEYS[2], ARGV[1], '1') == 0 then
  return 0
end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[6], '*', 'offset', ARGV[1], 'reason', ARGV[2],
           'consumer', ARGV[3], 'size', ARGV[5], 'payload', ARGV[4])
return 1
"""

# KEYS: log.  ARGV: keep_from (0: none).  Returns {removed, floor} (floor 0: no group, nothing
# removed). The floor is the smallest, over all groups, of the oldest pending entry, else the last
# delivered offset + 1, and of keep_from.
_TRIM_LUA = """
local log = KEYS[1]
local keep = tonumber(ARGV[1])
if redis.call('EXISTS', log) == 0 then
  return {0, 0}
end
local floor = nil
for _, g in ipairs(redis.call('XINFO', 'GROUPS', log)) do
  local name, last
  for j = 1, #g, 2 do
    if g[j] == 'name' then name = g[j + 1] elseif g[j] == 'last-delivered-id' then last = g[j + 1] end
  end
  local need
  local p = redis.call('XPENDING', log, name)
  if tonumber(p[1]) > 0 then
    need = tonumber(string.match(p[2], '^(%d+)'))
  else
    need = tonumber(string.match(last, '^(%d+)')) + 1
  end
  if floor == nil or need < floor then
    floor = need
  end
end
if floor == nil then
  return {0, 0}
end
if keep > 0 and keep < floor then
  floor = keep
end
local removed = redis.call('XTRIM', log, 'MINID', string.format('%d', floor) .. '-0')
return {removed, floor}
"""


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


def _offset(stream_id: bytes | str) -> int:
    s = stream_id.decode() if isinstance(stream_id, bytes) else stream_id
    return int(s.split("-", 1)[0])


def _raw(response: Any, **options: Any) -> Any:
    """The reply as the parser gave it (XREAD/XREADGROUP: ``_entries`` reads it)."""
    return response


class Parsed(NamedTuple):
    """A stream reply sorted out: what readers get, what is not the run's, where the reply ended."""

    entries: list[Entry]  # the run's offsets, ascending (a malformed one carries its ``flaw``)
    foreign: list[str]  # raw ids that are not an offset ``N-0``: never handed to a reader
    last_id: bytes | None  # the reply's last raw id (where a page ends), None for an empty reply
    size: int  # entries in the reply, deleted ones included (a full page: read on)


def _entries(resp: Any) -> Parsed:
    """Sort out a raw XREAD/XREADGROUP reply (RESP2 list or RESP3 map, one stream), each entry
    ``[id, [field, value, ...]]`` as Redis sends it (no per-entry dict: the read path's hot loop).

    An entry the append script wrote has the id ``N-0`` and exactly the fields ``p, <payload>, i,
    <id>``. An id that is not ``N-0`` is foreign; an offset with other fields is an entry with a
    ``flaw`` (``_flawed``). Whether an ``N-0`` is beyond the run's sequence the caller decides
    (``_split_beyond``): that needs ``{s}:seq``. The loop assumes what Redis sends (canonical ids,
    bytes); anything else falls to ``_entries_careful``, so nothing a stranger writes raises here."""
    out: list[Entry] = []
    foreign: list[str] = []
    if not resp:
        return Parsed(out, foreign, None, 0)
    size = 0
    last: bytes | None = None
    try:
        for items in resp.values() if isinstance(resp, dict) else (s[1] for s in resp):
            if not items:
                continue
            for sid, fields in items:
                if not fields:  # None for a pending entry deleted since (trimmed, or set aside as foreign)
                    continue
                if sid[-2:] == b"-0":
                    if len(fields) == 4 and fields[0] == b"p" and fields[2] == b"i":
                        out.append(Entry(int(sid[:-2]), fields[1]))
                    else:
                        out.append(_flawed(int(sid[:-2]), fields))
                else:
                    foreign.append(_text(sid))
            size += len(items)
            last = items[-1][0]
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        return _entries_careful(resp)
    if type(last) is not bytes or any(type(e.payload) is not bytes for e in out[-1:]):
        return _entries_careful(resp)
    return Parsed(out, foreign, last, size)


def _entries_careful(resp: Any) -> Parsed:
    """``_entries`` for a reply that is not shaped as Redis sends it (a RESP3 parser's maps, a
    test's hand-made reply): every id and field checked, nothing raises."""
    out: list[Entry] = []
    foreign: list[str] = []
    size = 0
    last: bytes | None = None
    streams = resp.values() if isinstance(resp, dict) else resp if isinstance(resp, list | tuple) else ()
    for stream in streams:
        items = stream if isinstance(resp, dict) else stream[1] if isinstance(stream, list | tuple) \
            and len(stream) == 2 else ()
        for item in items if isinstance(items, list | tuple) else ():
            size += 1
            if not isinstance(item, list | tuple) or len(item) != 2:
                continue
            sid, fields = _bytes(item[0]), item[1]
            last = sid
            if not fields:
                continue
            n, _, seq_part = sid.partition(b"-")
            if seq_part != b"0" or not n.isdigit() or not n.isascii() or n[:1] == b"0" or len(n) > 20 \
                    or int(n) >= 2**64:  # (Redis ids are two unsigned 64-bit numbers)
                foreign.append(sid.decode(errors="replace"))
                continue
            pairs = _pairs(fields)
            if sorted(k for k, _ in pairs) == [b"i", b"p"] and isinstance(fields, list | tuple | dict):
                out.append(Entry(int(n), dict(pairs)[b"p"]))
            else:
                out.append(_flawed(int(n), fields))
    return Parsed(out, foreign, last, size)


def _pairs(fields: Any) -> list[tuple[bytes, bytes]]:
    """(name, value) pairs of an entry's fields however the parser gave them, as bytes."""
    if isinstance(fields, dict):
        items = list(fields.items())
    elif isinstance(fields, list | tuple):
        items = list(zip(fields[::2], fields[1::2], strict=False))
        if len(fields) % 2:
            items.append((fields[-1], b""))
    else:
        items = [(b"?", fields)]
    return [(_bytes(k), _bytes(v)) for k, v in items]


def _bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return str(value).encode(errors="replace")


def _flawed(offset: int, fields: Any) -> Entry:
    """The entry at a run's offset whose fields are not what the append script writes (no ``p``,
    extra fields, odd ones): delivered so every reader folds the offset, as an entry that never
    decodes. Its payload is the fields as ``name=value`` lines after a 0xC1 byte (never valid
    msgpack, so a reader that ignores ``flaw`` still sets it aside); ``flaw`` says what is wrong.
    The same text as the Lua ``render`` gives a foreign entry's dead letter."""
    pairs = _pairs(fields)
    names = [k.decode(errors="replace")[:40] for k, _ in pairs]
    shown = ", ".join(names[:10]) + (f", ... ({len(names)} fields)" if len(names) > 10 else "")
    why = "no payload field 'p'" if "p" not in names else "fields other than the 'p' and 'i' dralab writes"
    payload = b"\xc1" + b"\n".join(k + b"=" + v for k, v in pairs)
    return FlawedEntry(offset, payload, f"malformed entry: {why} (fields: {shown})")


def _split_beyond(parsed: Parsed, seq: int) -> tuple[list[Entry], list[str]]:
    """The entries up to ``seq`` (the run's sequence, read after the reply) and the raw ids of
    those beyond it, which are foreign: the run never appended that offset (yet)."""
    entries = parsed.entries
    if not entries or (entries[-1].offset <= seq and entries[0].offset >= 1):  # ascending, as Redis sends
        return entries, parsed.foreign
    keep = [e for e in entries if 1 <= e.offset <= seq]
    return keep, parsed.foreign + [f"{e.offset}-0" for e in entries if not 1 <= e.offset <= seq]


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


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

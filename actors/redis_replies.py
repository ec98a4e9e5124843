"""Parsing the Redis bus's stream replies (actors/redis_bus.py): entries from the run, entries that are not
(foreign ids, set aside by the quarantine script) and entries at a run's offset with the wrong fields
(``FlawedEntry``). A fast path for replies shaped as Redis sends them, a careful one for anything else.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .bus import Entry, FlawedEntry


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

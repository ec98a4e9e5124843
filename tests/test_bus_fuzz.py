"""Fuzzing the bus's entry decoding (issue 18): arbitrary replies, ids, field lists and bytes fed to
RedisBus's reply parsing (``_entries``, ``_split_beyond``, ``_flawed``) and to the wire's decoding
(``decode_or_skip``) give a clean classification or a value, never an unhandled exception; and on a
real redis-server, any mix of foreign writes between the run's appends leaves the run's offsets dense,
every foreign entry set aside exactly once, and every append accepted."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dralab.actors import wire
from dralab.actors.bus import Entry, FlawedEntry
from dralab.actors.redis_bus import RedisBus
from dralab.actors.redis_replies import _entries, _flawed, _split_beyond
from dralab.core.log.events import LogDecodeError, Record, decode_record, encode_record
from dralab.core.state.cluster import ClusterState


def noop(i: str) -> bytes:
    return encode_record(Record(id=i, source="scenario", view=-1, t=0, events=()))


NO_PAYLOAD_LUA = "local o=redis.call('INCR',KEYS[2]); redis.call('XADD',KEYS[1],o..'-0','x','y')"

# -- pure: the reply parser and the wire decoder ----------------------------------------------------------

_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.binary(max_size=40), st.text(max_size=10))
_any = st.recursive(_leaf, lambda inner: st.one_of(st.lists(inner, max_size=5), st.tuples(inner, inner),
                                                    st.dictionaries(st.binary(max_size=5), inner, max_size=4)),
                    max_leaves=30)

_u64 = st.integers(0, 2**64 - 1)
_canonical_id = st.builds(lambda ms, seq: f"{ms}-{seq}".encode(), _u64, st.one_of(st.just(0), _u64))
_names = st.sampled_from([b"p", b"i", b"x", b"", b"P", b"\xff"]) | st.binary(max_size=6)
_fields = st.one_of(
    st.lists(st.binary(max_size=30), max_size=8),  # arbitrary, odd lengths included
    st.lists(st.tuples(_names, st.binary(max_size=30)), max_size=4).map(lambda ps: [b for p in ps for b in p]),
    st.builds(lambda p, i: [b"p", p, b"i", i], st.binary(max_size=30), st.binary(max_size=10)),  # dralab's shape
    st.none(),  # a pending entry deleted since
)
_redis_reply = st.lists(st.tuples(_canonical_id, _fields), max_size=12, unique_by=lambda item: item[0]).map(
    lambda items: [[b"{s}:log", sorted(items, key=lambda i: tuple(map(int, i[0].split(b"-"))))]])  # as Redis: by id
_any_id = st.one_of(_canonical_id, st.binary(max_size=25), st.text(max_size=10), st.integers())


def _check(parsed: Any) -> None:
    entries, foreign, last, size = parsed
    assert isinstance(size, int) and size >= 0 and (last is None or isinstance(last, bytes))
    assert all(isinstance(s, str) for s in foreign)
    for e in entries:
        assert isinstance(e, Entry) and isinstance(e.offset, int) and isinstance(e.payload, bytes)
        assert e.flaw is None or isinstance(e.flaw, str)


@settings(max_examples=400, deadline=None)
@given(_any)
def test_any_structure_as_a_reply_parses_cleanly(resp: Any) -> None:
    _check(_entries(resp))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_any_id, st.one_of(_fields, _any)), max_size=8))
def test_any_ids_and_fields_parse_cleanly(items: list[tuple[Any, Any]]) -> None:
    _check(_entries([[b"{s}:log", items]]))
    _check(_entries({b"{s}:log": items}))  # a RESP3 parser's map


@settings(max_examples=500, deadline=None)
@given(_redis_reply, st.integers(0, 2**64))
def test_redis_shaped_replies_are_classified_exactly(resp: Any, seq: int) -> None:
    """For what Redis can send: an entry is the run's iff its id is ``N-0`` (N >= 1) and N <= seq; a
    plain ``Entry`` iff its fields are exactly dralab's ``p, _, i, _``; everything else is foreign."""
    parsed = _entries(resp)
    _check(parsed)
    entries, foreign = _split_beyond(parsed, seq)
    items = [(sid, f) for sid, f in resp[0][1] if f]
    want_entries, want_foreign = [], []
    for sid, fields in items:
        ms, _, sq = sid.partition(b"-")
        if sq == b"0" and int(ms) >= 1 and int(ms) <= seq:
            plain = len(fields) == 4 and fields[0] == b"p" and fields[2] == b"i"
            want_entries.append((int(ms), plain))
        else:
            want_foreign.append(sid.decode())
    assert [(e.offset, e.flaw is None) for e in entries] == want_entries
    assert sorted(foreign) == sorted(want_foreign)
    for e in entries:
        if e.flaw is None:
            assert e.payload == dict(zip(*[iter(next(f for s, f in items if int(s.split(b"-")[0]) == e.offset))] * 2,
                                         strict=False))[b"p"]


@settings(max_examples=300, deadline=None)
@given(_any)
def test_a_flawed_entry_never_decodes(fields: Any) -> None:
    entry = _flawed(5, fields)
    assert isinstance(entry, FlawedEntry) and entry.flaw and entry.payload[:1] == b"\xc1"
    with pytest.raises(LogDecodeError):
        decode_record(entry.payload, 5)
    record, reason = wire.decode_or_skip(entry, ClusterState(), "fuzz")
    assert reason == entry.flaw and record.id == "dead-letter/5" and record.events == ()


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200) | st.builds(lambda r, cut: encode_record(r)[:cut],
                                          st.builds(Record, id=st.text(max_size=8), source=st.just("scenario"),
                                                    view=st.just(-1), t=st.integers(0, 10**6), events=st.just(())),
                                          st.integers(0, 60)))
def test_the_wire_decodes_any_bytes_to_a_record_or_a_reason(payload: bytes) -> None:
    record, reason = wire.decode_or_skip(Entry(3, payload), ClusterState(), "fuzz")
    assert isinstance(record, Record)
    assert reason is None or (isinstance(reason, str) and record.id == "dead-letter/3")


# -- on a real redis-server: foreign writes between the run's appends ----------------------------------------

_write = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 3)),
    st.tuples(st.just("auto"), st.lists(st.binary(max_size=20), min_size=2, max_size=6)
              .filter(lambda f: len(f) % 2 == 0)),
    st.tuples(st.just("beyond"), st.integers(1, 50)),  # an explicit N-0 above the run's seq
    st.tuples(st.just("seqpart"), st.integers(1, 9)),  # top-ms-k, k > 0
    st.tuples(st.just("nop"), st.just(0)),  # INCR seq, XADD o-0 without p (the reproduction)
    st.tuples(st.just("read"), st.integers(1, 5)),
)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(_write, min_size=1, max_size=14))
def test_foreign_writes_never_wedge_the_run(redis_url: str, ops: list[tuple[str, Any]]) -> None:
    async def run() -> None:
        bus = await RedisBus.connect(redis_url, f"fuzz-{uuid.uuid4().hex[:10]}")
        try:
            await bus.create_group("g")
            foreign: list[str] = []
            seen: list[Entry] = []
            appended = 0
            for kind, arg in ops:
                if kind == "append":
                    ids = [f"a{appended + j}" for j in range(arg)]
                    got = await bus.append_many([(noop(i), i, {}, []) for i in ids])
                    appended += arg
                    assert all(not a.duplicate for a in got)
                elif kind == "read":
                    seen += await bus.read_group("g", "c", count=arg)
                elif kind == "nop":  # (a foreign entry above the run's seq would refuse this writer's XADD
                    # after its INCR, leaving an offset without an entry: read it out of the way first)
                    assert await bus.read(after=await bus.last_offset()) == []
                    await bus._cmd.eval(NO_PAYLOAD_LUA, 2, bus.log_key, bus.seq_key)
                else:
                    top = await bus._cmd.xinfo_stream(bus.log_key)
                    ms, _, sq = top["last-generated-id"].decode().partition("-")
                    if kind == "auto":
                        sid = "*"
                    elif kind == "beyond":
                        sid = f"{max(int(ms), await bus.last_offset()) + arg}-0"
                    else:
                        sid = f"{ms}-{int(sq) + arg}"
                    fields = dict(zip(arg[::2], arg[1::2], strict=True)) if kind == "auto" else {b"p": b"junk"}
                    if kind == "auto" and not fields:
                        continue
                    foreign.append((await bus._cmd.xadd(bus.log_key, fields, id=sid)).decode())
            seen += await bus.read_group("g", "c", count=1000)
            last = await bus.last_offset()
            assert [e.offset for e in seen] == list(range(1, last + 1))
            assert [e.offset for e in await bus.read()] == list(range(1, last + 1))
            assert await bus.append(b"end", id="end", expect={}, writes=[]) is not None
            letters = await bus.dead_letters()
            assert sorted(d.stream_id for d in letters if d.stream_id) == sorted(foreign)  # each once
        finally:
            await bus.close()

    loop = asyncio.new_event_loop()  # a private loop: leaves pytest-asyncio's session loop alone
    try:
        loop.run_until_complete(run())
    finally:
        loop.close()


def test_ids_no_redis_sends_are_foreign_not_errors() -> None:
    odd = [b"9" * 5000 + b"-0", b"0-0", b"18446744073709551616-0", b"-0", b"1-", b"1-0-0", b"\xff-0", b"1_0-0"]
    parsed = _entries([[b"{s}:log", [[sid, [b"p", b"x", b"i", b"y"]] for sid in odd]]])
    _check(parsed)
    entries, _foreign = _split_beyond(parsed, 2**64)
    assert all(1 <= e.offset < 2**64 for e in entries)

"""Entries from anyone, on a real redis-server (issue 18, defects 1 and 2; docs/delivery.md, "Foreign
entries"): whatever a stranger writes to a run's stream -- an entry without the payload field, odd
fields, an auto id, an id with a non-zero sequence part, an id beyond the run's sequence -- is set
aside once in the dead-letter stream with one log line, never reaches a reader as an offset, and never
wedges dralab's own appends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from test_wire import redis_stream

from dralab.actors import wire
from dralab.actors.bus import Appended, Entry, FlawedEntry
from dralab.actors.recorder import RecordOptions, header_fields, record
from dralab.actors.redis_bus import RedisBus
from dralab.core.log.events import Record, RunStarted, decode_record, encode_record
from dralab.core.scenario.load import load_scenario
from dralab.core.state.cluster import ClusterState
from dralab.replay.logs.logfile import LogWriter, make_header, read_log
from dralab.replay.simulation.sim import simulate
from dralab.replay.simulation.verify import verify

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"

# The reproduction: an entry at the run's own next offset, without the payload field.
NO_PAYLOAD_LUA = "local o=redis.call('INCR',KEYS[2]); redis.call('XADD',KEYS[1],o..'-0','x','y'); return o"


def rec(i: int) -> bytes:
    return encode_record(Record(id=f"in-{i}", source="scenario", view=-1, t=i * 10, events=()))


async def put(bus: RedisBus, *ids: int) -> list[int]:
    return [(await bus.append(rec(i), id=f"in-{i}", expect={}, writes=[])).offset for i in ids]


async def test_an_entry_without_the_payload_field_is_set_aside_once_and_reads_go_on(redis_url: str) -> None:
    """Defect 1: `ValueError: b'p' is not in list`, and the entry stayed pending for every later read."""
    async with redis_stream(redis_url) as bus:
        await bus.create_group("g")
        await put(bus, 1, 2)
        bad = await bus._cmd.eval(NO_PAYLOAD_LUA, 2, bus.log_key, bus.seq_key)
        assert bad == 3
        await put(bus, 4)
        with capture_logs() as logs:
            got = await bus.read_group("g", "c", count=10)
            assert [e.offset for e in got] == [1, 2, 3, 4]
            flawed = got[2]
            assert flawed.flaw and "'p'" in flawed.flaw and b"x" in flawed.payload
            record, reason = wire.decode_or_skip(flawed, ClusterState(), "c")
            assert reason == flawed.flaw and record.id == "dead-letter/3"
            assert await wire.set_aside(bus, flawed, reason, "c") is True
            assert await wire.set_aside(bus, flawed, reason, "other") is False  # once per offset
        await bus.ack("g", [e.offset for e in got])
        # Nothing stays pending, later reads and appends go on, plain reads and pending reads agree.
        assert await bus.pending("g", "c") == []
        assert [e.offset for e in await bus.read()] == [1, 2, 3, 4]
        assert await put(bus, 5) == [5]
        assert [e.offset for e in await bus.read_group("g", "c")] == [5]
        letters = await bus.dead_letters()
        assert [(d.offset, d.consumer) for d in letters] == [(3, "c")] and "'p'" in letters[0].reason
        assert [e["event"] for e in logs].count("entry.set_aside") == 1


async def test_an_auto_id_entry_never_wedges_the_next_append(redis_url: str) -> None:
    """Defect 2: after `XADD {S}:log * p garbage` every append failed with "ID specified in XADD is
    equal or smaller than the target stream top item"."""
    async with redis_stream(redis_url) as bus:
        await bus.create_group("g")
        await put(bus, 1, 2)
        foreign = await bus._cmd.xadd(bus.log_key, {"p": b"garbage"})
        with capture_logs() as logs:
            assert await bus.append(rec(3), id="in-3", expect={}, writes=["k"]) == Appended(3, False)
        assert await bus.version("k") == 3 and await bus.last_offset() == 3
        assert [e.offset for e in await bus.read_group("g", "c")] == [1, 2, 3]
        assert [e.offset for e in await bus.read()] == [1, 2, 3]
        letters = await bus.dead_letters()
        assert len(letters) == 1
        assert letters[0].stream_id == foreign.decode() and letters[0].payload == b"garbage"
        assert letters[0].offset == 0 and "id" in letters[0].reason
        foreign_lines = [e for e in logs if e["event"] == "entry.foreign"]
        assert len(foreign_lines) == 1 and foreign_lines[0]["stream_id"] == foreign.decode()


async def test_a_foreign_id_read_first_is_quarantined_by_the_reader(redis_url: str) -> None:
    """The reader meets the auto-id entry before any append does: it is set aside there (once, whichever
    reader meets it first), no reader sees it as an offset, and the group's position comes back down
    so the next legit entry is delivered."""
    async with redis_stream(redis_url) as bus, redis_stream(redis_url) as other:
        other.stream = bus.stream
        for b in (bus, other):
            await b.create_group("a")
        await bus.create_group("b")
        await put(bus, 1)
        foreign = (await bus._cmd.xadd(bus.log_key, {"p": b"junk", "q": b"x" * 200_000})).decode()
        with capture_logs() as logs:
            assert [e.offset for e in await bus.read_group("a", "c")] == [1]
            assert [e.offset for e in await bus.read_group("b", "c")] == [1]
            assert await bus.read(after=1) == []
        assert [e["event"] for e in logs].count("entry.foreign") == 1
        assert await bus.pending("a", "c") != []  # 1 is pending until acked; the foreign one is not
        assert [e.offset for e in await bus.pending("a", "c")] == [1]
        assert await put(bus, 2) == [2]
        assert [e.offset for e in await bus.read_group("a", "c")] == [2]
        assert [e.offset for e in await bus.read_group("b", "c")] == [2]
        letters = await bus.dead_letters()
        assert [d.stream_id for d in letters] == [foreign]
        assert letters[0].size > 200_000 and len(letters[0].payload) <= 64 * 1024


@pytest.mark.parametrize("raw_id", ["999-0", "2-7", "1-5"])
async def test_explicit_foreign_ids_are_quarantined(redis_url: str, raw_id: str) -> None:
    """An id beyond the run's sequence, or with a non-zero sequence part (above the top or between
    two legit entries once more are appended), is never an offset."""
    async with redis_stream(redis_url) as bus:
        await bus.create_group("g")
        await put(bus, 1)
        if raw_id == "1-5":
            await bus._cmd.xadd(bus.log_key, {"p": rec(9), "i": b"in-9"}, id=raw_id)
        else:
            await put(bus, 2)
            await bus._cmd.xadd(bus.log_key, {"p": rec(9), "i": b"in-9"}, id=raw_id)
        assert [e.offset for e in await bus.read(after=0)][-1] <= 2
        appended = await put(bus, 3, 4)
        assert all(a <= 4 for a in appended)
        got = await bus.read_group("g", "c")
        assert [e.offset for e in got] == list(range(1, await bus.last_offset() + 1))
        assert all(e.flaw is None for e in got)
        assert [d.stream_id for d in await bus.dead_letters()] == [raw_id]


async def test_claim_stale_and_pending_survive_foreign_entries(redis_url: str) -> None:
    async with redis_stream(redis_url) as bus:
        await bus.create_group("g")
        await put(bus, 1)
        await bus._cmd.eval(NO_PAYLOAD_LUA, 2, bus.log_key, bus.seq_key)
        await bus._cmd.xadd(bus.log_key, {"x": b"y"})
        got = await bus.read_group("g", "old")
        assert [(e.offset, e.flaw is not None) for e in got] == [(1, False), (2, True)]
        claimed = await bus.claim_stale("g", "new", min_idle_ms=0)
        assert [(e.offset, e.flaw is not None) for e in claimed] == [(1, False), (2, True)]
        assert [e.offset for e in await bus.pending("g", "new")] == [1, 2]
        assert await put(bus, 3) == [3]


def test_entry_without_flaw_is_the_common_case() -> None:
    assert Entry(1, b"x").flaw is None and FlawedEntry(1, b"x", "why").flaw == "why"
    assert Entry(1, b"x") != FlawedEntry(1, b"x", "why")


# -- dralab record -----------------------------------------------------------------------------------------


async def test_the_recorder_survives_both_forms_and_its_file_verifies(redis_url: str, tmp_path: Path) -> None:
    """`dralab record` crashed on both reproductions (the same ValueError; the run's next append failed).
    Now the auto-id entry is set aside by the append that met it, the entry without a payload by the
    recorder (the file holds the no-op every consumer folds there), and the file verifies."""
    sim = simulate(load_scenario(QUICKSTART), 7)
    half = len(sim.entries) // 2
    async with redis_stream(redis_url) as bus:
        await bus.create_group("reactors")  # a run creates its groups first: the stream exists
        await bus.append_many([(p, f"sim-{o}", {}, []) for o, p in sim.entries[:half]])
        junk = (await bus._cmd.xadd(bus.log_key, {"p": b"garbage"})).decode()
        await bus.append_many([(p, f"sim-{o}", {}, []) for o, p in sim.entries[half:]])
        flawed = await bus._cmd.eval(NO_PAYLOAD_LUA, 2, bus.log_key, bus.seq_key)
        assert flawed == len(sim.entries) + 1
        out = tmp_path / "rec.dralog"

        def open_writer(path: str, first: RunStarted) -> tuple[LogWriter, dict[str, Any]]:
            header = make_header(**header_fields(first))
            return LogWriter(path, header), header

        options = RecordOptions(stream=bus.stream, path=str(out), wait_s=5, until_idle_s=1.0, progress_every_s=0)
        with capture_logs() as logs:
            result = await record(redis_url, options, open_writer)
        assert result.error is None and result.stopped == "idle" and result.gaps == []
        assert (result.records, result.last_offset) == (flawed, flawed)
        letters = await bus.dead_letters()
        assert [(d.offset, d.stream_id, d.consumer) for d in letters] == [(0, junk, "append"), (flawed, "", "recorder")]
        assert [e["offset"] for e in logs if e["event"] == "entry.set_aside"] == [flawed]
    kept = read_log(out)
    assert [o for o, _ in kept.entries] == list(range(1, flawed + 1))
    assert kept.entries[:-1] == sim.entries
    last = decode_record(kept.entries[-1][1], flawed)
    assert (last.id, last.events, last.t) == (f"dead-letter/{flawed}", (), decode_record(sim.entries[-1][1], 1).t)
    assert verify(kept).ok


def test_a_lagging_view_folds_a_bad_entry_as_the_no_op() -> None:
    """A stale-view (or delay) fault's lagging copy of the view moves over the entries the actor folded;
    a bad one (a foreign writer's entry without a payload) raised LogDecodeError there and crashed the
    actor: it now folds the no-op every consumer folds."""
    from dralab.actors.live_faults import ActorFaults
    from dralab.actors.redis_replies import _flawed
    from dralab.core.cluster.runtime_faults import Effect

    faults, state = ActorFaults(["scheduler"]), ClusterState()
    state.apply(1, Record(id="in-1", source="scenario", view=-1, t=10, events=()))
    effect = Effect(lag=1)
    assert faults.view("scheduler", effect, state, 10).offset == 1  # the lagging copy begins here
    bad = _flawed(2, [b"x", b"y"])
    state.apply(2, wire.skip_record(state, 2))
    faults.note(2, bad.payload, 10)
    state.apply(3, Record(id="in-3", source="scenario", view=-1, t=30, events=()))
    faults.note(3, rec(3), 30)
    view = faults.view("scheduler", Effect(lag=0, delay=1), state, 50)
    assert view.offset == 3 and view.t == 30


async def test_an_offset_a_reader_took_for_foreign_is_never_deleted_once_it_is_the_runs(redis_url: str) -> None:
    """A reader met `11-0` above the sequence (10): foreign. Before its set-aside ran, an append met the
    same entry, repaired, and appended the run's own 11. The reader's set-aside must leave that alone."""
    async with redis_stream(redis_url) as bus:
        await bus.create_group("g")
        await put(bus, *range(1, 11))
        await bus._cmd.xadd(bus.log_key, {"p": b"junk"}, id="11-0")
        assert await put(bus, 11) == [11]  # the append repaired and took 11
        fixed = await bus._quarantine_script(keys=[bus.log_key, bus.seq_key, bus.dead_key], args=["late", "11-0"])
        assert fixed == []
        assert [e.offset for e in await bus.read_group("g", "c")] == list(range(1, 12))
        assert [(d.stream_id, d.consumer) for d in await bus.dead_letters()] == [("11-0", "append")]

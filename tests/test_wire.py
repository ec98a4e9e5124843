"""Delivery on the wire, on a real redis-server (docs/delivery.md): bad entries are set aside in the
dead-letter stream and do not stop a consumer, a consumer that stops acknowledging has its entries
reclaimed by its replacement, an event delivered twice is applied once, and a duplicate append of
the same intent is recognised by its id. One test uses a real Ray actor (the actor must survive a
bad entry); the others run the actor's loop (ReactorLoop) directly."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from dralab.actors import wire
from dralab.actors.bus import Appended, Entry, GroupInfo
from dralab.actors.bus_factory import BusSpec
from dralab.actors.live import LiveOptions, LiveRun
from dralab.actors.reactor_actor import ReactorActor
from dralab.actors.reactor_loop import ReactorLoop
from dralab.actors.redis_bus import RedisBus
from dralab.core.analysis.metrics import metrics_from_entries
from dralab.core.log.events import SCHEMA_VERSION, Record, decode_record, encode_record
from dralab.core.scenario.load import load_scenario
from dralab.core.state.cluster import ClusterState
from dralab.replay.simulation.sim import simulate

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"
GARBAGE = b"\xc1 not msgpack at all"


def rec(i: int, v: int = SCHEMA_VERSION) -> Record:
    """An external input with no events: decodes, folds, and gives a reactor nothing to do."""
    return Record(id=f"in-{i}", source="scenario", view=-1, t=i * 10, events=(), v=v)


@contextlib.asynccontextmanager
async def redis_stream(url: str) -> AsyncIterator[RedisBus]:
    bus = await RedisBus.connect(url, f"wire-{uuid.uuid4().hex[:10]}")
    try:
        yield bus
    finally:
        await bus.close()


async def append_raw(bus: RedisBus, payload: bytes, id: str) -> int:
    return (await bus.append(payload, id=id, expect={}, writes=[])).offset


async def until(check: Callable[[], Awaitable[bool]], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def running(loop: ReactorLoop) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(loop.run())
    try:
        yield task
    finally:
        loop.stopping = True
        await asyncio.wait_for(task, 5)


async def caught_up(bus: RedisBus, group: str) -> bool:
    info = await bus.group_info(group)
    return info == GroupInfo(await bus.last_offset(), 0)


# -- dead letters ---------------------------------------------------------------------------------


async def test_bad_entries_are_set_aside_once_and_do_not_stop_consumers(redis_url: str) -> None:
    async with redis_stream(redis_url) as bus:
        await append_raw(bus, encode_record(rec(1)), "in-1")
        await append_raw(bus, GARBAGE, "bad-1")  # offset 2: does not decode
        await append_raw(bus, encode_record(rec(3, v=SCHEMA_VERSION + 1)), "in-3")  # offset 3: from the future
        loops = [ReactorLoop("scheduler", bus, group=g, consumer=f"{g}-0") for g in ("scheduler", "autoscaler")]
        with capture_logs() as logs:
            for loop in loops:
                await loop.rebuild()  # met while rebuilding the view
            async with running(loops[0]), running(loops[1]):
                await append_raw(bus, encode_record(rec(4)), "in-4")
                await append_raw(bus, b"", "bad-5")  # offset 5: met while consuming
                await append_raw(bus, encode_record(rec(6)), "in-6")
                for g in ("scheduler", "autoscaler"):
                    await until(lambda g=g: caught_up(bus, g))  # type: ignore[misc]
        for loop in loops:
            # Every offset folded (bad ones as no-ops): the view is where the log ends, without a gap.
            assert loop.state.offset == 6 and loop.state.anomalies == []
            assert loop.state.t == 60
            assert loop.stats["dead_letters"] == 3
        letters = await bus.dead_letters()
        assert [d.offset for d in letters] == [2, 3, 5]  # once per offset, for two consumers
        by_offset = {d.offset: d for d in letters}
        assert by_offset[2].reason.startswith("malformed payload") and by_offset[2].payload == GARBAGE
        assert "schema version 2 is newer" in by_offset[3].reason
        assert by_offset[5].payload == b"" and by_offset[5].size == 0
        assert {d.consumer for d in letters} <= {"scheduler-0", "autoscaler-0"}
        set_aside = [e for e in logs if e["event"] == "entry.set_aside"]
        assert {(e["offset"], e["consumer"]) for e in set_aside} == {
            (o, c) for o in (2, 3, 5) for c in ("scheduler-0", "autoscaler-0")}
        assert all(e["log_level"] == "error" and e["reason"] for e in set_aside)


async def test_the_drivers_fold_skips_a_bad_entry_and_keeps_the_no_op(redis_url: str) -> None:
    async with redis_stream(redis_url) as bus:
        scenario = load_scenario(QUICKSTART)
        sim = simulate(scenario, 7)
        live = LiveRun(scenario, LiveOptions(), bus, BusSpec("redis", url=redis_url, stream=bus.stream))
        good = [Entry(o, p) for o, p in sim.entries[:3]]
        t = decode_record(good[-1].payload, 3).t
        after = Record(id="in-5", source="scenario", view=-1, t=t, events=())
        with capture_logs() as logs:
            live._fold([*good, Entry(4, GARBAGE), Entry(5, encode_record(after))])
        await wire.drain()
        assert live.state.offset == 5 and live.state.anomalies == []
        assert [(d.offset, d.consumer, d.payload) for d in await bus.dead_letters()] == [(4, "driver", GARBAGE)]
        assert [e["offset"] for e in logs if e["event"] == "entry.set_aside"] == [4]
        # The run keeps the no-op every consumer folded in its place: the summary still works.
        kept = decode_record(live.entries[3][1], 4)
        assert (kept.id, kept.source, kept.events) == ("dead-letter/4", "scenario", ())
        metrics_from_entries(live.entries)


@pytest.mark.live
@pytest.mark.timeout(120)
async def test_a_reactor_actor_survives_bad_input(redis_url: str, ray_session: None) -> None:
    import ray

    async with redis_stream(redis_url) as bus:
        spec = BusSpec("redis", url=redis_url, stream=bus.stream)
        actor = ReactorActor.options(name=f"wire-{uuid.uuid4().hex[:6]}").remote(  # type: ignore[attr-defined]
            "scheduler", spec)
        try:
            async def status() -> dict[str, object]:
                return await asyncio.wait_for(actor.status.remote(), 10)  # type: ignore[no-any-return]

            async def ready() -> bool:
                try:  # a new worker process can take more than 10 s to start on a loaded 2-core machine
                    return bool((await status()).get("ready"))
                except TimeoutError:
                    return False

            await until(ready, 60)
            before = await status()
            await append_raw(bus, encode_record(rec(1)), "in-1")
            await append_raw(bus, GARBAGE, "bad-2")
            await append_raw(bus, encode_record(rec(3, v=SCHEMA_VERSION + 7)), "in-3")
            await append_raw(bus, encode_record(rec(4)), "in-4")
            await until(lambda: caught_up(bus, "scheduler"), 20)
            after = await status()
            assert after["pid"] == before["pid"] and after["alive"] and after["error"] is None
            assert after["view_offset"] == 4 and after["dead_letters"] == 2
            assert [d.offset for d in await bus.dead_letters()] == [2, 3]
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(actor.stop.remote(), 10)
            ray.kill(actor, no_restart=True)


# -- reclaim --------------------------------------------------------------------------------------


async def test_a_replacement_reclaims_what_a_silent_consumer_left(redis_url: str) -> None:
    async with redis_stream(redis_url) as bus:
        for i in range(1, 6):
            await append_raw(bus, encode_record(rec(i)), f"in-{i}")
        await bus.create_group("scheduler")
        # The old consumer read three entries, then stopped acknowledging (hung, or gone for good).
        assert [e.offset for e in await bus.read_group("scheduler", "scheduler-old", count=3)] == [1, 2, 3]
        loop = ReactorLoop("scheduler", bus, group="scheduler", consumer="scheduler-new",
                           reclaim_idle_ms=300, reclaim_every_s=0.1)
        t0 = time.monotonic()
        with capture_logs() as logs:
            async with running(loop):
                await until(lambda: caught_up(bus, "scheduler"))
        assert time.monotonic() - t0 >= 0.3  # not before they had been idle that long
        assert loop.stats["reclaimed"] == 3
        assert await bus.pending("scheduler", "scheduler-old") == []
        assert loop.state.offset == 5 and loop.state.anomalies == []
        assert loop.stats["applied"] == 5  # the reclaimed entries were in the view already: applied once
        claimed = [e for e in logs if e["event"] == "entries.reclaimed"]
        assert [(e["count"], e["first"], e["last"], e["consumer"]) for e in claimed] == [(3, 1, 3, "scheduler-new")]


async def test_entries_given_to_another_consumer_are_read_from_the_log(redis_url: str) -> None:
    """Two consumers in one group split the deliveries; each still folds every offset, in order
    (the gap before an entry is read from the log), and acknowledges what it was given."""
    async with redis_stream(redis_url) as bus:
        for i in range(1, 4):
            await append_raw(bus, encode_record(rec(i)), f"in-{i}")
        loop = ReactorLoop("scheduler", bus, group="scheduler", consumer="scheduler-a")
        await loop.rebuild()
        await loop._fold(await bus.read_group("scheduler", "scheduler-a"))
        for i in range(4, 7):
            await append_raw(bus, encode_record(rec(i)), f"in-{i}")
        assert [e.offset for e in await bus.read_group("scheduler", "scheduler-b", count=2)] == [4, 5]
        mine = await bus.read_group("scheduler", "scheduler-a")
        assert [e.offset for e in mine] == [6]
        await loop._fold(mine)
        assert loop.state.offset == 6 and loop.state.anomalies == [] and loop.state.t == 60
        assert loop.stats["gap_reads"] == 2


# -- idempotent application -----------------------------------------------------------------------


async def test_an_event_delivered_twice_is_applied_once(redis_url: str) -> None:
    """A real run's log on Redis: a consumer that crashed before acknowledging gets every entry
    again; folding them again changes nothing."""
    sim = simulate(load_scenario(QUICKSTART), 7)
    async with redis_stream(redis_url) as bus:
        await bus.append_many([(p, decode_record(p, o).id, {}, []) for o, p in sim.entries])
        first = ReactorLoop("scheduler", bus, group="scheduler", consumer="scheduler-0")
        assert await first.rebuild() == []
        assert _same(first.state, sim.state)
        delivered = await bus.read_group("scheduler", "scheduler-0", count=len(sim.entries))
        assert len(delivered) == len(sim.entries)  # ... and then the consumer died: nothing acked
        restarted = ReactorLoop("scheduler", bus, group="scheduler", consumer="scheduler-0")
        redelivered = await restarted.rebuild()
        assert [e.offset for e in redelivered] == [o for o, _ in sim.entries]
        before = copy.deepcopy(restarted.state)
        await restarted._fold(redelivered)
        await restarted._fold(redelivered[:10])  # and once more
        assert restarted.state == before
        assert restarted.stats["duplicates_skipped"] == len(sim.entries) + 10
        assert restarted.stats["applied"] == len(sim.entries)


async def test_a_duplicate_append_of_the_same_intent_is_recognised_by_its_id(redis_url: str) -> None:
    sim = simulate(load_scenario(QUICKSTART), 7)
    decisions = [(o, p, decode_record(p, o)) for o, p in sim.entries]
    offset, payload, record = next((o, p, r) for o, p, r in decisions if r.source == "scheduler")
    async with redis_stream(redis_url) as bus:
        for o, p, r in decisions[:offset]:
            assert (await bus.append(p, id=r.id, expect={}, writes=r.writes())).offset == o
        end = await bus.last_offset()
        # The same decision resent by five connections at once (a timed-out append retried, a
        # restarted actor deciding the same record): one entry, every caller told its offset.
        others = [await RedisBus.connect(redis_url, bus.stream) for _ in range(5)]
        try:
            got = await asyncio.gather(*(b.append(payload, id=record.id, expect={}, writes=record.writes())
                                         for b in others))
        finally:
            for b in others:
                await b.close()
        assert set(got) == {Appended(offset, True)}
        assert await bus.last_offset() == end == offset
        assert [e.offset for e in await bus.read()] == list(range(1, offset + 1))


def _same(a: ClusterState, b: ClusterState) -> bool:
    return a.offset == b.offset and a.versions == b.versions and {
        k: (p.phase, p.node) for k, p in a.pods.items()} == {k: (p.phase, p.node) for k, p in b.pods.items()}

"""The live path, on a real redis-server and a real local Ray: the same end state as the simulator,
a log that verifies, and a reactor actor killed mid-run that Ray restarts and that resumes from its
consumer group without losing or double-applying an event."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest
from conftest import QuickstartLive

from dralab.actors.live import LiveOptions, LiveRun, run_live_async
from dralab.actors.redis_bus import RedisBus
from dralab.core.log.events import PodBound, decode_record
from dralab.core.scenario.load import load_scenario
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import simulate
from dralab.replay.simulation.verify import verify

pytestmark = [pytest.mark.live, pytest.mark.timeout(180)]
QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"
SPEED = 40.0


def _pods(state):  # pod key -> (phase, scheduled?)
    return {k: (p.phase, p.node is not None) for k, p in state.pods.items()}


async def test_live_run_reaches_the_sim_end_state_and_verifies(quickstart_live: QuickstartLive) -> None:
    """The session's live quickstart run (conftest.py: seed 7 at 40x on Redis; tests/test_observability.py
    scrapes its metrics endpoint while it goes on)."""
    scenario = load_scenario(QUICKSTART)
    live = quickstart_live.live
    sim = simulate(scenario, 7)
    assert live.completed
    assert live.state.pods_by_phase["Pending"] == {}
    assert _pods(live.state) == _pods(sim.state)
    assert live.violations == []
    result = verify(LogFile("live", {}, live.entries))
    assert result.ok, result.divergence and result.divergence.render()
    assert set(result.sources) == {"scheduler", "autoscaler", "cloud", "lifecycle"}
    # The summary knows which bus it used, without a password in it.
    assert live.extra["bus"].startswith("redis redis://127.0.0.1:")


async def test_killed_actor_restarts_and_resumes_from_its_group(redis_url: str, ray_session: None) -> None:
    scenario = load_scenario(QUICKSTART)
    stream = f"t-kill-{uuid.uuid4().hex[:6]}"
    # SPEED is enough: the kill comes while a pod is pending, and only the scheduler can bind it, so the run
    # cannot settle before the scheduler is back (10 cluster minutes are 15 s of wall time at 40x).
    options = LiveOptions(seed=3, redis_url=redis_url, stream=stream, speed=SPEED, timeout_s=150)
    seen: dict[str, object] = {}

    async def kill_scheduler_mid_run(run: LiveRun) -> None:
        state = run.state
        if "killed_pid" in seen:
            if "after" not in seen:
                status = (await run.actor_status())["scheduler"]
                if status.get("pid") not in (None, seen["killed_pid"]) and status.get("ready"):
                    seen["after"] = status
            return
        if state.pods and state.pods_by_phase["Pending"] and len(state.pods_by_phase["Running"]) >= 1:
            status = (await run.actor_status())["scheduler"]
            seen["before"] = status
            seen["killed_pid"] = status["pid"]
            os.kill(status["pid"], signal.SIGKILL)  # a real process death, not a polite stop

    live = await run_live_async(scenario, options, hook=kill_scheduler_mid_run)
    assert "killed_pid" in seen, "the run ended before the kill could happen"
    assert live.completed
    assert live.state.pods_by_phase["Pending"] == {}
    assert live.state.anomalies == []  # no pod bound twice, no gap
    assert live.violations == []
    after = seen.get("after")
    assert isinstance(after, dict), "the scheduler did not come back"
    assert after["pid"] != seen["killed_pid"]
    assert after["resumed_from"] > 0, "a restarted actor resumes from its consumer group, not from scratch"
    # rebuilt from a snapshot plus the tail, or from the whole log: either way up to where it resumed
    assert after["snapshot_offset"] + after["rebuilt"] >= after["resumed_from"]
    assert after["anomalies"] == []

    # Every entry reached the scheduler's group and was acknowledged; the log verifies.
    bus = await RedisBus.connect(redis_url, stream)
    try:
        info = await bus.group_info("scheduler")
        assert info.pending == 0
        assert info.last_delivered == await bus.last_offset()
    finally:
        await bus.close()
    bound = [e for o, p in live.entries for e in decode_record(p, o).events if isinstance(e, PodBound)]
    assert len(bound) == len({e.pod for e in bound}) == len(live.state.pods)
    result = verify(LogFile("live", {}, live.entries))
    assert result.ok, result.divergence and result.divergence.render()


async def test_embedded_bus_run_without_redis(ray_session: None) -> None:
    """No Redis at all: the log lives in a Ray actor, and the run still verifies."""
    scenario = load_scenario(QUICKSTART)
    options = LiveOptions(seed=7, embedded=True, speed=SPEED, timeout_s=120)
    live = await run_live_async(scenario, options)
    assert live.completed
    assert live.extra["bus"].startswith("embedded bus")
    assert live.state.pods_by_phase["Pending"] == {}
    assert _pods(live.state) == _pods(simulate(scenario, 7).state)
    result = verify(LogFile("live", {}, live.entries))
    assert result.ok, result.divergence and result.divergence.render()


async def test_live_gang_times_out_then_binds_whole(redis_url: str, ray_session: None) -> None:
    """scenarios/gang-quickstart.yaml on Redis and Ray: the scheduler actor wakes itself at the gang's
    deadline (no event arrives then), releases the waiting members together, and binds the gang in one
    record once the slow node is Ready; the log verifies."""
    from dralab.core.log.events import PodUnreserved

    scenario = load_scenario(QUICKSTART.parent / "gang-quickstart.yaml")
    options = LiveOptions(seed=4, redis_url=redis_url, stream=f"t-gang-{uuid.uuid4().hex[:6]}", speed=150.0,
                          timeout_s=120)
    live = await run_live_async(scenario, options)
    assert live.completed and live.violations == []
    events = [(o, decode_record(p, o)) for o, p in live.entries]
    released = [(r.t, e) for _, r in events for e in r.events if isinstance(e, PodUnreserved)]
    bound = [o for o, r in events for e in r.events if isinstance(e, PodBound)]
    assert len(released) == 2 and all(t >= 300_000 for t, _ in released)
    assert len(bound) == 4 and len(set(bound)) == 1
    result = verify(LogFile("live", {}, live.entries))
    assert result.ok, result.divergence and result.divergence.render()

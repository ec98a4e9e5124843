"""`dralab chaos --live`: the chaos scenarios on the live system (real local Ray, a private redis-server),
under random fault schedules that include real process kills (SIGKILL of a reactor's actor, restarted by
Ray) and a real Redis restart (the run's redis-server SIGKILLed and started again on its AOF), plus the
pauses (SIGSTOP/SIGCONT), partitions, lagging views, duplicated appends and skewed clocks the actors and
the driver play (actors/live_faults.py), and the scenario's own cluster, device and cloud faults.

Each seed must finish, keep every invariant while it runs (the driver's monitor) and after (liveness over
the log, with the scheduler's measured downtime allowed), and its log must verify (every decision
recomputed on the view it records). The scenarios run at 120x and cut to their first 6 minutes, each
through the command (`dralab chaos --live`, JSON summary) with one seed: the first or the second (by
turns) whose schedule holds both a kill and a Redis restart, so every run has both, and the five runs
together play every fault kind the first two seeds of every scenario would.

The actor side of the runtime faults (ActorFaults) is unit-tested first, without Ray.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dralab.actors.live_faults import ActorFaults, hits
from dralab.cli import main
from dralab.core.cluster.runtime_faults import Effect
from dralab.core.log.events import FaultInjected, Record, RunStarted, encode_record
from dralab.core.scenario.load import Scenario, load_scenario
from dralab.core.state.cluster import ClusterState
from dralab.replay.simulation.chaos import LIVE_KINDS as CHAOS_LIVE_KINDS
from dralab.replay.simulation.chaos import chaos_schedule
from dralab.replay.simulation.sim import simulate

ROOT = Path(__file__).resolve().parents[1]
CHAOS = sorted((ROOT / "scenarios" / "chaos").glob("*.yaml"))
LIVE_KINDS = (*CHAOS_LIVE_KINDS, "redis-restart")  # what `dralab chaos --live` draws from with a Redis of its own
RATE = 30.0
CUT_MS = 6 * 60_000
SPEED = 120.0


# -- the actor's side, without Ray ----------------------------------------------------------------------

def _state(*faults: dict[str, object]) -> ClusterState:
    state = ClusterState()
    run = RunStarted(scenario="t", seed=0, config={})
    state.apply(1, Record(id="run", source="scenario", t=0, view=0, events=(run,)))
    for i, f in enumerate(faults):
        event = FaultInjected(fault=f"fault/{i}", kind=str(f["kind"]), target=str(f.get("target", "")),
                              until_ms=int(f.get("until", -1)), params=dict(f.get("params", {})))  # type: ignore[arg-type]
        state.apply(state.offset + 1, Record(id=f"scenario/fault/{i}", source="scenario", t=int(f.get("at", 0)),
                                             view=state.offset, events=(event,)))
    return state


def test_a_fault_on_drivers_hits_its_shards_only() -> None:
    assert hits("drivers", "drivers") and hits("drivers", "drivers-1")
    assert not hits("drivers", "drivers-x") and not hits("drivers", "driverz-1") and not hits("scheduler", "drivers")


def test_the_actor_plays_only_its_own_reactors_faults_and_only_its_kinds() -> None:
    state = _state({"kind": "partition", "target": "scheduler", "until": 60_000},
                   {"kind": "reactor-kill", "target": "scheduler"},  # the driver's to play
                   {"kind": "duplicate", "target": "autoscaler"})
    faults = ActorFaults(["scheduler"])
    effects = faults.effects(state, 10_000)
    assert effects == {"scheduler": Effect(blocked=True)}
    assert faults.cut_off_ms(state, 10_000) == 50_000  # cluster ms left: a partitioned actor reads nothing
    assert faults.cut_off_ms(state, 60_000) is None
    assert faults.back("scheduler", effects["scheduler"]) is False
    assert faults.back("scheduler", None) is True and faults.back("scheduler", None) is False
    # a host with another reactor not partitioned keeps reading
    assert ActorFaults(["scheduler", "cloud"]).cut_off_ms(state, 10_000) is None


def test_a_stale_view_freezes_a_copy_then_follows_lag_entries_behind() -> None:
    state = _state({"kind": "stale-view", "target": "scheduler", "params": {"lag": 3}})
    faults = ActorFaults(["scheduler"])
    e = faults.effects(state, 0)["scheduler"]
    first = faults.view("scheduler", e, state, 0)
    assert first is not state and first.offset == state.offset == 2
    for i in range(5):  # five more entries folded by the actor
        record = Record(id=f"x{i}", source="scenario", t=0, view=state.offset, events=())
        state.apply(state.offset + 1, record)
        faults.note(state.offset, encode_record(record), 0)
    view = faults.view("scheduler", e, state, 0)
    assert (state.offset, view.offset) == (7, 4)
    # a delay: only what arrived at least `delay` (cluster ms) ago
    delayed = ActorFaults(["scheduler"])
    d = Effect(delay=1000)
    assert delayed.view("scheduler", d, state, 0).offset == 7  # the copy taken when the fault begins
    for at in (100, 900):
        record = Record(id=f"y{at}", source="scenario", t=at, view=state.offset, events=())
        state.apply(state.offset + 1, record)
        delayed.note(state.offset, encode_record(record), at)
    assert [delayed.view("scheduler", d, state, now).offset for now in (1000, 1100, 1899, 1900)] == [7, 8, 8, 9]
    # the fault over: the lagging copy is dropped, the reactor is back on the actor's view
    ended = _state({"kind": "delay", "target": "scheduler", "until": 500, "params": {"delay": 1000}})
    assert set(delayed.effects(ended, 100)) == {"scheduler"} and delayed.lagging
    assert delayed.effects(ended, 500) == {} and delayed.lagging == {}


# -- live ------------------------------------------------------------------------------------------------

def _cut(path: Path) -> Scenario:
    sc = load_scenario(path)
    return msgspec.structs.replace(sc, duration_ms=min(sc.duration_ms, CUT_MS))


def _seeds(sc: Scenario, n: int = 2) -> list[int]:
    """The first seeds whose schedule kills a reactor and restarts Redis in the first two thirds of the cut
    run (a fault drawn in its last seconds may come after the run has settled and ended)."""
    out = [s for s in range(1, 500)
           if {"reactor-kill", "redis-restart"} <= {f.kind for f in chaos_schedule(sc, s, LIVE_KINDS, RATE)
                                                    if f.at_ms <= CUT_MS * 2 // 3}]
    return out[:n]


def _seed(i: int, sc: Scenario) -> int:
    """The seed scenario `i` runs live: the first or the second of `_seeds`, by turns. The two draw different
    fault kinds besides the kill and the Redis restart; by turns, the scenarios together play all of them."""
    return _seeds(sc)[i % 2]


# One scenario runs with one actor per reactor (the command's default), the others in two host actors.
ONE_ACTOR_PER_REACTOR = "partitioned-scheduler"


def test_the_live_seeds_play_every_kind_both_seeds_of_each_scenario_would() -> None:
    """One seed per scenario, not two: what the second seeds drew is drawn by another scenario's."""
    both: set[str] = set()
    chosen: set[str] = set()
    for i, path in enumerate(CHAOS):
        sc = _cut(path)
        seeds = _seeds(sc)
        assert len(seeds) == 2
        both |= {f.kind for s in seeds for f in chaos_schedule(sc, s, LIVE_KINDS, RATE)}
        kinds = {f.kind for f in chaos_schedule(sc, _seed(i, sc), LIVE_KINDS, RATE)}
        assert {"reactor-kill", "redis-restart"} <= kinds
        chosen |= kinds
    assert chosen == both, sorted(both - chosen)
    assert ONE_ACTOR_PER_REACTOR in [p.stem for p in CHAOS]


@pytest.mark.live
@pytest.mark.timeout(240)
@pytest.mark.parametrize("path", CHAOS, ids=[p.stem for p in CHAOS])
def test_chaos_scenario_live_with_kills_and_a_redis_restart(path: Path, tmp_path: Path, ray_session: None,
                                                            capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`dralab chaos --live` end to end (the session's Ray is reused), one seed that kills a reactor and
    restarts Redis: the JSON summary alone on stdout, and each seed's own result (taken from the
    command's run_live_seeds) says the faults were played. The command reads the scenario file; what it
    read is cut to CUT_MS before the run."""
    import dralab.chaos_cmd as chaos_cmd
    import dralab.chaos_live as chaos_live

    sc = _cut(path)
    seed = _seed(CHAOS.index(path), sc)
    assert simulate(sc, 0).violations == []
    results: list[Any] = []

    def run_live_seeds(*args: Any, **kwargs: Any) -> Any:
        results.extend(real(*args, **kwargs))
        return results

    real = chaos_live.run_live_seeds
    monkeypatch.setattr(chaos_live, "run_live_seeds", run_live_seeds)
    load = chaos_cmd.load_scenario_input

    def load_cut(file: str, *args: Any) -> Scenario:  # the command reads the file; the run is cut as `_cut`
        loaded = load(file, *args)
        return msgspec.structs.replace(loaded, duration_ms=min(loaded.duration_ms, CUT_MS))

    monkeypatch.setattr(chaos_cmd, "load_scenario_input", load_cut)
    layout = [] if path.stem == ONE_ACTOR_PER_REACTOR else ["--hosts", "2", "--timeout", "120"]
    code = main(["chaos", str(path), "--live", "--seeds", str(seed), "--rate", str(RATE), "--speed", str(SPEED),
                 *layout, "--out", str(tmp_path / "out"), "--summary", "json", "--quiet"])
    out = capsys.readouterr().out
    summary = json.loads(out)  # nothing but the summary on stdout (Ray's notices go to stderr)
    assert [r.seed for r in results] == [seed]
    for r in results:
        assert r.ok, (r.seed, r.failures, r.message, r.files, r.live)
        assert r.live["completed"]
        played = r.live["played"]
        assert played.get("reactor-kill", 0) >= 1 and played.get("redis-restart", 0) >= 1, played
        assert not r.live["skipped"], r.live["skipped"]
        assert r.live["bus_outages_s"], "the driver saw no outage of the restarted Redis"
        assert r.records > 0 and r.sim_ms > 0
    assert code == 0, summary
    assert summary["mode"] == "live" and summary["speed"] == SPEED and summary["seeds_run"] == 1
    assert summary["ok"] and summary["seeds_failed"] == 0 and summary["scenario"] == sc.name
    assert "redis-restart" in summary["kinds"] and summary["cluster_hours"] > 0
    assert not (tmp_path / "out").exists()  # nothing failed, nothing kept

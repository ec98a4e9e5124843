"""`dralab chaos SCENARIO --live`: the same random fault schedules, played on the live system.

Each seed draws the schedule the simulator would run (replay/simulation/chaos.py, `prepare`), and the scenario with
those faults runs live: reactors as Ray actors, the log on a private redis-server (or the one given with
`--redis`). The driver and the actors play the runtime faults on real processes and on Redis
(actors/live_faults.py): SIGKILL, SIGSTOP/SIGCONT, a partitioned consumer, lagging views, duplicated
appends, skewed clocks, a redis-server killed and started again on its AOF. Cluster, device and cloud
faults are written into the log by the chaos, drivers and cloud reactors as in the simulator.

A live seed fails when, besides what fails a simulated seed (an invariant broken while the run goes on,
watched by the driver's own fold; liveness over the finished log):
- the run did not finish (`run-error`: the bus lost for good, a timeout), or
- `replay --verify` disagrees with the log (`divergence`: a decision the reactors' code does not make
  again on the view it records: the live path broke determinism).
Liveness gets the simulator's allowance (runtime faults that held the scheduler back) plus what the
live run measured: how long each kill, pause and Redis outage actually kept the scheduler away (a
restart takes what Ray takes, in wall time, times the speed-up).

Seeds run one after another, on one Ray instance (a live run is a whole cluster already). A failing
seed's log is kept like a simulated one's (its header says `mode: live`) and shrunk in the simulator
from its external inputs: a failure that needs live timing may not reproduce there, and the summary
says so (`shrunk.reproduced: false`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass
from typing import Any

from dralab.actors.live import LiveOptions, LiveResult, run_live_async
from dralab.actors.live_runtime import ray_runtime
from dralab.actors.redis_server import redis_server_available
from dralab.core.checks.liveness import DEFAULT_BOUND_MS
from dralab.core.checks.log_check import check_records
from dralab.core.log.events import decode_record
from dralab.core.scenario.load import Scenario
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.chaos import (
    DIVERGENCE,
    RUN_ERROR,
    ChaosOptions,
    SeedResult,
    judge,
    liveness_bound,
    log_digest,
    prepare,
    scenario_seed,
)
from dralab.replay.simulation.verify import verify

DEFAULT_SPEED = 30.0


@dataclass(frozen=True)
class LiveChaosOptions:
    speed: float = DEFAULT_SPEED  # cluster time per wall second
    timeout_s: float = 600.0  # a seed's run longer than this (wall) fails as run-error
    ray_address: str | None = None
    redis_url: str | None = None  # given: the run's Redis is not ours, so redis-restart faults are skipped
    reconnect_s: float = 60.0
    hosts: int = 0  # 0: an actor per reactor; N: the reactors dealt into N host actors (actors/hosts.py)


def redis_restart_possible(live: LiveChaosOptions) -> bool:
    """A Redis the run starts itself (no --redis, redis-server installed) is the only one it restarts."""
    return live.redis_url is None and redis_server_available()


async def run_live_seed(scenario: Scenario, seed: int, options: ChaosOptions, live: LiveChaosOptions) -> SeedResult:
    run, result = prepare(scenario, seed, options)
    opts = LiveOptions(seed=scenario_seed(scenario), ray_address=live.ray_address, redis_url=live.redis_url,
                       speed=live.speed, timeout_s=live.timeout_s, progress_every_s=0, reconnect_s=live.reconnect_s,
                       embedded=not live.redis_url and not redis_server_available(), hosts=live.hosts)
    outcome = await run_live_async(run, opts)
    entries = outcome.entries
    found = [(v.offset, v.invariant, v.message) for v in outcome.violations]
    if outcome.error is not None or not outcome.completed:
        why = outcome.error or f"the run did not finish within {live.timeout_s:g} s"
        found.append((len(entries), RUN_ERROR, why))
    faults = outcome.extra.get("faults", {})
    held_ms = int(faults.get("downtime_ms", {}).get("scheduler", 0))
    base = DEFAULT_BOUND_MS if options.liveness_bound_ms is None else options.liveness_bound_ms
    bound = liveness_bound(run, base) + held_ms
    records = ((offset, decode_record(payload, offset)) for offset, payload in entries)
    found += [(v.offset, v.invariant, v.message)
              for v in check_records(records, only=["liveness"], liveness_bound_ms=bound).violations]
    verified = verify(LogFile("live", {}, entries))
    if verified.divergence is not None:
        d = verified.divergence
        found.append((d.offset, DIVERGENCE, f"offset {d.offset} ({d.source}, view {d.view}): {d.reason}"))
    result.records = len(entries)
    result.digest = log_digest(entries)  # informative only: live timing makes every run's log its own
    result.sim_ms = min(run.duration_ms, int(outcome.extra.get("wall_s", 0) * live.speed * 1000))
    result.live = live_facts(outcome, bound)
    judge(run, seed, entries, found, result, options, mode="live")
    return result


def live_facts(outcome: LiveResult, bound_ms: int) -> dict[str, Any]:
    """What the summary says of a live seed: the faults played (by kind), those skipped and why, the
    actors' restarts as seen through their rebuilds, bus outages, the liveness bound used."""
    faults = outcome.extra.get("faults", {})
    played: dict[str, int] = {}
    for p in faults.get("played", []):
        played[p["kind"]] = played.get(p["kind"], 0) + 1
    actors = outcome.extra.get("actors", {})
    return {
        "completed": outcome.completed, "wall_s": outcome.extra.get("wall_s"), "played": played,
        "skipped": faults.get("skipped", []), "downtime_ms": faults.get("downtime_ms", {}),
        "rebuilt_from": {n: a.get("rebuilt_from") for n, a in sorted(actors.items())},
        "bus_outages_s": outcome.extra.get("bus_outages_s", []), "liveness_bound_ms": bound_ms,
    }


def run_live_seeds(scenario: Scenario, seeds: list[int], options: ChaosOptions, live: LiveChaosOptions,
                   progress: Any) -> list[SeedResult]:
    """Every seed live, one after another, on one Ray (started here unless `live.ray_address`)."""
    results: list[SeedResult] = []
    failed = 0
    # The actors' lines stay in Ray's session logs; Ray's own notices (a worker killed...) are printed
    # on stdout, which is the summary's: they go to stderr while the seeds run.
    with ray_runtime(live.ray_address, "json"), contextlib.redirect_stdout(sys.stderr):
        for seed in seeds:
            started = time.monotonic()
            r = asyncio.run(run_live_seed(scenario, seed, options, live))
            r.live["seed_wall_s"] = round(time.monotonic() - started, 2)
            results.append(r)
            failed += not r.ok
            progress.update(len(results), failed)
    progress.update(len(results), failed, force=True)
    return results

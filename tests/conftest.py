"""Shared fixtures: one private Redis and one local Ray per test session.

Both are session-scoped because they are slow to start (Ray about 3 s) and stateless between
tests as long as each test uses fresh names (stream names, actor names). The shared Redis on 6379,
if any, is never used.
"""

from __future__ import annotations

import asyncio
import os
import socket
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dralab.actors.redis_server import private_redis_server, redis_server_available

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of a private redis-server for this session (skips only if redis-server is missing)."""
    if not redis_server_available():
        pytest.skip("redis-server is not on PATH")
    with private_redis_server() as url:
        yield url


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """A local Ray instance for the whole session; every test that needs Ray requests this."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from dralab.actors.ray_access import local_ray_environment

    started = not ray.is_initialized()
    if not started:
        yield
        return
    with local_ray_environment():  # as `dralab run` starts Ray: loopback only, a token of its own
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        yield
        ray.shutdown()


# -- live runs shared by several test modules ------------------------------------------------------------
# Each of these is one real run (Ray actors, the session's redis-server) that two modules used to make
# separately with the same scenario, seed, speed and bus; made once, each module checks what it checked.


@pytest.fixture(scope="session")
async def undisturbed(redis_url: str, ray_session: None) -> Any:
    """tests/test_faults_live.py's scenario run live with no fault (one actor per reactor, trimming and
    frequent snapshots): the end state every faulted run (test_faults_live.py, test_live_hosts.py) must
    reach. It completes, and its own log passes every check a faulted run's must."""
    from test_faults_live import _options, _scenario, check_log

    from dralab.actors.live import run_live_async

    scenario = _scenario()
    live = await run_live_async(scenario, _options(redis_url, "calm"))
    assert live.completed, live.error
    check_log(live, scenario, 5)
    return live


@dataclass
class QuickstartLive:
    """scenarios/quickstart.yaml, seed 7, live on Redis at 40x with the metrics endpoint on and progress
    every half second; `scrapes` are the endpoint's answers taken while the run went on."""

    live: Any
    url: str
    scrapes: list[dict[str, Any]] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        return str(response.read().decode())


@pytest.fixture(scope="session")
async def quickstart_live(redis_url: str, ray_session: None) -> QuickstartLive:
    """One live quickstart run for tests/test_live.py (end state = the simulator's, the log verifies) and
    tests/test_observability.py (the metrics endpoint scraped during the run, gone after it)."""
    from dralab.actors.live import LiveOptions, LiveRun, run_live_async
    from dralab.core.scenario.load import load_scenario

    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    options = LiveOptions(seed=7, redis_url=redis_url, stream=f"t-live-{uuid.uuid4().hex[:6]}", speed=40.0,
                          timeout_s=120, metrics_port=port, progress_every_s=0.5, progress_in_place=False)
    scrapes: list[dict[str, Any]] = []

    async def scrape_mid_run(run: LiveRun) -> None:
        # once some pod is bound and the observer has polled the actors (about once a second)
        polled = run.statuses and all(st.get("applied", 0) > 0 for st in run.statuses.values())
        if len(scrapes) < 2 and run.state.runs >= 1 and polled and run.groups:
            if scrapes and run.state.offset == scrapes[-1]["offset"]:
                return
            text = await asyncio.to_thread(scrape, url)  # the endpoint asks this loop: not from it
            scrapes.append({"offset": run.state.offset, "raw": text})

    live = await run_live_async(load_scenario(ROOT / "scenarios" / "quickstart.yaml"), options, hook=scrape_mid_run)
    return QuickstartLive(live, url, scrapes)

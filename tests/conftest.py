"""Shared fixtures: one private Redis and one local Ray per test session.

Both are session-scoped because they are slow to start (Ray about 3 s) and stateless between
tests as long as each test uses fresh names (stream names, actor names). The shared Redis on 6379,
if any, is never used.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from dralab.actors.redis_server import private_redis_server, redis_server_available


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
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()

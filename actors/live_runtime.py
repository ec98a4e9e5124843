"""The live run's runtime: Ray started or joined (and shut down only if started here), the run's log opened
(a given Redis, a private redis-server, or the embedded bus) and the errors that say which service is
missing. Apart from the run itself (actors/live.py), which needs Ray up and a bus open and nothing else
of how they came to be.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import ray

from dralab.core.scenario.load import Scenario

from .bus import Bus, BusUnavailable
from .bus_factory import BusSpec, open_bus
from .ray_access import RayUnreachable, local_ray_environment, probe_ray, token_help
from .reactor_loop import SnapshotPolicy
from .redis_bus import _secrets, redact_url
from .redis_server import RedisServer, private_redis_server

RAY_NAMESPACE = "dralab"


class ServiceUnavailable(Exception):
    """Redis or Ray could not be reached or started; the message says which and where."""


class BadRedisURL(ValueError):
    """The Redis URL given cannot be parsed: invalid input, said without its password."""


class StreamInUse(ValueError):
    """The stream named for this run already holds a log: a run never writes into another's history."""


@dataclass
class LiveOptions:
    seed: int = 0
    ray_address: str | None = None
    redis_url: str | None = None
    stream: str | None = None
    speed: float = 20.0
    timeout_s: float = 600.0
    embedded: bool = False
    log_file: str | None = None
    log_format: str = "console"
    progress_every_s: float = 2.0  # 0: no progress line
    progress_in_place: bool | None = None  # overwrite one line (\r); None: when stderr is a terminal, console logs
    metrics_port: int = 0  # serve Prometheus metrics at http://metrics_host:metrics_port/metrics (0: off)
    metrics_host: str = "127.0.0.1"
    snapshots: SnapshotPolicy = field(default_factory=SnapshotPolicy)  # when reactor actors save their view
    trim_every_s: float = 5.0  # trim the stream this often (0: never; the stream keeps the whole run)
    drivers_shards: int = 1  # device-driver actors, each hosting a share of the nodes (core/controllers/drivers.py)
    hosts: int = 0  # 0: one actor per reactor; N: the reactors dealt into N host actors (actors/hosts.py)
    gc_tenure_every: int = 0  # the driver's GC tuning (actors/gc_tuning.py; process-wide: `dralab run` turns it on)
    reconnect_s: float = 60.0  # how long the driver waits for an unreachable bus before giving up


@contextlib.contextmanager
def ray_runtime(address: str | None, log_format: str = "console") -> Iterator[None]:
    """Start Ray locally (or join `address`), and shut it down only if this call started it.

    A cluster given with `address` is probed first (actors/ray_access.py): nothing there, no GCS, or a
    token missing is a one-line ``ServiceUnavailable`` within ~20 s, not minutes of Ray's retries. A
    local Ray listens on 127.0.0.1 only and uses token authentication with a token of its own.
    Ray's own chatter is kept to errors. With JSON logs, actors' lines stay in Ray's session logs
    (Ray would prefix them with `(ReactorActor pid=...)`, which breaks one-JSON-object-per-line)."""
    if ray.is_initialized():
        yield
        return
    common: dict[str, Any] = {
        "namespace": RAY_NAMESPACE, "log_to_driver": log_format != "json", "logging_level": logging.ERROR,
    }
    with contextlib.ExitStack() as stack:
        try:
            if address:
                probe_ray(address)
                ray.init(address=address, **common)
            else:
                stack.enter_context(local_ray_environment())
                ray.init(address="local", include_dashboard=False, **common)
        except RayUnreachable as exc:
            raise ServiceUnavailable(str(exc)) from None
        except Exception as exc:  # ConnectionError and friends: say where, in one line
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            hint = f"; if the cluster uses token authentication, {token_help()}" if address else ""
            raise ServiceUnavailable(f"cannot start or join Ray ({address or 'local'}): {text}{hint}") from None
        try:
            yield
        finally:
            ray.shutdown()


def restarts_redis(scenario: Scenario) -> bool:
    return any(f.kind == "redis-restart" for f in scenario.faults)


@contextlib.asynccontextmanager
async def live_bus(options: LiveOptions, scenario: Scenario,
                   restartable: list[RedisServer] | None = None) -> AsyncIterator[tuple[Bus, BusSpec]]:
    """The log for this run: the given Redis, a private redis-server, or the embedded bus. A scenario
    with `redis-restart` faults gets a private server it can restart (AOF on), put in `restartable`."""
    stream = options.stream or f"dralab:{scenario.name}:{uuid.uuid4().hex[:8]}"
    with contextlib.ExitStack() as stack:
        if options.embedded:  # --embedded wins over --redis and DRALAB_REDIS_URL
            from .embedded_bus import RayBus, start_log_actor

            name = f"dralab-log-{uuid.uuid4().hex[:8]}"
            handle = start_log_actor(name)
            spec = BusSpec("ray", actor=name, stream=stream, namespace=ray.get_runtime_context().namespace)
            bus: Bus = RayBus(handle)
        else:
            if options.redis_url:
                spec = BusSpec("redis", url=options.redis_url, stream=stream)
            elif restartable is not None and restarts_redis(scenario):
                workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="dralab-redis-"))
                # `always`: with `everysec` a SIGKILL can drop acknowledged appends (Redis postpones the AOF
                # write behind a slow background fsync and replies anyway): `dralab chaos --live` found
                # reactors then deciding on entries the log no longer has (docs/delivery.md)
                server = stack.enter_context(RedisServer(workdir, appendfsync="always"))
                restartable.append(server)
                spec = BusSpec("redis", url=server.url, stream=stream)
            else:
                spec = BusSpec("redis", url=stack.enter_context(private_redis_server()), stream=stream)
            try:
                bus = await open_bus(spec)
            except BusUnavailable as exc:
                raise ServiceUnavailable(str(exc)) from None
        try:
            if (used := await bus.last_offset()) > 0:
                raise StreamInUse(f"--stream: {stream} already holds {used} entries of another run; "
                                  "name a new stream (or leave --stream out)")
            yield bus, spec
        finally:
            await bus.close()



async def probe_redis(url: str) -> None:
    """Fail within seconds, before Ray starts, when the given Redis does not answer."""
    from .redis_bus import RedisBus

    try:
        bus = await RedisBus.connect(url, "dralab:probe")
    except BusUnavailable as exc:
        raise ServiceUnavailable(str(exc)) from None
    except ValueError as exc:  # a URL redis-py cannot parse is the user's input (exit 2, as `dralab record`)
        text = str(exc)
        for secret in _secrets(url):
            text = text.replace(secret, "***")
        raise BadRedisURL(f"--redis: bad Redis URL {redact_url(url)}: {text}") from None
    await bus.close()

"""Seeds as Ray tasks: what `dralab chaos --ray`, `dralab trace openb --ray` and the FGD matrix's `--ray` run
instead of a local process pool (cli/pool.py chooses).

Why tasks, in chunks: a million chaos seeds as a million tasks would spend more on Ray's bookkeeping than on the
seeds (a chaos seed is tens of milliseconds), so seeds go in chunks (about 16 per CPU of the cluster, so that the
last ones, running while other CPUs idle, are a small share; at most 64 seeds each), a few chunks per CPU in
flight at a time (a million seeds never sit in Ray's queue at once), each chunk one task returning its results
in order.
The sweep's inputs (the scenario, the options, an imported trace) are put into Ray's object store once; a
worker process calls the sweep's `init` with them the first time it runs one of the sweep's chunks, as the
local pool's initializer does, and keeps them for the next chunk. A seed's run is a function of the seed and
those inputs alone, so results do not depend on where they ran.

`auto` starts a local Ray with every core of this machine (loopback only, a token of its own:
actors/ray_access.py); an address joins that cluster after the same bounded probe as `dralab run --ray`
(token authentication as docs/deploy.md says). A Ray already started in this process (a test's session) is
used as it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from .ray_access import RayUnreachable, local_ray_environment, probe_ray, token_help

__all__ = ["LAST_SWEEP", "LOCAL", "RaySweepUnavailable", "chunk_size", "ray_finished", "sweep_ray"]

LOCAL = "auto"  # `--ray auto`: a local Ray on every core
CHUNKS_PER_CPU = 16  # the chunking's aim per CPU: the last chunks, running alone, are a small share of the sweep
IN_FLIGHT_PER_CPU = 4  # chunks submitted and not yet collected, per CPU of the cluster
MAX_CHUNK = 64  # seeds per task at most: a failing chaos seed is shrunk (seconds), progress still ticks

# The CPUs of the cluster the last sweep of this process ran on (a summary's `jobs`).
LAST_SWEEP: dict[str, int] = {"cpus": 0}
# A worker process's inputs for the sweep it last ran a chunk of (set by `_chunk`).
_WORKER_SWEEP: dict[str, Any] = {"id": None}


class RaySweepUnavailable(Exception):
    """Ray cannot be started or joined; the message says why in one line (the CLI exits 3)."""


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def sweep_ray(address: str) -> Iterator[None]:
    """Ray for a sweep: `auto` starts a local one on every core, anything else is joined; shut down only if
    this call started or joined it (a Ray already up in this process is left alone)."""
    import ray

    if ray.is_initialized():
        yield
        return
    common: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
    with contextlib.ExitStack() as stack:
        try:
            if address == LOCAL:
                stack.enter_context(local_ray_environment())
                ray.init(address="local", num_cpus=_cores(), include_dashboard=False, **common)
            else:
                probe_ray(address)
                ray.init(address=address, **common)
        except RayUnreachable as exc:
            raise RaySweepUnavailable(str(exc)) from None
        except Exception as exc:  # ConnectionError and friends: say where, in one line
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            hint = "" if address == LOCAL else f"; if the cluster uses token authentication, {token_help()}"
            raise RaySweepUnavailable(f"--ray {address}: cannot start or join Ray: {text}{hint}") from None
        try:
            yield
        finally:
            ray.shutdown()


def chunk_size(seeds: int, cpus: int) -> int:
    """Seeds per task: about CHUNKS_PER_CPU chunks per CPU, at most MAX_CHUNK seeds each."""
    return max(1, min(MAX_CHUNK, seeds // max(1, cpus * CHUNKS_PER_CPU)))


def _chunk(run: Callable[[int], Any], init: Callable[..., None], sweep: str, initargs: tuple[Any, ...],
           seeds: list[int]) -> list[Any]:
    """One task: the chunk's results in seed order; the sweep's inputs set once per worker process."""
    if _WORKER_SWEEP["id"] != sweep:
        init(*initargs)
        _WORKER_SWEEP["id"] = sweep
    return [run(seed) for seed in seeds]


def ray_finished(run: Callable[[int], Any], init: Callable[..., None], initargs: tuple[Any, ...], seeds: list[int],
                 address: str) -> Iterator[list[Any]]:
    """As cli/pool.py `finished`: yields the results finished since the last yield, about every second.
    A task that raises raises here (Ray's error is also an instance of the seed's exception), the rest are
    cancelled."""
    import ray

    with sweep_ray(address):
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))  # type: ignore[no-untyped-call]
        LAST_SWEEP["cpus"] = cpus
        size = chunk_size(len(seeds), cpus)
        chunks = [seeds[i:i + size] for i in range(0, len(seeds), size)]
        # A worker (or its node) that dies takes its chunk with it: run again, as often as Ray's default, since a
        # chunk is a function of its seeds and writes nothing; a seed that raises is not retried (Ray retries
        # system failures only unless retry_exceptions is set) and ends the sweep, as on the pool.
        task = ray.remote(num_cpus=1, max_retries=3)(_chunk)
        sweep, inputs = uuid.uuid4().hex, ray.put(initargs)
        limit = cpus * IN_FLIGHT_PER_CPU
        queued = iter(chunks)
        pending: list[Any] = []
        try:
            while True:
                while len(pending) < limit:
                    chunk = next(queued, None)
                    if chunk is None:
                        break
                    pending.append(task.remote(run, init, sweep, inputs, chunk))
                if not pending:
                    return
                done, pending = ray.wait(pending, num_returns=1, timeout=1.0)
                if done:  # and whatever else is ready, without waiting; none done: an empty yield after 1 s
                    more, pending = ray.wait(pending, num_returns=len(pending), timeout=0) if pending else ([], [])
                    done += more
                yield [r for batch in ray.get(done) for r in batch]
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise

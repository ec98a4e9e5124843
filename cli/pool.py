"""Running one function over many seeds, in this process or on a pool of worker processes: what `dralab
chaos` and `dralab trace openb` share. Workers are started with forkserver (spawn where it is missing), get
their inputs once through `init`, and the results come back as they finish; one job runs in this process
(so a test can patch what the run calls). With `ray` (an address, or `auto` for a local Ray on every core) the
seeds run as Ray tasks instead (actors/ray_sweep.py), with the same results."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


def finished(run: Callable[[int], Any], init: Callable[..., None], initargs: tuple[Any, ...], seeds: list[int],
             jobs: int, ray: str | None = None) -> Iterator[list[Any]]:
    """Yields the results finished since the last yield (in this process: one per seed; on a pool or Ray:
    every second, possibly none, so that a progress line can tick)."""
    if ray:
        from dralab.actors.ray_sweep import ray_finished

        yield from ray_finished(run, init, initargs, seeds, ray)
        return
    if jobs == 1 or len(seeds) == 1:
        init(*initargs)
        for seed in seeds:
            yield [run(seed)]
        return
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(seeds)), mp_context=ctx, initializer=init,
                             initargs=initargs) as pool:
        pending = {pool.submit(run, seed) for seed in seeds}
        try:
            while pending:
                done, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                yield [future.result() for future in done]
        except BaseException:
            for future in pending:
                future.cancel()
            raise

"""What the simulator benchmarks share: running a built simulation under the wall clock, optionally
profiled, so every benchmark times exactly the same span (`sim.run()`, nothing before or after it)."""

from __future__ import annotations

import cProfile
import gc
import re
import shutil
import subprocess
import time
from typing import Any

from dralab.replay.simulation.sim import SimResult, Simulator


def timed_run(sim: Simulator, profile: bool) -> tuple[SimResult, float, cProfile.Profile | None]:
    """Run `sim`; the result, the wall seconds the run took, and the profile (None unless `profile`).
    `last_cpu_s()` then gives the CPU seconds of the same span: on a shared machine the wall clock
    counts the other jobs' time too, CPU time (one thread) much less so."""
    global _cpu_s
    gc.collect()  # the garbage of the scenario's build and of earlier runs in the process is not this run's cost
    prof = cProfile.Profile() if profile else None
    cpu = time.process_time()
    start = time.perf_counter()
    if prof:
        prof.enable()
    result = sim.run()
    if prof:
        prof.disable()
    wall = time.perf_counter() - start
    _cpu_s = time.process_time() - cpu
    return result, wall, prof


_cpu_s = 0.0


def last_cpu_s() -> float:
    """CPU seconds of the last `timed_run`."""
    return _cpu_s


def redis_benchmark(port: int) -> dict[str, float]:
    """XADD/s from redis-benchmark on the server at `port`: unpipelined and pipelined 16 (every
    benchmark reports its figures also as a ratio to these, measured in the same run)."""
    if shutil.which("redis-benchmark") is None:
        return {}
    out = {}
    for label, pipe in (("xadd_per_s", "1"), ("xadd_pipelined_per_s", "16")):
        text = subprocess.run(["redis-benchmark", "-p", str(port), "-q", "-n", "100000", "-P", pipe,
                               "XADD", "rb:bench", "*", "f", "v"], capture_output=True, text=True, check=False).stdout
        m = re.findall(r"([\d.]+) requests per second", text)
        if m:
            out[label] = float(m[-1])
    return out


def timed_scheduler_run(sim: Simulator, profile: bool, since_ms: int = 0
                        ) -> tuple[SimResult, float, cProfile.Profile | None, float]:
    """`timed_run`, and the scheduler reactor's own CPU seconds in the decisions at cluster time `since_ms` or
    later (upstream scheduler_perf's SchedulingThroughput counts the scheduler's work on the measured pods)."""
    from dralab.core.scheduler.reactor import Scheduler

    spent = [0.0]
    original = Scheduler.react

    def timed_react(self: Scheduler, view: Any, now: int, rng: Any) -> Any:
        start = time.process_time()
        try:
            return original(self, view, now, rng)
        finally:
            if now >= since_ms:
                spent[0] += time.process_time() - start

    Scheduler.react = timed_react  # type: ignore[method-assign]
    try:
        result, wall, prof = timed_run(sim, profile)
    finally:
        Scheduler.react = original  # type: ignore[method-assign]
    return result, wall, prof, spent[0]

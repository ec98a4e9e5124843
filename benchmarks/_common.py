"""What the simulator benchmarks share: running a built simulation under the wall clock, optionally
profiled, so every benchmark times exactly the same span (`sim.run()`, nothing before or after it)."""

from __future__ import annotations

import cProfile
import time

from dralab.replay.sim import SimResult, Simulator


def timed_run(sim: Simulator, profile: bool) -> tuple[SimResult, float, cProfile.Profile | None]:
    """Run `sim`; the result, the wall seconds the run took, and the profile (None unless `profile`).
    `last_cpu_s()` then gives the CPU seconds of the same span: on a shared machine the wall clock
    counts the other jobs' time too, CPU time (one thread) much less so."""
    global _cpu_s
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

"""What the simulator benchmarks share: running a built simulation under the wall clock, optionally
profiled, so every benchmark times exactly the same span (`sim.run()`, nothing before or after it)."""

from __future__ import annotations

import cProfile
import time

from dralab.replay.sim import SimResult, Simulator


def timed_run(sim: Simulator, profile: bool) -> tuple[SimResult, float, cProfile.Profile | None]:
    """Run `sim`; the result, the wall seconds the run took, and the profile (None unless `profile`)."""
    prof = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if prof:
        prof.enable()
    result = sim.run()
    if prof:
        prof.disable()
    wall = time.perf_counter() - start
    return result, wall, prof

"""The garbage collector's policy of the offline tools (simulator, verify, log reading).

The collector is a process-wide switch: its runner sets it, never the pure code of core/
(tests/test_layering.py). A reactor's decision and a snapshot's decoding make many objects that live on
(the record, the state) and no garbage cycles, so the collector's passes over the growing heap while they
run are wasted work: on a 5,000-node bring-up in the simulator the drivers' decisions took 1.4 s with it
running, 0.36 s without, and decoding a 6.5 MB snapshot 0.8 s against 0.28 s (measured 2026-12-05 on the
project's loaded 2-core machine; benchmarks/bringup_bench.py and snapshot_bench.py time both as the runners
run them). The runners pause it around both; any garbage a decision leaves is
collected after it, at the next allocation past the threshold.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """No collection inside the block; the collector back as it was after it (nested blocks are fine)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()

"""Keep Python's garbage collector from rescanning a reactor process's view again and again.

A reactor actor's view (``ClusterState``) is a large heap of long-lived container objects (pod
manifests, node and claim states) that grows with every entry folded, and every entry decoded
allocates a dozen more. CPython 3.11's collector scans the whole tracked heap in each full
collection, about every time it grows by a quarter: on the live path that is about half the CPU a
consumer spends per entry, and a pause of tens of ms once the view holds tens of thousands of pods
(docs/delivery.md#benchmark-the-live-paths-throughput-and-latency).

``Tenure`` moves what survived into the permanent generation (``gc.freeze``) every ``every``
entries folded, after one collection of what is not frozen yet (so no garbage cycle made before
is frozen with it): later collections scan only what was allocated since. Frozen objects are still
freed by reference counting when the view drops them; only a reference cycle among them that
becomes garbage after it was frozen is never collected (the view's objects are trees: none that we
know of). It changes nothing the fold computes. Process-wide, so only the reactor actors (each a
process of its own) turn it on; a ``ReactorLoop`` run in a test process does not, by default.

``collector_paused`` keeps the collector out of a reactor's decision and a snapshot's decoding: both make
many objects that live on and no garbage cycles (the drivers publishing thousands of slices at once,
a snapshot of thousands of pods), so a collection meanwhile is wasted work. This policy is the runner's
(here, and replay/logs/gc_policy.py offline), never core/'s: core/ is pure (tests/test_layering.py).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["TENURE_EVERY", "Tenure", "collector_paused"]

TENURE_EVERY = 5000  # entries folded between two tenures in a reactor actor


class Tenure:
    """Collect once and freeze what survived, every ``every`` entries (``every <= 0``: never)."""

    def __init__(self, every: int = 0) -> None:
        self.every = every
        self._at = 0
        self.count = 0
        self.last_ms = 0.0

    def maybe(self, offset: int, *, now: bool = False) -> None:
        """Tenure if ``every`` entries were folded since the last time (or ``now``: at start, once
        the view is rebuilt, so that the first one, which scans every import too, is not paid by
        an entry)."""
        if self.every <= 0 or (offset - self._at < self.every and not now):
            return
        self._at = offset
        started = time.monotonic()
        gc.collect()
        gc.freeze()
        self.count += 1
        self.last_ms = round((time.monotonic() - started) * 1000, 1)


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

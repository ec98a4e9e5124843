"""The FGD experiment's metrics, computed as the paper's pipeline computes its cached CSVs.

The simulator logs a line after every arrival (placed or failed: `[Alloc]` with the used and arrived GPU
milli, `[Report]` with the cluster fragment printed `%.2f`); the authors' analysis scripts (pandas) turn each
line into a row and each integer bucket of arrived % into a column. Matching the cache column for column
needs their arithmetic, not just their definitions:

- a row's arrived % is ``round(arrived_milli / gpus / 10, 0)`` and its allocation ``round(used / gpus / 10,
  2)`` (Python floats: round half to even on the binary value);
- a bucket is the mean of its rows; an empty bucket pools the rows of its two neighbours (a-1..a+1);
- a mean is numpy's (pairwise summation, divided by the count) and the final 2-decimal rounding is numpy's
  (``rint(x * 100) / 100``: ``round(np.float64(2.675), 2)`` is 2.68, Python's ``round(2.675, 2)`` is 2.67);
- fragment % of GPUs: the mean of the rows' printed milli amounts, then ``round(100 * m / 1000 / gpus, 2)``;
- fragment % of idle: the mean of the rows' printed ``100 * frag / idle`` (idle: the sum of the seven
  fragment buckets, a float), not rounded.

The cluster's fragment buckets are kept as exact sums (integers in units of 2^-80) of the nodes' float
buckets: the simulator adds its nodes in an arbitrary order each time, so there is no one float sum to copy,
and an exact one neither drifts over 11,000 updates nor depends on the order of updates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .fgd_policies import FRAGMENT_BUCKETS, Buckets

BUCKETS = 131  # arrived % 0..130, the cached results' columns
_SCALE = 80  # fixed point: a bucket value is an integer number of 2^-80 milli-GPU


def _fixed(x: float) -> int:
    scaled = x * (1 << _SCALE)  # exact: a power of two
    whole = int(scaled)
    if whole != scaled:  # a value under 2^-28 with bits below 2^-80: keep the exact value anyway
        n, d = x.as_integer_ratio()
        return n * (1 << _SCALE) // d
    return whole


class ClusterFragment:
    """The seven fragment buckets summed over the nodes, updated as nodes change."""

    def __init__(self, nodes: Sequence[Buckets]) -> None:
        self._sums = [0] * 7
        for b in nodes:
            self.add(b, 1)

    def add(self, buckets: Buckets, sign: int) -> None:
        for i, v in enumerate(buckets):
            if v:
                self._sums[i] += sign * _fixed(v)

    def replace(self, old: Buckets, new: Buckets) -> None:
        self.add(old, -1)
        self.add(new, 1)

    def amounts(self) -> tuple[float, float]:
        """(fragment, idle) in milli-GPU: the fragment buckets added in Go's order, and all seven."""
        values = [s / (1 << _SCALE) for s in self._sums]
        frag = 0.0
        for i in FRAGMENT_BUCKETS:
            frag += values[i]
        idle = 0.0
        for v in values:
            idle += v
        return frag, idle


class Rows:
    """One row per arrival, as analysis.py reads the simulator's log; :meth:`columns` gives the buckets."""

    def __init__(self, total_gpus: int) -> None:
        self.gpus = total_gpus
        self.arrived: list[float] = []
        self.alloc: list[float] = []
        self.frag: list[float] = []
        self.ratio: list[float] = []

    def add(self, arrived_milli: int, used_milli: int, frag: float, idle: float) -> None:
        self.arrived.append(round(arrived_milli / self.gpus / 10, 0))
        self.alloc.append(round(used_milli / self.gpus / 10, 2))
        self.frag.append(float(f"{frag:.2f}"))
        self.ratio.append(float(f"{100 * frag / idle:.2f}") if idle else 0.0)

    def columns(self) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        """(allocation %, fragment % of GPUs, fragment % of idle) per arrived-% bucket 0..130."""
        arrived = np.array(self.arrived, dtype=np.float64)
        alloc, frag, ratio = (np.array(v, dtype=np.float64) for v in (self.alloc, self.frag, self.ratio))
        out: tuple[list[float | None], list[float | None], list[float | None]] = ([], [], [])
        for a in range(BUCKETS):
            rows = np.flatnonzero(arrived == a)
            if not len(rows):
                rows = np.flatnonzero((arrived >= a - 1) & (arrived <= a + 1))
            if not len(rows):
                for column in out:
                    column.append(None)
                continue
            n = len(rows)
            out[0].append(float(round(np.sum(alloc[rows]) / n, 2)))
            out[1].append(float(round(100 * (np.sum(frag[rows]) / n) / 1000 / self.gpus, 2)))
            out[2].append(float(np.sum(ratio[rows]) / n))
        return _filled(out[0]), _filled(out[1]), _filled(out[2])


def _filled(values: list[float | None]) -> tuple[float, ...]:
    """A bucket with no row even among its neighbours (a pod asking over 2% of the cluster at once; not in any
    openb trace) takes the nearest bucket's value, the earlier one first; the cache would leave it empty."""
    out: list[float] = []
    for i, v in enumerate(values):
        if v is None:
            for d in range(1, len(values)):
                near = [values[j] for j in (i - d, i + d) if 0 <= j < len(values) and values[j] is not None]
                if near:
                    v = near[0]
                    break
        out.append(v if v is not None else 0.0)
    return tuple(out)

"""The six score policies of the FGD paper's openb experiments, as pure functions of one node's state.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient
Descent", USENIX ATC'23; the behaviour follows ../shared/traces/README.md ("How the FGD paper's simulator
runs an openb experiment" and "Details that decide whether a reimplementation matches").

A node state is ``(cpu_left, mem_left, free)``: milli-cpu, MiB and the free thousandths of each GPU in device
index order (the DRA devices of the node, their consumable `gpu_milli` left). A pod shape is :class:`Shape`. A
policy returns ``(score, gpus)`` for a node the pod fits, ``gpus`` the device indices it takes (the GPU choice
is part of the policy, as in the paper's simulator), or ``None`` when the pod does not fit. Higher scores win;
ties go to the node first in the run's node order (the per-seed name prefix). Scores are truncated to ints
like the Go code's int64, which creates the ties the tie-break rule settles.

Nothing here draws random numbers or reads a clock; `random` is decided by the runner (replay/traces/fgd.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

MILLI = 1000
BESTFIT_CPU, BESTFIT_GPU = 128_000, 8_000  # the BestFit plugin's fixed normalisers (README: 128 cores, 8 GPUs)


class Shape(NamedTuple):
    """A pod's request: cpu (milli), memory (MiB), GPU count, share per GPU (thousandths) and the allowed
    GPU models (indices into the cluster's model list; None: any), and those models as the trace wrote them
    (`A|B`; the simulator keys and orders its typical pods by that string)."""

    cpu: int
    mem: int
    num: int
    milli: int
    models: frozenset[int] | None
    spec: str = ""


class NodeInfo(NamedTuple):
    """What does not change on a node: its model index (-1: no GPU), cpu/memory capacity, GPU count."""

    model: int
    cpu: int
    mem: int
    gpus: int


Typical = list[tuple[float, int, int, int, frozenset[int] | None]]  # (frequency, cpu, num, milli, models)
Result = tuple[int, tuple[int, ...]] | None


def gpu_fits(shape: Shape, model: int, free: tuple[int, ...]) -> bool:
    if shape.num == 0:
        return True
    if shape.models is not None and model not in shape.models:
        return False
    milli, need = shape.milli, shape.num
    for f in free:
        if f >= milli:
            need -= 1
            if need == 0:
                return True
    return False


def fits(shape: Shape, node: NodeInfo, cpu_left: int, mem_left: int, free: tuple[int, ...]) -> bool:
    """The simulator's filter: kube-scheduler's cpu/memory fit plus the GPU check (allowed model, one GPU
    with enough share, or enough whole free GPUs)."""
    return cpu_left >= shape.cpu and mem_left >= shape.mem and gpu_fits(shape, node.model, free)


def first_free(shape: Shape, free: tuple[int, ...]) -> tuple[int, ...]:
    """Whole-GPU pods take the first fully free GPUs by index (README, GPU choice)."""
    out = [i for i, f in enumerate(free) if f >= shape.milli]
    return tuple(out[: shape.num])


def tightest(shape: Shape, free: tuple[int, ...]) -> tuple[int, ...]:
    """A sharing pod on the fitting GPU with the least share left, first index on ties (BestFit, Packing)."""
    if shape.num == 0:
        return ()
    if shape.milli >= MILLI or shape.num > 1:
        return first_free(shape, free)
    best = min((f, i) for i, f in enumerate(free) if f >= shape.milli)
    return (best[1],)


def after(free: tuple[int, ...], gpus: tuple[int, ...], milli: int) -> tuple[int, ...]:
    if not gpus:
        return free
    out = list(free)
    for g in gpus:
        out[g] -= milli
    return tuple(out)


# The simulator's per-node fragment buckets (pkg/utils/frag.go): Q1 lacks cpu and GPU, Q2 lacks GPU, Q3 is
# satisfied, Q4 lacks cpu, XL/XR a CPU-only shape with/without the cpu, NA a model the shape may not use.
Q1, Q2, Q3, Q4, XL, XR, NA = range(7)
FRAGMENT_BUCKETS = (Q1, Q2, Q4, XL, XR, NA)  # FragAmountSumExceptQ3's order of addition
Buckets = tuple[float, float, float, float, float, float, float]


def node_buckets(typical: Typical, model: int, cpu_left: int, free: tuple[int, ...]) -> Buckets:
    """FGD's node fragment for the typical pods (paper §4, README step 6), bucket by bucket as the simulator's
    ``NodeGpuShareFragAmount`` keeps it: for each typical shape, its frequency times the idle GPU share it
    could not use here (the GPUs with less share left than it asks when it fits cpu, model and GPU count;
    else every idle share; CPU-only shapes: every idle share). Memory is not looked at, as in the simulator.

    Why buckets and not one running total: the score truncates ``sigmoid(...) * 100`` to an int, and a
    fragment summed in another order differs in the last bit often enough to move a truncation (a CPU-only
    pod that leaves the fragment unchanged scores 49 instead of 50); seven float buckets added in Go's order
    give Go's float, bit for bit."""
    data = [0.0] * 7
    idle = sum(free)
    for freq, cpu, num, milli, models in typical:
        if milli == 0:
            data[XL if cpu_left >= cpu else XR] += freq * idle
            continue
        if models is not None and model not in models:
            data[NA] += freq * idle
            continue
        need, frag = num, 0  # GPUs still wanted; the share left on GPUs too small for the shape
        for f in free:
            if f >= milli:
                need -= 1
            else:
                frag += f
        if need > 0:
            data[Q2 if cpu_left >= cpu else Q1] += freq * idle
        elif cpu_left >= cpu:
            data[Q2] += freq * frag
            data[Q3] += freq * (idle - frag)
        else:
            data[Q4] += freq * idle
    return (data[0], data[1], data[2], data[3], data[4], data[5], data[6])


def fragment_of(buckets: Buckets) -> float:
    """``FragAmountSumExceptQ3``: every bucket but the satisfied one, added in Go's order from 0.0."""
    total = 0.0
    for b in FRAGMENT_BUCKETS:
        total += buckets[b]
    return total


def node_fragment(typical: Typical, model: int, cpu_left: int, free: tuple[int, ...]) -> float:
    return fragment_of(node_buckets(typical, model, cpu_left, free))


class Context:
    """What a policy may read besides the node: the typical pods and a memo of node fragments (a node
    state's fragment is a pure function of it, and states repeat across nodes and pods)."""

    def __init__(self, typical: Typical) -> None:
        self.typical = typical
        self._buckets: dict[tuple[int, int, tuple[int, ...]], tuple[Buckets, float]] = {}

    def _entry(self, model: int, cpu_left: int, free: tuple[int, ...]) -> tuple[Buckets, float]:
        key = (model, cpu_left, free)
        entry = self._buckets.get(key)
        if entry is None:
            b = node_buckets(self.typical, model, cpu_left, free)
            entry = self._buckets[key] = (b, fragment_of(b))
        return entry

    def fragment(self, model: int, cpu_left: int, free: tuple[int, ...]) -> float:
        return self._entry(model, cpu_left, free)[1]

    def buckets(self, model: int, cpu_left: int, free: tuple[int, ...]) -> Buckets:
        return self._entry(model, cpu_left, free)[0]


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= -700 else 0.0


def fgd(ctx: Context, shape: Shape, node: NodeInfo, cpu_left: int, mem_left: int, free: tuple[int, ...]) -> Result:
    """int(sigmoid((fragment_before - fragment_after) / 1000) x 100), not normalised; a sharing pod tries every
    GPU it fits and keeps the first index with the best score (README, FGD score and GPU choice)."""
    if not fits(shape, node, cpu_left, mem_left, free):
        return None
    before = ctx.fragment(node.model, cpu_left, free)
    cpu_after = cpu_left - shape.cpu
    if shape.num == 1 and shape.milli < MILLI:
        best: Result = None
        for i, f in enumerate(free):
            if f >= shape.milli:
                frag = ctx.fragment(node.model, cpu_after, after(free, (i,), shape.milli))
                score = int(sigmoid((before - frag) / 1000) * 100)
                if best is None or score > best[0]:
                    best = (score, (i,))
        return best
    taken = first_free(shape, free) if shape.num else ()
    frag = ctx.fragment(node.model, cpu_after, after(free, taken, shape.milli))
    return int(sigmoid((before - frag) / 1000) * 100), taken


def bestfit(ctx: Context, shape: Shape, node: NodeInfo, cpu_left: int, mem_left: int, free: tuple[int, ...]) -> Result:
    """int((1 - ((cpu_left - cpu)/128000 x 0.5 + (gpu_left - gpu)/8000 x 0.5)) x 100): the node left with the
    least cpu and GPU (README; min-max normalisation never changes the winner, so it is left out)."""
    if not fits(shape, node, cpu_left, mem_left, free):
        return None
    gpu_left = sum(free)
    score = int((1 - ((cpu_left - shape.cpu) / BESTFIT_CPU * 0.5
                      + (gpu_left - shape.num * shape.milli) / BESTFIT_GPU * 0.5)) * 100)
    return score, tightest(shape, free)


def packing(ctx: Context, shape: Shape, node: NodeInfo, cpu_left: int, mem_left: int, free: tuple[int, ...]) -> Result:
    """GPU packing, high to low: share a used GPU (100 - its free %/10, at least 50); use free GPUs of a used
    node (50 - the free GPUs used, at least 33); an idle node (33 - its GPU count). CPU-only pods: 0."""
    if not fits(shape, node, cpu_left, mem_left, free):
        return None
    if shape.num == 0:
        return 0, ()
    fully_free = sum(1 for f in free if f == MILLI)
    gpus = tightest(shape, free)
    if fully_free == len(free):
        return max(33 - fully_free, fully_free), gpus
    whole = sum(1 for g in gpus if free[g] == MILLI)
    if whole:
        return max(50 - whole, 33), gpus
    ratio = sum(free[g] * 100 // MILLI for g in gpus)
    return max(100 - ratio // 10, 50), gpus


def dotprod(ctx: Context, shape: Shape, node: NodeInfo, cpu_left: int, mem_left: int, free: tuple[int, ...]) -> Result:
    """Tetris's alignment as the paper's runs configure it (`dimExtMethod: merge`, `normMethod: max`; the
    simulator's dot_product_score.go): one vector per node, (free cpu, free GPU share summed over its GPUs),
    and one per pod, (cpu, GPU share x count), each divided by the largest node's (128 cores, 8 GPUs); the score
    is int((1 - their dot product / 2) x 100): the fuller the node the pod lands on, the higher. The GPU is the
    simulator's `best` choice (:func:`tightest`). Float operations in Go's order."""
    if not fits(shape, node, cpu_left, mem_left, free):
        return None
    product = 0.0
    product += (cpu_left / BESTFIT_CPU) * (shape.cpu / BESTFIT_CPU)
    product += (sum(free) / BESTFIT_GPU) * (shape.num * shape.milli / BESTFIT_GPU)
    return int(100.0 * (1 - product / 2.0)), tightest(shape, free)


def gpu_tag(shape: Shape) -> tuple[int, int]:
    """The GPU affinity clustering groups pods by, as the simulator's `GetGpuAffinityFromPodAnnotation`: all
    GPU-sharing pods alike (`share`, here (1, 0)), whole-GPU pods by count (`<n>-gpu`, here (n, 1000))."""
    return (1, 0) if shape.num == 1 and shape.milli < MILLI else (shape.num, MILLI)


def clustering(ctx: Context, shape: Shape, node: NodeInfo, cpu_left: int, mem_left: int, free: tuple[int, ...],
               tags: frozenset[tuple[int, int]] = frozenset()) -> Result:
    """Gandiva-style clustering (the simulator's GpuClustering): a GPU pod prefers nodes that hold only pods of
    its own GPU affinity (:func:`gpu_tag`; 75-100), then nodes holding it among others (50-75), nodes with
    none (25-50), nodes with others only (0-25); within a band, the node with less GPU left (out of 8 GPUs).
    CPU-only pods: 0 everywhere. ``tags``: the affinities of the GPU pods on the node."""
    if not fits(shape, node, cpu_left, mem_left, free):
        return None
    if shape.num == 0:
        return 0, ()
    tag = gpu_tag(shape)
    used = 25 * (8 * MILLI - sum(free)) // (8 * MILLI)
    if tag in tags:  # only its own shape on the node: 75; others too: 50
        return used + (75 if len(tags) == 1 else 50), tightest(shape, free)
    band = 0 if tags else 25  # an idle node beats one holding other shapes
    return used + band, tightest(shape, free)


Policy = Callable[[Context, Shape, NodeInfo, int, int, tuple[int, ...]], Result]
POLICIES: dict[str, Policy] = {"dotprod": dotprod, "packing": packing, "bestfit": bestfit, "fgd": fgd}
# random and clustering need more than the node state (the run's random source; the shapes on a node):
# replay/traces/fgd.py handles them.
POLICY_NAMES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")
# The cached results' `sc_policy` column.
CACHED_NAMES = {"random": "01-Random", "dotprod": "02-DotProd", "clustering": "03-GpuClustering",
                "packing": "04-GpuPacking", "bestfit": "05-BestFit", "fgd": "06-FGD"}

"""The FGD paper's openb experiment (Weng et al., USENIX ATC'23), run on an imported scenario.

The protocol is the one /work/shared/traces/README.md reads from the authors' simulator ("How the FGD paper's
simulator runs an openb experiment"), with dralab's own seeded source, ``random.Random(seed)``, instead of Go's
math/rand (so runs match the cached ones in distribution, not pod for pod):

1. the GPU nodes, in a per-seed random order that settles ties (the simulator's `%04d-` name prefixes);
2. the pods, sorted by name and shuffled with the seed;
3. inflated to 1.3x the GPU capacity: pods drawn with replacement from the name-sorted list and appended
   until the next draw would cross the target, the stop test adding the per-GPU share only (as the
   simulator does); a trace above the target loses random pods instead;
4. one pod at a time, no departures, no retries: filter, score with one policy, bind or count as failed;
5. after every arrival: arrived % (GPU request of arrived pods, failed ones included, / capacity, rounded
   half to even), allocation % and fragmentation % (2 decimals), averaged per integer bucket 0..130.

Speed: a node's state is ``(cpu_left, mem_left, free GPU shares)``; a policy's verdict for a pod shape and a
node state is memoised, and FGD's node fragment only changes on the node the pod lands on, so the cluster's
fragment is kept as a running sum. Pure: no clock, no unseeded randomness.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from statistics import median

from .fgd_cluster import Cluster
from .fgd_policies import (
    MILLI,
    POLICIES,
    POLICY_NAMES,
    Context,
    NodeInfo,
    Result,
    Shape,
    Typical,
    clustering,
    fits,
    gpu_tag,
)
from .fgd_policies import tightest as _tightest

TUNE = 1.3
TYPICAL_COVERAGE = 0.95
BUCKETS = 131  # arrived % 0..130, the cached results' columns
MARKS = (50, 80, 90, 95, 100, 110, 120, 130)


@dataclass(frozen=True)
class RunResult:
    seed: int
    policy: str
    pods: int  # after inflation
    failed: int
    alloc: tuple[float, ...]  # per bucket 0..130, % of GPU capacity
    frag: tuple[float, ...]  # fragmented GPU, % of GPU capacity
    frag_idle: tuple[float, ...]  # fragmented GPU, % of idle GPU


def typical_pods(pods: tuple[Shape, ...], coverage: float = TYPICAL_COVERAGE) -> Typical:
    """The most frequent shapes (cpu, share, count, models) of the original list, CPU-only pods included,
    sorted by frequency then shape (both descending), added until ``coverage`` of the pods is covered
    (README: 35 shapes covering 7,766 of 8,152 pods on the default trace)."""
    counts = Counter((p.cpu, p.milli, p.num, tuple(sorted(p.models)) if p.models is not None else ()) for p in pods)
    ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    kept: list[tuple[int, tuple[int, int, int, tuple[int, ...]]]] = []
    covered = 0
    for shape, n in ordered:
        if covered >= coverage * len(pods):
            break
        kept.append((n, shape))
        covered += n
    # Frequencies are shares of the typical pods, not of all pods (they sum to 1): with that, the cluster
    # fragment matches the cached `frag` columns (about 5% higher than with shares of all pods).
    return [(n / covered, cpu, num, milli, frozenset(models) if models else None)
            for n, (cpu, milli, num, models) in kept]


def arrival_order(cluster: Cluster, rng: random.Random, tune: float = TUNE) -> list[int]:
    """Pod indices in arrival order: shuffled, then inflated (or cut) to ``tune`` x GPU capacity."""
    pods = cluster.pods
    order = list(range(len(pods)))
    rng.shuffle(order)
    target = tune * cluster.total_gpus * MILLI
    total = sum(p.num * p.milli for p in pods)
    if total < target:
        while True:
            i = rng.randrange(len(pods))
            if total + pods[i].milli > target:  # the simulator's stop test: the per-GPU share only
                break
            order.append(i)
            total += pods[i].milli
    else:
        while total > target and order:
            i = order.pop(rng.randrange(len(order)))
            total -= pods[i].num * pods[i].milli
    return order


def _bucket_means(sums: list[float], counts: list[int]) -> tuple[float, ...]:
    """Each bucket's mean; an empty bucket takes its nearest non-empty neighbour (the earlier one first)."""
    means: list[float | None] = [round(s / c, 2) if c else None for s, c in zip(sums, counts, strict=True)]
    out: list[float] = []
    for i in range(len(means)):
        v = means[i]
        if v is None:
            for d in range(1, len(means)):
                for j in (i - d, i + d):
                    if 0 <= j < len(means) and means[j] is not None:
                        v = means[j]
                        break
                if v is not None:
                    break
        out.append(v if v is not None else 0.0)
    return tuple(out)


def run_seed(cluster: Cluster, policy: str, seed: int, tune: float = TUNE) -> RunResult:
    """One run of the protocol (README steps 1-8 for one seed)."""
    if policy not in POLICY_NAMES:
        raise ValueError(f"unknown policy {policy!r}; expected one of {', '.join(POLICY_NAMES)}")
    rng = random.Random(seed)
    arrivals = arrival_order(cluster, rng, tune)
    node_order = list(range(len(cluster.nodes)))
    rng.shuffle(node_order)  # the per-seed name prefixes: the first node in this order wins ties
    ctx = Context(typical_pods(cluster.pods))
    infos = cluster.nodes
    cpu_left = [n.cpu for n in infos]
    mem_left = [n.mem for n in infos]
    free = [(MILLI,) * n.gpus for n in infos]
    tags: list[frozenset[tuple[int, int]]] = [frozenset()] * len(infos)
    node_frag = [ctx.fragment(n.model, n.cpu, free[i]) for i, n in enumerate(infos)]
    frag_total = sum(node_frag)
    capacity = cluster.total_gpus * MILLI
    allocated = arrived = 0
    idle = capacity
    sums = {"alloc": [0.0] * BUCKETS, "frag": [0.0] * BUCKETS, "idle": [0.0] * BUCKETS}
    counts = [0] * BUCKETS
    runner = _Chooser(ctx, policy, infos, node_order)
    failed = 0
    for pod_index in arrivals:
        shape = cluster.pods[pod_index]
        best, gpus = runner.choose(shape, rng)
        arrived += shape.num * shape.milli
        if best < 0:
            failed += 1
        else:
            cpu_left[best] -= shape.cpu
            mem_left[best] -= shape.mem
            if gpus:
                f = list(free[best])
                for g in gpus:
                    f[g] -= shape.milli
                free[best] = tuple(f)
                tags[best] = tags[best] | {gpu_tag(shape)}
            runner.moved(best, cpu_left[best], mem_left[best], free[best], tags[best])
            used = shape.num * shape.milli
            allocated += used
            idle -= used
            new = ctx.fragment(infos[best].model, cpu_left[best], free[best])
            frag_total += new - node_frag[best]
            node_frag[best] = new
        b = round(arrived * 100 / capacity)
        if b < BUCKETS:
            counts[b] += 1
            sums["alloc"][b] += round(allocated * 100 / capacity, 2)
            sums["frag"][b] += round(frag_total * 100 / capacity, 2)
            sums["idle"][b] += round(frag_total * 100 / idle, 2) if idle else 0.0
    return RunResult(seed, policy, len(arrivals), failed, _bucket_means(sums["alloc"], counts),
                     _bucket_means(sums["frag"], counts), _bucket_means(sums["idle"], counts))


class _Chooser:
    """Picks the node for a pod. Nodes in the same state (shape, cpu and memory left, free GPU shares; for
    clustering also the GPU shapes on it) get the same verdict, so each state gets an id, verdicts are memoised
    per (pod shape, state id), and a pod's choice is a max over the states of the nodes in tie-break order,
    done with builtins (`max` keeps the first of equal scores: the earlier node wins, README's tie rule)."""

    def __init__(self, ctx: Context, policy: str, infos: tuple[NodeInfo, ...], node_order: list[int]) -> None:
        self.ctx, self.policy, self.infos, self.node_order = ctx, policy, infos, node_order
        self.score = POLICIES.get(policy)
        self.rank = [0] * len(infos)
        for k, n in enumerate(node_order):
            self.rank[n] = k
        self.ids: dict[tuple[object, ...], int] = {}
        self.states: list[tuple[object, ...]] = []
        self.live: dict[int, int] = {}  # state id -> how many nodes are in it
        self.by_rank = [0] * len(infos)  # state id of the k-th node in tie-break order
        self.fresh: list[int] = []  # the state id each node entered, in order (a state's verdict never changes)
        # per pod shape: scores and GPU choices by state id (None: not asked yet), and how much of `fresh` it saw
        self.verdicts: dict[Shape, tuple[list[int | None], dict[int, tuple[int, ...]], list[int]]] = {}
        for n, info in enumerate(infos):
            self._set(n, (info, info.cpu, info.mem, (MILLI,) * info.gpus, frozenset()))

    def _set(self, n: int, state: tuple[object, ...]) -> None:
        if self.policy != "clustering":
            state = state[:4]
        sid = self.ids.get(state)
        if sid is None:
            sid = self.ids[state] = len(self.states)
            self.states.append(state)
        self.live[sid] = self.live.get(sid, 0) + 1
        self.fresh.append(sid)
        self.by_rank[self.rank[n]] = sid

    def moved(self, n: int, cpu_left: int, mem_left: int, free: tuple[int, ...], tags: frozenset[object]) -> None:
        old = self.by_rank[self.rank[n]]
        self.live[old] -= 1
        if not self.live[old]:
            del self.live[old]
        self._set(n, (self.infos[n], cpu_left, mem_left, free, tags))

    def _verdict(self, shape: Shape, state: tuple[object, ...]) -> Result:
        info, cpu_left, mem_left, free = state[0], state[1], state[2], state[3]
        assert isinstance(info, NodeInfo) and isinstance(cpu_left, int) and isinstance(mem_left, int)
        assert isinstance(free, tuple)
        if self.policy == "random":
            return (0, ()) if fits(shape, info, cpu_left, mem_left, free) else None
        if self.policy == "clustering":
            tags = state[4]
            assert isinstance(tags, frozenset)
            return clustering(self.ctx, shape, info, cpu_left, mem_left, free, tags)
        assert self.score is not None
        return self.score(self.ctx, shape, info, cpu_left, mem_left, free)

    def choose(self, shape: Shape, rng: random.Random) -> tuple[int, tuple[int, ...]]:
        """The node for ``shape`` and its GPU indices; (-1, ()) when none fits."""
        memo = self.verdicts.get(shape)
        if memo is None:
            memo = self.verdicts[shape] = ([], {}, [0])
        scores, gpus, seen = memo
        if len(scores) < len(self.states):
            scores.extend([None] * (len(self.states) - len(scores)))
        fresh, live = self.fresh, self.live
        for sid in fresh[seen[0]:]:
            if scores[sid] is None and sid in live:
                r = self._verdict(shape, self.states[sid])
                scores[sid] = _INFEASIBLE if r is None else r[0]
                if r is not None:
                    gpus[sid] = r[1]
        seen[0] = len(fresh)
        ranked: list[int] = list(map(scores.__getitem__, self.by_rank))  # type: ignore[arg-type]
        if self.policy == "random":
            feasible = [k for k, s in enumerate(ranked) if s != _INFEASIBLE]
            if not feasible:
                return -1, ()
            k = rng.choice(feasible)
            return self.node_order[k], _random_gpus(shape, self.states[self.by_rank[k]][3], rng)  # type: ignore[arg-type]
        top = max(ranked)
        if top == _INFEASIBLE:
            return -1, ()
        k = ranked.index(top)
        return self.node_order[k], gpus[self.by_rank[k]]


_INFEASIBLE = -(1 << 60)


def medians(results: list[RunResult], marks: tuple[int, ...] = MARKS) -> dict[str, dict[str, float]]:
    """Median over the seeds of allocation and fragmentation at the given arrived %."""
    return {
        "alloc_pct": {str(m): round(median(r.alloc[m] for r in results), 3) for m in marks},
        "frag_pct": {str(m): round(median(r.frag[m] for r in results), 3) for m in marks},
    }


def _random_gpus(shape: Shape, free: tuple[int, ...], rng: random.Random) -> tuple[int, ...]:
    """Random's GPU choice: a sharing pod on a fitting GPU drawn with the run's source; whole GPUs first free."""
    if shape.num == 1 and shape.milli < MILLI:
        return (rng.choice([i for i, f in enumerate(free) if f >= shape.milli]),)
    return _tightest(shape, free)

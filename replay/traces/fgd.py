"""The FGD paper's openb experiment (Weng et al., USENIX ATC'23), run on an imported scenario.

The protocol is the one ../shared/traces/README.md reads from the authors' simulator ("How the FGD paper's
simulator runs an openb experiment"). By default the random choices come from dralab's own seeded source,
``random.Random(seed)``, so runs match the cached ones in distribution; with ``compat="fgd-go"`` they come from
Go's math/rand (replay/traces/gorand.py) drawn exactly as the simulator draws them (:class:`GoDraws`), and a run
reproduces the cached one decision for decision:

1. the GPU nodes, in a per-seed random order that settles ties (the simulator's `%04d-` name prefixes);
2. the pods, sorted by name and shuffled with the seed;
3. inflated to 1.3x the GPU capacity: pods drawn with replacement from the name-sorted list and appended
   until the next draw would cross the target, the stop test adding the per-GPU share only (as the
   simulator does); a trace above the target loses random pods instead;
4. one pod at a time, no departures, no retries: filter, score with one policy, bind or count as failed;
5. after every arrival: arrived %, allocation % and fragmentation, averaged per integer bucket 0..130 of
   arrived %, with the authors' analysis arithmetic (replay/traces/fgd_metrics.py).

Speed: a node's state is ``(cpu_left, mem_left, free GPU shares)``; a policy's verdict for a pod shape and a
node state is memoised, and FGD's node fragment only changes on the node the pod lands on, so the cluster's
fragment is kept as exact bucket sums (replay/traces/fgd_metrics.py). Pure: no clock, no unseeded randomness.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from statistics import median

from .fgd_cluster import Cluster
from .fgd_metrics import ClusterFragment, Rows
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
from .gorand import GoRand

TUNE = 1.3
TYPICAL_COVERAGE = 0.95
COMPAT_MODES = ("fgd-go",)
INFORMER_DRAWS = 10  # client-go reflectors started by the scheduler's informers: one Float64 each
MARKS = (50, 80, 90, 95, 100, 110, 120, 130)


@dataclass(frozen=True)
class RunResult:
    seed: int
    policy: str
    pods: int  # after inflation
    failed: int
    alloc: tuple[float, ...]  # per bucket 0..130, % of GPU capacity
    frag: tuple[float, ...]  # fragmented GPU, % of GPU capacity
    frag_idle: tuple[float, ...]  # fragmented GPU, % of idle GPU (means of 2-decimal rows, not rounded)
    compat: str = ""


def typical_pods(pods: tuple[Shape, ...], coverage: float = TYPICAL_COVERAGE) -> Typical:
    """The most frequent shapes of the original list (CPU-only pods included) as the simulator's
    ``GetTypicalPods`` picks them: keyed by (cpu, share, count, models as written), sorted by count then key,
    both descending, taken until ``coverage`` of the pods is covered (README: 35 shapes covering 7,766 of 8,152
    pods on the default trace). A shape's frequency is its share of the typical pods, computed as Go does,
    (n / total) / (covered / total) (not n / covered: the last bit differs, and FGD truncates its scores)."""
    counts = Counter((p.cpu, p.milli, p.num, p.spec) for p in pods)
    models = {(p.cpu, p.milli, p.num, p.spec): p.models for p in pods}
    ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    total = float(len(pods))
    expected = float(round(coverage * 100)) * total / 100.0
    kept: list[tuple[float, tuple[int, int, int, str]]] = []
    covered = 0.0
    for shape, n in ordered:
        if covered >= expected:
            break
        kept.append((n / total, shape))
        covered += n
    scale = covered / total if len(kept) < len(ordered) else 1.0
    return [(share / scale if scale != 1.0 else share, cpu, num, milli, models[(cpu, milli, num, spec)])
            for share, (cpu, milli, num, spec) in kept]


class PyDraws:
    """dralab's own random source for a run: ``random.Random(seed)``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def shuffle(self, items: list[int]) -> None:
        self.rng.shuffle(items)

    def randrange(self, n: int) -> int:
        return self.rng.randrange(n)

    def node_order(self, sources: tuple[int, ...]) -> list[int]:
        order = list(range(len(sources)))
        self.rng.shuffle(order)
        return order

    def pick_gpu(self, candidates: list[int]) -> int:
        return self.rng.choice(candidates)


class GoDraws:
    """The paper's simulator's draws from Go's global math/rand source, in its order (hkust-adsl/kubernetes-
    scheduler-simulator, pkg/simulator/core.go ``Simulate`` and simulator.go):

    1. ``rand.Seed(seed)``, then one ``rand.Int()``: an argument of a ``log.Debugf`` call, which Go evaluates
       even with debug logging off;
    2. ``rand.Shuffle`` of the name-sorted pods (Lemire's int31n per swap), then the inflation's
       ``rand.Intn(len(pods))`` draws (the one that ends the loop included) or the removals' ``rand.Intn``;
    3. one ``rand.Float64()`` per informer the scheduler starts (client-go's reflector jitters its watch
       timeout), 10 of them;
    4. ``rand.Perm(len(nodes))`` over the nodes sorted by name: node i is renamed ``%04d-<name>`` with perm[i],
       and ties go to the smallest name, so perm[i] is node i's rank;
    5. Random only: ``rand.Intn(#feasible)`` when two or more nodes fit, and a reservoir ``rand.Intn(cnt)`` per
       fitting GPU of a sharing pod. (Which node index i means depends on goroutine timing in the original, so
       Random matches in distribution only.)
    """

    def __init__(self, seed: int) -> None:
        self.go = GoRand(seed)
        self.go.int_()

    def shuffle(self, items: list[int]) -> None:
        self.go.shuffle(items)

    def randrange(self, n: int) -> int:
        return self.go.intn(n)

    def node_order(self, sources: tuple[int, ...]) -> list[int]:
        for _ in range(INFORMER_DRAWS):
            self.go.float64()
        perm = self.go.perm(len(sources))
        order = [0] * len(sources)
        for i, rank in enumerate(perm):
            order[rank] = sources[i]
        return order

    def pick_gpu(self, candidates: list[int]) -> int:
        chosen = candidates[0]
        for count, gpu in enumerate(candidates, 1):
            if self.go.intn(count) == 0:
                chosen = gpu
        return chosen


Draws = PyDraws | GoDraws


def arrival_order(cluster: Cluster, rng: Draws, tune: float = TUNE) -> list[int]:
    """Pod indices in arrival order: shuffled, then inflated (or cut) to ``tune`` x GPU capacity."""
    pods = cluster.pods
    order = list(range(len(pods)))
    rng.shuffle(order)
    target = tune * cluster.total_gpus * MILLI
    total = sum(p.num * p.milli for p in pods)
    if total < target:
        while True:
            i = rng.randrange(len(pods))
            # the simulator's tuneUpPods: the stop test adds the per-GPU share only, the total the whole request
            if total + pods[i].milli > target:
                break
            order.append(i)
            total += pods[i].num * pods[i].milli
    else:
        while total > target and order:
            i = order.pop(rng.randrange(len(order)))
            total -= pods[i].num * pods[i].milli
    return order


def run_seed(cluster: Cluster, policy: str, seed: int, tune: float = TUNE, compat: str = "",
             sources: tuple[int, ...] | None = None) -> RunResult:
    """One run of the protocol (README steps 1-8 for one seed). ``sources``: the cluster's node indices in the
    trace's node-name order, which the simulator's name prefixes follow (compat mode; default: cluster order)."""
    if policy not in POLICY_NAMES:
        raise ValueError(f"unknown policy {policy!r}; expected one of {', '.join(POLICY_NAMES)}")
    if compat and compat not in COMPAT_MODES:
        raise ValueError(f"unknown compat mode {compat!r}; expected one of {', '.join(COMPAT_MODES)}")
    draws: Draws = GoDraws(seed) if compat else PyDraws(seed)
    arrivals = arrival_order(cluster, draws, tune)
    node_order = draws.node_order(sources if sources is not None else tuple(range(len(cluster.nodes))))
    ctx = Context(typical_pods(cluster.pods))
    infos = cluster.nodes
    cpu_left = [n.cpu for n in infos]
    mem_left = [n.mem for n in infos]
    free = [(MILLI,) * n.gpus for n in infos]
    tags: list[frozenset[tuple[int, int]]] = [frozenset()] * len(infos)
    fragment = ClusterFragment([ctx.buckets(n.model, n.cpu, free[i]) for i, n in enumerate(infos)])
    rows = Rows(cluster.total_gpus)
    allocated = arrived = 0
    runner = _Chooser(ctx, policy, infos, node_order)
    failed = 0
    for pod_index in arrivals:
        shape = cluster.pods[pod_index]
        best, gpus = runner.choose(shape, draws)
        arrived += shape.num * shape.milli
        if best < 0:
            failed += 1
        else:
            before = ctx.buckets(infos[best].model, cpu_left[best], free[best])
            cpu_left[best] -= shape.cpu
            mem_left[best] -= shape.mem
            if gpus:
                f = list(free[best])
                for g in gpus:
                    f[g] -= shape.milli
                free[best] = tuple(f)
                tags[best] = tags[best] | {gpu_tag(shape)}
            runner.moved(best, cpu_left[best], mem_left[best], free[best], tags[best])
            allocated += shape.num * shape.milli
            fragment.replace(before, ctx.buckets(infos[best].model, cpu_left[best], free[best]))
        rows.add(arrived, allocated, *fragment.amounts())
    alloc, frag, frag_idle = rows.columns()
    return RunResult(seed, policy, len(arrivals), failed, alloc, frag, frag_idle, compat)


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

    def choose(self, shape: Shape, rng: Draws) -> tuple[int, tuple[int, ...]]:
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
            # the Random plugin's PreScore draws only when two or more nodes fit (one: no scoring at all)
            k = feasible[0] if len(feasible) == 1 else feasible[rng.randrange(len(feasible))]
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


def _random_gpus(shape: Shape, free: tuple[int, ...], rng: Draws) -> tuple[int, ...]:
    """Random's GPU choice: a sharing pod on a fitting GPU drawn with the run's source; whole GPUs first free."""
    if shape.num == 1 and shape.milli < MILLI:
        return (rng.pick_gpu([i for i, f in enumerate(free) if f >= shape.milli]),)
    return _tightest(shape, free)

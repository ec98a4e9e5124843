"""The Score framework (upstream's RunPreScorePlugins, RunScorePlugins and prioritizeNodes in
pkg/scheduler/schedule_one.go and pkg/scheduler/framework/runtime/framework.go), for a run whose configuration
carries a scheduler configuration (config.py's effective form).

Why: kube-scheduler picks a node by the weighted sum of several plugins' scores, each an int64 in 0..100
after its NormalizeScore, summed per node (int64) and the best picked at random among equals (selectHost).
dralab's older single score policy (`score: most-allocated|least-allocated|fragmentation`, floats) stays for
logs without a configuration (the legacy profile) and for `fragmentation`.

A score plugin has this duck-typed shape (ScorePlugin below; helper "spread"'s PodTopologySpread and
InterPodAffinity are the same): PreScore returns its state for the pod, or None to skip (upstream's Skip,
which dralab's plugins also answer when the plugin would give every node the same score: a constant added to
every node picks the same node); Score one node; NormalizeScore the found nodes in place. A plugin whose score
depends on the node and its usage alone declares `POINTWISE = True`: then a node's total can be cached per
pod shape (feasibility_cache.py) and DynamicResources' Filter can still run lazily on the best-scored nodes,
because no node's score depends on which other nodes pass. Otherwise (normalization over the found set,
an image's spread) the node search scores the found set as upstream (`rank`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..kube.fields import FieldError
from ..log.events import PodBound
from ..state.cluster import NodeState, PodState
from .config import check_effective
from .cycle import Cycle
from .placement import affinity_score, spread_score
from .plugins.balanced_allocation import BalancedAllocationScore
from .plugins.image_locality import ImageLocalityScore
from .plugins.node_affinity import NodeAffinityScore
from .plugins.node_resources_fit import NodeResourcesFitScore, nonzero_extra
from .plugins.taint_toleration import TaintTolerationScore


class ScorePlugin(Protocol):
    """A Score plugin of the configuration (see the module docstring)."""

    NAME: str

    def pre_score(self, cycle: Any, pod: PodState, nodes: list[NodeState]) -> Any | None: ...

    def score(self, state: Any, pod: PodState, node: NodeState, used: dict[str, int]) -> int: ...

    def normalize(self, state: Any, scores: dict[str, int]) -> None: ...


class NonZero:
    """Each node's NonZeroRequested additions (nodeInfo.NonZeroRequested minus Requested: 100m cpu / 200Mi
    memory per container requesting none) for the decision being scored: the pods bound to it in the view
    and those the decision bound (its PodBound events so far). Gang members held at Permit and nominated pods
    count their requests but not these additions (a deviation for pods without cpu/memory requests only)."""

    def __init__(self) -> None:
        self._cycle: Cycle | None = None
        self._seen: list[object] = []  # the decision's events read so far (a rollback drops a suffix of them)
        self._bound: dict[str, list[str]] = {}  # node -> pods the decision bound there, in order
        self._memo: dict[str, tuple[dict[str, Any], tuple[int, int]]] = {}  # pod -> (manifest, additions)

    def at(self, cycle: Cycle) -> None:
        """Follow the decision's events: what a rollback took away is taken back (the longest prefix still
        the same objects is kept), what was appended since is read."""
        events, seen = cycle.events, self._seen
        if cycle is not self._cycle:
            self._cycle, seen, self._bound = cycle, [], {}
            self._seen = seen
        k = min(len(events), len(seen))
        while k and events[k - 1] is not seen[k - 1]:
            k -= 1
        for event in reversed(seen[k:]):
            if isinstance(event, PodBound):
                self._bound[event.node].pop()
        del seen[k:]
        for event in events[k:]:
            seen.append(event)
            if isinstance(event, PodBound):
                self._bound.setdefault(event.node, []).append(event.pod)

    def pod(self, pod: PodState) -> tuple[int, int]:
        hit = self._memo.get(pod.key)
        if hit is not None and hit[0] is pod.manifest:
            return hit[1]
        extra = nonzero_extra(pod)
        if len(self._memo) > 65_536:
            self._memo.clear()
        self._memo[pod.key] = (pod.manifest, extra)
        return extra

    def of(self, node: NodeState) -> tuple[int, int]:
        if self._cycle is None:
            return 0, 0
        pods = self._cycle.view.pods
        cpu = memory = 0
        for key in (*node.pods, *self._bound.get(node.name, ())):
            pod = pods.get(key)
            if pod is not None:
                c, m = self.pod(pod)
                cpu += c
                memory += m
        return cpu, memory


# Score plugin name -> factory (its args, the NonZero tracker). PodTopologySpread and InterPodAffinity score
# over the decision's pod placements (placement.py); they normalize over the found nodes, so they are not
# POINTWISE, and their PreScore skips a pod they have nothing to say about (no constraint or preferred term of
# its own, none of an existing pod that could match it), which keeps such pods on the per-shape caches.
PLUGINS: dict[str, Callable[[dict[str, Any], NonZero], ScorePlugin]] = {
    "PodTopologySpread": lambda args, _: spread_score(args),
    "InterPodAffinity": lambda args, _: affinity_score(args),
    "TaintToleration": TaintTolerationScore,
    "NodeAffinity": NodeAffinityScore,
    "NodeResourcesFit": NodeResourcesFitScore,
    "NodeResourcesBalancedAllocation": BalancedAllocationScore,
    "ImageLocality": ImageLocalityScore,
}


class Deferred:
    """The PreScore state of a plugin whose PreScore reads the nodes that passed Filter (upstream's
    `filteredNodes`: the feasible nodes found, at most numFeasibleNodesToFind): made by `PodScore.rank`."""

    __slots__ = ("cycle",)

    def __init__(self, cycle: Any) -> None:
        self.cycle = cycle


class PodScore:
    """One pod's scoring after PreScore: the plugins that did not skip, with their weights and states.
    Callable as dralab's ScorePlugin (pod, node, used) for the node-by-node loops when `pointwise`."""

    __slots__ = ("pod", "active", "pointwise", "key", "percentage", "part_key", "_part")

    def __init__(self, pod: PodState, active: list[tuple[ScorePlugin, int, Any]], extra: tuple[int, int],
                 percentage: int) -> None:
        self.pod = pod
        self.percentage = percentage  # percentageOfNodesToScore (0: adaptive), for the plain loop
        self.active = active
        self.pointwise = all(getattr(p, "POINTWISE", False) for p, _, _ in active)
        # what a pointwise total depends on besides the node and the pod's requests (the feasibility
        # cache's key): the plugins in play and the pod's NonZeroRequested additions
        self.key = (tuple(p.NAME for p, _, _ in active), extra)
        # a set-wise pod: its pointwise plugins (normalize a no-op) apart, their weighted sum cached per shape
        # as a pointwise pod's total (`part_key`: the key that pod would have), the rest scored per pod (`rank`)
        self._part = [a for a in active if getattr(a[0], "POINTWISE", False)]
        self.part_key = (tuple(p.NAME for p, _, _ in self._part), extra)

    def node(self, node: NodeState, used: dict[str, int]) -> int:
        """The weighted sum on one node (pointwise plugins: no normalization to wait for)."""
        return self._sum(self.active, node, used)

    def part(self, node: NodeState, used: dict[str, int]) -> int:
        """The pointwise plugins' weighted sum on one node (`node` for a pod whose plugins are all pointwise)."""
        return self._sum(self._part, node, used)

    def _sum(self, plugins: list[tuple[ScorePlugin, int, Any]], node: NodeState, used: dict[str, int]) -> int:
        total = 0
        pod = self.pod
        for plugin, weight, state in plugins:
            total += plugin.score(state, pod, node, used) * weight
        return total

    def __call__(self, pod: PodState, node: NodeState, used: dict[str, int]) -> float:
        return self.node(node, used)

    def rank(self, found: list[tuple[str, NodeState, dict[str, int]]], part: dict[str, float] | None = None
             ) -> dict[float, list[str]]:
        """prioritizeNodes over the found nodes: each plugin scores them, normalizes, is weighted; the totals
        summed; nodes grouped by total in the order found (the caller breaks ties at random). `part`: the
        found nodes' `part` (pointwise plugins' sum, from the per-shape cache): then only the others score."""
        pod = self.pod
        if part is None:
            totals: dict[str, float] = dict.fromkeys((name for name, _, _ in found), 0)
            active = self.active
        else:
            totals = {name: part[name] for name, _, _ in found}
            active = [a for a in self.active if not getattr(a[0], "POINTWISE", False)]
        for plugin, weight, state in active:
            if isinstance(state, Deferred):  # PreScore with upstream's filteredNodes: the nodes found
                state = plugin.pre_score(state.cycle, pod, [node for _, node, _ in found])
            score_all = getattr(plugin, "score_all", None)  # the same scores, made in one call
            scores = (score_all(state, pod, found) if score_all is not None
                      else {name: plugin.score(state, pod, node, used) for name, node, used in found})
            plugin.normalize(state, scores)
            if not 0 <= min(scores.values(), default=0) <= max(scores.values(), default=0) <= 100:
                name, score = next((n, s) for n, s in scores.items() if not 0 <= s <= 100)
                raise ValueError(f"plugin {plugin.NAME} returns an invalid score {score} for node {name}")
            for name, score in scores.items():
                totals[name] += score * weight
        out: dict[float, list[str]] = {}
        for name, total in totals.items():
            out.setdefault(total, []).append(name)
        return out


class Scoring:
    """The configuration's Score plugins, made once per scheduler (they keep per-decision caches)."""

    def __init__(self, config: dict[str, Any]) -> None:
        try:
            check_effective(config)
        except FieldError as e:
            raise ValueError(f"scheduler configuration: {e}") from None
        self.nonzero = NonZero()
        args = config.get("args") or {}
        self.plugins: list[tuple[ScorePlugin, int]] = [
            (PLUGINS[name](args.get(name) or {}, self.nonzero), int(weight))
            for name, weight in (config.get("score") or {}).items() if name in PLUGINS]
        self.percentage = int(config.get("percentageOfNodesToScore") or 0)
        self._cycle: Cycle | None = None
        self._nodes: list[NodeState] = []

    def prepare(self, cycle: Cycle, pod: PodState) -> PodScore:
        """PreScore for the pod in this decision: every node is passed to the plugins whose PreScore reads
        all nodes (their skips do not depend on which nodes pass the filters); a plugin that reads only the
        filtered ones (`FILTERED_PRESCORE`) gets them in `rank`."""
        if cycle is not self._cycle:
            self._cycle = cycle
            self._nodes = list(cycle.view.nodes.values())
        self.nonzero.at(cycle)
        active = []
        for plugin, weight in self.plugins:
            if getattr(plugin, "FILTERED_PRESCORE", False):
                # PreScore over the nodes that passed Filter (PodTopologySpread's initPreScoreState): run by
                # `rank`, once the found nodes are known; whether it skips does not depend on them
                if not plugin.skips(pod):  # type: ignore[attr-defined]
                    active.append((plugin, weight, Deferred(cycle)))
                continue
            state = plugin.pre_score(cycle, pod, self._nodes)
            if state is not None:
                active.append((plugin, weight, state))
        return PodScore(pod, active, self.nonzero.pod(pod), self.percentage)

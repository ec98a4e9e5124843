"""The scheduler's per-shape node answers (resource fit and score), kept across decisions.

Why: upstream's schedulePod filters and scores nodes from a rotating start until it has found
numFeasibleNodesToFind of them (about 420 of 1,000 nodes), for every pod. Done node by node in Python
that scan was most of the time of a simulated day. But whether a pod fits a node and how the node
scores (most-/least-allocated) depend only on the pod's shape (its requests, in their order since the
score's sum follows it; its placement constraints, through the static filters), the node's
allocatable and the node's usage. So, per shape, the answer for each node is kept and recomputed only
for the nodes whose usage changed: the fold's journal (`ClusterState.usage_changes`) names those that
changed between decisions, the decision's own (`Cycle.changed`) those its bindings changed (the
assume cache, seen through `own`).

Nodes are kept in the order of the static list (view.nodes) in blocks that know how many of their nodes
fit and their best score, so that the scan from the rotating start to the wanted number of feasible
nodes steps over whole blocks. `scan` answers exactly what the node-by-node scan finds: how many nodes
it looked at, and the best-scored feasible nodes in scan order (the caller breaks the tie with the
decision's random source, as before); when no node fits, `reasons` counts each node's failure as the
loop does. Pods with DRA claims and the fragmentation score keep the node-by-node loop (their answer
depends on the decision's devices). A cache only: another view or journal drops it, and it never
changes an answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from ..state.cluster import ClusterState, NodeState
from .plugins.node_resources_fit import failure_message, lacking

NEG = float("-inf")  # the score of a node that does not fit (real scores are finite)
BLOCK = 32

Score = Callable[[NodeState, dict[str, int]], float]


class Layout:
    """What a static list says whatever the pod's requests: the nodes' names in order, their positions,
    and the static failures counted. Pods with the same placement constraints but other requests have
    ShapeIndexes of their own over the very same static list, so this is made once per static list and
    shared by them, not made again by each one's rebuild. Each new list gets new objects (the old ones,
    which other indexes may still hold, are never changed)."""

    __slots__ = ("static", "names", "pos", "static_fails")

    def __init__(self) -> None:
        self.static: list[tuple[str, str | None]] | None = None
        self.names: list[str] = []
        self.pos: dict[str, int] = {}
        self.static_fails: Counter[str] = Counter()

    def of(self, static: list[tuple[str, str | None]]) -> Layout:
        if static is not self.static:
            self.names = [name for name, _ in static]
            self.pos = {name: i for i, name in enumerate(self.names)}
            self.static_fails = Counter(failure for _, failure in static if failure is not None)
            self.static = static
        return self


class ShapeIndex:
    """One pod shape's answers on every node (see the module docstring)."""

    __slots__ = ("_checks", "_score", "_layout", "_fit", "_why", "_journal", "_journal_pos",
                 "_cycle", "_cycle_pos", "_overlaid", "_static", "_names", "_pos", "_scores", "_count", "_best",
                 "_reason", "_fails", "_static_fails")

    def __init__(self, requests: dict[str, int], score: Score, layout: Layout | None = None) -> None:
        self._layout = Layout() if layout is None else layout  # shared by the indexes of one static shape
        self._checks = sorted(requests.items())  # NodeResourcesFit's order (fits_resources)
        self._score = score
        self._fit: dict[str, float] = {}  # node -> its score if the pod fits its usage, else NEG
        self._why: dict[str, str] = {}  # node -> why the pod does not fit its usage (NEG in _fit)
        self._journal: list[str] | None = None  # the view's journal, and how far it was read
        self._journal_pos = 0
        self._cycle: object = None  # the decision whose bindings were read, and how far
        self._cycle_pos = 0
        self._overlaid: set[str] = set()  # nodes answered for the decision's usage, not the view's
        self._static: list[tuple[str, str | None]] | None = None  # the static list the blocks follow
        self._names: list[str] = []
        self._pos: dict[str, int] = {}
        self._scores: list[float] = []  # per position: the score, NEG if it does not fit or fails statically
        self._count: list[int] = []  # per block: nodes that fit
        self._best: list[float] = []  # per block: the best score (NEG: none fits)
        # The failures as the loop counts them when no node fits: per position the resource fit's (None
        # if it fits or fails statically), and counted: the resource fit's, the static filters'.
        self._reason: list[str | None] = []
        self._fails: dict[str, int] = {}
        self._static_fails: Counter[str] = Counter()

    def _eval(self, node: NodeState, used: dict[str, int]) -> float:
        """NodeResourcesFit (`lacking`), then the score: the node-by-node loop's checks in the same order."""
        missing = lacking(self._checks, used, node.allocatable)
        if missing:
            self._why[node.name] = failure_message(missing[0])
            return NEG
        return self._score(node, used)

    def sync(self, view: ClusterState, static: list[tuple[str, str | None]], cycle: object,
             changed: list[str], own: dict[str, dict[str, int]]) -> None:
        """Bring the answers to the decision's usage: `static` is the decision's static filter list,
        `cycle` identifies the decision, `changed` the nodes its bindings changed so far (in order,
        growing), `own` their usage in the decision."""
        journal = view.usage_changes
        fit = self._fit
        if journal is not self._journal:  # another view: start afresh
            fit.clear()
            self._why.clear()
            self._overlaid.clear()
            self._static = None
            self._journal = journal
            dirty: set[str] = set()
        else:
            dirty = set(journal[self._journal_pos:])
        self._journal_pos = len(journal)
        if cycle is not self._cycle:  # a new decision: what the last one assumed is gone
            dirty |= self._overlaid
            self._overlaid = set()
            self._cycle, self._cycle_pos = cycle, 0
        dirty.update(changed[self._cycle_pos:])
        self._cycle_pos = len(changed)
        nodes = view.nodes
        for name in dirty:
            node = nodes.get(name)
            if node is None:
                fit.pop(name, None)
                self._why.pop(name, None)
                self._overlaid.discard(name)
                continue
            mine = own.get(name)
            if mine is None:
                self._overlaid.discard(name)
                fit[name] = self._eval(node, node.used)
            else:
                self._overlaid.add(name)
                fit[name] = self._eval(node, mine)
        if static is not self._static and static != self._static:
            old = self._static
            if old is None or len(static) <= len(old) or static[:len(old)] != old:
                self._rebuild(view, static, own)
                return
            self._extend(view, static, own)  # nodes added at the end (most new lists): the rest as it was
        self._static = static
        pos, why = self._pos, self._why
        for name in dirty:
            i = pos.get(name)
            if i is not None and static[i][1] is None:
                value = fit[name]
                self._set(i, value, why[name] if value == NEG else None)

    def _rebuild(self, view: ClusterState, static: list[tuple[str, str | None]],
                 own: dict[str, dict[str, int]]) -> None:
        """Positions and blocks anew for another static list (nodes added, removed, turned Ready...);
        the answers kept for nodes whose usage did not change are reused."""
        fit, nodes, why = self._fit, view.nodes, self._why
        for name in [name for name, failure in static if failure is None and name not in fit]:
            node = nodes[name]
            mine = own.get(name)
            if mine is not None:
                self._overlaid.add(name)
            fit[name] = self._eval(node, node.used if mine is None else mine)
        scores = [NEG if failure is not None else fit[name] for name, failure in static]
        reason = [why[name] if score == NEG and failure is None else None
                  for (name, failure), score in zip(static, scores, strict=True)]
        self._static = static
        self._reason = reason
        self._fails = dict(Counter(r for r in reason if r is not None))
        layout = self._layout.of(static)
        self._static_fails, self._names, self._pos = layout.static_fails, layout.names, layout.pos
        self._scores = scores
        self._count = []
        self._best = []
        for lo in range(0, len(scores), BLOCK):
            block = scores[lo:lo + BLOCK]
            self._count.append(len(block) - block.count(NEG))
            self._best.append(max(block))

    def _extend(self, view: ClusterState, static: list[tuple[str, str | None]],
                own: dict[str, dict[str, int]]) -> None:
        """`_rebuild` for a static list that is the current one with nodes appended (nodes created): the
        positions, scores and reasons of the current ones stay, the new ones are added, and the blocks
        from the first one they touch are made again. The caller then updates the nodes whose usage
        changed, as without a new list."""
        assert self._static is not None
        start = len(self._static)
        fit, nodes, why = self._fit, view.nodes, self._why
        scores, reason, fails = self._scores, self._reason, self._fails
        for name, failure in static[start:]:
            if failure is None and name not in fit:
                node = nodes[name]
                mine = own.get(name)
                if mine is not None:
                    self._overlaid.add(name)
                fit[name] = self._eval(node, node.used if mine is None else mine)
            score = NEG if failure is not None else fit[name]
            why_not = why[name] if score == NEG and failure is None else None
            scores.append(score)
            reason.append(why_not)
            if why_not is not None:
                fails[why_not] = fails.get(why_not, 0) + 1
        layout = self._layout.of(static)
        self._static_fails, self._names, self._pos = layout.static_fails, layout.names, layout.pos
        first = start // BLOCK
        del self._count[first:]
        del self._best[first:]
        for lo in range(first * BLOCK, len(scores), BLOCK):
            block = scores[lo:lo + BLOCK]
            self._count.append(len(block) - block.count(NEG))
            self._best.append(max(block))

    def _set(self, i: int, value: float, reason: str | None) -> None:
        old_reason = self._reason[i]
        if old_reason != reason:
            fails = self._fails
            if old_reason is not None:
                fails[old_reason] -= 1
            if reason is not None:
                fails[reason] = fails.get(reason, 0) + 1
            self._reason[i] = reason
        scores = self._scores
        old = scores[i]
        if old == value:
            return
        scores[i] = value
        k = i // BLOCK
        self._count[k] += (value != NEG) - (old != NEG)
        if value >= self._best[k]:
            self._best[k] = value
        elif old == self._best[k]:
            self._best[k] = max(scores[k * BLOCK:(k + 1) * BLOCK])

    def answer(self, name: str) -> tuple[float, str | None]:
        """One node's answer after `sync` (a node that passes the static filters): its score, or NEG and
        why the pod does not fit its usage. The node-by-node loop reads it for pods with claims, whose
        scores (pointwise, scheduler configuration) are the same whatever DRA says."""
        value = self._fit[name]
        return value, (self._why[name] if value == NEG else None)

    def feasible(self) -> int:
        return sum(self._count)

    def reasons(self) -> Counter[str]:
        """Each node's failure counted, as the node-by-node loop counts them when no node fits: the
        static filter's, else the resource fit's."""
        out = Counter(self._static_fails)
        for reason, n in self._fails.items():
            if n:
                out[reason] += n
        return out

    def scan(self, start: int, want: int) -> tuple[int, list[str]]:
        """From position `start` round the ring, until `want` feasible nodes are found (or all were
        looked at): how many nodes were looked at, and the best-scored feasible ones in scan order."""
        scanned, best, ranges = self._scan(start, want)
        names, scores = self._names, self._scores
        return scanned, [names[j] for lo, hi, _ in ranges for j in range(lo, hi) if scores[j] == best]

    def scan_draw(self, start: int, want: int, draw: Callable[[int], int]) -> tuple[int, str | None]:
        """`scan`, and the node at `draw(n)` among the n best (no draw when n is 1), without listing them:
        the first draw of the node search's one-at-a-time shuffle (NodeSearch._draw), for the many ties
        LeastAllocated leaves among empty nodes."""
        scanned, best, ranges = self._scan(start, want)
        scores = self._scores
        n = sum(c for _, _, c in ranges)
        if n == 0:
            return scanned, None
        k = draw(n) if n > 1 else 0
        for lo, hi, c in ranges:
            if k >= c:
                k -= c
                continue
            for j in range(lo, hi):
                if scores[j] == best:
                    if k == 0:
                        return scanned, self._names[j]
                    k -= 1
        raise AssertionError("unreachable: the drawn node is among the ranges")

    def _scan(self, start: int, want: int) -> tuple[int, float, list[tuple[int, int, int]]]:
        """`scan`'s walk: nodes looked at, the best score, and the position ranges (in scan order) holding
        the nodes of that score among those found, each with how many it holds."""
        scores, count, best_of = self._scores, self._count, self._best
        total = len(scores)
        found = 0
        best = NEG
        group: list[tuple[int, int, int]] = []
        base = 0  # nodes looked at before the current segment
        for a, b in ((start, total), (0, start)):
            i = a
            while i < b:
                k = i // BLOCK
                lo = k * BLOCK
                hi = min(lo + BLOCK, total)
                c = count[k]
                if i == lo and hi <= b and found + c < want:  # the whole block, short of `want`
                    if c:
                        found += c
                        m = best_of[k]
                        if m > best:
                            best = m
                            group = [(lo, hi, scores[lo:hi].count(m))]
                        elif m == best:
                            group.append((lo, hi, scores[lo:hi].count(m)))
                    i = hi
                    continue
                end = min(hi, b)
                while i < end:
                    s = scores[i]
                    i += 1
                    if s == NEG:
                        continue
                    found += 1
                    if s > best:
                        best = s
                        group = [(i - 1, i, 1)]
                    elif s == best:
                        group.append((i - 1, i, 1))
                    if found == want:
                        return base + i - a, best, group
            base += b - a
        return total, best, group


class FeasibilityCache:
    """The scheduler's ShapeIndex per pod shape, across decisions (a reactor-held cache)."""

    def __init__(self) -> None:
        self._shapes: dict[tuple[object, ...], ShapeIndex] = {}
        self._layouts: dict[object, Layout] = {}  # static shape (key[0]) -> its indexes' shared Layout

    def index(self, key: tuple[object, ...], requests: dict[str, int], score: Score) -> ShapeIndex:
        """`key`: (static shape, requests in order)."""
        hit = self._shapes.get(key)
        if hit is None:
            if len(self._shapes) > 256:
                self._shapes.clear()
                self._layouts.clear()
            layout = self._layouts.get(key[0])
            if layout is None:
                layout = self._layouts[key[0]] = Layout()
            hit = self._shapes[key] = ShapeIndex(requests, score, layout)
        return hit

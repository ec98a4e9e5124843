"""Each node's utilization as scale-down reads it, kept across the autoscaler's loops until its inputs change.

cluster-autoscaler looks at every node in every loop (its planner's UpdateUnneededNodes); so does dralab's
scale-down (candidates.py `mark`). Most nodes' utilization does not change from one loop to the next, and
computing it for thousands of nodes every 10 s was most of the cost of an hour of a large cluster (issue 24:
an hour of 2,000 DRA pods, 5,000 nodes). A node's utilization (scale_down.py `utilization`) depends on:

- its pods and their requests, its usage (`NodeState.used`): the fold's journal `ClusterState.usage_changes`
  names every node whose usage, pods or existence changed;
- the devices of its own slices: the journal `DraState.slice_changes` (the slices published or removed);
- which of those devices are allocated: the journal `DraState.allocation_changes` (the pools of the devices
  allocated or freed);
- the devices pods wait on in PreBind, and, leaving expendable pods out, the claims only they use: not
  kept while any pod waits in PreBind or the node holds an expendable pod (computed each time, as before).

So a value is kept until one of the journals names the node (or a pool or slice it read), and is then
computed afresh: the same number a fresh computation gives (tests/test_incremental_drivers.py compares them
at every loop).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ...state.cluster import ClusterState, NodeState
from ..simulation.nominated import expendable

Key = tuple[bool, bool, bool]  # (release, ignore DaemonSet pods, ignore mirror pods)


@dataclass
class UtilizationCache:
    """Kept in the autoscaler's ScaleDown (the reactor instance): pure, a cache and never an answer."""

    journals: tuple[list[str], list[str], list[tuple[str, str]]] | None = None
    positions: tuple[int, int, int] = (0, 0, 0)
    values: dict[str, dict[Key, float]] = field(default_factory=dict)  # node -> its utilization per key
    pools: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # pool -> nodes whose value read it
    slices: dict[str, str] = field(default_factory=dict)  # slice name -> the node whose value read it
    gpus: dict[str, tuple[NodeState, bool]] = field(default_factory=dict)  # node -> whether it has a `*/gpu`

    def utilization(self, view: ClusterState, node: NodeState, key: Key, compute: Callable[[], float]) -> float:
        """`compute()`, or the value it gave before if nothing it depends on changed since."""
        known = self.journals
        if known is None or view.usage_changes is not known[0] or len(known[0]) != self.positions[0] \
                or len(known[1]) != self.positions[1] or len(known[2]) != self.positions[2] \
                or view.dra.slice_changes is not known[1] or view.dra.allocation_changes is not known[2]:
            self._sync(view)
        if view.dra.binding or (key[0] and node.pods and any(expendable(view.pods[k]) for k in node.pods)):
            return compute()  # inputs the journals do not name: computed each time
        per = self.values.get(node.name)
        if per is not None:
            value = per.get(key)
            if value is not None:
                return value
        value = compute()
        if per is None:
            per = self.values[node.name] = {}
            if view.dra.slices:
                for _, slc in view.dra.slice_index().by_node.get(node.name, ()):
                    self.slices[slc.name] = node.name
                    self.pools.setdefault((slc.driver, slc.pool), set()).add(node.name)
        per[key] = value
        return value

    def has_gpu(self, node: NodeState) -> bool:
        """Whether the node has an extended `*/gpu` resource (its allocatable is fixed when it is created)."""
        seen = self.gpus.get(node.name)
        if seen is None or seen[0] is not node:
            seen = self.gpus[node.name] = (node, any(a and r.endswith("/gpu") for r, a in node.allocatable.items()))
        return seen[1]

    def _sync(self, view: ClusterState) -> None:
        usage, slices, allocs = view.usage_changes, view.dra.slice_changes, view.dra.allocation_changes
        known = self.journals
        if known is None or usage is not known[0] or slices is not known[1] or allocs is not known[2]:
            self.journals = (usage, slices, allocs)  # another view: start afresh
            self.values.clear()
            self.pools.clear()
            self.slices.clear()
            self.gpus.clear()
            self.positions = (len(usage), len(slices), len(allocs))
            return
        at_usage, at_slices, at_allocs = self.positions
        if len(usage) == at_usage and len(slices) == at_slices and len(allocs) == at_allocs:
            return
        values = self.values
        for name in usage[at_usage:]:
            values.pop(name, None)
        for name in slices[at_slices:]:
            reader = self.slices.pop(name, None)
            if reader is not None:
                values.pop(reader, None)
            slc = view.dra.slices.get(name)
            if slc is not None and slc.node_selection is not None and slc.node_selection.node_name:
                values.pop(slc.node_selection.node_name, None)
        for pool in dict.fromkeys(allocs[at_allocs:]):
            for name in self.pools.get(pool, ()):
                values.pop(name, None)
        self.positions = (len(usage), len(slices), len(allocs))

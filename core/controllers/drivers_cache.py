"""Which nodes the drivers reactor has to look at in a decision: those whose inputs changed (issue 24).

What a node's drivers want published (core/controllers/drivers.py) depends on the node (its first Ready
time and its drivers' publish delays, both fixed once it is Ready), its group (replaced as a whole when
redefined), the device faults aimed at it, the slices of its pool names, and the time, which only matters
at the instants the reactor already reports as wake-ups (a publication due, a restart, a device turning
unhealthy). So the answer for a node stays what it was until one of those changes, and the reactor looks
again only at:

- the nodes the fold's journal `ClusterState.node_changes` names since the last decision (created, first
  Ready; deleted ones are forgotten);
- the nodes whose slices the journal `DraState.slice_changes` names (a publication by anyone, or the
  removal of a deleted node's slices);
- the nodes whose earliest wake-up is due, the nodes with a device fault (now or at the last decision:
  faults are few and their effect depends on the time in ways the wake-ups do not all name), and the
  nodes that published in the last decision (what they published may have been refused by the fold);
- every node when the node groups changed, or the view is another one (its journals are other lists:
  a restored snapshot, another run).

The nodes to look at are taken in the order of `view.nodes` (the events come out in the order a full
pass makes them): the journal of node changes is replayed on a mirror of that dict's order. The
result equals a full pass at every decision (tests/test_incremental_drivers.py); the cost of a decision
is that of what changed, not of every node (before: 63 % of an hour of 2,000 DRA pods on 5,000 nodes).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from ..state.cluster import ClusterState


@dataclass
class DirtyNodes:
    """The drivers reactor's memory of what it last looked at (kept in the reactor instance: pure)."""

    node_journal: list[tuple[str, str]] | None = None
    node_pos: int = 0
    slice_journal: list[str] | None = None
    slice_pos: int = 0
    groups: list[Any] = field(default_factory=list)  # the node groups as last seen (compared by identity)
    order: dict[str, int] = field(default_factory=dict)  # node -> ordinal, in the order of view.nodes
    next_ord: int = 0
    watch: dict[str, str] = field(default_factory=dict)  # slice name -> the node whose drivers read it
    wake_at: dict[str, int] = field(default_factory=dict)  # node -> its earliest wake-up
    wakes: list[tuple[int, str]] = field(default_factory=list)  # heap of (wake-up, node); stale entries skipped
    again: set[str] = field(default_factory=set)  # nodes that published in the last decision, or had faults

    def dirty(self, view: ClusterState, now: int, faulted: set[str]) -> list[str]:
        """The names of the nodes to look at now, in the order of `view.nodes`."""
        groups = list(view.node_groups.values())
        same_groups = len(groups) == len(self.groups) and all(a is b for a, b in zip(groups, self.groups, strict=True))
        if (view.node_changes is not self.node_journal or view.dra.slice_changes is not self.slice_journal
                or not same_groups):
            return self._everything(view, groups)
        dirty = self.again | faulted
        self.again = set(faulted)
        journal = view.node_changes
        for what, name in journal[self.node_pos:]:
            if what == "c":
                self.order.pop(name, None)
                self.order[name] = self.next_ord
                self.next_ord += 1
                dirty.add(name)
            elif what == "d":
                self.order.pop(name, None)
                self.wake_at.pop(name, None)
            else:
                dirty.add(name)
        self.node_pos = len(journal)
        slices = view.dra.slice_changes
        for slice_name in slices[self.slice_pos:]:
            node = self.watch.get(slice_name)
            if node is not None:
                dirty.add(node)
        self.slice_pos = len(slices)
        heap = self.wakes
        while heap and heap[0][0] <= now:
            t, name = heapq.heappop(heap)
            if self.wake_at.get(name) == t:
                del self.wake_at[name]
                dirty.add(name)
        order = self.order
        return sorted((n for n in dirty if n in order and n in view.nodes), key=order.__getitem__)

    def _everything(self, view: ClusterState, groups: list[Any]) -> list[str]:
        self.node_journal, self.node_pos = view.node_changes, len(view.node_changes)
        self.slice_journal, self.slice_pos = view.dra.slice_changes, len(view.dra.slice_changes)
        self.groups = groups
        self.order = {name: i for i, name in enumerate(view.nodes)}
        self.next_ord = len(self.order)
        self.watch.clear()
        self.wake_at.clear()
        self.wakes.clear()
        self.again.clear()
        return list(view.nodes)

    def looked(self, node: str, slice_names: list[str], wakes: list[int], published: bool) -> None:
        """What the decision found for `node`: the slices it read, when it wants to look again, whether it
        published."""
        for name in slice_names:
            self.watch[name] = node
        if wakes:
            first = min(wakes)
            if self.wake_at.get(node) != first:
                self.wake_at[node] = first
                heapq.heappush(self.wakes, (first, node))
        else:
            self.wake_at.pop(node, None)
        if published:
            self.again.add(node)

    def next_wake(self) -> int | None:
        """The earliest wake-up of every node looked at (what a full pass gathers from all of them)."""
        heap = self.wakes
        while heap and self.wake_at.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

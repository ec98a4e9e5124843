"""Devices of a cluster snapshot as the pods see them: which are published in full, which match a class
and selectors, and from which nodes each can be reached.

Split from :mod:`dralab.core.analysis.audit_snapshot` because none of it depends on scheduling state (bindings,
allocations), only on the ResourceSlices, DeviceClasses and nodes, so it is memoized once per snapshot.
The audit's stranded-device count and fragmentation check call the reachability helpers once per device:
they find a node-local device's node by name instead of testing every node.
"""

from __future__ import annotations

from ..dra.cel import CelMatcher, SelectorError
from ..dra.model import Device, DeviceClass, Node, Slice
from ..dra.pools import node_matches

__all__ = ["DeviceCatalog", "complete_devices", "device_reachable", "reachable_from_any", "reached_nodes"]


class DeviceCatalog:
    """The devices of the complete pools and which of them match a class and a request's selectors.

    Fixed for the life of a snapshot (slices and classes never change; which devices are in use is the
    snapshot's business), so every answer is memoized once for all pods and bindings.
    """

    def __init__(self, slices: list[Slice], classes: dict[str, DeviceClass], matcher: CelMatcher) -> None:
        self.classes = classes
        self.matcher = matcher
        self.complete = complete_devices(slices)
        self._match_memo: dict[tuple[Device, str, tuple[str, ...]], bool] = {}
        self._matching_memo: dict[tuple[str, tuple[str, ...]], list[tuple[Slice, Device]]] = {}
        self._by_node_memo: dict[tuple[str, tuple[str, ...]], dict[str, list[Device]] | None] = {}

    def matching_devices(self, class_name: str, selectors: tuple[str, ...]) -> list[tuple[Slice, Device]]:
        """The devices of ``complete`` that `device_matches` (memoized; do not modify the list)."""
        key = (class_name, tuple(selectors))
        hit = self._matching_memo.get(key)
        if hit is None:
            hit = self._matching_memo[key] = [(slc, d) for slc, d in self.complete
                                              if self.device_matches(d, class_name, selectors)]
        return hit

    def matching_by_node(self, class_name: str, selectors: tuple[str, ...]) -> dict[str, list[Device]] | None:
        """`matching_devices` by the node whose node-local slice publishes them (memoized; do not modify);
        None when one of them is not node-local (reachable from several nodes)."""
        key = (class_name, tuple(selectors))
        if key not in self._by_node_memo:
            out: dict[str, list[Device]] | None = {}
            for slc, d in self.matching_devices(class_name, selectors):
                name = slc.node_selection.node_name if slc.node_selection is not None else None
                if slc.per_device_node_selection or not name:
                    out = None
                    break
                assert out is not None
                out.setdefault(name, []).append(d)
            self._by_node_memo[key] = out
        return self._by_node_memo[key]

    def device_matches(self, device: Device, class_name: str, selectors: tuple[str, ...]) -> bool:
        key = (device, class_name, tuple(selectors))
        hit = self._match_memo.get(key)
        if hit is None:
            hit = self._match_memo[key] = self._device_matches(device, class_name, selectors)
        return hit

    def _device_matches(self, device: Device, class_name: str, selectors: tuple[str, ...]) -> bool:
        cls = self.classes.get(class_name)
        if cls is None:
            return False
        try:
            return all(self.matcher.matches(e, device, f"deviceclass {class_name}") for e in cls.selectors) and all(
                self.matcher.matches(e, device, "request") for e in selectors)
        except SelectorError:
            return False


def complete_devices(slices: list[Slice]) -> list[tuple[Slice, Device]]:
    """The devices of every complete pool (all slices of its newest generation published)."""
    pools: dict[tuple[str, str], list[Slice]] = {}
    for slc in slices:
        pools.setdefault((slc.driver, slc.pool), []).append(slc)
    out: list[tuple[Slice, Device]] = []
    for key in sorted(pools):
        gen = max(s.generation for s in pools[key])
        newest = [s for s in pools[key] if s.generation == gen]
        if len(newest) != newest[0].resource_slice_count:
            continue
        for slc in sorted(newest, key=lambda s: s.name):
            out.extend((slc, d) for d in slc.devices)
    return out


def reached_nodes(slc: Slice, device: Device, names: set[str], nodes: list[Node]) -> list[str]:
    """The names of the ``nodes`` (whose names are ``names``) from which ``device`` is reachable, in
    ``nodes`` order: what ``[n.name for n in nodes if device_reachable(slc, device, n)]`` gives, without
    a loop over the nodes for a node-local device."""
    selection = device.node_selection if slc.per_device_node_selection else slc.node_selection
    if selection is None:
        return []
    if selection.node_name:
        return [selection.node_name] if selection.node_name in names else []
    if selection.all_nodes:
        return [n.name for n in nodes]
    return [n.name for n in nodes if node_matches(selection, n)]


def reachable_from_any(slc: Slice, device: Device, names: set[str], nodes: list[Node]) -> bool:
    """``any(device_reachable(slc, device, n) for n in nodes)``, without a loop for a node-local device."""
    selection = device.node_selection if slc.per_device_node_selection else slc.node_selection
    if selection is None:
        return False
    if selection.node_name:
        return selection.node_name in names
    if selection.all_nodes:
        return bool(nodes)
    return any(node_matches(selection, n) for n in nodes)


def device_reachable(slc: Slice, device: Device, node: Node) -> bool:
    """Can a pod on ``node`` be allocated ``device``?"""
    if slc.per_device_node_selection:
        return node_matches(device.node_selection, node)
    return node_matches(slc.node_selection, node)

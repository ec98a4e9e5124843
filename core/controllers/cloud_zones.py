"""The zone of a group's new node when a zone is stocked out or at its quota.

A group spanning zones places its nodes round-robin over them (cluster/nodes.py `zone_of`), as a regional
instance group or a multi-AZ Auto Scaling group spreads instances evenly. When a zone cannot take one (a
`cloud-stockout` or a `quota-cut` with a `zone`, or the group's `zoneQuota`), the cloud launches it in the
zone with the fewest of the group's nodes among those that can (ties: the round-robin order from the
node's ordinal), as an Auto Scaling group does (the EC2 Auto Scaling user guide, "Availability Zone
distribution": it launches in the zone with the fewest instances and, if a launch fails there, in another
zone until one succeeds) and a regional MIG keeps its zones even; when none can, the node fails
`out-of-stock` (a zone stocked out) or `quota`. Without such a zone fault or quota, round-robin as always.
"""

from __future__ import annotations

from ..cluster.cloud_faults import CloudFaults
from ..cluster.nodes import ZONE_LABEL, zone_of
from ..log.events_cloud import NodeGroupCloudDefined
from ..state.cluster import ClusterState, NodeGroupState


def _zone_label(manifest: dict[str, object]) -> str:
    meta = manifest.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return str(labels.get(ZONE_LABEL, "")) if isinstance(labels, dict) else ""


class ZonePicker:
    """The zones of one group for one decision: the nodes it runs in each, what each may still take."""

    def __init__(self, view: ClusterState, group: NodeGroupState, faults: CloudFaults,
                 settings: NodeGroupCloudDefined | None) -> None:
        self.zones = group.zones
        self.out = faults.zones_out
        quota = dict(settings.zone_quota) if settings is not None else {}
        for zone, cut in faults.zone_quota:
            quota[zone] = min(cut, quota.get(zone, cut))
        self.quota = quota
        self.active = bool(self.zones) and bool(self.out or self.quota)
        self.running: dict[str, int] = {}
        if self.active:
            for name in view.nodes_by_group.get(group.name, {}):
                node = view.nodes.get(name)
                if node is not None:
                    zone = _zone_label(node.manifest)
                    self.running[zone] = self.running.get(zone, 0) + 1
            for vm in view.provisioning_nodes.values():
                if vm.group == group.name:
                    zone = _zone_label(vm.node)
                    self.running[zone] = self.running.get(zone, 0) + 1

    def pick(self, index: int) -> tuple[str | None, str]:
        """The zone of the group's `index`-th node, or None and the reason none can take it."""
        if not self.active:
            return zone_of(self.zones, index), ""
        stocked_out = False
        open_zones: list[tuple[int, int, str]] = []  # (nodes there, rotation from the ordinal's zone, zone)
        for k in range(len(self.zones)):
            zone = zone_of(self.zones, index + k)
            if zone in self.out:
                stocked_out = True
            elif zone not in self.quota or self.running.get(zone, 0) < self.quota[zone]:
                open_zones.append((self.running.get(zone, 0), k, zone))
        if open_zones:
            return min(open_zones)[2], ""
        return None, "out-of-stock" if stocked_out else "quota"

    def short(self, index: int, nodes: int) -> str:
        """Why the zones cannot take `nodes` more nodes from the `index`-th on ("" if they can), leaving
        the picker as it was (an atomic request is placed whole or not at all)."""
        if not self.active:
            return ""
        saved = dict(self.running)
        why = ""
        for i in range(nodes):
            zone, why = self.pick(index + i)
            if zone is None:
                break
            self.take(zone)
        self.running = saved
        return why

    def take(self, zone: str) -> None:
        self.running[zone] = self.running.get(zone, 0) + 1

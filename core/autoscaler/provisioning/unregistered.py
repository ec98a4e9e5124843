"""Deleting an instance that never registered, through a cloud that may refuse: the VM that comes anyway.

Each loop cluster-autoscaler deletes the instances that stayed unregistered longer than
`--max-node-provision-time` (static_autoscaler.go `removeOldUnregisteredNodes`, calling the provider's
`DeleteNodes`); a failure is logged and the next loop tries again, as long as the instance is still
unregistered. backoff.py writes that deletion as an immediate `NodeDeleted` (the VM cancelled). Where the
group deletes through the cloud (a `deleteDelay`, a `deleteFailureRate`, a deletion fault: core/cluster/nodes.py
`deletes_through_cloud`) it is a request instead (`NodeDeletionRequested`), answered by the cloud
(core/controllers/cloud_ops.py): when the deletion fails, the request is made again each loop while the VM
is unregistered, and a VM whose deletion kept failing registers once it is up: it joins as an ordinary node,
idle and paid for until scale-down removes it.
"""

from __future__ import annotations

from ...cluster.nodes import deletes_through_cloud
from ...log.events import AnyEvent, NodeDeleted, NodeDeletionRequested
from ...state.cluster import ClusterState
from .target_revert import REVERTED

REASON = "unregistered for max-node-provision-time"


def unregistered_deletions(view: ClusterState, timed_out: list[AnyEvent]) -> list[AnyEvent]:
    """The timeout's events with the deletions of unregistered VMs of such groups turned into requests, and a
    request again for each such VM whose last deletion failed and is still unregistered."""
    ops = view.cloud_ops
    if not ops.groups and not view.faults:
        return timed_out  # the common case: every deletion is immediate
    out: list[AnyEvent] = []
    asked: set[str] = set()
    for event in timed_out:
        vm = view.provisioning_nodes.get(event.name) if isinstance(event, NodeDeleted) else None
        if vm is not None and isinstance(event, NodeDeleted) and event.reason != REVERTED \
                and deletes_through_cloud(view, vm.group):  # (a decreased target size is not a deletion)
            if event.name not in ops.deleting:
                out.append(NodeDeletionRequested(name=event.name, reason=event.reason))
            asked.add(event.name)
        else:
            out.append(event)
    for name in ops.failed_deletions:  # upstream retries each loop (removeOldUnregisteredNodes)
        if name in view.provisioning_nodes and name not in ops.deleting and name not in asked:
            out.append(NodeDeletionRequested(name=name, reason=REASON))
    return out

"""The fields of the cluster state and its indexes, with the queries and the bookkeeping over them.

Apart from the fold (:class:`~.cluster.ClusterState`, which subclasses this without adding a field) so that
what the state holds, and the indexes kept beside the objects (pods by phase, nodes by group, the heap of
run deadlines, the nodes never Ready, what changed since the invariant monitor looked), read on one page.
The fields' order is the snapshot's (core/state/codec.py): add new ones at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..log.events import (
    AutoscalerEvent,
    ClaimAllocated,
    ClaimReleased,
    ClaimReserved,
    NodeProvisioning,
    ResourceClaimCreated,
    RunStarted,
)
from .cloud_ops import CLOUD_HANDLERS as CLOUD_HANDLERS  # re-exported for cluster.py's dispatch table
from .cloud_ops import CloudOps
from .device_taints import RULE_ROOM_EVENTS as RULE_ROOM_EVENTS  # re-exported for cluster.py's ROOM_TYPES
from .dra import DraState
from .gangs import GangState
from .groups import NodeGroupState
from .jobs import JobState
from .object_changes import OBJECT_HANDLERS as OBJECT_HANDLERS  # re-exported for cluster.py's dispatch table
from .objects import FAILED, PENDING, RUNNING, SUCCEEDED, FaultState, NodeState, PodState
from .provreq import ProvisioningState
from .scale_down import ScaleDownStatus


@dataclass
class ClusterIndexes:
    offset: int = 0  # last applied offset
    t: int = 0  # time of the last applied record
    run: RunStarted | None = None
    versions: dict[str, int] = field(default_factory=dict)
    node_groups: dict[str, NodeGroupState] = field(default_factory=dict)
    nodes: dict[str, NodeState] = field(default_factory=dict)
    pods: dict[str, PodState] = field(default_factory=dict)
    # Indexes (ordered sets as dicts, so iteration order is deterministic).
    pods_by_phase: dict[str, dict[str, None]] = field(
        default_factory=lambda: {PENDING: {}, RUNNING: {}, SUCCEEDED: {}, FAILED: {}}
    )
    nodes_by_group: dict[str, dict[str, None]] = field(default_factory=dict)
    scale_ups: list[tuple[int, str, int]] = field(default_factory=list)  # (t, group, delta)
    # VMs the cloud is making, not registered yet (NodeProvisioning until NodeCreated or NodeDeleted)
    provisioning_nodes: dict[str, NodeProvisioning] = field(default_factory=dict)
    provisioning_t: dict[str, int] = field(default_factory=dict)  # when the cloud accepted each VM
    unready_bindings: list[str] = field(default_factory=list)  # pods bound to a node not Ready (invariants)
    events_applied: int = 0
    anomalies: list[str] = field(default_factory=list)
    gang_violations: list[str] = field(default_factory=list)  # partial gang bindings (see invariants)
    dra: DraState = field(default_factory=DraState)
    gang: GangState = field(default_factory=GangState)
    provisioning: ProvisioningState = field(default_factory=ProvisioningState)
    faults: dict[str, FaultState] = field(default_factory=dict)  # injected faults, by id (core/controllers/chaos.py)
    # PodDisruptionBudgets created or changed (the manifest) or deleted (None) during the run, by "ns/name": on top of
    # the run configuration's (object_changes.current_pdbs)
    pdbs: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    # Last offset at which room may have appeared (a node turned Ready, a pod finished, a claim was
    # released, slices or classes or claims appeared): unschedulable pods are retried after it.
    room_offset: int = 0
    # What the records applied since the invariant monitor last looked changed (None: nobody looks, the
    # fold keeps nothing): nodes whose usage, reservations or existence changed, pods whose claims or
    # running state changed, and whether any device allocation (claims, reservations) changed.
    # Index of the running pods that finish by themselves: a heap of (done at, running order, pod key);
    # entries of pods no longer running are dropped lazily (see `finishing`).
    run_deadlines: list[tuple[int, int, str]] = field(default_factory=list)
    runs: int = 0  # pods bound so far (the running order of the heap)
    never_ready: dict[str, None] = field(default_factory=dict)  # nodes not Ready yet, in creation order
    touched_nodes: set[str] | None = field(default=None, compare=False, repr=False)
    touched_pods: set[str] | None = field(default=None, compare=False, repr=False)
    touched_allocations: bool = field(default=False, compare=False, repr=False)
    # Every node whose usage, reservations or existence changed, in fold order: a journal that the
    # scheduler's feasibility cache reads on from where it stopped, rather than look at every node.
    usage_changes: list[str] = field(default_factory=list, compare=False, repr=False)
    _view: int = 0
    jobs: dict[str, JobState] = field(default_factory=dict)  # batch/v1 Jobs and their pods (jobs.py)
    cloud_ops: CloudOps = field(default_factory=CloudOps)  # deletions, pending instances, preemptions (cloud_ops.py)
    scale_down: ScaleDownStatus = field(default_factory=ScaleDownStatus)  # the autoscaler's own (scale_down.py)
    # cluster-autoscaler's Events (core/log/events_autoscaler.py): "<reason> <object key>" -> (when, message) of the
    # last one; the autoscaler's 5-minute event filter and the pending reason read it
    autoscaler_events: dict[str, tuple[int, str]] = field(default_factory=dict)
    # Every node created ("c"), Ready for the first time ("r") or deleted ("d"), as (what, name) in fold
    # order: a journal that the drivers reactor reads on from where it stopped (core/controllers/drivers_cache.py)
    node_changes: list[tuple[str, str]] = field(default_factory=list, compare=False, repr=False)

    def _on_autoscaler_event(self, t: int, event: object) -> bool:
        """Record an AutoscalerEvent (False: not one). Called by the fold for events without a handler."""
        if not isinstance(event, AutoscalerEvent):
            return False
        self.autoscaler_events[f"{event.reason} {event.involved}"] = (t, event.message)
        return True

    def version(self, key: str) -> int:
        return self.versions.get(key, 0)

    def free_by_node(self, resource: str) -> dict[str, int]:
        """Free amount of one resource (e.g. nvidia.com/gpu) on every Ready node."""
        return {name: n.free(resource) for name, n in self.nodes.items() if n.ready}

    def pending_pods(self) -> list[PodState]:
        return [self.pods[k] for k in self.pods_by_phase[PENDING]]


    # ------------------------------------------------------------------ indexes

    def finishing(self, now: int) -> tuple[list[str], int | None]:
        """The running pods whose run time is over at `now`, in running order, and the earliest time
        another one's is (None: none)."""
        heap, running = self.run_deadlines, self.pods_by_phase[RUNNING]
        due: list[tuple[int, str]] = []
        nxt: int | None = None
        stack = [0]
        size = len(heap)
        while stack:
            i = stack.pop()
            if i >= size:
                continue
            done_at, seq, key = heap[i]
            live = key in running
            if done_at > now:
                if nxt is not None and done_at >= nxt:
                    continue  # everything below is later still
                if live:
                    nxt = done_at
                    continue
            elif live:
                due.append((seq, key))
            stack.append(2 * i + 1)
            stack.append(2 * i + 2)
        due.sort()
        # once each: a terminating pod has two deadlines (its run's end, its grace period's) that may both be due
        return list(dict.fromkeys(key for _, key in due)), nxt

    def gang_running(self, gang: str) -> int:
        """Members of a gang that are bound and not finished (upstream's AssignedPods: the scheduler's
        cache drops pods once they terminate)."""
        running = self.pods_by_phase[RUNNING]
        return sum(1 for key in self.gang.members.get(gang, ()) if key in running)

    def _touch_dra(self, event: object) -> None:
        """Invariant bookkeeping for the DRA events (see `touched_pods`)."""
        assert self.touched_pods is not None
        if isinstance(event, ClaimAllocated | ClaimReleased | ClaimReserved):
            self.touched_pods.add(event.pod)
            if not isinstance(event, ClaimReserved):
                self.touched_allocations = True
        elif isinstance(event, ResourceClaimCreated):
            self.touched_pods.add(event.pod)  # a new claim is created unallocated

    def _touch(self, node: str, pod: str = "") -> None:
        self.usage_changes.append(node)
        if self.touched_nodes is not None:
            self.touched_nodes.add(node)
        if pod and self.touched_pods is not None:
            self.touched_pods.add(pod)

    def _node_born(self, node: str) -> None:
        """A node is created (the fold's journals)."""
        self._touch(node)
        self.node_changes.append(("c", node))

    def _node_gone(self, node: str) -> None:
        """A node is deleted (the fold's journals)."""
        self._touch(node)
        self.node_changes.append(("d", node))

    def _first_ready(self, node: str) -> None:
        """A node turned Ready for the first time."""
        self.never_ready.pop(node, None)
        self.node_changes.append(("r", node))

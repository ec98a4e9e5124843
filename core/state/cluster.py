"""ClusterState: the cluster as a pure fold over the log.

Nothing else holds authoritative state: every reactor's view, the simulator, verify and the summary
are all this fold applied to a prefix of the log. The fold is total: an event that makes no sense
(binding an unknown pod, say) is applied as far as it can be and noted in `anomalies`, which the
invariants report, because the log is the truth and refusing to read it would hide the bug.

Applying the same offset twice changes nothing (`apply` skips offsets it has seen), which is what
at-least-once delivery needs.

The per-object records the fold keeps (`NodeState`, `PodState`, `Condition`, the pod phases) are
defined in objects.py and re-exported here, so reactors, tools and tests import them from here.
Its fields, the indexes it keeps beside the objects and the queries over them are in indexes.py
(`ClusterIndexes`, which ClusterState subclasses without adding a field); this module is the fold.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..kube.manifests import node_allocatable, pod_requests
from ..log.events import (
    ClaimReleased,
    CompositePodGroupCreated,
    DeviceClassCreated,
    FaultApplied,
    FaultInjected,
    JobCreated,
    NodeCreated,
    NodeDeleted,
    NodeGroupDefined,
    NodeNotReady,
    NodeProvisioning,
    NodeReady,
    NodeTaintsChanged,
    PodBound,
    PodCreated,
    PodEvicted,
    PodFinished,
    PodGroupConditionSet,
    PodGroupCreated,
    PodNominated,
    PodReserved,
    PodUngated,
    PodUnreserved,
    PodUnschedulable,
    Record,
    ResourceClaimCreated,
    ResourceClaimTemplateCreated,
    ResourceSlicePublished,
    RunStarted,
    ScaleUpFailed,
    ScaleUpRequested,
    ScaleUpTimedOut,
    WorkloadCreated,
)
from .groups import NodeGroupState as NodeGroupState  # re-exported: reactors import it from here
from .indexes import CLOUD_HANDLERS, OBJECT_HANDLERS, RULE_ROOM_EVENTS, ClusterIndexes
from .jobs import job_pod_created, on_job_created
from .objects import FAILED as FAILED
from .objects import PENDING as PENDING
from .objects import RUNNING as RUNNING
from .objects import SUCCEEDED as SUCCEEDED
from .objects import Condition as Condition
from .objects import FaultState as FaultState
from .objects import NodeState as NodeState
from .objects import PodState as PodState
from .objects import replaced_pod, ungated
from .scale_down import HANDLERS as SCALE_DOWN_HANDLERS
from .termination import PodDeleted, PodTerminating, on_pod_deleted, on_pod_terminating

ROOM_EVENTS = (
    NodeReady,
    NodeCreated,
    PodFinished,
    PodEvicted,
    ClaimReleased,
    ResourceSlicePublished,
    DeviceClassCreated,
    ResourceClaimCreated,
    ResourceClaimTemplateCreated,
    NodeGroupDefined,
    WorkloadCreated,
    PodGroupCreated,
    CompositePodGroupCreated,
    PodUnreserved,
    NodeTaintsChanged,  # a taint removed (a NodeReady again is room too, listed above)
)
ROOM_TYPES = frozenset((*ROOM_EVENTS, *RULE_ROOM_EVENTS))  # a rule deleted or changed (device_taints.py)


class ClusterState(ClusterIndexes):
    """The fold: `apply` takes one record into the fields and indexes of :class:`ClusterIndexes`."""

    # ------------------------------------------------------------------ fold

    def apply(self, offset: int, record: Record) -> bool:
        """Apply one record at `offset`; False (and no change) if it was already applied."""
        if offset <= self.offset:
            return False
        if offset != self.offset + 1:
            self.anomalies.append(f"offset {offset}: gap after {self.offset}")
        self.offset = offset
        t = self.t = record.t
        self._view = record.view if record.view >= 0 else offset
        events = record.events
        handlers = _HANDLERS
        for event in events:
            kind = type(event)
            handler = handlers.get(kind)
            if handler is not None:
                handler(self, offset, t, event)
            else:
                self._apply_event(offset, t, event)
            if kind in ROOM_TYPES:
                self.room_offset = offset
        self.events_applied += len(events)
        if self.gang.bound_now:
            self._check_gang_bindings(offset)
        versions = self.versions
        for event in events:  # what Record.writes() lists, without building it (each version is this offset)
            for key in event.touched():
                versions[key] = offset
        return True

    def _check_gang_bindings(self, offset: int) -> None:
        """No partial gang: a record that binds members of a gang leaves at least minCount of them running."""
        for gang in self.gang.bound_now:
            some = next(iter(self.gang.members.get(gang, {})), None)
            ref = self.gang.refs.get(some or "")
            needed = self.gang.min_count(ref) if ref is not None else None
            running = self.gang_running(gang)
            if needed is not None and running < needed:
                self.gang_violations.append(
                    f"offset {offset}: gang {gang} bound with {running} of minCount {needed} members running"
                )
            self.gang.bound[gang] = None
        self.gang.bound_now.clear()

    def _apply_event(self, offset: int, t: int, event: object) -> None:
        """An event without a handler in `_HANDLERS` (the table `apply` dispatches on, by the event's type:
        a `match` over some 30 classes tests them one after the other, for every event of every log):
        DRA and ProvisioningRequest events, which their own parts of the state apply."""
        if self.touched_pods is not None:
            self._touch_dra(event)
        if not self.dra.apply(offset, event, self.anomalies, t) and not self.provisioning.apply(
                offset, t, event, self.anomalies) and not self._on_autoscaler_event(t, event):
            self.anomalies.append(f"offset {offset}: unhandled event {type(event).__name__}")

    def _on_pod_unschedulable(self, offset: int, t: int, event: PodUnschedulable) -> None:
        pod = self.pods.get(event.pod)
        if pod is None:
            self.anomalies.append(f"offset {offset}: PodUnschedulable for unknown pod {event.pod}")
            return
        pod.condition = Condition("False", event.reason, event.message, event.cause, t, self._view,
                                  event.detail)
        if event.reason == "Unschedulable":
            pod.attempts += 1

    def _on_pod_evicted(self, offset: int, t: int, event: PodEvicted) -> None:
        self._pod_finished(offset, t, PodFinished(pod=event.pod, phase=FAILED))

    def _on_pod_ungated(self, offset: int, t: int, event: PodUngated) -> None:
        pod = self.pods.get(event.pod)
        if pod is None:
            self.anomalies.append(f"offset {offset}: PodUngated for unknown pod {event.pod}")
            return
        pod.manifest = ungated(pod.manifest, event.gates, event.annotations)

    def _on_node_ready(self, offset: int, t: int, event: NodeReady) -> None:
        node = self._known_node(offset, event.name, "NodeReady for")
        if node is None:
            return
        node.ready = True
        if node.ready_t < 0:
            node.ready_t = t
            self._first_ready(node.name)

    def _on_node_not_ready(self, offset: int, t: int, event: NodeNotReady) -> None:
        node = self._known_node(offset, event.name, "NodeNotReady for")
        if node is None:
            return
        node.ready = False

    def _on_node_taints_changed(self, offset: int, t: int, event: NodeTaintsChanged) -> None:
        node = self._known_node(offset, event.name, "taints of")
        if node is None:
            return
        spec = {**(node.manifest.get("spec") or {}), "taints": [dict(x) for x in event.taints]}
        if not event.taints:
            del spec["taints"]
        node.manifest = {**node.manifest, "spec": spec}  # the manifest may be shared: replace it

    def _on_node_deleted(self, offset: int, t: int, event: NodeDeleted) -> None:
        self._node_deleted(offset, event)

    def _on_scale_up_requested(self, offset: int, t: int, event: ScaleUpRequested) -> None:
        group = self.node_groups.get(event.group)
        if group is None:
            self.anomalies.append(f"offset {offset}: scale-up of unknown group {event.group}")
            return
        group.requested += event.delta
        group.unserved.append((event.delta, event.atomic, event.booking))
        self.scale_ups.append((t, event.group, event.delta))

    def _on_scale_up_timed_out(self, offset: int, t: int, event: ScaleUpTimedOut) -> None:
        group = self.node_groups.get(event.group)
        if group is None:
            self.anomalies.append(f"offset {offset}: timed-out scale-up of unknown group {event.group}")
            return
        fresh = [n for n in event.nodes if n not in group.timed_out]
        group.timed_out.update(dict.fromkeys(fresh))
        group.failures.append((t, len(fresh), "timeout"))

    def _on_scale_up_failed(self, offset: int, t: int, event: ScaleUpFailed) -> None:
        group = self.node_groups.get(event.group)
        if group is None:
            self.anomalies.append(f"offset {offset}: failed scale-up of unknown group {event.group}")
            return
        if not group._answer(event.delta):
            self.anomalies.append(f"offset {offset}: {event.delta} nodes of {event.group} failed, "
                                  "more than were requested")
        group.failed += event.delta
        group.failures.append((t, event.delta, event.reason))

    def _on_node_group_defined(self, offset: int, t: int, event: NodeGroupDefined) -> None:
        self.node_groups[event.name] = NodeGroupState(
            name=event.name,
            min=event.min,
            max=event.max,
            provision_delay_ms=event.provision_delay_ms,
            template=event.template,
            cost_per_hour=event.cost_per_hour,
            allocatable=node_allocatable(event.template),
            resource_slices=event.resource_slices,
            zones=event.zones,
            quota=event.quota,
            stock=event.stock,
            failure_rate=event.failure_rate,
            drivers=event.drivers,
            not_ready_ms=event.not_ready_ms,
        )
        self.nodes_by_group.setdefault(event.name, {})

    def _on_run_started(self, offset: int, t: int, event: RunStarted) -> None:
        self.run = event

    def _on_workload_created(self, offset: int, t: int, event: WorkloadCreated) -> None:
        self.gang.workload_created(event)

    def _on_group_event(self, offset: int, t: int, event: Any) -> None:  # PodGroups, composites, nominations
        if (anomaly := self.gang.apply_group_event(offset, t, event)) is not None:
            self.anomalies.append(f"offset {offset}: {anomaly}")

    def _on_pod_reserved(self, offset: int, t: int, event: PodReserved) -> None:
        self._pod_reserved(offset, event)

    def _on_pod_unreserved(self, offset: int, t: int, event: PodUnreserved) -> None:
        self._pod_unreserved(offset, event)

    def _on_fault_injected(self, offset: int, t: int, event: FaultInjected) -> None:
        if event.fault in self.faults:
            self.anomalies.append(f"offset {offset}: fault {event.fault} injected twice")
            return
        self.faults[event.fault] = FaultState(event.fault, event.kind, event.target, t, event.until_ms,
                                              dict(event.params))

    def _on_fault_applied(self, offset: int, t: int, event: FaultApplied) -> None:
        fault = self.faults.get(event.fault)
        if fault is None or event.phase not in ("start", "end"):
            self.anomalies.append(f"offset {offset}: {event.phase} of unknown fault {event.fault}")
            return
        if event.phase == "start":
            fault.started, fault.effective = True, not event.note
        else:
            fault.ended = True

    def _pod_created(self, offset: int, t: int, event: PodCreated) -> None:
        key = event.key
        if key in self.pods:
            self.anomalies.append(f"offset {offset}: pod {key} created twice")
            return
        spec = event.pod.get("spec", {})
        self.pods[key] = PodState(
            key=key,
            manifest=event.pod,
            requests=pod_requests(event.pod),
            priority=int(spec.get("priority") or 0),
            created_t=t,
            created_offset=offset,
            run_for_ms=event.run_for_ms,
        )
        self.pods_by_phase[PENDING][key] = None
        self.gang.pod_created(offset, key, event.pod)
        job_pod_created(self.jobs, key, event.pod)
        replaced = self.pods.get(replaced_pod(event.pod))
        if replaced is not None:
            replaced.replaced_by = key

    def _pod_bound(self, offset: int, t: int, event: PodBound) -> None:
        pod = self.pods.get(event.pod)
        node = self.nodes.get(event.node)
        if pod is None or node is None:
            self.anomalies.append(f"offset {offset}: binding {event.pod} -> {event.node}: unknown pod or node")
            return
        if pod.node is not None:
            self.anomalies.append(f"offset {offset}: pod {pod.key} bound twice ({pod.node}, {event.node})")
            return
        if not node.ready:
            self.unready_bindings.append(f"pod {pod.key} bound to {node.name} before it was Ready")
        reservation = self.gang.pod_bound(pod.key)
        if reservation is not None:
            self._unhold(reservation.node, reservation.requests)
            self.touched_allocations = True
        self._touch(node.name, pod.key)
        ref = self.gang.refs.get(pod.key)
        if ref is not None:
            self.gang.bound_now[ref.key] = None
        pod.node, pod.bound_t, pod.phase = event.node, t, RUNNING
        pod.condition = Condition("True", "", "", "", t)
        del self.pods_by_phase[PENDING][pod.key]
        self.pods_by_phase[RUNNING][pod.key] = None
        node.pods[pod.key] = None
        node.busy_t = t
        for resource, amount in pod.requests.items():
            node.used[resource] = node.used.get(resource, 0) + amount
        node.used["pods"] = node.used.get("pods", 0) + 1
        self.runs += 1
        if pod.run_for_ms >= 0:
            heapq.heappush(self.run_deadlines, (t + pod.run_for_ms, self.runs, pod.key))

    def _known_node(self, offset: int, name: str, what: str) -> NodeState | None:
        """The node an event is about, or None with the anomaly noted (`<what> unknown node <name>`)."""
        node = self.nodes.get(name)
        if node is None:
            self.anomalies.append(f"offset {offset}: {what} unknown node {name}")
        return node

    def _pod_reserved(self, offset: int, event: PodReserved) -> None:
        pod = self.pods.get(event.pod)
        node = self.nodes.get(event.node)
        if pod is None or node is None or pod.phase != PENDING or event.pod in self.gang.reservations:
            self.anomalies.append(f"offset {offset}: reservation {event.pod} -> {event.node}: unknown, "
                                  "not pending or already reserved")
            return
        self.gang.reserve(event, pod.requests)
        self._touch(node.name, pod.key)
        self.touched_allocations = True
        for resource, amount in pod.requests.items():
            node.reserved[resource] = node.reserved.get(resource, 0) + amount
        node.reserved["pods"] = node.reserved.get("pods", 0) + 1

    def _pod_unreserved(self, offset: int, event: PodUnreserved) -> None:
        reservation = self.gang.reservations.pop(event.pod, None)
        if reservation is None:
            self.anomalies.append(f"offset {offset}: {event.pod} unreserved but was not reserved")
            return
        self._unhold(reservation.node, reservation.requests)
        self.touched_allocations = True
        self.gang.timeouts += 1
        pod = self.pods[event.pod]
        if pod.condition is not None:
            # Its own release is no reason to retry it: only room appearing after this record is.
            pod.condition = replace(pod.condition, offset=offset)

    def _unhold(self, node_name: str, requests: dict[str, int]) -> None:
        node = self.nodes.get(node_name)
        if node is None:
            return
        self._touch(node_name)
        for resource, amount in requests.items():
            node.reserved[resource] = node.reserved.get(resource, 0) - amount
        node.reserved["pods"] = node.reserved.get("pods", 0) - 1

    def _pod_finished(self, offset: int, t: int, event: PodFinished, node: NodeState | None = None) -> None:
        pod = self.pods.get(event.pod)
        if pod is None or pod.phase != RUNNING or pod.node is None:
            self.anomalies.append(f"offset {offset}: {event.pod} finished but was not running")
            return
        node = node or self.nodes.get(pod.node)
        self._touch(pod.node, pod.key)
        if node is not None:
            node.busy_t = t
            node.pods.pop(pod.key, None)
            for resource, amount in pod.requests.items():
                node.used[resource] = node.used.get(resource, 0) - amount
            node.used["pods"] = node.used.get("pods", 0) - 1
        del self.pods_by_phase[RUNNING][pod.key]
        phase = event.phase if event.phase in (SUCCEEDED, FAILED) else SUCCEEDED
        self.pods_by_phase[phase][pod.key] = None
        pod.phase, pod.finished_t = phase, t
        heap, running = self.run_deadlines, self.pods_by_phase[RUNNING]
        while heap and heap[0][2] not in running:
            heapq.heappop(heap)

    def _node_created(self, offset: int, t: int, event: NodeCreated) -> None:
        if event.name in self.nodes:
            self.anomalies.append(f"offset {offset}: node {event.name} created twice")
            return
        vm = self.provisioning_nodes.pop(event.name, None)
        self.provisioning_t.pop(event.name, None)
        self._node_born(event.name)
        self.nodes[event.name] = NodeState(
            name=event.name,
            group=event.group,
            manifest=event.node,
            allocatable=node_allocatable(event.node),
            created_t=t,
            ready_at=event.ready_at,
            publish_delay_ms=dict(vm.publish_delay_ms) if vm is not None else {},
        )
        self.never_ready[event.name] = None
        if event.group:
            group = self.node_groups.get(event.group)
            if group is None:
                self.anomalies.append(f"offset {offset}: node {event.name} of unknown group {event.group}")
            else:
                group.created += 1
                group.initial += event.initial
                if vm is None:  # not made by the cloud (starting nodes, tools): it takes the next ordinal
                    group.next_index += 1
                    if not event.initial:
                        group._answer(1)  # made outside the cloud for a scale-up: that node is answered
            self.nodes_by_group.setdefault(event.group, {})[event.name] = None

    def _node_provisioning(self, offset: int, t: int, event: NodeProvisioning) -> None:
        group = self.node_groups.get(event.group)
        if group is None or event.name in self.nodes or event.name in self.provisioning_nodes:
            self.anomalies.append(f"offset {offset}: node {event.name} provisioned twice or in unknown group "
                                  f"{event.group}")
            return
        if not group._answer(1):
            self.anomalies.append(f"offset {offset}: node {event.name} provisioned for no scale-up of {event.group}")
        group.provisioned += 1
        group.next_index += 1
        group.delivered_t.append(t)
        self.provisioning_nodes[event.name] = event
        self.provisioning_t[event.name] = t

    def _node_deleted(self, offset: int, event: NodeDeleted) -> None:
        """The node is gone: out of `nodes` and its group, its slices with it (garbage collected with
        the Node upstream). Pods still on it are failed here too, noted as an anomaly: whoever deletes
        a node writes their PodFinished(Failed) first."""
        vm = self.provisioning_nodes.pop(event.name, None)
        self.provisioning_t.pop(event.name, None)
        if vm is not None:
            group = self.node_groups.get(vm.group)
            if group is not None:
                group.cancelled += 1
            return
        node = self.nodes.pop(event.name, None)
        if node is None:
            self.anomalies.append(f"offset {offset}: deletion of unknown node {event.name}")
            return
        self._node_gone(event.name)
        self.never_ready.pop(event.name, None)
        if node.pods:
            self.anomalies.append(f"offset {offset}: node {event.name} deleted with pods still on it")
            for key in list(node.pods):
                self._pod_finished(offset, self.t, PodFinished(pod=key, phase=FAILED), node)
        if node.group:
            self.nodes_by_group.get(node.group, {}).pop(node.name, None)
            group = self.node_groups.get(node.group)
            if group is not None:
                group.deleted += 1
        self.dra.remove_node_slices(node.name)


# The fold's dispatch table (see ClusterState._apply_event).
_HANDLERS: dict[type, Callable[[ClusterState, int, int, Any], None]] = {**OBJECT_HANDLERS,  # object_changes.py
    PodCreated: ClusterState._pod_created,
    PodBound: ClusterState._pod_bound,
    PodUnschedulable: ClusterState._on_pod_unschedulable,
    PodFinished: ClusterState._pod_finished,
    PodEvicted: ClusterState._on_pod_evicted,
    PodUngated: ClusterState._on_pod_ungated,
    NodeCreated: ClusterState._node_created,
    NodeReady: ClusterState._on_node_ready,
    NodeNotReady: ClusterState._on_node_not_ready,
    NodeTaintsChanged: ClusterState._on_node_taints_changed,
    NodeDeleted: ClusterState._on_node_deleted,
    NodeProvisioning: ClusterState._node_provisioning,
    ScaleUpRequested: ClusterState._on_scale_up_requested,
    ScaleUpTimedOut: ClusterState._on_scale_up_timed_out,
    ScaleUpFailed: ClusterState._on_scale_up_failed,
    NodeGroupDefined: ClusterState._on_node_group_defined,
    RunStarted: ClusterState._on_run_started,
    WorkloadCreated: ClusterState._on_workload_created,
    PodGroupCreated: ClusterState._on_group_event,
    PodGroupConditionSet: ClusterState._on_group_event,
    PodNominated: ClusterState._on_group_event,
    CompositePodGroupCreated: ClusterState._on_group_event,
    PodReserved: ClusterState._on_pod_reserved,
    PodUnreserved: ClusterState._on_pod_unreserved,
    FaultInjected: ClusterState._on_fault_injected, FaultApplied: ClusterState._on_fault_applied, **SCALE_DOWN_HANDLERS,
    JobCreated: on_job_created, PodTerminating: on_pod_terminating,  # (termination.py: graceful deletion)
    PodDeleted: on_pod_deleted, **CLOUD_HANDLERS}  # (termination.py: deletion at once; cloud_ops.py: the cloud)

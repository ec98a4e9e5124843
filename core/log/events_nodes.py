"""Events of the run and its configuration, of nodes and of pods (the core/v1 part of the schema; the
tagged union and the codec are in :mod:`.events`)."""

from __future__ import annotations

from typing import Any

import msgspec

from .event_base import Event, group_key, node_key, pod_key

# ---------------------------------------------------------------- run and configuration


class RunStarted(Event, tag="RunStarted", frozen=True):
    """First record of every run: what is needed to rebuild the reactors exactly (for verify)."""

    scenario: str
    seed: int
    config: dict[str, Any]  # reactor settings, see core/run/config.py run_config
    mode: str = "sim"  # sim | local | cluster
    speed: float = 1.0  # live runs: cluster ms per wall ms
    epoch: float = 0.0  # live runs: the wall-clock time (Unix s) of cluster time 0; an input like any other

    def touched(self) -> tuple[str, ...]:
        return ("run",)


class StockWindow(msgspec.Struct, frozen=True):
    """The cloud has at most `available` more nodes of a group to deliver in [from_ms, until_ms)."""

    from_ms: int
    until_ms: int  # -1: until the end of the run
    available: int


class UnhealthyDevice(msgspec.Struct, frozen=True):
    """A device its driver reports unhealthy `after_ms` after it first published (a device taint)."""

    device: str
    after_ms: int


class DriverSpec(msgspec.Struct, frozen=True):
    """How one DRA driver of a group's nodes behaves: when it publishes, restarts, reports faults."""

    name: str
    publish_delay_ms: tuple[int, int] = (0, 0)  # after the node turns Ready, drawn per node by the cloud
    restart_after_ms: int = -1  # restart (republish, generation + 1) this long after publishing; -1 never
    unhealthy: tuple[UnhealthyDevice, ...] = ()


class NodeGroupDefined(Event, tag="NodeGroupDefined", frozen=True):
    name: str
    min: int
    max: int
    provision_delay_ms: tuple[int, int]
    template: dict[str, Any]  # v1 Node manifest
    cost_per_hour: float = 0.0
    resource_slices: tuple[dict[str, Any], ...] = ()  # ResourceSlice templates its drivers publish
    # The cloud and the nodes (core/controllers/cloud.py, lifecycle.py, drivers.py); defaults: as before.
    zones: tuple[str, ...] = ()  # topology.kubernetes.io/zone of new nodes, round-robin
    quota: int = -1  # max nodes of the group the cloud runs at once (-1: no quota)
    stock: tuple[StockWindow, ...] = ()
    failure_rate: float = 0.0  # probability that one node of a request is not delivered
    drivers: tuple[DriverSpec, ...] = ()  # drivers not listed publish when the node turns Ready
    not_ready_ms: int = 0  # a new node registers this long before it turns Ready (within provision_delay)

    def touched(self) -> tuple[str, ...]:
        return (group_key(self.name),)


# ---------------------------------------------------------------- nodes


class NodeCreated(Event, tag="NodeCreated", frozen=True):
    """A node object exists (registered, not yet Ready). `group` is "" for nodes outside any group."""

    name: str
    group: str
    node: dict[str, Any]  # v1 Node manifest, name filled in
    ready_at: int = -1  # cluster ms when the node will turn Ready (-1: unknown)
    initial: bool = False  # part of the scenario's starting cluster, not of a scale-up

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),) + ((group_key(self.group),) if self.group else ())


class NodeReady(Event, tag="NodeReady", frozen=True):
    name: str

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


class NodeProvisioning(Event, tag="NodeProvisioning", frozen=True):
    """The cloud accepted one node of a scale-up: a VM is being made, the Node object does not exist yet.

    Its timing is the cloud's decision, drawn with the seeded source when the request is served and
    recorded here, so that the fold counts the node as coming and lifecycle/drivers replay it exactly."""

    name: str
    group: str
    node: dict[str, Any]  # the v1 Node manifest it registers with (name, group and zone labels filled in)
    register_at: int  # cluster ms when the kubelet registers the Node (NodeCreated, NotReady)
    ready_at: int  # cluster ms when it turns Ready
    publish_delay_ms: dict[str, int] = msgspec.field(default_factory=dict)  # driver -> ms after Ready

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name), group_key(self.group))


class NodeNotReady(Event, tag="NodeNotReady", frozen=True):
    """The node stopped reporting Ready (kubelet down, node failure): nothing new is placed on it."""

    name: str

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


class NodeTaintsChanged(Event, tag="NodeTaintsChanged", frozen=True):
    """spec.taints of the node replaced by `taints` (e.g. the autoscaler's ToBeDeletedByClusterAutoscaler)."""

    name: str
    taints: tuple[dict[str, Any], ...]

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


class NodeDeleted(Event, tag="NodeDeleted", frozen=True):
    """The Node object is gone (with its ResourceSlices). Pods still on it must be finished as Failed
    earlier in the same record (`lifecycle.delete_node` writes both); a node still provisioning is
    cancelled."""

    name: str
    reason: str = ""

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


# ---------------------------------------------------------------- pods


class PodCreated(Event, tag="PodCreated", frozen=True):
    pod: dict[str, Any]  # v1 Pod manifest, namespace filled in
    run_for_ms: int = -1  # how long it runs once bound (-1: until the end)

    @property
    def key(self) -> str:
        meta = self.pod["metadata"]
        return pod_key(meta.get("namespace", "default"), meta["name"])

    def touched(self) -> tuple[str, ...]:
        return (self.key,)


class PodBound(Event, tag="PodBound", frozen=True):
    """The scheduler's binding. Writes the node too, so two bindings from stale views conflict."""

    pod: str  # pod key
    node: str

    def touched(self) -> tuple[str, ...]:
        return (self.pod, node_key(self.node))


class PodUnschedulable(Event, tag="PodUnschedulable", frozen=True):
    """PodScheduled=False. `reason` is the condition reason as upstream writes it (`Unschedulable`);
    `cause` is dralab's structured pending reason (capacity, topology, fragmentation, ...)."""

    pod: str
    reason: str
    message: str
    cause: str
    detail: str = ""  # dralab's evidence for the cause (e.g. the allocator's explanation)

    def touched(self) -> tuple[str, ...]:
        return (self.pod,)


class PodFinished(Event, tag="PodFinished", frozen=True):
    pod: str
    phase: str = "Succeeded"

    def touched(self) -> tuple[str, ...]:
        return (self.pod,)


class PodEvicted(Event, tag="PodEvicted", frozen=True):
    """The pod was evicted (the Eviction API, as cluster-autoscaler drains a node it scales down): it
    ends Failed, with the DisruptionTarget condition upstream writes; its controller, if any, makes a
    replacement. dralab models a zero grace period: the pod is gone in the same record."""

    pod: str
    node: str
    reason: str = ""  # who evicted it and why, e.g. "scale-down: unneeded"

    def touched(self) -> tuple[str, ...]:
        return (self.pod,)


class PodTerminating(Event, tag="PodTerminating", frozen=True, omit_defaults=True):
    """Graceful deletion of a running pod (the scheduler deleting a preemption victim with the pod's own
    terminationGracePeriodSeconds, as DefaultPreemption's DeleteOptions do): the pod gets its
    deletionTimestamp and the DisruptionTarget condition but keeps its node's resources and devices for
    `grace_ms`; then the lifecycle reactor ends it (PodEvicted) and its claims are released. Why an event of
    its own: PodEvicted is instantaneous, and the time a victim still holds its GPUs is what a preemptor
    waits for (core/state/termination.py folds it)."""

    pod: str
    node: str
    grace_ms: int
    reason: str = ""
    # the DisruptionTarget condition's reason: "" is the scheduler's PreemptionByScheduler; the device taint
    # eviction controller writes DeletionByDeviceTaintManager. Omitted when empty (omit_defaults), so the events
    # written before it existed encode as they did.
    condition: str = ""

    def touched(self) -> tuple[str, ...]:
        return (self.pod,)


class PodUngated(Event, tag="PodUngated", frozen=True):
    """One update of a pod: scheduling gates removed and annotations added (Kueue admitting a workload:
    it removes its `kueue.x-k8s.io/admission` gate and applies the admission check's podSetUpdates, e.g.
    the annotations that make the pod consume its ProvisioningRequest). Gates can only be removed."""

    pod: str  # pod key
    gates: tuple[str, ...]
    annotations: dict[str, str] = msgspec.field(default_factory=dict)

    def touched(self) -> tuple[str, ...]:
        return (self.pod,)

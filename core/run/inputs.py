"""A scenario as the external inputs of a run: the records the world appends, with their times.

Everything a reactor did not decide enters the log through here: the run's configuration, node
groups, the starting nodes, pod arrivals, faults, and objects created, changed or deleted during the run.
Their ids are stable (`scenario/...`) so that a retried append after a crash is recognised as a duplicate.
"""

from __future__ import annotations

from typing import Any

from ..cluster.nodes import node_from_template, node_name, zone_of
from ..kube.kueue import KUEUE_KINDS
from ..kube.manifests import node_allocatable
from ..log.events import (
    AnyEvent,
    CompositePodGroupCreated,
    DeviceBindingDefined,
    DeviceClassCreated,
    DeviceTaintRuleCreated,
    DeviceTaintRuleDeleted,
    FaultInjected,
    JobCreated,
    NodeCreated,
    NodeGroupDefined,
    NodeReady,
    ObjectCreated,
    ObjectDeleted,
    ObjectUpdated,
    PodCreated,
    PodGroupCreated,
    PodTemplateCreated,
    ProvisioningRequestCreated,
    Record,
    ResourceClaimCreated,
    ResourceClaimTemplateCreated,
    ResourceSlicePublished,
    RunStarted,
    WorkloadCreated,
)
from ..scenario.dra import render_slice_templates
from ..scenario.load import Scenario, replica_name
from ..scenario.model import ObjectChange
from ..state.cluster import NodeGroupState
from .config import run_config

SOURCE = "scenario"


def setup_record(scenario: Scenario, seed: int, mode: str = "sim", speed: float = 1.0, epoch: float = 0.0,
                 drivers_shards: int = 1) -> Record:
    config = run_config(scenario, drivers_shards=drivers_shards)
    events: list[AnyEvent] = [
        RunStarted(scenario=scenario.name, seed=seed, config=config, mode=mode, speed=speed, epoch=epoch)
    ]
    groups: dict[str, NodeGroupState] = {}
    for g in scenario.node_groups:
        events.append(
            NodeGroupDefined(
                name=g.name,
                min=g.min,
                max=g.max,
                provision_delay_ms=(g.provision_delay_ms[0], g.provision_delay_ms[1]),
                template=g.template,
                cost_per_hour=g.cost_per_hour,
                resource_slices=tuple(g.resource_slices),
                zones=tuple(g.zones),
                quota=g.quota,
                stock=tuple(g.stock),
                failure_rate=g.failure_rate,
                drivers=tuple(g.drivers),
                not_ready_ms=g.not_ready_ms,
            )
        )
        if g.binding:  # drivers' answers to binding conditions (only when set: older logs stay as they were)
            events.append(DeviceBindingDefined(group=g.name, rules=g.binding))
        if g.cloud_ops is not None:  # a misbehaving cloud (only when set: core/log/events_cloud.py)
            events.append(g.cloud_ops)
        groups[g.name] = NodeGroupState(
            g.name, g.min, g.max, g.provision_delay_ms, g.template, g.cost_per_hour, node_allocatable(g.template),
            tuple(g.resource_slices), zones=tuple(g.zones),
        )
    events.extend(object_events(scenario.objects))
    index: dict[str, int] = {}
    for initial in scenario.nodes:
        for _ in range(initial.count):
            i = index.get(initial.group, 0)
            index[initial.group] = i + 1
            name = node_name(initial.group, i)
            node = node_from_template(groups[initial.group], name, zone_of(groups[initial.group].zones, i))
            events.append(NodeCreated(name=name, group=initial.group, node=node, ready_at=0, initial=True))
            events.append(NodeReady(name=name))
            events.extend(ResourceSlicePublished(manifest=m)
                          for m in render_slice_templates(list(groups[initial.group].resource_slices), name))
    return Record(id=f"{SOURCE}/setup", source=SOURCE, view=-1, t=0, events=tuple(events))


OBJECT_ORDER = ("DeviceClass", "ResourceClaimTemplate", "ResourceClaim", "Workload", "CompositePodGroup", "PodGroup",
                "PodTemplate", "ProvisioningRequest", "DeviceTaintRule")


def object_events(objects: list[dict[str, Any]]) -> list[AnyEvent]:
    """The scenario's starting objects (classes first, then templates, shared claims, Workloads). Kueue's
    objects are not events: they configure the broker reactor (recorded in the run config)."""
    # Kueue's objects configure the broker; PriorityClasses were applied at admission (PodGroups carry priority)
    ranked = sorted((o for o in objects if o["kind"] not in KUEUE_KINDS  # PDBs: the scheduler's (run config)
                     and o["kind"] not in ("PriorityClass", "PodDisruptionBudget")),
                    key=lambda o: OBJECT_ORDER.index(o["kind"]))
    events: list[AnyEvent] = []
    for obj in ranked:
        kind = obj["kind"]
        if kind == "DeviceClass":
            events.append(DeviceClassCreated(manifest=obj))
        elif kind == "ResourceClaimTemplate":
            events.append(ResourceClaimTemplateCreated(manifest=obj))
        elif kind == "Workload":
            events.append(WorkloadCreated(manifest=obj))
        elif kind == "PodGroup":
            events.append(PodGroupCreated(manifest=obj))
        elif kind == "CompositePodGroup":
            events.append(CompositePodGroupCreated(manifest=obj))
        elif kind == "PodTemplate":
            events.append(PodTemplateCreated(manifest=obj))
        elif kind == "ProvisioningRequest":
            events.append(ProvisioningRequestCreated(manifest=obj))
        elif kind == "DeviceTaintRule":  # core/dra/taint_rules.py: its taint counts from the start
            events.append(DeviceTaintRuleCreated(manifest=obj, time_added_ms=0))
        else:
            events.append(ResourceClaimCreated(manifest=obj))
    return events


def tree_copy(value: Any) -> Any:
    """A copy of a manifest (the dicts, lists and scalars YAML and msgpack give): each replica of an
    arrival owns its pod. `copy.deepcopy` does the same with a memo and dispatch a manifest never needs
    (it was 5% of a chaos run's time)."""
    if isinstance(value, dict):
        return {k: tree_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [tree_copy(v) for v in value]
    return value


def arrival_records(scenario: Scenario) -> list[Record]:
    records = []
    for n, arrival in enumerate(scenario.workload):
        if arrival.job is not None:  # a Job: its controller (core/controllers/jobs.py) creates the pods
            job = JobCreated(manifest=tree_copy(arrival.job),
                             run_for_ms=-1 if arrival.run_for_ms is None else arrival.run_for_ms)
            records.append(Record(id=f"{SOURCE}/arrival/{n}", source=SOURCE, view=-1, t=arrival.at_ms, events=(job,)))
            continue
        pods: list[AnyEvent] = []
        for i in range(arrival.count):
            pod: dict[str, Any] = tree_copy(arrival.pod)
            meta = pod["metadata"]
            meta["name"] = replica_name(meta["name"], arrival.count, i)
            pods.append(PodCreated(pod=pod, run_for_ms=-1 if arrival.run_for_ms is None else arrival.run_for_ms))
        records.append(Record(id=f"{SOURCE}/arrival/{n}", source=SOURCE, view=-1, t=arrival.at_ms, events=tuple(pods)))
    return records


def fault_records(scenario: Scenario) -> list[Record]:
    """One record per fault of `spec.faults`, at its time (core/scenario/faults.py)."""
    return [
        Record(id=f"{SOURCE}/fault/{n}", source=SOURCE, view=-1, t=f.at_ms, events=(FaultInjected(
            fault=f"fault/{n}", kind=f.kind, target=f.target,
            until_ms=-1 if f.for_ms is None else f.at_ms + f.for_ms, params=dict(f.params)),))
        for n, f in enumerate(scenario.faults)
    ]


def change_events(change: ObjectChange) -> tuple[AnyEvent, ...]:
    """The events of one object change (core/scenario/object_changes.py): a creation is the kind's own `*Created`
    event, as at t=0; a DeviceTaintRule keeps its own events (created or replaced, deleted), with its timeAdded."""
    if change.kind == "DeviceTaintRule":
        if change.op == "delete":
            return (DeviceTaintRuleDeleted(name=change.name),)
        return (DeviceTaintRuleCreated(manifest=tree_copy(change.manifest), time_added_ms=change.time_added_ms),)
    if change.op == "create" and change.kind == "PodDisruptionBudget":  # no event of its own (spec.objects': config)
        return (ObjectCreated(manifest=tree_copy(change.manifest)),)
    if change.op == "create":
        return tuple(object_events([tree_copy(change.manifest)]))
    if change.op == "update":
        return (ObjectUpdated(manifest=tree_copy(change.manifest)),)
    return (ObjectDeleted(kind=change.kind, name=change.name, namespace=change.namespace),)


def object_change_records(scenario: Scenario) -> list[Record]:
    """One record per object change of `spec.workload`, at its time, with the entry's index as its id."""
    return [Record(id=f"{SOURCE}/object/{c.entry}", source=SOURCE, view=-1, t=c.at_ms, events=change_events(c))
            for c in scenario.object_changes]


def scenario_inputs(
    scenario: Scenario, seed: int, mode: str = "sim", speed: float = 1.0, epoch: float = 0.0, drivers_shards: int = 1
) -> list[Record]:
    """All external inputs, in time order (setup first, at t=0). `drivers_shards`: live runs' driver actors."""
    return [setup_record(scenario, seed, mode, speed, epoch, drivers_shards),
            *sorted([*arrival_records(scenario), *fault_records(scenario), *object_change_records(scenario)],
                    key=lambda r: r.t)]

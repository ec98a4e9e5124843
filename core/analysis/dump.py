"""A cluster dump (an :class:`~dralab.core.dra.model.Inventory`) as the log record that folds into it.

The reactors only ever see a :class:`~dralab.core.state.cluster.ClusterState`, the fold of a log; to run them on a
real cluster's ``kubectl get ... -o yaml`` (``dralab whatif``), the dump is turned into the events that
would have led to it. The API server's status fields become the events that write them in dralab's log:
a claim's ``status.allocation`` a :class:`~dralab.core.log.events.ClaimAllocated`, its ``reservedFor`` pods
:class:`~dralab.core.log.events.ClaimReserved`, a pod's ``spec.nodeName`` a
:class:`~dralab.core.log.events.PodBound`, a finished pod a :class:`~dralab.core.log.events.PodFinished` (so the
claim controller frees what it still holds, as kube-controller-manager would). Read under a 1.36/1.37 profile,
its PodGroups and CompositePodGroups are created before the pods (so a pod's ``spec.schedulingGroup`` puts it in
its group), and their ``status.conditions`` become the PodGroupConditionSet events of earlier cycles. A pod's
other status (``nominatedNodeName``, a terminating pod's ``deletionTimestamp`` and DisruptionTarget) stays in its
manifest for the scheduler to read; a terminating pod still holds its node.

Pods are read as ``dralab audit`` reads them (:func:`dralab.core.analysis.audit_snapshot.is_pending`, a node's Ready
condition, absent meaning Ready). What cannot be placed in the fold is left out and said in
:attr:`DumpRecord.skipped` rather than noted as an anomaly: a pod bound to a node missing from the dump
takes nothing the reactors could see, a finished pod that never ran holds nothing.

Generated claims (from a ResourceClaimTemplate) are linked to their pod, as the resourceclaim controller
records it, so that the scheduler finds them through ``dra.pod_claims`` instead of asking the claim
controller for new ones: from the pod's ``status.resourceClaimStatuses``, else from the claim's
``resource.kubernetes.io/pod-claim-name`` annotation and controlling Pod owner reference, else by the name
``<pod>-<pod claim>`` (what ``dralab audit`` assumes too).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..cluster.pod_claims import POD_CLAIM_ANNOTATION
from ..dra.api import scheduling_objects
from ..dra.extended import POD_CLAIM
from ..dra.model import Claim, Inventory
from ..dra.taint_rules import inventory_rules
from ..log.events import (
    AnyEvent,
    ClaimAllocated,
    ClaimDeviceConditionSet,
    ClaimReserved,
    CompositePodGroupCreated,
    DeviceClassCreated,
    DeviceTaintRuleCreated,
    NodeCreated,
    NodeReady,
    PodBound,
    PodCreated,
    PodFinished,
    PodGroupConditionSet,
    PodGroupCreated,
    Record,
    ResourceClaimCreated,
    ResourceClaimTemplateCreated,
    ResourceSlicePublished,
    WorkloadCreated,
    claim_key,
    pod_key,
)
from .audit_snapshot import is_pending, node_ready

__all__ = ["SOURCE", "DumpRecord", "dump_record"]

SOURCE = "dump"
_DONE = ("Succeeded", "Failed")


@dataclass(frozen=True)
class DumpRecord:
    """The dump as one external-input record, and what it holds that the fold cannot."""

    record: Record
    pending: tuple[str, ...]  # pod keys (pod/ns/name) of the dump's pending pods, in creation order
    skipped: tuple[str, ...] = field(default=())  # "ns/name: why", objects left out of the record


def _names(manifest: dict[str, Any]) -> tuple[str, str]:
    meta = manifest.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _creation_order(pods: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Pods by creationTimestamp (RFC 3339 strings sort as times), else by ``status.startTime``, then
    namespace/name: the scheduler breaks ties between equal priorities by arrival, preemption between equal
    victims by start time (upstream's MoreImportantPod: the earlier started is kept), and a dump's order is
    the API server's, by name."""
    def when(pod: dict[str, Any]) -> str:
        return str((pod.get("metadata") or {}).get("creationTimestamp") or (pod.get("status") or {}).get("startTime")
                   or "")
    return sorted(pods.items(), key=lambda kv: (when(kv[1]), kv[0]))


def _claim_owners(inv: Inventory) -> dict[str, tuple[str, str]]:
    """Generated claim "ns/name" -> (pod key, pod claim name), for claims made from a pod's template, and a pod's
    special claim for DRA-served extended resources (status.extendedResourceClaimStatus: dralab's POD_CLAIM)."""
    owners: dict[str, tuple[str, str]] = {}
    by_pod: dict[str, dict[str, str]] = {}  # "ns/pod" -> {pod claim name: template name}
    for key, pod in inv.pods.items():
        ns, name = _names(pod)
        special = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        if isinstance(special, str) and f"{ns}/{special}" in inv.claims:  # DRA extended resources (KEP-5004)
            owners[f"{ns}/{special}"] = (pod_key(ns, name), POD_CLAIM)
        entries = {str(e.get("name")): str(e.get("resourceClaimTemplateName"))
                   for e in (pod.get("spec") or {}).get("resourceClaims") or []
                   if isinstance(e, dict) and e.get("resourceClaimTemplateName")}
        if not entries:
            continue
        by_pod[key] = entries
        for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if isinstance(status, dict) and status.get("name") in entries and status.get("resourceClaimName"):
                owners.setdefault(f"{ns}/{status['resourceClaimName']}", (pod_key(ns, name), str(status["name"])))
    for key, claim in inv.claims.items():
        if key in owners:
            continue
        meta = claim.manifest.get("metadata") or {}
        pod_claim = (meta.get("annotations") or {}).get(POD_CLAIM_ANNOTATION)
        owner = next((ref.get("name") for ref in meta.get("ownerReferences") or []
                      if isinstance(ref, dict) and ref.get("kind") == "Pod" and ref.get("controller")), None)
        if pod_claim and owner and pod_claim in by_pod.get(f"{claim.namespace}/{owner}", {}):
            owners[key] = (pod_key(claim.namespace, str(owner)), str(pod_claim))
    claimed = {(pod, pc) for pod, pc in owners.values()}
    for key, entries in by_pod.items():
        ns, name = key.split("/", 1)
        for pod_claim in entries:
            guess = f"{ns}/{name}-{pod_claim}"
            if (pod_key(ns, name), pod_claim) not in claimed and guess in inv.claims and guess not in owners:
                owners[guess] = (pod_key(ns, name), pod_claim)
    return owners


def _consumers(claim: Claim, users: dict[str, list[str]]) -> list[str]:
    """The pods an allocated claim is reserved for: ``status.reservedFor``, else the running pods that use
    it (a dump written by hand, or by a tool that drops status, may leave reservedFor out)."""
    listed = [pod_key(claim.namespace, str(r.get("name"))) for r in claim.reserved_for
              if isinstance(r, dict) and r.get("resource", "pods") == "pods" and r.get("name")]
    return listed or users.get(claim.key, [])


def dump_record(inv: Inventory) -> DumpRecord:
    """The record (source ``dump``, t=0) whose fold is the cluster of ``inv``: classes, templates, Workloads,
    slices, nodes, claims, pods, then what the dump's status fields say was decided (bindings, allocations,
    reservations, finished pods)."""
    events: list[AnyEvent] = [DeviceClassCreated(manifest=c.manifest) for c in inv.classes.values()]
    events += [ResourceClaimTemplateCreated(manifest=t) for t in inv.templates.values()]
    events += [WorkloadCreated(manifest=w) for w in (getattr(inv, "workloads", None) or {}).values()]
    events += _groups(inv)
    events += [ResourceSlicePublished(manifest=s.manifest) for s in inv.slices.values()]
    events += [DeviceTaintRuleCreated(manifest=r.manifest) for r in inventory_rules(inv.other)]  # taint from t=0
    for name, node in sorted(inv.nodes.items()):
        events.append(NodeCreated(name=name, group="", node=node.manifest, initial=True))
        if node_ready(node):
            events.append(NodeReady(name=name))
    owners = _claim_owners(inv)
    for key, claim in inv.claims.items():
        manifest = {k: v for k, v in claim.manifest.items() if k != "status"}  # status is events below
        owner, pod_claim = owners.get(key, ("", ""))
        events.append(ResourceClaimCreated(manifest=manifest, pod=owner, pod_claim=pod_claim))
    pods = _Pods(inv, owners)
    events += pods.created
    events += pods.decided
    for claim in inv.claims.values():
        if claim.allocation is None:
            continue
        first, *rest = _consumers(claim, pods.users) or [""]
        key = claim_key(claim.namespace, claim.name)
        events.append(ClaimAllocated(claim=key, allocation=claim.allocation, pod=first))
        events += [ClaimReserved(claim=key, pod=p) for p in rest]
        events += device_conditions(key, claim.manifest)  # status.devices[].conditions (binding conditions)
    record = Record(id=f"{SOURCE}/cluster", source=SOURCE, view=-1, t=0, events=tuple(events))
    return DumpRecord(record, tuple(pods.pending), tuple(pods.skipped))


def device_conditions(key: str, manifest: dict[str, Any]) -> list[AnyEvent]:
    """A claim's `status.devices[].conditions` as the drivers' ClaimDeviceConditionSet events, written before the
    run (`at` -1): what kube-scheduler's PreBind reads for binding conditions (KEP-5007)."""
    out: list[AnyEvent] = []
    for entry in (manifest.get("status") or {}).get("devices") or []:
        for cond in entry.get("conditions") or []:
            out.append(ClaimDeviceConditionSet(
                claim=key, driver=str(entry.get("driver")), pool=str(entry.get("pool")),
                device=str(entry.get("device")), condition=str(cond.get("type")), status=str(cond.get("status")), at=-1,
                reason=str(cond.get("reason") or "")))
    return out


def _groups(inv: Inventory) -> list[AnyEvent]:
    """The dump's 1.36+ CompositePodGroups and PodGroups (read under a profile, in the v1beta1 hub shape) as
    created, composites first (the levels above), then each one's ``status.conditions`` as the
    PodGroupConditionSet events that wrote them (KEP-4671: the scheduler patches them; a dump's conditions are
    the evidence of earlier cycles, e.g. PodGroupInitiallyScheduled=True means the group is past its first
    placement). A pod's ``spec.schedulingGroup`` puts it in its group when it is created (the fold reads it)."""
    created: list[AnyEvent] = []
    conditions: list[AnyEvent] = []
    for kind, make in (("CompositePodGroup", CompositePodGroupCreated), ("PodGroup", PodGroupCreated)):
        for key, manifest in scheduling_objects(inv, kind).items():
            created.append(make(manifest={k: v for k, v in manifest.items() if k != "status"}))
            for cond in (manifest.get("status") or {}).get("conditions") or []:
                if isinstance(cond, dict) and cond.get("type"):
                    conditions.append(PodGroupConditionSet(
                        group=key, condition=str(cond["type"]), status=str(cond.get("status") or "Unknown"),
                        reason=str(cond.get("reason") or ""), message=str(cond.get("message") or ""), kind=kind))
    return created + conditions


class _Pods:
    """The dump's pods as events: created (in creation order), then bound and finished as the dump says."""

    def __init__(self, inv: Inventory, owners: dict[str, tuple[str, str]]) -> None:
        self.created: list[AnyEvent] = []
        self.decided: list[AnyEvent] = []
        self.pending: list[str] = []  # pod keys
        self.skipped: list[str] = []
        self.users: dict[str, list[str]] = {}  # claim "ns/name" -> running pods that use it
        owned: dict[str, list[str]] = {}  # pod key -> the generated claims ("ns/name") it owns
        for claim, (owner, _) in owners.items():
            owned.setdefault(owner, []).append(claim)
        for name, manifest in _creation_order(inv.pods):
            self._add(name, manifest, inv, owned)

    def _add(self, name: str, pod: dict[str, Any], inv: Inventory, owned: dict[str, list[str]]) -> None:
        ns = _names(pod)[0]
        key = pod_key(ns, _names(pod)[1])
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if is_pending(pod):
            self.pending.append(key)
        elif not isinstance(node, str) or node not in inv.nodes:
            why = "finished before it was scheduled" if phase in _DONE else f"bound to node {node}, not in the dump"
            self.skipped.append(f"{name}: {why}")
            return
        else:
            self.decided.append(PodBound(pod=key, node=node))
            if phase in _DONE:
                self.decided.append(PodFinished(pod=key, phase=str(phase)))
            else:
                named = [f"{ns}/{e['resourceClaimName']}" for e in (pod.get("spec") or {}).get("resourceClaims") or []
                         if isinstance(e, dict) and e.get("resourceClaimName")]
                for used in named + owned.get(key, []):
                    self.users.setdefault(used, []).append(key)
        self.created.append(PodCreated(pod=pod))

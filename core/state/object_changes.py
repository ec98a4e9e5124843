"""The fold of objects changed during a run: updates, deletions, and the removal of a deleted claim.

Creations need nothing here: a scenario's ``create`` is the kind's own ``*Created`` event, folded as the objects
of spec.objects are at t=0. An update (``ObjectUpdated``) replaces the object as the API server's update does:
a DeviceClass's new selectors count from then on (claims already allocated keep their devices: an allocation
is a copy, upstream's and dralab's alike); a claim's, template's or ProvisioningRequest's spec is immutable
(refused at load), so only their metadata changes. A deletion (``ObjectDeleted``) removes the object at once,
but for a ResourceClaim that is allocated or reserved: the scheduler put the ``resource.kubernetes.io/
delete-protection`` finalizer on it when it allocated it (DynamicResources PreBind), so the claim gets a
deletionTimestamp (``DraState.deleting``) and stays, its pods running, until the resourceclaim controller
removes the finalizer (``ResourceClaimRemoved``, core/controllers/claims.py) once ``status.reservedFor`` is
empty. A deleted DeviceClass does not touch the claims allocated from it (upstream keeps no link either).
PodDisruptionBudgets of spec.objects are in the run configuration; those created, changed or deleted during the
run are kept in ``pdbs`` and laid over them (``current_pdbs``) by the scheduler's preemption and the autoscaler's
drains at each decision.

The handlers take the fold's fields (``Fold``); the fold, state/cluster.py, registers them in its dispatch table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..dra.claims import convert_claim
from ..dra.convert import convert_device_class
from ..log.events import ObjectCreated, ObjectDeleted, ObjectUpdated, ResourceClaimRemoved, claim_key
from .dra import DraState, _convert
from .gangs import GangState
from .objects import NodeState
from .provreq import ProvisioningState


class Fold(Protocol):
    """The fields of the fold (ClusterIndexes) these handlers change; indexes.py re-exports the handlers for the
    fold's dispatch table, so this module cannot import it."""

    nodes: dict[str, NodeState]
    dra: DraState
    gang: GangState
    provisioning: ProvisioningState
    anomalies: list[str]
    touched_pods: set[str] | None
    touched_allocations: bool
    pdbs: dict[str, dict[str, Any] | None]
    room_offset: int  # a parked pod may fit from this offset on (a DeviceClass changed, a claim's devices freed)


def _names(manifest: dict[str, Any]) -> tuple[str, str]:
    meta = manifest.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def current_pdbs(configured: list[dict[str, Any]], changed: dict[str, dict[str, Any] | None]
                 ) -> list[dict[str, Any]]:
    """The PodDisruptionBudgets in force: the run configuration's (spec.objects) with the ones created, changed or
    deleted since on top (in the configuration's order, then in creation order): what the scheduler's preemption
    and the autoscaler's drains read, so a changed budget is recomputed from the next decision on."""
    if not changed:
        return configured
    budgets: dict[str, dict[str, Any] | None] = {_key(p): p for p in configured}
    budgets.update(changed)
    return [p for p in budgets.values() if p is not None]


def _key(manifest: dict[str, Any]) -> str:
    namespace, name = _names(manifest)
    return f"{namespace}/{name}"


def on_object_created(state: Fold, offset: int, t: int, event: ObjectCreated) -> None:
    if event.manifest.get("kind") != "PodDisruptionBudget":
        state.anomalies.append(f"offset {offset}: ObjectCreated of a {event.manifest.get('kind')}, which has its own "
                               "creation event")
        return
    state.pdbs[_key(event.manifest)] = event.manifest


def on_object_updated(state: Fold, offset: int, t: int, event: ObjectUpdated) -> None:
    manifest = event.manifest
    kind = manifest.get("kind")
    state.room_offset = offset  # a changed DeviceClass or Node may let a parked pod fit (the fold's ROOM_EVENTS)
    if kind == "Node":  # a patch of its labels, annotations, taints, unschedulable (scenario/node_changes.py)
        node = state.nodes.get(str((manifest.get("metadata") or {}).get("name")))
        if node is not None:  # a node gone by then: NotFound, nothing changes
            node.manifest = patched_node(node.manifest, manifest)
        return
    namespace, name = _names(manifest)
    key = f"{namespace}/{name}"
    dra, provisioning = state.dra, state.provisioning
    if kind == "PodDisruptionBudget":
        state.pdbs[key] = manifest
    elif kind == "DeviceClass":
        cls = _convert(convert_device_class, manifest, offset, state.anomalies)
        if cls is not None:
            if cls.name not in dra.classes:
                state.anomalies.append(f"offset {offset}: update of unknown DeviceClass {cls.name}")
            dra.classes[cls.name] = cls
    elif kind == "ResourceClaimTemplate":
        dra.templates[key] = manifest
    elif kind == "ResourceClaim":
        claim = dra.claims.get(claim_key(namespace, name))
        converted = _convert(convert_claim, manifest, offset, state.anomalies) if claim is not None else None
        if claim is None:
            state.anomalies.append(f"offset {offset}: update of unknown ResourceClaim {key}")
        elif converted is not None:
            claim.claim = converted  # metadata only: the spec is immutable (refused at load)
    elif kind == "PodTemplate":
        provisioning.templates[key] = manifest
    elif kind == "ProvisioningRequest":
        request = provisioning.requests.get(key)
        if request is None:
            state.anomalies.append(f"offset {offset}: update of unknown ProvisioningRequest {key}")
        else:
            request.manifest = manifest  # metadata only: the spec is immutable (refused at load); status kept
    else:
        state.anomalies.append(f"offset {offset}: update of a {kind}, which dralab does not change mid-run")


def on_object_deleted(state: Fold, offset: int, t: int, event: ObjectDeleted) -> None:
    dra, provisioning = state.dra, state.provisioning
    key = f"{event.namespace}/{event.name}"
    gone: object = None
    if event.kind == "PodDisruptionBudget":  # those of the run configuration are not in the fold: no NotFound here
        state.pdbs[key] = None
        state.room_offset = offset  # a victim it protected may be preempted now
        return
    if event.kind == "DeviceClass":
        gone = dra.classes.pop(event.name, None)
    elif event.kind == "ResourceClaimTemplate":
        gone = dra.templates.pop(key, None)
    elif event.kind == "PodTemplate":
        gone = provisioning.templates.pop(key, None)
    elif event.kind == "ProvisioningRequest":
        gone = provisioning.requests.pop(key, None)
        if gone is not None:
            provisioning.deleted[key] = t  # as the autoscaler's own deletion (state/provreq.py)
    elif event.kind == "ResourceClaim":
        ckey = claim_key(event.namespace, event.name)
        claim = dra.claims.get(ckey)
        gone = claim
        if claim is not None and ckey not in dra.deleting:
            # a gang member waiting at Permit holds an allocation of it in the scheduler's memory: kept as in use
            # (upstream: no finalizer yet, so gone, and that member's PreBind would fail; dralab's gang binds whole)
            held = any(ckey in r.allocations for r in state.gang.reservations.values())
            if claim.allocation is None and not claim.reserved_for and not held:
                _remove_claim(state, ckey)  # no finalizer yet: gone at once
            else:
                dra.deleting[ckey] = t
    else:
        state.anomalies.append(f"offset {offset}: deletion of a {event.kind}, which dralab does not delete mid-run")
        return
    if gone is None:
        state.anomalies.append(f"offset {offset}: deletion of unknown {event.kind} {key.lstrip('/')}")


def on_claim_removed(state: Fold, offset: int, t: int, event: ResourceClaimRemoved) -> None:
    claim = state.dra.claims.get(event.claim)
    if claim is None or event.claim not in state.dra.deleting:
        state.anomalies.append(f"offset {offset}: finalizer of {event.claim} removed, but it is not being deleted")
        return
    state.room_offset = offset  # its devices are free
    if claim.reserved_for:
        state.anomalies.append(f"offset {offset}: {event.claim} removed while reserved for "
                               f"{', '.join(claim.reserved_for)}")
    _remove_claim(state, event.claim)


def _remove_claim(state: Fold, key: str) -> None:
    """The claim is gone: its allocation (if any) freed, its owner's status entry with it."""
    dra = state.dra
    claim = dra.claims.pop(key)
    dra.deleting.pop(key, None)
    if claim.allocation is not None:
        dra.allocated.remove_allocation(claim.allocation)
        dra.allocation_changed(claim.allocation)
        dra.device_conditions.pop(key, None)
        if state.touched_pods is not None:
            state.touched_allocations = True
    if claim.owner:
        entries = dra.pod_claims.get(claim.owner, {})
        for name in [n for n, k in entries.items() if k == key]:
            del entries[name]


OBJECT_HANDLERS: dict[type, Callable[[Any, int, int, Any], None]] = {
    ObjectCreated: on_object_created,
    ObjectUpdated: on_object_updated,
    ObjectDeleted: on_object_deleted,
    ResourceClaimRemoved: on_claim_removed,
}


def patched_node(node: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A node's manifest after a scenario's patch (scenario/node_changes.py): a new dict, the old one may be shared
    with the log's events."""
    meta = dict(node.get("metadata") or {})
    for field in ("labels", "annotations"):
        given = (patch.get("metadata") or {}).get(field)
        if given is not None:
            merged = {**(meta.get(field) or {}), **given}
            meta[field] = {k: v for k, v in merged.items() if v is not None}
    spec = dict(node.get("spec") or {})
    for field, value in (patch.get("spec") or {}).items():
        spec[field] = value
    if not spec.get("taints"):
        spec.pop("taints", None)
    if spec.get("unschedulable") is False:
        spec.pop("unschedulable")
    return {**node, "metadata": meta, "spec": spec}

"""DynamicResources' DRA extended resources (KEP-5004; gate DRAExtendedResource: beta and on in 1.36, GA in 1.37):
a pod asking an extended resource that a DeviceClass serves (core/dra/extended.py) gets it from DRA devices on the
nodes whose allocatable does not list that resource.

Upstream (pkg/scheduler/framework/plugins/noderesources/fit.go and dynamicresources/extendeddynamicresources.go):
NodeResourcesFit leaves such a resource to DynamicResources on a node that does not list it (on a node that does,
the device plugin's count applies as before); DynamicResources' PreFilter adds an in-memory special claim, Filter
allocates it per node with the pod's other claims, PreBind creates it (annotated, owned by the pod), writes the
allocation and reservedFor, and records it in the pod's `status.extendedResourceClaimStatus`.

dralab: a pod with such requests is tried first on the nodes that list none of them, with those requests left out
of the fit and the special claim allocated with its other claims; if none fits, on the other nodes with its
requests as they are (the device-plugin path). Upstream scores both kinds of node in one pass; they rarely mix in
one cluster. On binding, `ResourceClaimCreated` (the special claim, recorded as the pod's `<extended-resources>`
claim) precedes `ClaimAllocated`. Release profiles only (the legacy profile accepted the field and ignored it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...dra.claims import convert_claim
from ...dra.extended import POD_CLAIM, container_requests, resource_classes, special_claim
from ...dra.model import Claim
from ...kube.versions import LEGACY_PROFILE, Profile, same_profile
from ...log.events import ResourceClaimCreated
from ...state.cluster import ClusterState, NodeState, PodState
from ..framework import ExtensionPoint

NAME = "DynamicResources"
EXTENSION_POINTS = (ExtensionPoint.PRE_FILTER, ExtensionPoint.FILTER, ExtensionPoint.PRE_BIND)


@dataclass(frozen=True)
class ExtendedPlan:
    """A pod's DRA-served extended resources: the pod as NodeResourcesFit sees it on the DRA nodes, the special
    claim (model and manifest), the DRA nodes, and the other nodes (device-plugin path)."""

    fit_pod: PodState
    claim: Claim
    manifest: dict[str, Any]
    dra_nodes: tuple[str, ...]
    plugin_nodes: tuple[str, ...]


def enabled(profile: Profile) -> bool:
    return profile.enabled("DRAExtendedResource") and not same_profile(profile, LEGACY_PROFILE)


def plan(view: ClusterState, profile: Profile, pod: PodState) -> ExtendedPlan | None:
    """The pod's plan, or None when no request is served by a DeviceClass (most pods: one dict lookup each)."""
    if not view.dra.classes or not enabled(profile) or POD_CLAIM in view.dra.pod_claims.get(pod.key, {}):
        return None
    classes = resource_classes(view.dra.classes)
    served = {r: classes[r] for r in pod.requests if r in classes and pod.requests[r] > 0}
    if not served:
        return None
    requests = container_requests(pod.manifest, served)
    if not requests:
        return None
    manifest = special_claim(pod.manifest, requests)
    dra_nodes = tuple(n.name for n in view.nodes.values() if not _lists(n, served))
    plugin_nodes = tuple(n.name for n in view.nodes.values() if _lists(n, served))
    fit_pod = replace(pod, requests={r: a for r, a in pod.requests.items() if r not in served})
    return ExtendedPlan(fit_pod, convert_claim(manifest, ""), manifest, dra_nodes, plugin_nodes)


def _lists(node: NodeState, served: dict[str, str]) -> bool:
    return any(node.allocatable.get(r) for r in served)


def created(pod: PodState, ext: ExtendedPlan) -> ResourceClaimCreated:
    """PreBind's creation of the special claim (before its ClaimAllocated, in the same record)."""
    return ResourceClaimCreated(manifest=ext.manifest, pod=pod.key, pod_claim=POD_CLAIM)


def served_on(state: ClusterState, node: NodeState) -> dict[str, int]:
    """What the node's pods take through their special claims: their requests of resources the node does not
    list (the no-overcommit invariant leaves those to the devices)."""
    out: dict[str, int] = {}
    for key in node.pods:
        if POD_CLAIM in state.dra.pod_claims.get(key, {}):
            for resource, amount in state.pods[key].requests.items():
                if resource not in node.allocatable:
                    out[resource] = out.get(resource, 0) + amount
    return out


def schedule_extended(sched: Any, cycle: Any, pod: PodState, state: Any, ext: ExtendedPlan, now: int,
                      prebind: Any) -> None:
    """One attempt of a pod with DRA-served extended resources (the reactor's `_schedule` from PreFilter on):
    the DRA nodes with the special claim, else the device-plugin nodes; bound (through `prebind(cycle, pod, node,
    claims, allocations)` when it waits for binding conditions, else `Cycle.bind`) or pending with PostFilter's
    reason."""
    claims = state.claims
    own = list(claims.to_allocate)
    claims.to_allocate = [*own, ext.claim]
    allocator = state.allocator or sched._dra.allocator(cycle.view, cycle.allocated)
    node, reasons, allocations, state.dra_nodes = sched.schedule_one(cycle, ext.fit_pod, claims, allocator,
                                                                     restrict=ext.dra_nodes)
    fit = ext.fit_pod
    if node is None and ext.plugin_nodes:
        claims.to_allocate = own
        node, more, allocations, plugin_dra = sched.schedule_one(cycle, pod, claims, state.allocator,
                                                                 restrict=ext.plugin_nodes)
        reasons.update(more)
        state.dra_nodes += plugin_dra
        fit = pod
    if node is None:
        state.allocator = allocator
        claims.to_allocate = [*own, ext.claim]
        status = sched._claims.post_filter(state, pod, reasons)
        cycle.pending(pod, "Unschedulable", status.message, status.cause, status.detail)
        return
    if fit is not pod:
        cycle.events.append(created(pod, ext))
    if prebind is not None and prebind(cycle, fit, node, claims, allocations):
        return
    cycle.bind(fit, node, claims, allocations)

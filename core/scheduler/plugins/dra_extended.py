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
class Path:
    """One way to place the pod: on `nodes`, which list none of the resources `claim` serves (None: the device
    plugin's path, the pod's requests as they are), with `fit_pod` as NodeResourcesFit sees it there."""

    fit_pod: PodState
    claim: Claim | None
    manifest: dict[str, Any] | None
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class ExtendedPlan:
    """A pod's DRA-served extended resources: the paths to try, in order (the nodes lacking the most of them
    first, the device plugin's nodes last)."""

    paths: tuple[Path, ...]


def enabled(profile: Profile) -> bool:
    return profile.enabled("DRAExtendedResource") and not same_profile(profile, LEGACY_PROFILE)


def plan(view: ClusterState, profile: Profile, pod: PodState) -> ExtendedPlan | None:
    """The pod's plan, or None when no request is served by a DeviceClass (most pods: one dict lookup each)."""
    if not view.dra.classes or not any("/" in r for r in pod.requests):  # extended resources have a domain
        return None
    if not enabled(profile) or POD_CLAIM in view.dra.pod_claims.get(pod.key, {}):
        return None
    classes = resource_classes(view.dra.classes)
    served = {r: classes[r] for r in pod.requests if r in classes and pod.requests[r] > 0}
    if not served:
        return None
    groups: dict[frozenset[str], list[str]] = {}
    for node in view.nodes.values():  # per node, the served resources it does not list (allocatable 0: not listed)
        groups.setdefault(frozenset(r for r in served if not node.allocatable.get(r)), []).append(node.name)
    paths = []
    for lacking in sorted(groups, key=lambda g: (-len(g), sorted(g))):
        if not lacking:
            paths.append(Path(pod, None, None, tuple(groups[lacking])))
            continue
        requests = container_requests(pod.manifest, served, lacking)
        manifest = special_claim(pod.manifest, requests)
        fit_pod = replace(pod, requests={r: a for r, a in pod.requests.items() if r not in lacking})
        paths.append(Path(fit_pod, convert_claim(manifest, ""), manifest, tuple(groups[lacking])))
    return ExtendedPlan(tuple(paths))


def created(pod: PodState, manifest: dict[str, Any]) -> ResourceClaimCreated:
    """PreBind's creation of the special claim (before its ClaimAllocated, in the same record)."""
    return ResourceClaimCreated(manifest=manifest, pod=pod.key, pod_claim=POD_CLAIM)


def served_on(state: ClusterState, node: NodeState) -> dict[str, int]:
    """What the node's pods take through their special claims: their requests of resources the node does not
    list, or lists as 0 (the no-overcommit invariant leaves those to the devices)."""
    out: dict[str, int] = {}
    for key in node.pods:
        if POD_CLAIM in state.dra.pod_claims.get(key, {}):
            for resource, amount in state.pods[key].requests.items():
                if not node.allocatable.get(resource):
                    out[resource] = out.get(resource, 0) + amount
    return out


def search(sched: Any, cycle: Any, pod: PodState, state: Any, ext: ExtendedPlan,
           restrict: tuple[str, ...] | None = None) -> tuple[Path | None, str | None, dict[str, dict[str, Any]], Any]:
    """PreFilter on for a pod with DRA-served extended resources: each path in turn (within `restrict`, a PodGroup's
    topology domain, when given), its special claim allocated with the pod's other claims. Returns the path, node
    and allocations of the first fit (path None, node None when none fits) and the failure reasons so far."""
    claims = state.claims
    own = list(claims.to_allocate)
    reasons: Any = None
    allowed = set(restrict) if restrict is not None else None
    for path in ext.paths:
        claims.to_allocate = own if path.claim is None else [*own, path.claim]
        allocator = state.allocator if path.claim is None else (
            state.allocator or sched._dra.allocator(cycle.view, cycle.allocated))
        nodes = path.nodes if allowed is None else tuple(n for n in path.nodes if n in allowed)
        node, why, allocations, dra_nodes = sched.schedule_one(cycle, path.fit_pod, claims, allocator, restrict=nodes)
        reasons = why if reasons is None else reasons + why
        state.dra_nodes += dra_nodes
        if node is not None:
            return path, node, allocations, reasons
        state.allocator = allocator or state.allocator
    return None, None, {}, reasons


def schedule_extended(sched: Any, cycle: Any, pod: PodState, state: Any, ext: ExtendedPlan, now: int,
                      prebind: Any) -> None:
    """One attempt of a pod with DRA-served extended resources (the reactor's `_schedule` from PreFilter on): the
    paths (`search`); bound (through `prebind(cycle, pod, node, claims, allocations)` when it waits for binding
    conditions, else `Cycle.bind`) or pending with PostFilter's reason."""
    path, node, allocations, reasons = search(sched, cycle, pod, state, ext)
    if path is not None and node is not None:
        if path.manifest is not None:
            cycle.events.append(created(pod, path.manifest))
        if prebind is None or not prebind(cycle, path.fit_pod, node, state.claims, allocations):
            cycle.bind(path.fit_pod, node, state.claims, allocations)
        return
    status = sched._claims.post_filter(state, pod, reasons)
    cycle.pending(pod, "Unschedulable", status.message, status.cause, status.detail)

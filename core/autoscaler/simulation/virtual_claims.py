"""Claims for the autoscaler's virtual pods (a ProvisioningRequest's pods, which exist only in its memory).

A real pod's ResourceClaimTemplates become ResourceClaims through the resourceclaim controller, whose
names the pod's status records; a virtual pod never reaches the API server, so upstream's DRA snapshot
finds neither and reports "ResourceClaim not created yet": check-capacity then answers
CapacityIsNotFound and a best-effort-atomic request never finds a node, whatever the capacity
(autoscaler#10065). The fix under review (kubernetes-sigs/cluster-autoscaler#22) materialises the
claims in memory for the simulation only; dralab does that by default, and keeps the bug behind
`autoscaler.provisioningRequestClaims: unresolved`.
"""

from __future__ import annotations

import copy
from typing import Any

from ...cluster.pod_claims import claim_manifest
from ...dra.claims import convert_claim
from ...dra.model import Claim
from ...kube.resources import pod_requests
from ...scheduler.plugins.dynamic_resources import PodClaims
from ...state.cluster import ClusterState, PodState

MATERIALIZE, UNRESOLVED = "materialize", "unresolved"


def materialize(view: ClusterState, pod: PodState, resolved: PodClaims) -> PodClaims:
    """`resolved` (PreFilter's answer, waiting for the template claims) with one in-memory claim per
    template entry, named `<pod>-<pod claim name>` (never written anywhere)."""
    if resolved.missing or not resolved.waiting:
        return resolved
    namespace = pod.key.split("/")[1]
    pod_name = pod.key.split("/", 2)[2]
    made: list[Claim] = []
    for entry in pod.manifest.get("spec", {}).get("resourceClaims") or []:
        template_name = entry.get("resourceClaimTemplateName")
        if not template_name:
            continue  # a named claim: PreFilter resolved it
        template = view.dra.templates.get(f"{namespace}/{template_name}")
        if template is None:
            return resolved  # PreFilter says which template is missing
        manifest = claim_manifest(template, pod, entry["name"], f"{pod_name}-{entry['name']}")
        made.append(convert_claim(manifest, f"virtual claim of {pod.key[4:]}"))
    return PodClaims(to_allocate=[*resolved.to_allocate, *made], allocated=list(resolved.allocated))


def node_pod(manifest: dict[str, Any], node: str) -> PodState:
    """A node group's DaemonSet pod (nodeGroups[].daemonSetPods) as it runs on the simulation's template node
    `node`: named `<pod>-<node>` (one copy per node, as a DaemonSet's), bound there. Its template claims are
    made in memory by `materialize` (the pod is not in the view), one per node."""
    meta = manifest["metadata"]
    namespace = meta.get("namespace") or "default"
    name = f"{meta['name']}-{node}"
    pod = copy.deepcopy(manifest)
    pod["metadata"] = {**meta, "name": name, "namespace": namespace}
    pod["spec"] = {**pod["spec"], "nodeName": node}
    return PodState(key=f"pod/{namespace}/{name}", manifest=pod, requests=pod_requests(pod),
                    priority=int(pod["spec"].get("priority") or 0), created_t=0, created_offset=0, run_for_ms=-1)

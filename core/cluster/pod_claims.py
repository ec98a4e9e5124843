"""A pod's ResourceClaims made from its templates, named and shaped as the resourceclaim controller makes
them (kube-controller-manager, pkg/controller/resourceclaim): shared by that controller (claims.py), the
autoscaler's virtual pods (virtual_claims.py) and cluster dumps (analysis/dump.py)."""

from __future__ import annotations

import copy
import random
from typing import Any

from ..state.cluster import ClusterState, PodState

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand: no vowels, no look-alikes
_MAX_PREFIX = 57  # 63 minus 5 random characters minus the separating dash


def generate_name(pod: str, claim: str, rng: random.Random) -> str:
    """`<pod>-<claim>-xxxxx`, the two parts cut in proportion when too long (resourceclaim controller)."""
    if len(pod) + len(claim) + 1 > _MAX_PREFIX:
        budget = _MAX_PREFIX - 1
        pod_len = max(1, budget * len(pod) // (len(pod) + len(claim)))
        pod, claim = pod[:pod_len], claim[: budget - pod_len]
    return f"{pod}-{claim}-" + "".join(rng.choice(_ALPHABET) for _ in range(5))


def claim_manifest(template: dict[str, Any], pod: PodState, pod_claim: str, name: str) -> dict[str, Any]:
    return owned_claim_manifest(template, pod.manifest, pod_claim, name)


def owned_claim_manifest(template: dict[str, Any], owner: dict[str, Any], pod_claim: str, name: str
                         ) -> dict[str, Any]:
    """The claim made from `template` for `owner` (a Pod, or a PodGroup for KEP-5729's group claims, made the
    same way: owned by the group, annotated with the group's claim entry name)."""
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    owner_meta = owner.get("metadata") or {}
    claim_meta: dict[str, Any] = {
        "name": name,
        "namespace": meta.get("namespace") or "default",
        "annotations": {**((spec.get("metadata") or {}).get("annotations") or {}), POD_CLAIM_ANNOTATION: pod_claim},
        "ownerReferences": [{
            "apiVersion": owner.get("apiVersion") or "v1", "kind": owner.get("kind") or "Pod",
            "name": owner_meta.get("name"), "uid": owner_meta.get("uid", ""),
            "controller": True, "blockOwnerDeletion": True,
        }],
    }
    if (spec.get("metadata") or {}).get("labels"):
        claim_meta["labels"] = copy.deepcopy(spec["metadata"]["labels"])
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": claim_meta,
            "spec": copy.deepcopy(spec.get("spec") or {})}


def group_claims(view: ClusterState, pod: PodState) -> dict[str, tuple[str, dict[str, Any]]]:
    """The claims of the pod's PodGroup (KEP-5729, DRAWorkloadResourceClaims): entry name -> (the group's
    consumer key `podgroup/<ns>/<name>`, the group's entry); empty for a pod without a group or claims."""
    group = view.gang.group_of.get(pod.key)
    state = view.gang.podgroups.get(group) if group is not None else None
    if state is None:
        return {}
    entries = state.spec.get("resourceClaims") or []
    return {str(e.get("name")): (f"podgroup/{group}", e) for e in entries if isinstance(e, dict)}


def same_source(group_entry: dict[str, Any], pod_entry: dict[str, Any]) -> bool:
    """KEP-5729's matching rule: the pod uses the group's claim only when its entry has the same name and the
    same claim or template name; any other entry is the pod's own."""
    return all(group_entry.get(f) == pod_entry.get(f) for f in ("resourceClaimName", "resourceClaimTemplateName"))


def status_claim(generated: dict[str, str], entry: dict[str, Any]) -> str | None:
    """The claim key `pod.status.resourceClaimStatuses` names for a template entry (the fold's `dra.pod_claims`
    of the pod), else None. kube-scheduler and cluster-autoscaler resolve a template entry this way only
    (component-helpers resource/resourceclaim.go `Name`: the status entry of that name, `ErrClaimNotFound`
    without one): the ResourceClaimTemplate matters to the resourceclaim controller alone, so a claim that
    exists and is named there is used even when its template is gone (issue 22, upstream's DRA tests name
    templates that do not exist)."""
    name = entry.get("name")
    if not entry.get("resourceClaimTemplateName") or not isinstance(name, str):
        return None
    return generated.get(name)

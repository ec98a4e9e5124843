"""A pod's ResourceClaims made from its templates, named and shaped as the resourceclaim controller makes
them (kube-controller-manager, pkg/controller/resourceclaim): shared by that controller (claims.py), the
autoscaler's virtual pods (virtual_claims.py) and cluster dumps (analysis/dump.py)."""

from __future__ import annotations

import copy
import random
from typing import Any

from ..state.cluster import PodState

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
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    pod_meta = pod.manifest.get("metadata") or {}
    claim_meta: dict[str, Any] = {
        "name": name,
        "namespace": meta.get("namespace") or "default",
        "annotations": {**((spec.get("metadata") or {}).get("annotations") or {}), POD_CLAIM_ANNOTATION: pod_claim},
        "ownerReferences": [{
            "apiVersion": "v1", "kind": "Pod", "name": pod_meta.get("name"), "uid": pod_meta.get("uid", ""),
            "controller": True, "blockOwnerDeletion": True,
        }],
    }
    if (spec.get("metadata") or {}).get("labels"):
        claim_meta["labels"] = copy.deepcopy(spec["metadata"]["labels"])
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": claim_meta,
            "spec": copy.deepcopy(spec.get("spec") or {})}

"""The resourceclaim controller (kube-controller-manager, pkg/controller/resourceclaim), as a reactor.

It creates a pod's claims from its ResourceClaimTemplates, named as upstream does (generateName
`<pod>-<pod claim name>-` with both parts shortened to fit, then five random characters, drawn from
the decision's seeded source), owned by the pod, annotated with the pod claim's name, and recorded
in the pod's status (resourceClaimStatuses) through the event's `pod`/`pod_claim` fields. When a
pod is done it takes the pod out of each claim's reservedFor, and deallocates a claim nobody uses
any more, so its devices are free again.

The same reactor hosts the workload controllers' part that matters here (workload_controllers.py): a
replicated pod that failed or was evicted gets a replacement. Both are kube-controller-manager.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any

from ..events import AnyEvent, ClaimReleased, ResourceClaimCreated
from ..reactor import Decision, Trigger
from ..state import FAILED, PENDING, SUCCEEDED, ClusterState, PodState
from .workload_controllers import replacements

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


@dataclass
class ClaimController:
    name: str = "claims"
    trigger: Trigger = "events"

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        events: list[AnyEvent] = []
        for key in view.pods_by_phase[PENDING]:
            events.extend(self._create_claims(view, view.pods[key], rng))
        pods = view.pods  # not a set of every finished pod per decision: that grows all day long
        for claim_key, state in view.dra.claims.items():
            if state.reserved_for:
                gone = [p for p in state.reserved_for if p in pods and pods[p].phase in (SUCCEEDED, FAILED)]
                for i, pod_key in enumerate(gone):
                    last = i == len(gone) - 1 and len(state.reserved_for) == len(gone)
                    events.append(ClaimReleased(claim=claim_key, pod=pod_key, deallocate=last))
        events.extend(replacements(view, rng))  # after the claims: their names' random draws come first
        return Decision(tuple(events))

    def _create_claims(self, view: ClusterState, pod: PodState, rng: random.Random) -> list[AnyEvent]:
        out: list[AnyEvent] = []
        entries = pod.manifest.get("spec", {}).get("resourceClaims")
        if not entries:
            return out  # most pods: no claims (every pending pod is looked at in every decision)
        have = view.dra.pod_claims.get(pod.key, {})
        namespace = pod.key.split("/")[1]
        pod_name = pod.key.split("/", 2)[2]
        for entry in entries:
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name or entry.get("name") in have:
                continue
            template = view.dra.templates.get(f"{namespace}/{template_name}")
            if template is None:
                continue  # the scheduler reports the pod as waiting for the missing template
            name = generate_name(pod_name, entry["name"], rng)
            out.append(ResourceClaimCreated(manifest=claim_manifest(template, pod, entry["name"], name),
                                            pod=pod.key, pod_claim=entry["name"]))
        return out

"""DRA extended resources (KEP-5004) in `dralab audit` and `dralab schedule` on a dump: read them as the scheduler
does, not as "Insufficient nvidia.com/gpu".

A DeviceClass with `spec.extendedResourceName` (or any class, through its implicit name
`deviceclass.resource.kubernetes.io/<class>`) serves that extended resource from DRA devices on the nodes whose
allocatable does not list it (or lists it as 0). There kube-scheduler's NodeResourcesFit leaves the resource to
DynamicResources (pkg/scheduler/framework/plugins/noderesources/fit.go), whose PreFilter adds an in-memory special
claim for the pod (dynamicresources/extendeddynamicresources.go), allocated with the pod's other claims. A bound
pod's special claim is a real ResourceClaim in the dump (annotated resource.kubernetes.io/extended-resource-claim,
owned by the pod), linked by the pod's `status.extendedResourceClaimStatus.resourceClaimName`; it is allocated, so
its devices are in use like any claim's.

dralab's dump tools: a pending pod gets the special claim as core/dra/extended.py builds it (the scenario
scheduler's); on a node that lists every resource the claim serves (the device-plugin path) the claim is left out
and the requests are counted against allocatable as before. A node that lists some of the pod's served resources
and not others is judged as one that lists none of them (upstream: the claim for just the missing ones).
The gate (DRAExtendedResource, beta from 1.36) is not checked: a dump whose classes set the field comes from a
release that serves it.
"""

from __future__ import annotations

from typing import Any

from ..dra.claims import convert_claim
from ..dra.extended import ANNOTATION, POD_CLAIM, container_requests, resource_classes, special_claim
from ..dra.model import Claim, Inventory
from ..kube.fields import FieldError
from ..kube.resources import pod_requests

__all__ = ["POD_CLAIM", "ExtendedResources", "is_special"]


class ExtendedResources:
    """The dump's DRA-served extended resources, and which nodes list them (device-plugin nodes)."""

    def __init__(self, inv: Inventory, allocatable: dict[str, dict[str, int]]) -> None:
        self.served = resource_classes(inv.classes) if inv.classes else {}
        self.listed = {node: frozenset(r for r, v in alloc.items() if v and r in self.served)
                       for node, alloc in allocatable.items()}
        self.mixed = any(self.listed.values())  # some node lists a served resource: claims differ per node

    def pod_served(self, requests: dict[str, int]) -> dict[str, str]:
        """The pod's requests that a DeviceClass serves: resource -> class."""
        if not self.served:
            return {}
        return {r: self.served[r] for r, n in requests.items() if n > 0 and r in self.served}

    def fit_requests(self, requests: dict[str, int], node: str) -> dict[str, int]:
        """What NodeResourcesFit checks on `node`: the requests without the served resources it does not list."""
        served = self.pod_served(requests)
        if not served:
            return requests
        listed = self.listed.get(node, frozenset())
        return {r: n for r, n in requests.items() if r not in served or r in listed}

    def claim(self, pod: dict[str, Any], claims: dict[str, Claim]) -> Claim | None:
        """The pod's special claim: the dump's (status.extendedResourceClaimStatus), else the one the scheduler's
        PreFilter would add; None when the pod asks no served resource."""
        served = self.pod_served(pod_requests(pod))
        if not served:
            return None
        meta = pod.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
        name = status.get("resourceClaimName") if isinstance(status, dict) else None
        if name and f"{ns}/{name}" in claims:
            return claims[f"{ns}/{name}"]
        requests = container_requests(pod, served)
        if not requests:
            return None
        try:
            return convert_claim(special_claim(pod, requests), "")
        except FieldError:
            return None

    def on_node(self, claims: list[tuple[str, Claim]], node: str) -> list[tuple[str, Claim]]:
        """The claims DynamicResources allocates on `node`: without a special claim whose every resource the node
        lists (the device plugin serves them there)."""
        listed = self.listed.get(node)
        if not listed:
            return claims
        return [(n, c) for n, c in claims if not (is_special(c) and self._all_listed(c, listed))]

    def _all_listed(self, claim: Claim, listed: frozenset[str]) -> bool:
        """Whether the node lists a resource name of each class the claim asks for (its explicit or implicit
        name: the pod asked one of them)."""
        served_listed = {self.served[r] for r in listed}
        return all(sub.device_class in served_listed for r in claim.requests for sub in r.choices())


def is_special(claim: Claim) -> bool:
    """A special claim for extended resources (upstream's annotation)."""
    return ((claim.manifest.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION) == "true"

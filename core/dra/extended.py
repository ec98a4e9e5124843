"""DRA extended resources (KEP-5004; gate DRAExtendedResource: alpha 1.34/1.35, beta 1.36, GA 1.37): a pod's
extended resource request (`nvidia.com/gpu: 2`) served by DRA devices on nodes whose allocatable does not list
that resource.

Which DeviceClass serves a resource: the class whose `spec.extendedResourceName` names it (when two do, the one
created later wins, as upstream's extended-resource cache), and every class by the implicit name
`deviceclass.resource.kubernetes.io/<class>`. The scheduler's DynamicResources plugin then allocates a special
ResourceClaim for the pod (pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go, as its
tests show it): generateName `<pod>-extended-resources-`, annotation
`resource.kubernetes.io/extended-resource-claim: "true"`, owned by the pod, one request per container and
resource, `container-<i>-request-<j>`, of the class with count = the amount; created, allocated and reserved in
PreBind.
"""

from __future__ import annotations

from typing import Any

from .model import DeviceClass

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
POD_CLAIM = "<extended-resources>"  # the pod claim name dralab records the special claim under (pod_claims)


def resource_classes(classes: dict[str, DeviceClass]) -> dict[str, str]:
    """Extended resource name -> the DeviceClass serving it (`classes` in creation order)."""
    out = {IMPLICIT_PREFIX + name: name for name in classes}
    for name, cls in classes.items():
        if cls.extended_resource_name:
            out[cls.extended_resource_name] = name  # created later: wins
    return out


def container_requests(pod: dict[str, Any], served: dict[str, str],
                       only: frozenset[str] | None = None) -> list[tuple[str, str, int]]:
    """(request name, class, count) for each DRA-served extended resource each regular container asks for, in
    container order, then resource name order (`j` of `container-<i>-request-<j>` counts every served resource
    of the container; `only`: those the special claim is for, on nodes that do not list them). Counts are whole
    devices (extended resources are integers)."""
    out: list[tuple[str, str, int]] = []
    for i, container in enumerate((pod.get("spec") or {}).get("containers") or []):
        res = container.get("resources") or {}
        amounts = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        j = 0
        for resource in sorted(amounts):
            if resource in served:
                count = int(str(amounts[resource]))
                if count > 0:
                    if only is None or resource in only:
                        out.append((f"container-{i}-request-{j}", served[resource], count))
                    j += 1
    return out


def special_claim(pod: dict[str, Any], requests: list[tuple[str, str, int]]) -> dict[str, Any]:
    """The special claim's manifest (named `<pod>-extended-resources-0`, as upstream's first generated name)."""
    meta = pod.get("metadata") or {}
    name = str(meta.get("name"))
    owner = {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": str(meta.get("uid") or ""), "controller": True}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{name}-extended-resources-0", "generateName": f"{name}-extended-resources-",
                         "namespace": meta.get("namespace") or "default", "annotations": {ANNOTATION: "true"},
                         "ownerReferences": [owner]},
            "spec": {"devices": {"requests": [
                {"name": r, "exactly": {"deviceClassName": c, "allocationMode": "ExactCount", "count": n}}
                for r, c, n in requests]}}}

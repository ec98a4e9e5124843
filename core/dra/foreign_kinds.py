"""Other projects' kinds whose controllers make the DRA objects a pod uses, and that dralab does not model.

A dump's objects of kinds dralab does not read go to ``Inventory.other`` untouched (a Namespace, a ConfigMap, a
Deployment whose pods the dump lists). Some CRDs are different: their controller creates the DRA objects the pods
in the same input use. When the input holds what the controller made (a real cluster's dump), the pods are read
as usual and the CRD is kept like any other object. When it does not (a demo's spec, applied to no cluster), the
answer would be wrong -- a pod "waiting for a template someone forgot" while a controller would make it -- so the
object is refused, exit 2, naming the kind, the field that names the missing object, and why (the project's rule:
no silent ignores).

- NVIDIA's ``ComputeDomain`` (``resource.nvidia.com``; NVIDIA/k8s-dra-driver-gpu
  ``cmd/compute-domain-controller/computedomain.go``): its controller creates the ResourceClaimTemplate named in
  ``spec.channel.resourceClaimTemplate.name``, in the ComputeDomain's namespace (device class
  ``compute-domain-default-channel.nvidia.com``), and starts IMEX daemons on the nodes that join the domain, whose
  plugin publishes the channel devices. dralab models neither the controller nor the daemons.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..kube.fields import join

COMPUTE_DOMAIN = ("resource.nvidia.com", "ComputeDomain")
NOT_MODELLED = {COMPUTE_DOMAIN: "its controller (NVIDIA's k8s-dra-driver-gpu) creates that ResourceClaimTemplate and "
                                "starts the IMEX daemons whose channel devices it allocates; dralab models neither"}


def is_foreign(group: str, kind: str) -> bool:
    return (group, kind) in NOT_MODELLED


def missing_products(obj: Mapping[str, Any], path: str, templates: Mapping[str, Any]) -> tuple[str, str] | None:
    """(field path, message) when ``obj`` (a kind of :data:`NOT_MODELLED`) names a DRA object its controller
    would create and ``templates`` (ResourceClaimTemplates read, key ``namespace/name``) lacks it; else None."""
    meta = _map(obj.get("metadata"))
    template = _map(_map(_map(obj.get("spec")).get("channel")).get("resourceClaimTemplate"))
    name = template.get("name")
    if not isinstance(name, str) or not name:
        return None
    key = f"{meta.get('namespace') or 'default'}/{name}"
    if key in templates:
        return None
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    kind = str(obj.get("kind"))
    return (join(path, "spec.channel.resourceClaimTemplate.name"),
            f"`{kind}` ({group}) is not modelled and the input has no ResourceClaimTemplate {key} made by its "
            f"controller: {NOT_MODELLED[(group, kind)]}; give the template the controller made (kubectl get "
            f"resourceclaimtemplates -A -o yaml) or leave the {kind} out")


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}

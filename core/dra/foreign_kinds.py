"""Other projects' kinds that decide what the scheduler sees and that dralab does not model: refused by name.

A dump's objects of kinds dralab does not read go to ``Inventory.other`` untouched (a Namespace, a ConfigMap, a
Deployment whose pods the dump lists). Some CRDs are different: their controller creates the DRA objects the
pods in the same input use, so reading the pods without them would give a wrong answer (a pod "waiting for a
template someone forgot" when a controller makes it). Those kinds are refused, exit 2, naming the kind and what
is missing, rather than silently kept (the project's rule: no silent ignores).

- NVIDIA's ``ComputeDomain`` (``resource.nvidia.com``, NVIDIA/k8s-dra-driver-gpu ``api/nvidia.com/resource/``,
  ``cmd/compute-domain-controller/``): its controller creates the ResourceClaimTemplate named in
  ``spec.channel.resourceClaimTemplate.name`` (device class ``compute-domain-default-channel.nvidia.com``) and
  starts IMEX daemons on the nodes that join the domain; the channel devices those daemons' plugin publishes
  appear only then. dralab models neither the controller nor the daemons.
"""

from __future__ import annotations

from ..kube.fields import FieldError, join

NOT_MODELLED: dict[tuple[str, str], str] = {
    ("resource.nvidia.com", "ComputeDomain"): (
        "its controller (NVIDIA's k8s-dra-driver-gpu) creates the ResourceClaimTemplate in "
        "`spec.channel.resourceClaimTemplate.name` and starts the IMEX daemons whose devices that template "
        "allocates; dralab models neither"),
}


def refuse_not_modelled(group: str, kind: str, path: str) -> None:
    """Raise a FieldError at ``path``.kind when (``group``, ``kind``) is a kind dralab refuses; else nothing."""
    why = NOT_MODELLED.get((group, kind))
    if why is not None:
        raise FieldError(join(path, "kind"), f"`{kind}` ({group}) is not modelled: {why}")

"""Events of objects changed during a run (the tagged union and the codec are in :mod:`.events`).

A scenario's ``spec.workload[]`` entries ``create``, ``apply`` and ``delete`` (core/scenario/object_changes.py)
are external inputs like arrivals: a creation is the kind's own ``*Created`` event (what spec.objects gives at
t=0; ``ObjectCreated`` for a kind without one), an update and a deletion are the events here. A ResourceClaim
in use is not gone at its deletion: upstream's scheduler put the ``resource.kubernetes.io/delete-protection``
finalizer on it when it allocated it, and the resourceclaim controller removes that finalizer (deallocating the
claim) once no consumer is left in ``status.reservedFor`` (pkg/controller/resourceclaim/controller.go,
syncClaim): ``ResourceClaimRemoved``.
"""

from __future__ import annotations

from typing import Any

from .event_base import Event, _meta, claim_key

# the object key each kind's events write (as its *Created event does: versions and conflicts)
_KEY_PREFIX = {"DeviceClass": "deviceclass", "ResourceClaimTemplate": "claimtemplate", "ResourceClaim": "claim",
               "PodTemplate": "podtemplate", "ProvisioningRequest": "provreq", "PodDisruptionBudget": "pdb"}


def object_key(kind: str, namespace: str, name: str) -> str:
    """The key of an object in the state's versions (``claim/<ns>/<name>``, ``deviceclass/<name>``...)."""
    if kind == "ResourceClaim":
        return claim_key(namespace, name)
    prefix = _KEY_PREFIX.get(kind, kind.lower())
    return f"{prefix}/{namespace}/{name}" if namespace else f"{prefix}/{name}"


class ObjectCreated(Event, tag="ObjectCreated", frozen=True):
    """A creation of a kind that has no ``*Created`` event of its own: a PodDisruptionBudget (those of spec.objects
    are in the run configuration; one created during the run is folded on top of them, state/object_changes.py)."""

    manifest: dict[str, Any]

    def touched(self) -> tuple[str, ...]:
        return (object_key(str(self.manifest.get("kind") or ""), *_meta(self.manifest)),)


class ObjectUpdated(Event, tag="ObjectUpdated", frozen=True):
    """An update of an existing object (a scenario's ``apply`` of an object that exists): the manifest replaces
    the object's metadata and spec as a whole, as an update (PUT) does; its status is kept (a subresource). For a
    Node it is a patch (labels and annotations merged, taints and unschedulable set): scenario/node_changes.py."""

    manifest: dict[str, Any]

    def touched(self) -> tuple[str, ...]:
        namespace, name = _meta(self.manifest)
        kind = str(self.manifest.get("kind") or "")
        scoped = (self.manifest.get("metadata") or {}).get("namespace")
        return (object_key(kind, namespace if scoped else "", name),)


class ObjectDeleted(Event, tag="ObjectDeleted", frozen=True):
    """A deletion (a scenario's ``delete``). Gone at once, but for a ResourceClaim that is allocated or reserved:
    it gets its deletionTimestamp and stays until the resourceclaim controller removes its finalizer."""

    kind: str
    name: str
    namespace: str = ""  # "" for cluster-scoped kinds (DeviceClass)

    def touched(self) -> tuple[str, ...]:
        return (object_key(self.kind, self.namespace, self.name),)


class ResourceClaimRemoved(Event, tag="ResourceClaimRemoved", frozen=True):
    """The resourceclaim controller removed the delete-protection finalizer of a claim being deleted that no
    consumer reserves any more (clearing its allocation first, if any): the claim is gone."""

    claim: str  # claim key

    def touched(self) -> tuple[str, ...]:
        return (self.claim,)

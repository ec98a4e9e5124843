"""The per-object records the ClusterState fold keeps: one `NodeState` per node, one `PodState` per pod,
and the `Condition` the scheduler last wrote on a pod.

They live apart from the fold (state.py) because nearly every reactor reads them while only the fold
writes them: this module is the shape of the cluster's objects, state.py is how the log changes them.
state.py re-exports every name here, so `from .state import NodeState` keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
# On a pod a workload controller made to replace a failed or evicted one: the old pod's name. Upstream
# has no such link (a ReplicaSet just counts its pods); dralab writes it so that the log says which pod
# a replacement stands for and the controller makes one replacement per lost pod.
REPLACES_ANNOTATION = "dralab.io/replaces"


def replaced_pod(manifest: dict[str, Any]) -> str:
    """The key of the pod this one replaces ("" if none)."""
    meta = manifest.get("metadata") or {}
    name = (meta.get("annotations") or {}).get(REPLACES_ANNOTATION)
    return f"pod/{meta.get('namespace') or 'default'}/{name}" if name else ""


def controller_ref(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """metadata.ownerReferences' entry with controller: true (metav1.GetControllerOf)."""
    for ref in (manifest.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


@dataclass(frozen=True)
class Condition:
    """PodScheduled condition as the scheduler last wrote it."""

    status: str
    reason: str
    message: str
    cause: str
    t: int
    offset: int = 0  # offset of the view the scheduler decided on (room appearing after it = retry)
    detail: str = ""


@dataclass
class NodeState:
    name: str
    group: str
    manifest: dict[str, Any]
    allocatable: dict[str, int]
    created_t: int
    ready_at: int
    ready: bool = False
    ready_t: int = -1  # when it first turned Ready (a later NotReady/Ready flap does not move it)
    publish_delay_ms: dict[str, int] = field(default_factory=dict)  # driver -> ms after Ready (the cloud's draw)
    used: dict[str, int] = field(default_factory=dict)
    reserved: dict[str, int] = field(default_factory=dict)  # held by gang members waiting at Permit
    busy_t: int = -1  # last time a pod was bound to it, left it, or was reserved on it (scale-down)
    pods: dict[str, None] = field(default_factory=dict)  # ordered set of pod keys bound here

    @property
    def labels(self) -> dict[str, str]:
        labels: dict[str, str] = self.manifest.get("metadata", {}).get("labels") or {}
        return labels

    @property
    def taints(self) -> list[dict[str, Any]]:
        taints: list[dict[str, Any]] = self.manifest.get("spec", {}).get("taints") or []
        return taints

    def free(self, resource: str) -> int:
        return self.allocatable.get(resource, 0) - self.used.get(resource, 0)


@dataclass
class PodState:
    key: str
    manifest: dict[str, Any]
    requests: dict[str, int]
    priority: int
    created_t: int
    created_offset: int
    run_for_ms: int
    phase: str = PENDING
    node: str | None = None
    bound_t: int = -1
    finished_t: int = -1
    condition: Condition | None = None
    attempts: int = 0  # failed scheduling attempts (PodScheduled=False, Unschedulable, written each time)
    replaced_by: str = ""  # the key of the pod its controller made in its place (see REPLACES_ANNOTATION)

    @property
    def node_selector(self) -> dict[str, str]:
        selector: dict[str, str] = self.manifest.get("spec", {}).get("nodeSelector") or {}
        return selector

    @property
    def tolerations(self) -> list[dict[str, Any]]:
        tolerations: list[dict[str, Any]] = self.manifest.get("spec", {}).get("tolerations") or []
        return tolerations


def ungated(manifest: dict[str, Any], gates: tuple[str, ...], annotations: dict[str, str]) -> dict[str, Any]:
    """A pod's manifest after an update that removes scheduling gates and adds annotations (a new dict:
    the old one may be shared with the log's event)."""
    spec = dict(manifest.get("spec") or {})
    left = [g for g in spec.get("schedulingGates") or [] if g.get("name") not in gates]
    if left:
        spec["schedulingGates"] = left
    else:
        spec.pop("schedulingGates", None)
    meta = dict(manifest.get("metadata") or {})
    if annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    return {**manifest, "metadata": meta, "spec": spec}


@dataclass
class FaultState:
    """A fault injected into the run (`FaultInjected`) and how far the chaos reactor has got with it
    (`FaultApplied`): started when its effects were written, ended when they were undone."""

    fault: str
    kind: str
    target: str
    start_ms: int
    until_ms: int  # -1: never ends
    params: dict[str, Any] = field(default_factory=dict)
    started: bool = False
    ended: bool = False
    effective: bool = False  # its start changed the cluster (so its end undoes that)

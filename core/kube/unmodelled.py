"""What dralab does with each field of the objects it simulates: modelled, kept without effect, or refused.

House rule (issue 21, "no silent ignores"): a field that changes what kube-scheduler, cluster-autoscaler, the
DRA allocator or the kubelet's admission does, and that dralab does not model, must not be accepted and then
ignored: a scenario using it would run a cluster Kubernetes would not run. :data:`FIELDS` classifies the fields
of each kind, from upstream's API types (k8s.io/api core/v1 ``PodSpec``, ``Container``, ``Volume``, ``NodeSpec``,
``NodeStatus``; resource/v1 ``DeviceClass``, ``ResourceClaim``; scheduling ``Workload``/``PodGroup``) and the
scheduler plugins that read them:

- ``modelled``: dralab reads it as upstream does (the "(issue 21)" ones are being modelled in this round);
- ``no effect``: kept, ignored on purpose: nothing in scheduling reads it (image pull policy, env, probes...);
- ``refused``: changes scheduling and is not modelled. A *scenario* using it is refused (exit 2, FieldError
  naming the field); a *dump* read by ``dralab audit`` is a real cluster, so there the field is reported instead
  (:func:`unmodelled_uses`, "not modelled: N pods use ...; their ... were not checked") and the audit goes on.

Fields a kind's table does not list are kept as before (an unknown field of a newer release may come up; the
API server of the scenario's release would have dropped it). The DRA kinds, Workloads and PodGroups are read
with closed field lists (core/dra/claims.py, convert.py, core/kube/workloads.py, podgroup_convert.py): their
rows say what each accepted field does, and tests/test_unmodelled.py checks the rows against those lists.

docs/scenario-format.md, "What dralab models", is generated from this table (:func:`render_markdown`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .fields import FieldError, index, join

__all__ = ["FIELDS", "MODELLED", "NO_EFFECT", "REFUSED", "Field", "check_unmodelled", "render_markdown",
           "unmodelled_uses"]

MODELLED, NO_EFFECT, REFUSED = "modelled", "no effect", "refused"
ISSUE_21 = " (issue 21)"


@dataclass(frozen=True)
class Field:
    """One field of ``kind``: ``path`` with ``[]`` for every list item (``spec.containers[].ports[].hostPort``).
    ``why``: for a modelled field what reads it, for one without effect why none, for a refused one what upstream
    does with it. ``unchecked``: for a refused field, what an audit of a dump could not check because of it.
    ``when``: a refused field counts only when this holds of the whole object (``hostNetwork`` with ports)."""

    kind: str
    path: str
    status: str
    why: str
    unchecked: str = ""
    when: Callable[[dict[str, Any]], bool] | None = None


def _has_ports(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    return any(isinstance(c, dict) and c.get("ports") for f in ("containers", "initContainers")
               for c in (spec or {}).get(f) or [] if isinstance(c, dict))


def _not_linux(pod: dict[str, Any]) -> bool:
    """spec.os names another system than linux: dralab's emulated kubelets are linux nodes (GPU clusters), so a
    linux pod is admitted as upstream would admit it; another OS would be rejected there (PodOSNotSupported)."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    system = (spec or {}).get("os")
    return not (isinstance(system, dict) and system.get("name") == "linux")


_VOLUME_FILTERS = "VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits"
_VOLUME_UNCHECKED = "their volume constraints (binding, zone, conflicts, attach limits) were not checked"
# Volume sources kube-scheduler's volume plugins read (pkg/scheduler/framework/plugins/volumebinding,
# volumezone, volumerestrictions: GCE PD / AWS EBS / RBD / iSCSI conflicts, nodevolumelimits/csi.go: PVCs,
# generic ephemeral and inline CSI volumes, in-tree volumes through CSI migration).
_VOLUMES_READ = {
    "persistentVolumeClaim": f"binds the pod to its claim's PersistentVolume and that volume's node affinity and "
                             f"zone ({_VOLUME_FILTERS})",
    "ephemeral": f"creates a PersistentVolumeClaim the scheduler binds as a persistentVolumeClaim ({_VOLUME_FILTERS})",
    "csi": "counts against the node's CSI attach limit (NodeVolumeLimits)",
    "gcePersistentDisk": "conflicts with another pod's read-write use of the disk (VolumeRestrictions) and counts "
                         "against the attach limit (NodeVolumeLimits, CSI migration)",
    "awsElasticBlockStore": "conflicts with another pod using the volume (VolumeRestrictions) and counts against the "
                            "attach limit (NodeVolumeLimits, CSI migration)",
    "rbd": "conflicts with another pod's read-write use of the image (VolumeRestrictions)",
    "iscsi": "conflicts with another pod's read-write use of the LUN (VolumeRestrictions)",
    "azureDisk": "counts against the node's attach limit (NodeVolumeLimits, CSI migration)",
    "cinder": "counts against the node's attach limit (NodeVolumeLimits, CSI migration)",
    "vsphereVolume": "counts against the node's attach limit (NodeVolumeLimits, CSI migration)",
    "portworxVolume": "counts against the node's attach limit (NodeVolumeLimits, CSI migration)",
}
_VOLUMES_FREE = ("configMap", "secret", "downwardAPI", "projected", "image", "nfs",
                 "gitRepo", "cephfs", "glusterfs", "flexVolume", "fc", "flocker", "quobyte", "scaleIO", "storageos",
                 "photonPersistentDisk", "azureFile")
_CONTAINER_FREE = ("command", "args", "workingDir", "env", "envFrom", "volumeMounts", "volumeDevices",
                   "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
                   "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce", "tty",
                   "resizePolicy")
_POD_FREE = ("restartPolicy", "dnsPolicy", "dnsConfig", "hostname", "hostnameOverride", "subdomain", "hostAliases",
             "setHostnameAsFQDN", "serviceAccountName", "serviceAccount", "automountServiceAccountToken", "hostPID",
             "hostIPC", "hostUsers", "shareProcessNamespace", "securityContext", "imagePullSecrets", "readinessGates",
             "enableServiceLinks", "ephemeralContainers")


def _pod() -> list[Field]:
    rows = [
        Field("Pod", "metadata.labels", MODELLED, "matched by selectors (gangs, Kueue, affinity and spread)"),
        Field("Pod", "metadata.ownerReferences", MODELLED, "the pod's controller: scale-down drains, replacements"),
        Field("Pod", "metadata.annotations", MODELLED, "cluster-autoscaler's safe-to-evict and pod-scale-up-delay "
              "annotations, Kueue's"),
        Field("Pod", "spec.volumes[].name", MODELLED, "named by safe-to-evict-local-volumes"),
        Field("Pod", "spec.volumes[].emptyDir", MODELLED, "local storage: blocks cluster-autoscaler's scale-down drain "
              "unless in memory or declared safe (utils/drain HasBlockingLocalStorage)"),
        Field("Pod", "spec.volumes[].hostPath", MODELLED, "local storage: blocks cluster-autoscaler's scale-down drain "
              "unless declared safe"),
        Field("Pod", "spec.containers[].resources", MODELLED, "requests and limits (NodeResourcesFit), claims (DRA)"),
        Field("Pod", "spec.initContainers[].resources", MODELLED, "requests as PodRequests counts init containers"),
        Field("Pod", "spec.initContainers[].restartPolicy", MODELLED, "a sidecar's requests add to the pod's"),
        *(Field("Pod", f"spec.{c}[].image", MODELLED, "ImageLocality scoring, with the nodes' status.images" + ISSUE_21)
          for c in ("containers", "initContainers")),
        *(Field("Pod", f"spec.{c}[].ports[].hostPort", REFUSED, "takes the port on the node: two pods asking for "
                "the same host port never share a node (NodePorts)", "their host ports were not checked (NodePorts)")
          for c in ("containers", "initContainers")),
        Field("Pod", "spec.hostNetwork", REFUSED,
              "with container ports, makes each a host port (API defaulting), which NodePorts keeps apart on a node",
              "their host ports were not checked (NodePorts)", when=_has_ports),
        Field("Pod", "spec.resources", MODELLED, "pod-level requests (PodRequests)"),
        Field("Pod", "spec.overhead", MODELLED, "added to the pod's requests"),
        Field("Pod", "spec.nodeSelector", MODELLED, "NodeAffinity"),
        Field("Pod", "spec.nodeName", MODELLED, "a pod bound by its creator (NodeName)"),
        Field("Pod", "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", MODELLED,
              "NodeAffinity Filter"),
        Field("Pod", "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution", MODELLED,
              "NodeAffinity Score" + ISSUE_21),
        Field("Pod", "spec.affinity.podAffinity", MODELLED, "InterPodAffinity" + ISSUE_21),
        Field("Pod", "spec.affinity.podAntiAffinity", MODELLED, "InterPodAffinity" + ISSUE_21),
        Field("Pod", "spec.topologySpreadConstraints", MODELLED, "PodTopologySpread" + ISSUE_21),
        Field("Pod", "spec.tolerations", MODELLED, "TaintToleration, NoExecute eviction"),
        Field("Pod", "spec.schedulerName", MODELLED, "a pod of another scheduler is left alone"),
        Field("Pod", "spec.schedulingGates", MODELLED, "SchedulingGates"),
        Field("Pod", "spec.priority", MODELLED, "queue order (PrioritySort)"),
        Field("Pod", "spec.priorityClassName", MODELLED, "the pod's priority from its PriorityClass" + ISSUE_21),
        Field("Pod", "spec.preemptionPolicy", MODELLED, "DefaultPreemption (Never: the pod preempts nobody)"
              + ISSUE_21),
        Field("Pod", "spec.terminationGracePeriodSeconds", MODELLED, "how long a preemption victim takes to go"
              + ISSUE_21),
        Field("Pod", "spec.resourceClaims", MODELLED, "DynamicResources"),
        Field("Pod", "spec.workloadRef", MODELLED, "gangs (KEP-4671, 1.35)"),
        Field("Pod", "spec.schedulingGroup", MODELLED, "PodGroups (1.36+)"),
        Field("Pod", "spec.runtimeClassName", REFUSED,
              "adds the RuntimeClass's overhead to the pod's requests and its scheduling nodeSelector and "
              "tolerations to the pod (RuntimeClass admission)", "their RuntimeClass overhead and node selection "
              "were not checked"),
        Field("Pod", "spec.os", REFUSED,
              "an operating system other than `linux` (dralab's nodes are linux) makes the kubelet reject the pod "
              "(admission, PodOSNotSupported)",
              "their operating system was not checked against the nodes'", when=_not_linux),
        Field("Pod", "spec.activeDeadlineSeconds", REFUSED,
              "makes the kubelet fail the pod after that many seconds, freeing its node and devices (use `runFor`)",
              "their deadline was not taken into account"),
        Field("Pod", "status.nominatedNodeName", MODELLED, "a preemptor's nominated node" + ISSUE_21),
        Field("Pod", "status.resourceClaimStatuses", MODELLED, "the claims generated for the pod (dumps)"),
        Field("Pod", "status.phase", MODELLED, "a finished pod holds nothing (dumps)"),
        Field("Pod", "status.conditions", MODELLED, "DisruptionTarget of a terminating pod; PodScheduled's message "
              "(audit, dumps)"),
        Field("Pod", "metadata.deletionTimestamp", MODELLED, "a terminating pod still holds its node (dumps)"),
    ]
    rows += [Field("Pod", f"spec.volumes[].{k}", REFUSED, why, _VOLUME_UNCHECKED) for k, why in _VOLUMES_READ.items()]
    rows += [Field("Pod", f"spec.volumes[].{k}", NO_EFFECT, "no scheduler plugin reads it") for k in _VOLUMES_FREE]
    rows += [Field("Pod", f"spec.containers[].{k}", NO_EFFECT, "not read by scheduling") for k in _CONTAINER_FREE]
    rows += [Field("Pod", f"spec.{k}", NO_EFFECT, "not read by scheduling") for k in _POD_FREE]
    return rows


_NODE_FREE = ("spec.podCIDR", "spec.podCIDRs", "spec.providerID", "spec.configSource", "spec.externalID",
              "status.addresses", "status.daemonEndpoints", "status.nodeInfo", "status.phase", "status.config",
              "status.volumesAttached", "status.volumesInUse", "status.runtimeHandlers", "status.features")


def _node() -> list[Field]:
    rows = [
        Field("Node", "metadata.labels", MODELLED, "NodeAffinity, topology domains"),
        Field("Node", "metadata.annotations", MODELLED, "a node group template's cluster-api capacity annotations "
              "(autoscaler#10199)"),
        Field("Node", "spec.taints", MODELLED, "TaintToleration, NoExecute eviction"),
        Field("Node", "spec.unschedulable", MODELLED, "NodeUnschedulable (cordon)"),
        Field("Node", "status.allocatable", MODELLED, "NodeResourcesFit"),
        Field("Node", "status.capacity", MODELLED, "stands in for a missing allocatable"),
        Field("Node", "status.conditions", MODELLED, "Ready (dumps; a scenario's node turns Ready as its group says); "
              "the pressure conditions act through the taints the node lifecycle controller sets, which are read"),
        Field("Node", "status.images", MODELLED, "ImageLocality scoring" + ISSUE_21),
    ]
    return rows + [Field("Node", p, NO_EFFECT, "not read by scheduling") for p in _NODE_FREE]


def _dra() -> list[Field]:
    c, r, t = "DeviceClass", "ResourceClaim", "ResourceClaimTemplate"
    exact = "spec.devices.requests[].exactly"
    first = "spec.devices.requests[].firstAvailable[]"
    rows = [
        Field(c, "spec.selectors", MODELLED, "CEL selectors of every request of the class"),
        Field(c, "spec.config", NO_EFFECT, "opaque driver configuration: handed to the driver, never to the allocator"),
        Field(c, "spec.extendedResourceName", MODELLED, "DRA extended resources" + ISSUE_21),
        Field(r, "spec.devices.requests[].name", MODELLED, "names the request in constraints and results"),
        Field(r, "spec.devices.constraints", MODELLED, "matchAttribute, distinctAttribute"),
        Field(r, "spec.devices.config", NO_EFFECT, "opaque driver configuration"),
        Field(r, "status.allocation", MODELLED, "an allocated claim's devices and node (dumps)"),
        Field(r, "status.reservedFor", MODELLED, "the pods using the claim (dumps)"),
        Field(r, "status.devices", MODELLED, "device conditions: binding conditions" + ISSUE_21),
        Field(t, "spec.metadata", NO_EFFECT, "labels and annotations of the generated claims"),
        Field(t, "spec.spec", MODELLED, "the generated claim's spec, as a ResourceClaim's"),
    ]
    for base in (exact, first):
        rows += [
            Field(r, f"{base}.deviceClassName", MODELLED, "the DeviceClass"),
            Field(r, f"{base}.selectors", MODELLED, "CEL selectors"),
            Field(r, f"{base}.allocationMode", MODELLED, "ExactCount or All"),
            Field(r, f"{base}.count", MODELLED, "how many devices"),
            Field(r, f"{base}.tolerations", MODELLED, "device taints" + ISSUE_21),
            Field(r, f"{base}.capacity", MODELLED, "consumable capacity"),
        ]
    rows.append(Field(r, f"{first}.name", MODELLED, "names the subrequest in results"))
    rows.append(Field(r, f"{exact}.adminAccess", MODELLED, "admin access: devices already in use may be allocated"))
    return rows


# scheduling.k8s.io v1alpha2/v1alpha3/v1beta1 (1.36, 1.37): core/kube/podgroup_convert.py reads them
_PG, _CPG, _WL = "PodGroup (1.36+)", "CompositePodGroup (1.37)", "Workload (1.36+)"
_GROUPS_136 = (
    (_PG, "schedulingPolicy", "basic or gang (minCount)"),
    (_PG, "schedulingConstraints", "topology (TopologyAwareWorkloadScheduling)"),
    (_PG, "resourceClaims", "claims shared by the group (DRAWorkloadResourceClaims)"),
    (_PG, "disruptionMode", "workload-aware preemption"),
    (_PG, "priorityClassName", "the group's priority"),
    (_PG, "priority", "the group's priority, as admitted"),
    (_PG, "preemptionPolicy", "workload-aware preemption (Never: preempts nobody)"),
    (_PG, "workloadRef", "the Workload and template it comes from"),
    (_PG, "podGroupTemplateRef", "v1alpha2's reference to its Workload's template"),
    (_PG, "parentCompositePodGroupName", "the CompositePodGroup above it"),
    (_CPG, "schedulingPolicy", "basic or gang (minGroupCount)"),
    (_CPG, "priorityClassName", "the tree's priority"),
    (_CPG, "priority", "the tree's priority, as admitted"),
    (_CPG, "workloadRef", "the Workload it comes from"),
    (_CPG, "parentCompositePodGroupName", "the CompositePodGroup above it"),
    (_WL, "podGroupTemplates", "the templates of its PodGroups, fields as a PodGroup's"),
    (_WL, "compositePodGroupTemplates", "the templates of its CompositePodGroups"),
)


def _groups() -> list[Field]:
    w, pg = "Workload", "PodGroup"
    return [
        Field(w, "spec.podGroups[].name", MODELLED, "named by the pods' workloadRef"),
        Field(w, "spec.podGroups[].policy", MODELLED, "basic, or gang with minCount (GangScheduling)"),
        Field(w, "spec.controllerRef", NO_EFFECT, "names the object that made the Workload"),
        Field(pg, "spec.minMember", MODELLED, "Coscheduling: pods placed all-or-nothing"),
        Field(pg, "spec.minResources", MODELLED, "Coscheduling PreFilter: resources free in the cluster"),
        Field(pg, "spec.scheduleTimeoutSeconds", MODELLED, "Permit's wait for the rest of the group"),
        *(Field(g, f"spec.{k}", MODELLED, why) for g, k, why in _GROUPS_136),
        Field(_WL, "spec.controllerRef", NO_EFFECT, "names the object that made the Workload"),
    ]


FIELDS: tuple[Field, ...] = (*_pod(), *_node(), *_dra(), *_groups())
_BY_KIND: dict[str, tuple[Field, ...]] = {}
for _f in FIELDS:
    _BY_KIND[_f.kind] = (*_BY_KIND.get(_f.kind, ()), _f)
_REFUSED: dict[str, tuple[Field, ...]] = {k: tuple(f for f in v if f.status == REFUSED) for k, v in _BY_KIND.items()}


def _set(value: object) -> bool:
    """In use: present and not null, false, zero or empty (a `hostPort: 0` or `volumes: []` asks nothing)."""
    return value is not None and value is not False and value != 0 and value not in ("", [], {})


def _resolve(obj: object, parts: list[str], path: str) -> Iterator[tuple[str, object]]:
    """Every (concrete path, value) ``parts`` reaches in ``obj`` (a part ending in ``[]`` walks each item)."""
    if not parts:
        yield path, obj
        return
    head, rest = parts[0], parts[1:]
    many = head.endswith("[]")
    key = head[:-2] if many else head
    if not isinstance(obj, dict) or key not in obj:
        return
    sub = join(path, key)
    if not many:
        yield from _resolve(obj[key], rest, sub)
    elif isinstance(obj[key], list):
        for i, item in enumerate(obj[key]):
            yield from _resolve(item, rest, index(sub, i))


def _uses(kind: str, obj: dict[str, Any], path: str = "") -> Iterator[tuple[Field, str]]:
    for f in _REFUSED.get(kind, ()):
        if f.when is not None and not f.when(obj):
            continue
        for where, value in _resolve(obj, f.path.split("."), path):
            if _set(value):
                yield f, where


def check_unmodelled(kind: str, obj: dict[str, Any], path: str = "") -> None:
    """Refuse the first field of ``obj`` (a ``kind`` read for a scenario) that changes scheduling and is not
    modelled: FieldError at its path saying what upstream does with it. For dumps see :func:`unmodelled_uses`."""
    for f, where in _uses(kind, obj, path):
        name = f.path.rsplit(".", 1)[-1]
        raise FieldError(where, f"`{name}` {f.why}; it is not modelled by dralab: remove it")


def unmodelled_uses(kind: str, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a dump's ``objects`` of ``kind`` use that dralab does not model, one row per field:
    ``{"kind", "field", "count", "examples", "unchecked", "line"}`` with ``count`` the objects using it and
    ``line`` the sentence an audit prints ("not modelled: 3 pods use spec.volumes[].persistentVolumeClaim; their
    volume constraints ... were not checked")."""
    users: dict[str, list[str]] = {}
    rows: dict[str, Field] = {}
    for obj in objects:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        name = "/".join(str(p) for p in ((meta or {}).get("namespace"), (meta or {}).get("name")) if p)
        for f in {f.path: f for f, _ in _uses(kind, obj)}.values():
            rows[f.path] = f
            users.setdefault(f.path, []).append(name)
    out = []
    for field_path, f in rows.items():
        n = len(users[field_path])
        noun = kind.lower() + ("" if n == 1 else "s")
        out.append({"kind": kind, "field": field_path, "count": n, "examples": users[field_path][:3],
                    "unchecked": f.unchecked,
                    "line": f"not modelled: {n} {noun} use{'s' if n == 1 else ''} {field_path}; {f.unchecked}"})
    return sorted(out, key=lambda r: (r["kind"], r["field"]))


def render_markdown() -> str:
    """The "What dralab models" tables of docs/scenario-format.md, one per kind."""
    lines: list[str] = []
    for kind, rows in _BY_KIND.items():
        lines += [f"#### {kind}", "", "| field | dralab | why |", "|---|---|---|"]
        lines += [f"| `{f.path}` | {f.status} | {f.why} |" for f in rows]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"

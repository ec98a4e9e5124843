"""The DRA parts of a scenario: objects present at t=0, ResourceSlice templates, pod claims.

- ``spec.objects``: resource.k8s.io/v1 DeviceClasses, ResourceClaimTemplates and ResourceClaims (shared
  claims), and scheduling.k8s.io/v1alpha1 Workloads (gangs), that exist when the run starts; with a version
  profile, also the 1.36/1.37 Workloads, PodGroups and CompositePodGroups (scheduling.k8s.io v1alpha2, v1alpha3,
  v1beta1, converted to the v1beta1 hub, :mod:`dralab.core.kube.podgroups`) and scheduling.k8s.io/v1
  PriorityClasses, as far as the profile's release serves them;
- ``spec.nodeGroups[].resourceSlices``: the ResourceSlices the device drivers of every node of the group
  publish, as templates (:func:`render_slices` makes one node's concrete slices);
- ``spec.workload[].pod``: ``spec.resourceClaims`` and the containers' ``resources.claims``.

Every manifest is checked by the DRA manifest loader (:func:`dralab.core.dra.api.parse_documents`), and
an error names the field's path in the scenario (``spec.objects[2].spec.devices.requests[0].exactly.count``).
References between objects (a pod's template, a claim's DeviceClass) are not checked here: a pod whose
claim cannot be resolved stays pending with reason ``missing``, as the scheduler reports it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..dra.claims import convert_pod
from ..dra.model import Node as DraNode
from ..dra.model import Slice
from ..dra.pools import SliceIndex, gather_pools
from ..dra.taint_rules import GROUP as TAINT_RULE_GROUP
from ..dra.taint_rules import KIND as TAINT_RULE_KIND
from ..dra.taint_rules import convert_rule
from ..dra.validation import check_driver_name, check_pool_name, required
from ..kube.fields import FieldError, expect_list, expect_map, expect_str, index, join, type_name
from ..kube.kueue import ADMISSION_CHECK_KIND, CONFIG_KIND, KUEUE_API_VERSIONS, KUEUE_KINDS, check_kueue_object
from ..kube.pdb import API_VERSION as PDB_API_VERSION
from ..kube.pdb import KIND as PDB_KIND
from ..kube.pdb import check_pdb
from ..kube.podgroups import (
    PRIORITY_CLASS_API_VERSION,
    PRIORITY_CLASS_KIND,
    SCHEDULING_KINDS,
    admit_priorities,
    check_priority_class,
    check_scheduling_object,
)
from ..kube.provreq import (
    POD_TEMPLATE_KIND,
    PROVREQ_API_VERSION,
    PROVREQ_KIND,
    check_pod_template,
    check_provisioning_request,
)
from ..kube.versions import SCHEDULING_API_VERSIONS as SERVED_API_VERSIONS
from ..kube.versions import Profile
from ..kube.workloads import WORKLOAD_API_VERSION, WORKLOAD_KIND, check_workload

if TYPE_CHECKING:
    from .model import NodeGroup

__all__ = [
    "DRA_API_VERSION",
    "OBJECT_KINDS",
    "check_objects",
    "check_pod_claims",
    "check_slice_templates",
    "render_slice_templates",
    "render_slices",
    "slice_name",
    "slice_names",
]

DRA_API_VERSION = "resource.k8s.io/v1"
DRA_KINDS = ("DeviceClass", "ResourceClaimTemplate", "ResourceClaim")
OBJECT_KINDS = (*DRA_KINDS, WORKLOAD_KIND, POD_TEMPLATE_KIND, PROVREQ_KIND, PDB_KIND)
# the API version each kind must have, and the checker of the kinds outside resource.k8s.io
_API_VERSIONS = {**dict.fromkeys(DRA_KINDS, DRA_API_VERSION), WORKLOAD_KIND: WORKLOAD_API_VERSION,
                 POD_TEMPLATE_KIND: "v1", PROVREQ_KIND: PROVREQ_API_VERSION, PDB_KIND: PDB_API_VERSION}
_CHECKERS = {WORKLOAD_KIND: check_workload, POD_TEMPLATE_KIND: check_pod_template,
             PROVREQ_KIND: check_provisioning_request, PDB_KIND: check_pdb}
_NAMESPACED = ("ResourceClaimTemplate", "ResourceClaim", WORKLOAD_KIND, POD_TEMPLATE_KIND, PROVREQ_KIND, PDB_KIND)
_ELSEWHERE = {
    "ResourceSlice": "ResourceSlices are published by the nodes: put them in `spec.nodeGroups[].resourceSlices`",
    "Pod": "pods arrive through `spec.workload`",
    "Node": "nodes come from `spec.nodeGroups` and `spec.nodes`",
}
# The fields of a slice template the emulator fills for each node, and why they may not be given.
_PER_NODE = "each node of the group publishes its own slices; dralab fills it with the node's name"
_NODE_LOCAL = (
    "a node group's slices describe the node's own devices (dralab sets `spec.nodeName` to each node's "
    "name); leave it out"
)
_DOCUMENTS = re.compile(r"documents\[\d+\]\.?")


def slice_name(node_name: str, driver: str, i: int) -> str:
    """The name of the ``i``-th slice (0-based, counted per driver) that ``node_name`` publishes for
    ``driver``: ``<node>-<driver>-<i>`` (the driver in lower case: driver names ignore case)."""
    return f"{node_name}-{driver.lower()}-{i}"


def render_slices(group: NodeGroup, node_name: str) -> list[dict[str, Any]]:
    """The ResourceSlice manifests the drivers of node ``node_name`` of ``group`` publish, in template
    order: deep copies of the group's templates with ``metadata.name`` (``<node>-<driver>-<i>``),
    ``spec.nodeName`` and ``spec.pool.name`` (the node's name) filled in."""
    return render_slice_templates(group.resource_slices, node_name)


def slice_names(templates: Sequence[dict[str, Any]], node_name: str) -> list[str]:
    """The names :func:`render_slice_templates` gives the slices of ``node_name``, without rendering them
    (the autoscaler asks this of every node on every loop)."""
    seen: dict[str, int] = {}
    out = []
    for template in templates:
        driver: str = template["spec"]["driver"]
        i = seen.get(driver, 0)
        seen[driver] = i + 1
        out.append(slice_name(node_name, driver, i))
    return out


def render_slice_templates(templates: Sequence[dict[str, Any]], node_name: str,
                           copiers: Sequence[Callable[[], dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """:func:`render_slices` for checked templates as :class:`~dralab.core.scenario.load.NodeGroup` holds them
    (``resource_slices``), for code that keeps the templates without the group. ``copiers``: one per
    template, each returning a deep copy of it (a decision rendering many nodes makes them once,
    ``reactors.nodes.copier``); by default ``copy.deepcopy``."""
    out: list[dict[str, Any]] = []
    for i, (template, name) in enumerate(zip(templates, slice_names(templates, node_name), strict=True)):
        driver: str = template["spec"]["driver"]
        manifest = copiers[i]() if copiers is not None else copy.deepcopy(template)
        manifest["metadata"] = {"name": name, **manifest["metadata"]}
        pool = {"name": node_name, **manifest["spec"]["pool"]}
        if manifest["spec"]["pool"].get("name"):  # a pool of its own on every node (check_slice_templates)
            pool["name"] = f"{node_name}/{manifest['spec']['pool']['name']}"
        manifest["spec"] = {"driver": driver, "pool": pool, "nodeName": node_name, **manifest["spec"]}
        manifest["spec"]["pool"] = pool
        out.append(manifest)
    return out


# --- checks ---------------------------------------------------------------------------------------------


def _parse(manifest: dict[str, Any], path: str) -> Any:
    """Check one manifest with the DRA loader; its errors are re-raised at ``path`` in the scenario."""
    from ..dra.api import ManifestError, parse_documents  # dra.api imports this package's scenario module

    try:
        return parse_documents([manifest], "<scenario>")
    except ManifestError as e:
        inner = _DOCUMENTS.sub("", e.path, count=1) if e.path.startswith("documents[") else e.path
        if not inner:
            raise FieldError(path, e.message) from None
        raise FieldError(path + inner if inner.startswith("[") else join(path, inner), e.message) from None


def _type_meta(obj: dict[str, Any], path: str) -> tuple[str, str]:
    out: list[str] = []
    for field in ("apiVersion", "kind"):
        value = obj.get(field)
        if value is None or value == "":
            raise FieldError(join(path, field), "missing required field")
        out.append(expect_str(value, join(path, field)))
    return out[0], out[1]


def _allowed(profile: Profile | None) -> str:
    """The kinds ``spec.objects`` holds (the scheduling.k8s.io ones as the release serves them), for the error
    on any other."""
    rest = (f"`{POD_TEMPLATE_KIND}` (v1), `{PROVREQ_KIND}` ({PROVREQ_API_VERSION}), `{PDB_KIND}` ({PDB_API_VERSION})"
            " and Kueue's "
            f"`{ADMISSION_CHECK_KIND}` and `{CONFIG_KIND}` ({KUEUE_API_VERSIONS[0]})")
    dra = ", ".join(f"`{k}`" for k in DRA_KINDS) + f" ({DRA_API_VERSION})"
    if profile is None:
        return f"{dra}, `{WORKLOAD_KIND}` ({WORKLOAD_API_VERSION}), {rest}"
    served = [a for a in SERVED_API_VERSIONS if profile.version in a.releases]
    kinds = ", ".join(f"`{k}`" for k in dict.fromkeys(k for a in served for k in a.kinds))
    versions = ", ".join(a.group_version for a in served)
    scheduling = f"{kinds} ({versions}, as Kubernetes {profile.version} serves them), " if served else ""
    return f"{dra}, {scheduling}`{PRIORITY_CLASS_KIND}` ({PRIORITY_CLASS_API_VERSION}), {rest}"


SCHEDULING_GROUP = "scheduling.k8s.io/"


class _Scheduling:
    """The 1.36/1.37 scheduling objects of ``spec.objects`` (with a profile): checked one by one, then the
    PodGroups' and CompositePodGroups' priorities resolved against the PriorityClasses once all are read (a class
    may come after the group that names it)."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.groups: list[tuple[dict[str, Any], str]] = []
        self.classes: list[dict[str, Any]] = []
        self.default: str | None = None  # where the globalDefault PriorityClass is

    def check(self, obj: dict[str, Any], path: str, api_version: str, kind: str) -> dict[str, Any] | None:
        """The checked object, or None if it is not one of these kinds."""
        if kind == PRIORITY_CLASS_KIND and api_version == PRIORITY_CLASS_API_VERSION:
            pc = check_priority_class(obj, path)
            if pc.get("globalDefault") is True:
                if self.default is not None:
                    raise FieldError(join(path, "globalDefault"), f"only one PriorityClass can be marked as default "
                                                                  f"(also {self.default})")
                self.default = path
            self.classes.append(pc)
            return pc
        if kind == WORKLOAD_KIND and api_version == WORKLOAD_API_VERSION:
            self.profile.check_api(api_version, kind, path)
            return check_workload(obj, path)
        if kind not in SCHEDULING_KINDS or not api_version.startswith(SCHEDULING_GROUP):
            return None
        if kind != WORKLOAD_KIND and obj.get("status"):
            raise FieldError(join(path, "status"), f"a {kind} of the scenario starts unscheduled (the scheduler writes "
                                                   "its conditions); leave `status` out")
        hub = check_scheduling_object(obj, path, self.profile)
        if kind != WORKLOAD_KIND:
            self.groups.append((hub, path))
        return hub

    def finish(self) -> None:
        admit_priorities(self.groups, self.classes, self.profile)


def check_objects(value: object, path: str = "spec.objects", profile: Profile | None = None) -> list[dict[str, Any]]:
    """Check ``spec.objects`` (plain data, see :func:`~dralab.core.kube.fields.sanitize`); return copies of
    the manifests with ``metadata.namespace`` filled in (``default``) for claims and templates. With a version
    ``profile``, the scheduling.k8s.io objects its release serves are accepted too (converted to the hub shape);
    without one, as dralab always has (1.35's v1alpha1 Workload)."""
    if value is None:
        return []
    out: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], str] = {}
    scheduling = _Scheduling(profile) if profile is not None else None
    for i, item in enumerate(expect_list(value, path)):
        o_path = index(path, i)
        if not isinstance(item, dict):
            raise FieldError(o_path, f"expected a Kubernetes object (a map), got {type_name(item)}")
        obj = copy.deepcopy(item)
        api_version, kind = _type_meta(obj, o_path)
        checked = scheduling.check(obj, o_path, api_version, kind) if scheduling is not None else None
        if kind == TAINT_RULE_KIND and api_version.startswith(TAINT_RULE_GROUP + "/"):  # core/dra/taint_rules.py
            checked = check_taint_rule(obj, o_path, profile)
        if checked is not None:
            obj = checked
        elif kind in KUEUE_KINDS:
            obj = check_kueue_object(obj, o_path)
        else:
            obj = _check_object(obj, o_path, api_version, kind, profile)
        meta = obj["metadata"]
        key = meta["name"]
        if kind in _NAMESPACED or kind in SCHEDULING_KINDS:
            meta["namespace"] = meta.get("namespace") or "default"
            key = f"{meta['namespace']}/{key}"
        first = seen.get((kind, key))
        if first is not None:
            raise FieldError(join(o_path, "metadata.name"), f"duplicate {kind} `{key}` (also {first})")
        seen[(kind, key)] = o_path
        out.append(obj)
    if scheduling is not None:
        scheduling.finish()
    return out


def _check_object(obj: dict[str, Any], o_path: str, api_version: str, kind: str,
                  profile: Profile | None) -> dict[str, Any]:
    """One object of the kinds dralab had before version profiles (DRA, Workload, PodTemplate, ProvReq)."""
    if kind not in OBJECT_KINDS:
        hint = _ELSEWHERE.get(kind)
        raise FieldError(
            join(o_path, "kind"),
            f"unsupported kind `{kind}`; expected one of {_allowed(profile)}" + (f": {hint}" if hint else ""),
        )
    expected = _API_VERSIONS[kind]
    if api_version != expected:
        release = "Kubernetes 1.35" if profile is None else f"Kubernetes {profile.version}"
        raise FieldError(join(o_path, "apiVersion"), f"expected `{expected}` ({release}), got `{api_version}`")
    if kind == "ResourceClaim" and obj.get("status") is not None:
        raise FieldError(
            join(o_path, "status"),
            "a claim of the scenario starts unallocated (the scheduler allocates it); leave `status` out",
        )
    checker = _CHECKERS.get(kind)
    if checker is not None:
        return checker(obj, o_path)
    _parse(obj, o_path)
    return obj


def check_slice_templates(value: object, path: str, group: str) -> list[dict[str, Any]]:
    """Check ``spec.nodeGroups[g].resourceSlices`` of node group ``group``; return copies of the templates
    with ``apiVersion``, ``kind``, ``spec.pool.generation`` (1) and ``spec.pool.resourceSliceCount`` (the
    number of templates of the driver's pool) filled in. A template may name its pool (``spec.pool.name``): a node
    then publishes that pool as ``<node>/<name>``, so one driver may have several pools per node; without a name,
    a driver's templates form one pool named after the node. ``resourceSliceCount`` above the templates listed, or
    templates of two generations, make every node publish its pool partly (cluster-autoscaler's readiness counts
    only complete pools: core/autoscaler/simulation/readiness.py)."""
    if value is None:
        return []
    templates: list[dict[str, Any]] = []
    counts: dict[tuple[str, str], int] = {}  # (driver, pool name given or "") -> its templates
    for i, item in enumerate(expect_list(value, path)):
        t_path = index(path, i)
        template = copy.deepcopy(expect_map(item, t_path))
        for field, expected in (("apiVersion", DRA_API_VERSION), ("kind", "ResourceSlice")):
            given = template.get(field)
            if given is None:
                template[field] = expected
            elif expect_str(given, join(t_path, field)) != expected:
                raise FieldError(join(t_path, field), f"expected `{expected}`, got `{given}`")
        meta_path = join(t_path, "metadata")
        meta = expect_map(template.get("metadata") or {}, meta_path)
        template["metadata"] = meta
        for field in ("name", "generateName"):
            if meta.get(field) is not None:
                raise FieldError(join(meta_path, field), f"leave it out: {_PER_NODE} (`<node>-<driver>-<i>`)")
        spec_path = join(t_path, "spec")
        if template.get("spec") is None:
            raise FieldError(spec_path, "missing required field")
        spec = expect_map(template["spec"], spec_path)
        if spec.get("nodeName") is not None:
            raise FieldError(join(spec_path, "nodeName"), f"leave it out: {_PER_NODE}")
        for field in ("nodeSelector", "allNodes", "perDeviceNodeSelection"):
            if spec.get(field) is not None:
                raise FieldError(join(spec_path, field), _NODE_LOCAL)
        if spec.get("driver") in (None, ""):
            raise required(join(spec_path, "driver"))
        driver = check_driver_name(expect_str(spec["driver"], join(spec_path, "driver")), join(spec_path, "driver"))
        pool_path = join(spec_path, "pool")
        pool = expect_map(spec.get("pool") or {}, pool_path)
        if pool.get("name") is not None:  # several pools of one driver: each node publishes `<node>/<name>`
            check_pool_name(expect_str(pool["name"], join(pool_path, "name")), join(pool_path, "name"))
        spec["pool"] = pool
        counts[(driver, pool.get("name") or "")] = counts.get((driver, pool.get("name") or ""), 0) + 1
        # The usual order of a manifest's fields, so that a rendered slice reads as `kubectl` prints one.
        ordered = {k: template[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        templates.append({**ordered, **template})
    for template in templates:
        pool = template["spec"]["pool"]
        pool.setdefault("generation", 1)
        pool.setdefault("resourceSliceCount", counts[(template["spec"]["driver"], pool.get("name") or "")])
    _check_rendered(templates, path, f"{group}-0")
    return templates


def _check_rendered(templates: list[dict[str, Any]], path: str, node: str) -> None:
    """Check the slices one node of the group would publish, as the loader and the allocator see them."""
    slices: list[Slice] = []
    devices: dict[tuple[str, str, str], str] = {}  # (driver, pool, device) -> where
    counters: dict[tuple[str, str, str], str] = {}  # (driver, pool, counter set) -> where
    for i, manifest in enumerate(render_slice_templates(templates, node)):
        t_path = index(path, i)
        [slc] = _parse(manifest, t_path).slices.values()
        slices.append(slc)
        spec = manifest["spec"]
        for what, field, seen in (("device", "devices", devices), ("counter set", "sharedCounters", counters)):
            for j, entry in enumerate(spec.get(field) or []):
                where = join(index(join(join(t_path, "spec"), field), j), "name")
                first = seen.get((slc.driver, slc.pool, entry["name"]))
                if first is not None:
                    raise FieldError(
                        where,
                        f"duplicate {what} name `{entry['name']}` in the pool of driver `{slc.driver}` (also {first}); "
                        "the slices of one driver on a node form one pool",
                    )
                seen[(slc.driver, slc.pool, entry["name"])] = where
    for pool in gather_pools(SliceIndex.build(slices), DraNode(name=node)):
        if pool.invalid:
            raise FieldError(path, f"the slices of driver `{pool.driver}` make an invalid pool: {pool.invalid_reason}")


def check_pod_claims(pod: dict[str, Any], path: str) -> None:
    """Check a (checked) pod's ``spec.resourceClaims`` and its containers' ``resources.claims``. The claims,
    templates and classes they name need not exist."""
    spec = pod["spec"]
    if spec.get("resourceClaims") is None and not any(
        isinstance(c, dict) and isinstance(c.get("resources"), dict) and c["resources"].get("claims") is not None
        for kind in ("containers", "initContainers")
        for c in spec.get(kind) or []
    ):
        return
    convert_pod(pod, path)


def check_taint_rule(obj: dict[str, Any], path: str, profile: Profile | None) -> dict[str, Any]:
    """A DeviceTaintRule of ``spec.objects`` (or of a `device-taint` fault), as the release serves it; refused
    without a release profile (the legacy 1.35 model has DRADeviceTaintRules off)."""
    if profile is None:
        raise FieldError(join(path, "kind"), f"a {TAINT_RULE_KIND} needs a release profile with its gate on "
                                             "(spec.kubernetes: 1.37, or 1.35/1.36 with DRADeviceTaintRules)")
    if obj.get("status") is not None:
        raise FieldError(join(path, "status"), "a rule of the scenario starts without status (the device taint "
                                               "eviction controller writes it); leave `status` out")
    convert_rule(obj, path, profile, scenario=True)
    return obj

"""Reading resource.k8s.io/v1 and v1 manifests into an :class:`~dralab.core.dra.model.Inventory`.

Input is multi-document YAML (or JSON), and ``kind: List`` (what ``kubectl get ... -o yaml`` prints), in
any mix of DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate (``resource.k8s.io/v1``),
Node and Pod (``v1``), Workload (``scheduling.k8s.io/v1alpha1``, gang scheduling, KEP-4671; a pod's
``spec.workloadRef`` is checked too) and PodGroup (``scheduling.x-k8s.io/v1alpha1``, the scheduler-plugins
Coscheduling CRD). Objects of other kinds go to ``Inventory.other`` untouched (DeviceTaintRules too, once checked:
core/dra/taint_rules.py; a dump's rules were served, so only their shape is checked). Every object is
checked as the Kubernetes 1.35 API server would check it on create (limits, one-of rules, names), and a
refusal is a :class:`ManifestError` naming the file, the path of the field and what was expected::

    cluster.yaml: items[3].spec.devices[2].attributes.model: Too long: may not be more than 64 bytes

In a file of several documents the path starts with ``documents[i]`` (0-based, empty documents counted);
in a List, with ``items[i]``. Each object's manifest is kept as read, so fields dralab does not model
round-trip: :func:`dump_objects` gives them back.

Every document of every file is checked before the read fails: :class:`ManifestErrors` lists each refusal (one
per document or List item). An object given twice with equal copies is read once; copies that differ are refused
naming both places and the first field that differs (core/dra/merge.py).

With a ``profile``, DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates of the older versions
the release serves (``resource.k8s.io/v1beta1``, ``v1beta2``; beta, so with runtime-config) are converted to v1 as
kube-apiserver converts them (core/dra/older.py) and kept in their v1 form; ``v1alpha3`` ones (1.31-1.33) are
refused naming what the release serves.

With a version ``profile`` (:mod:`dralab.core.kube.versions`), the scheduling.k8s.io objects are read as that
release serves them: 1.35's v1alpha1 Workload as above; the 1.36/1.37 Workload, PodGroup and CompositePodGroup
(v1alpha2, v1alpha3, v1beta1) checked and converted to the v1beta1 hub (:mod:`dralab.core.kube.podgroups`;
a PodGroup's ``status.conditions`` kept, they are evidence), and scheduling.k8s.io/v1 PriorityClasses; these go to
``Inventory.other`` in the hub shape (:func:`scheduling_objects` picks them out); a pod's ``spec.schedulingGroup``
(1.36+) or ``spec.workloadRef`` (1.35) is checked against the release.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from typing import Any

from ..kube.errors import ScenarioError
from ..kube.fields import FieldError, expect_list, index, join, sanitize, type_name
from ..kube.pdb import API_VERSION as PDB_API_VERSION
from ..kube.pdb import KIND as PDB_KIND
from ..kube.pdb import check_pdb
from ..kube.podgroups import (
    HUB_API_VERSION,
    PRIORITY_CLASS_API_VERSION,
    PRIORITY_CLASS_KIND,
    SCHEDULING_KINDS,
    admit_priorities,
    check_priority_class,
    check_scheduling_group,
    check_scheduling_object,
)
from ..kube.versions import Profile
from ..kube.workloads import (
    POD_GROUP_API_VERSION,
    POD_GROUP_KIND,
    WORKLOAD_API_VERSION,
    WORKLOAD_KIND,
    check_pod_group,
    check_workload,
    check_workload_ref,
)
from ..kube.yaml_files import YamlError, load_yaml_all
from .checks import name_object
from .claims import convert_claim, convert_pod, convert_template
from .convert import convert_device_class, convert_node, convert_slice
from .foreign_kinds import is_foreign, missing_products
from .merge import first_difference
from .model import Claim, Inventory
from .older import path_in_file, served_check, to_v1
from .taint_rules import KIND as TAINT_RULE_KIND
from .taint_rules import convert_rule

__all__ = [
    "API_VERSION",
    "DRA_KINDS",
    "MAX_FILE_BYTES",
    "InventoryBuilder",
    "ManifestError",
    "ManifestErrors",
    "claim_from_template",
    "dump_objects",
    "load_objects",
    "parse_documents",
    "read_documents",
    "scheduling_objects",
]

API_VERSION = "resource.k8s.io/v1"
DRA_GROUP = "resource.k8s.io"
DRA_KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
CORE_KINDS = ("Node", "Pod")
SCHEDULING_GROUP = "scheduling.k8s.io"
POD_GROUP_GROUP = "scheduling.x-k8s.io"  # scheduler-plugins' CRDs
MAX_FILE_BYTES = 64 * 1024 * 1024  # a dump of a large cluster's slices, not a guard against any file


class ManifestError(ScenarioError):
    """A manifest refused on input. ``str()`` is ``file: path: message`` (``file: message`` when the whole
    file is at fault, ``file:line:col: message`` for a YAML syntax error); the CLI exits 2 on it."""


class ManifestErrors(ManifestError):
    """Every refusal of a read (one per document or List item: an object's checks stop at its first error),
    in file and document order. ``file``, ``path`` and ``message`` are the first one's; ``str()`` is one line per
    error, first line first (the first :data:`SHOWN`, then how many more), then ``(N errors)`` when there are
    several, so the CLI's exit 2 lists them all."""

    SHOWN = 50

    def __init__(self, errors: Sequence[ManifestError]) -> None:
        self.errors = list(errors)
        first = self.errors[0]
        super().__init__(first.file, first.path, first.message, line=first.line, column=first.column)

    def __str__(self) -> str:
        errors = getattr(self, "errors", None)
        if not errors:
            return super().__str__()
        lines = [ManifestError.__str__(e) for e in errors[: self.SHOWN]]
        if len(errors) > self.SHOWN:
            lines.append(f"... and {len(errors) - self.SHOWN} more")
        if len(errors) > 1:
            lines.append(f"({len(errors)} errors)")
        return "\n".join(lines)


def load_objects(paths: Sequence[str | os.PathLike[str]], *, profile: Profile | None = None) -> Inventory:
    """Read, check and convert every object in the files at ``paths`` (as ``profile``'s release serves them,
    when given).

    An object given twice (in one file or several) is read once when both copies are equal, and refused naming
    both places and the first field that differs when they are not (core/dra/merge.py). Every file is read and
    every document checked before :class:`ManifestErrors` (a :class:`ManifestError`) lists all refusals.
    """
    builder = InventoryBuilder(profile)
    for path in paths:
        file = os.fspath(path)
        try:
            docs = read_documents(file)
        except ManifestError as e:
            builder.errors.append(e)
            continue
        if all(doc is None for doc in docs):
            builder.errors.append(ManifestError(file, "", "the file holds no Kubernetes object"))
            continue
        builder.add_documents(docs, file)
    builder.finish()
    builder.raise_errors()
    return builder.inventory


def parse_documents(docs: list[object], file: str = "<input>", *, profile: Profile | None = None) -> Inventory:
    """Check and convert already loaded YAML documents (``docs`` is not modified); ``file`` names them
    in errors."""
    builder = InventoryBuilder(profile)
    builder.add_documents(docs, file)
    builder.finish()
    builder.raise_errors()
    return builder.inventory


def scheduling_objects(inv: Inventory, kind: str) -> dict[str, dict[str, Any]]:
    """The hub-shaped objects of ``kind`` (Workload, PodGroup, CompositePodGroup; PriorityClass) a profile-aware
    read put in ``inv.other``, by ``namespace/name`` (by name for the cluster-scoped PriorityClass)."""
    want = PRIORITY_CLASS_API_VERSION if kind == PRIORITY_CLASS_KIND else HUB_API_VERSION
    out: dict[str, dict[str, Any]] = {}
    for obj in inv.other:
        if obj.get("kind") == kind and obj.get("apiVersion") == want:
            meta = obj["metadata"]
            out[f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]] = obj
    return out


def dump_objects(inv: Inventory) -> list[dict[str, Any]]:
    """The manifests of ``inv`` as they were read (copies), by kind: Nodes, DeviceClasses, ResourceSlices,
    ResourceClaimTemplates, ResourceClaims, Workloads, PodGroups, Pods, then every other object, each kind in
    input order."""
    out: list[dict[str, Any]] = [n.manifest for n in inv.nodes.values()]
    out += [c.manifest for c in inv.classes.values()]
    out += [s.manifest for s in inv.slices.values()]
    out += list(inv.templates.values())
    out += [c.manifest for c in inv.claims.values()]
    out += list(inv.workloads.values())
    out += list(inv.pod_groups.values())
    out += list(inv.pods.values())
    out += inv.other
    return copy.deepcopy(out)


def claim_from_template(template: dict[str, Any], name: str, *, uid: str = "") -> Claim:
    """The ResourceClaim the resourceclaim controller would create from ``template`` (a checked
    ResourceClaimTemplate manifest) under the name ``name``: the template's labels and annotations, its
    claim spec verbatim, in the template's namespace."""
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    claim_meta: dict[str, Any] = {"name": name, "namespace": meta.get("namespace") or "default"}
    if uid:
        claim_meta["uid"] = uid
    for field in ("labels", "annotations"):
        if (spec.get("metadata") or {}).get(field):
            claim_meta[field] = copy.deepcopy(spec["metadata"][field])
    manifest = {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": claim_meta,
        "spec": copy.deepcopy(spec.get("spec") or {}),
    }
    try:
        return convert_claim(manifest, "")
    except FieldError as e:
        raise ManifestError(f"<claim from ResourceClaimTemplate {meta.get('name')}>", e.path, e.message) from None


# --- reading --------------------------------------------------------------------------------------------


def read_documents(file: str, *, max_bytes: int = MAX_FILE_BYTES) -> list[Any]:
    """Every YAML document of the file at ``file`` (None for an empty one), read with dralab's safe loader
    (duplicate keys refused, timestamps kept as strings). Raises :class:`ManifestError`."""
    try:
        with open(file, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise ManifestError(file, "", f"cannot read the file: {e.strerror or e}") from None
    if len(raw) > max_bytes:
        size = f"{max_bytes >> 20} MiB" if max_bytes % (1 << 20) == 0 else f"{max_bytes} bytes"
        raise ManifestError(file, "", f"the file is larger than {size}")
    try:
        return _load_all(raw)
    except YamlError as e:
        raise ManifestError(file, "", e.message, line=e.line, column=e.column) from None


def _load_all(raw: bytes) -> list[Any]:
    return load_yaml_all(raw)


# --- building the inventory -----------------------------------------------------------------------------

_KIND_KEYS = {"Node": "nodes", "DeviceClass": "classes", "ResourceSlice": "slices"}


def _within(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


class InventoryBuilder:
    """Adds the objects of one file after another to ``inventory``, refusing a name seen before."""

    def __init__(self, profile: Profile | None = None) -> None:
        self.inventory = Inventory()
        self.profile = profile
        self._seen: dict[tuple[str, str], tuple[str, object]] = {}  # (kind, key) -> (where first read, the copy)
        self.errors: list[ManifestError] = []  # every refusal so far (add_documents goes on past one)
        # with a profile: the groups whose priority admission resolves once every file is read, and the classes
        self._groups: list[tuple[dict[str, Any], str, str]] = []  # (hub, path, file)
        self._classes: list[dict[str, Any]] = []
        self._foreign: list[tuple[dict[str, Any], str, str]] = []  # (object, path, file): core/dra/foreign_kinds.py

    def finish(self) -> None:
        """Refuse a ComputeDomain-like object whose controller's products the input lacks (core/dra/foreign_kinds.py);
        resolve the priorities of the PodGroups and CompositePodGroups read (a dump's admitted ones kept)."""
        for obj, path, file in self._foreign:
            if (missing := missing_products(obj, path, self.inventory.templates)) is not None:
                self.errors.append(ManifestError(file, *missing))
        if self.profile is None:
            return
        for hub, path, file in self._groups:
            try:
                admit_priorities([(hub, path)], self._classes, self.profile, admitted=True)
            except FieldError as e:
                self.errors.append(ManifestError(file, e.path, e.message))

    def raise_errors(self) -> None:
        """Raise :class:`ManifestErrors` listing every refusal, if there was any."""
        if self.errors:
            raise ManifestErrors(self.errors) from None

    def add_documents(self, docs: Sequence[object], file: str) -> None:
        """Add every document of ``file``; a refused one (or List item) is noted in :attr:`errors` and the rest
        are still read, so that one run names every error of the input."""
        several = len(docs) > 1
        for i, doc in enumerate(docs):
            if doc is None:
                continue
            prefix = index("documents", i) if several else ""
            try:
                try:
                    data = sanitize(doc)
                except FieldError as e:
                    raise FieldError(_within(prefix, e.path), e.message) from None
                self._add(data, prefix, file)
            except FieldError as e:
                self.errors.append(ManifestError(file, e.path, name_object(doc, e)))

    def _add(self, obj: object, path: str, file: str) -> None:
        if not isinstance(obj, dict):
            raise FieldError(path, f"expected a Kubernetes object (a map), got {type_name(obj)}")
        for field in ("apiVersion", "kind"):
            value = obj.get(field)
            if not isinstance(value, str) or not value:
                shown = "missing required field" if value in (None, "") else f"expected str, got {type_name(value)}"
                raise FieldError(join(path, field), shown)
        api_version, kind = obj["apiVersion"], obj["kind"]
        group = api_version.rpartition("/")[0]
        if kind == "List" or (kind.endswith("List") and self._typed(kind[:-4], group, api_version)):
            self._add_list(obj, path, file, api_version, kind)
            return
        if kind in DRA_KINDS and group == DRA_GROUP:
            if api_version != API_VERSION and self.profile is not None:
                self._add_older(obj, path, file, api_version, kind)
                return
            if api_version != API_VERSION:
                raise FieldError(
                    join(path, "apiVersion"), f"expected `{API_VERSION}` (Kubernetes 1.35), got `{api_version}`"
                )
            self._add_dra(obj, path, file, kind)
        elif kind in CORE_KINDS and api_version == "v1":
            self._add_core(obj, path, file, kind)
        elif kind == TAINT_RULE_KIND and group == DRA_GROUP:  # kept in `other`, checked (core/dra/taint_rules.py)
            if self._claim_name(kind, convert_rule(obj, path).name, path, file, obj):
                self.inventory.other.append(obj)
        elif kind == PDB_KIND and group == "policy":  # kept in `other`, its spec checked; a dump's status is the
            # disruption controller's and is read as written (scheduler/preemption.py view_budgets)
            if api_version != PDB_API_VERSION:
                raise FieldError(join(path, "apiVersion"), f"expected `{PDB_API_VERSION}`, got `{api_version}`")
            meta = check_pdb({k: v for k, v in obj.items() if k != "status"}, path)["metadata"]
            if self._claim_name(kind, f"{meta['namespace']}/{meta['name']}", path, file, obj):
                self.inventory.other.append(obj)
        elif self.profile is not None and self._scheduling(self.profile, obj, path, file, api_version, kind, group):
            pass
        elif kind == WORKLOAD_KIND and group == SCHEDULING_GROUP:
            if api_version != WORKLOAD_API_VERSION:
                raise FieldError(join(path, "apiVersion"),
                                 f"expected `{WORKLOAD_API_VERSION}` (Kubernetes 1.35), got `{api_version}`")
            self._add_workload(obj, path, file)
        elif kind == POD_GROUP_KIND and group == POD_GROUP_GROUP:
            if api_version != POD_GROUP_API_VERSION:
                raise FieldError(join(path, "apiVersion"),
                                 f"expected `{POD_GROUP_API_VERSION}` (scheduler-plugins), got `{api_version}`")
            self._add_pod_group(obj, path, file)
        else:
            if is_foreign(group, kind):  # a CRD whose controller makes the pods' DRA objects: checked in finish()
                self._foreign.append((obj, path, file))
            self.inventory.other.append(obj)

    def _typed(self, kind: str, group: str, api_version: str) -> bool:
        return (((kind in DRA_KINDS or kind == TAINT_RULE_KIND) and group == DRA_GROUP)
                or (kind in CORE_KINDS and api_version == "v1")
                or (kind == WORKLOAD_KIND and group == SCHEDULING_GROUP)
                or (kind == POD_GROUP_KIND and group == POD_GROUP_GROUP)
                or (self.profile is not None and group == SCHEDULING_GROUP
                    and (kind in SCHEDULING_KINDS or kind == PRIORITY_CLASS_KIND)))

    def _scheduling(self, profile: Profile, obj: dict[str, Any], path: str, file: str, api_version: str, kind: str,
                    group: str) -> bool:
        """A scheduling.k8s.io object read under ``profile``; False if ``obj`` is not one."""
        if group != SCHEDULING_GROUP:
            return False
        if kind == PRIORITY_CLASS_KIND and api_version == PRIORITY_CLASS_API_VERSION:
            pc = check_priority_class(obj, path)
            if self._claim_name(kind, pc["metadata"]["name"], path, file, pc):
                self._classes.append(pc)
                self.inventory.other.append(pc)
            return True
        if kind not in SCHEDULING_KINDS:
            return False
        if kind == WORKLOAD_KIND and api_version == WORKLOAD_API_VERSION:
            profile.check_api(api_version, kind, path)
            self._add_workload(obj, path, file)
            return True
        hub = check_scheduling_object(obj, path, profile)
        meta = hub["metadata"]
        if not self._claim_name(kind, f"{meta['namespace']}/{meta['name']}", path, file, hub):
            return True
        if kind != WORKLOAD_KIND:
            self._groups.append((hub, path, file))
        self.inventory.other.append(hub)
        return True

    def _add_list(self, obj: dict[str, Any], path: str, file: str, api_version: str, kind: str) -> None:
        items = expect_list(obj.get("items") or [], join(path, "items"))
        item_kind = None if kind == "List" else kind[:-4]
        for i, item in enumerate(items):
            if item_kind is not None and isinstance(item, dict):
                # The items of a typed list (ResourceSliceList, as the API returns it) omit their type.
                item = {"apiVersion": api_version, "kind": item_kind, **item}
            try:
                self._add(item, index(join(path, "items"), i), file)
            except FieldError as e:  # one refused item: noted, the list's other items still read
                self.errors.append(ManifestError(file, e.path, e.message))

    def _add_older(self, obj: dict[str, Any], path: str, file: str, api_version: str, kind: str) -> None:
        """A DRA object of an older served version (v1alpha3, v1beta1, v1beta2): refused unless the profile's
        release serves it, converted to v1 as kube-apiserver converts it (core/dra/older.py), then read as v1;
        an error names the path in the file as written."""
        assert self.profile is not None
        served_check(api_version, kind, self.profile.version, path)
        self.profile.check_api(api_version, kind, path)  # beta: served only with runtime-config (KEP-3136)
        converted = to_v1(obj, path)  # its errors name the file's own paths already
        try:
            self._add_dra(converted, path, file, kind)
        except FieldError as e:
            raise FieldError(path_in_file(e.path, api_version, kind), e.message) from None

    def _add_dra(self, obj: dict[str, Any], path: str, file: str, kind: str) -> None:
        inv = self.inventory
        if kind == "DeviceClass":
            device_class = convert_device_class(obj, path)
            if self._claim_name(kind, device_class.name, path, file, obj):
                inv.classes[device_class.name] = device_class
        elif kind == "ResourceSlice":
            resource_slice = convert_slice(obj, path)
            if self._claim_name(kind, resource_slice.name, path, file, obj):
                inv.slices[resource_slice.name] = resource_slice
        elif kind == "ResourceClaim":
            claim = convert_claim(obj, path)
            if self._claim_name(kind, claim.key, path, file, obj):
                inv.claims[claim.key] = claim
        else:
            namespace, name = convert_template(obj, path)
            key = f"{namespace}/{name}"
            if self._claim_name(kind, key, path, file, obj):
                inv.templates[key] = obj

    def _add_core(self, obj: dict[str, Any], path: str, file: str, kind: str) -> None:
        if kind == "Node":
            node = convert_node(obj, path)
            if self._claim_name(kind, node.name, path, file, obj):
                self.inventory.nodes[node.name] = node
        else:
            namespace, name = convert_pod(obj, path)
            if isinstance(obj.get("spec"), dict):  # convert_pod checked that it is a map when given
                if self.profile is None:
                    check_workload_ref(obj["spec"], join(path, "spec"))
                else:
                    check_scheduling_group(obj["spec"], join(path, "spec"), self.profile)
            key = f"{namespace}/{name}"
            if self._claim_name(kind, key, path, file, obj):
                self.inventory.pods[key] = obj

    def _add_workload(self, obj: dict[str, Any], path: str, file: str) -> None:
        """A Workload (KEP-4671): checked, kept as read under namespace/name."""
        meta = check_workload(obj, path)["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if self._claim_name(WORKLOAD_KIND, key, path, file, obj):
            self.inventory.workloads[key] = obj

    def _add_pod_group(self, obj: dict[str, Any], path: str, file: str) -> None:
        """A scheduler-plugins PodGroup: checked, kept as read under namespace/name."""
        meta = check_pod_group(obj, path)["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if self._claim_name(POD_GROUP_KIND, key, path, file, obj):
            self.inventory.pod_groups[key] = obj

    def _claim_name(self, kind: str, key: str, path: str, file: str, copy_read: object) -> bool:
        """True for the first object of ``kind`` named ``key``; False for an equal copy of it (read once: several
        files, one cluster); a copy that differs is refused naming both places and the first field that differs
        (core/dra/merge.py)."""
        seen = self._seen.get((kind, key))
        if seen is None:
            self._seen[(kind, key)] = (f"{file}: {path}" if path else file, copy_read)
            return True
        first, earlier = seen
        diff = first_difference(earlier, copy_read)
        if diff is None:
            return False
        raise FieldError(join(path, "metadata.name"),
                         f"duplicate {kind} `{key}` (also in {first}), and the copies differ: first at `{diff}`")

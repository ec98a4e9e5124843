"""Objects over time: `spec.workload[]` entries that create, change or delete an object at a time of the run.

    workload:
    - {at: 5m, create: <manifest>}     # refused if it exists then (AlreadyExists)
    - {at: 7m, apply: <manifest>}      # created if absent, else an update: the manifest replaces the object
    - {at: 9m, delete: {apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {name: c, namespace: ns}}}

Every manifest is checked as spec.objects' are (each kind's own checker, the release's gated fields), its errors at
`spec.workload[3].create.spec...`. The entries are then played in time order against what exists (spec.objects at
t=0, earlier entries), as the API server would answer them, so that a run never meets a refusal: a `create` of an
object that exists, a `delete` of one that does not, and an update of an immutable field (a ResourceClaim's or a
ResourceClaimTemplate's spec, pkg/apis/resource/validation ValidateResourceClaimUpdate / ...TemplateUpdate; a
ProvisioningRequest's spec fields, immutable by the CRD's `self == oldSelf` rules) are refused here, exit 2.

An `apply` is an update (PUT) of the whole object, not a merge patch: fields left out are removed, the status is
kept (dralab's objects' status is written by the controllers). At run time each entry is one external-input record
(core/run/inputs.py), folded so every reactor sees it at its time (core/state/object_changes.py).

Kinds: DeviceClass, ResourceClaim, ResourceClaimTemplate, PodTemplate, ProvisioningRequest, DeviceTaintRule and
PodDisruptionBudget in all three operations (a budget's spec is mutable: the scheduler's preemption and the
autoscaler's drains read the budgets in force at each decision); Workloads, PodGroups and CompositePodGroups can be
created (the gang plugins key their state on them from then on: changing or deleting one mid-run is not modelled,
and refused). An `apply` of a Node patches a starting node's labels, taints and cordon (node_changes.py).
PriorityClasses and Kueue's objects configure for the whole run (priorities are resolved at load, the broker from
the run configuration): refused here, they belong in spec.objects.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from ..dra.taint_rules import KIND as TAINT_RULE_KIND
from ..kube.durations import format_duration
from ..kube.fields import FieldError, check_fields, expect_duration, expect_list, expect_map, expect_str, index, join
from ..kube.podgroups import SCHEDULING_KINDS
from ..kube.versions import Profile
from . import gates as gated
from .dra import check_objects
from .model import ObjectChange
from .node_changes import check_node_change

OPS = ("create", "apply", "delete")
MAX_OBJECT_CHANGES = 100_000  # entries of spec.workload that change objects (as many as faults may be)
# kinds a delete can name, namespaced or not (the manifests' own kinds are checked by check_objects)
CHANGEABLE = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "PodTemplate", "ProvisioningRequest",
              TAINT_RULE_KIND, "PodDisruptionBudget")
CLUSTER_SCOPED = ("DeviceClass", TAINT_RULE_KIND)
_RUN_CONFIG = {  # kinds that configure a reactor for the whole run (core/run/config.py), and which one
    "PriorityClass": "applied when pods are admitted (their priority is resolved at load)",
    "AdmissionCheck": "it configures the Kueue broker for the whole run",
    "ProvisioningRequestConfig": "it configures the Kueue broker for the whole run",
}
# fields an update may not change, per kind, and the API server's message
_IMMUTABLE: dict[str, tuple[tuple[str, ...], str]] = {
    "ResourceClaim": (("spec",), "field is immutable (ValidateResourceClaimUpdate)"),
    "ResourceClaimTemplate": (("spec",), "field is immutable (ValidateResourceClaimTemplateUpdate)"),
    "ProvisioningRequest": (("spec.provisioningClassName", "spec.parameters", "spec.podSets"),
                            "Value is immutable (the ProvisioningRequest CRD's `self == oldSelf` rule)"),
}
_SCRATCH = "\x00objects"  # the path check_objects reports under, rewritten to the entry's


def is_object_change(item: object) -> bool:
    """Whether a spec.workload entry is an object change (not an arrival of pods or a Job)."""
    return isinstance(item, dict) and any(op in item for op in OPS)


def check_object_changes(value: object, duration_ms: int, profile: Profile, objects: list[dict[str, Any]],
                         starting: Iterable[str] = ()) -> list[ObjectChange]:
    """The object changes of ``spec.workload`` (the other entries are arrivals, load.py's), checked and played
    against ``objects`` (spec.objects as checked) in time order; in time order (file order at equal times).
    ``starting``: the starting nodes' names, which an `apply` of a Node may patch (node_changes.py)."""
    if value is None:
        return []
    entries: list[tuple[int, int, str, object]] = []
    for i, item in enumerate(expect_list(value, "spec.workload")):
        if not is_object_change(item):
            continue
        path = index("spec.workload", i)
        m = expect_map(item, path)
        ops = [op for op in OPS if op in m]
        if len(ops) > 1:
            raise FieldError(join(path, ops[1]), f"set one of `create`, `apply` or `delete`, not `{ops[0]}` and "
                                                 f"`{ops[1]}`")
        op = ops[0]
        check_fields(m, path, ("at", op), required=("at",))
        at_ms = expect_duration(m["at"], join(path, "at"))
        if at_ms > duration_ms:
            raise FieldError(join(path, "at"), f"must be <= spec.duration ({format_duration(duration_ms)}), got "
                                               f"{format_duration(at_ms)}")
        if m[op] is None:
            raise FieldError(join(path, op), "missing required field")
        entries.append((at_ms, i, op, m[op]))
        if len(entries) > MAX_OBJECT_CHANGES:
            raise FieldError(path, f"at most {MAX_OBJECT_CHANGES} object changes (create, apply, delete) in "
                                   "spec.workload")
    entries.sort(key=lambda e: (e[0], e[1]))
    world = _World(objects)
    classes = [o for o in objects if o["kind"] == "PriorityClass"]
    out: list[ObjectChange] = []
    for at_ms, i, op, raw in entries:
        path = join(index("spec.workload", i), op)
        if op == "delete":
            out.append(world.delete(_reference(raw, path), path, at_ms, i))
        elif isinstance(raw, dict) and raw.get("kind") == "Node":
            if op == "create":
                raise FieldError(join(path, "kind"), "nodes come from spec.nodeGroups and spec.nodes (and the "
                                                     "autoscaler): `apply` patches a starting node's labels and taints")
            out.append(check_node_change(raw, path, at_ms, i, set(starting)))
        else:
            out.append(world.put(_check_manifest(raw, path, profile, classes), path, at_ms, i, op))
    return out


def _check_manifest(raw: object, path: str, profile: Profile, classes: list[dict[str, Any]]) -> dict[str, Any]:
    """One manifest checked as spec.objects' are (PriorityClasses of spec.objects resolve a PodGroup's priority)."""
    if isinstance(raw, dict) and raw.get("kind") in _RUN_CONFIG:
        raise FieldError(join(path, "kind"), f"a {raw['kind']} cannot change during a run: "
                                             f"{_RUN_CONFIG[raw['kind']]}; put it in spec.objects")
    where = index(_SCRATCH, len(classes))
    try:
        checked = check_objects([*classes, raw], _SCRATCH, profile)[-1]
        gated.check_object(cast(dict[str, Any], raw), where, profile)
        gated.check_workload_gangs([*classes, raw], _SCRATCH, profile)
    except FieldError as e:
        if e.path.startswith(where):
            raise FieldError(path + e.path[len(where):], e.message) from None
        raise FieldError(path, e.message) from None
    return checked


def _reference(raw: object, path: str) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace, name) of a `delete` entry: the object's type and metadata.name/namespace."""
    m = expect_map(raw, path)
    check_fields(m, path, ("apiVersion", "kind", "metadata"), required=("apiVersion", "kind", "metadata"))
    api_version = expect_str(m["apiVersion"], join(path, "apiVersion"))
    kind = expect_str(m["kind"], join(path, "kind"))
    meta_path = join(path, "metadata")
    meta = expect_map(m["metadata"], meta_path)
    check_fields(meta, meta_path, ("name", "namespace"), required=("name",))
    name = expect_str(meta["name"], join(meta_path, "name"))
    if kind in _RUN_CONFIG:
        raise FieldError(join(path, "kind"), f"a {kind} cannot be deleted during a run: {_RUN_CONFIG[kind]}")
    if kind in SCHEDULING_KINDS:
        raise FieldError(join(path, "kind"), f"deleting a {kind} during a run is not modelled by dralab (the gang "
                                             "plugins keep its pods' state for the whole run)")
    if kind == "Node":
        raise FieldError(join(path, "kind"), "a node is deleted by the autoscaler's scale-down, or fails with a "
                                             "`node-fail` fault (spec.faults)")
    if kind not in CHANGEABLE:
        raise FieldError(join(path, "kind"), f"unsupported kind `{kind}`; a delete names one of "
                                             + ", ".join(f"`{k}`" for k in CHANGEABLE))
    if kind in CLUSTER_SCOPED:
        if meta.get("namespace") is not None:
            raise FieldError(join(meta_path, "namespace"), f"a {kind} is cluster-scoped: leave it out")
        namespace = ""
    else:
        namespace = "default" if meta.get("namespace") is None else expect_str(meta["namespace"],
                                                                                 join(meta_path, "namespace"))
    return api_version, kind, namespace, name


def _field(obj: dict[str, Any], dotted: str) -> object:
    value: object = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


class _World:
    """What exists at the time of the entry being checked: (kind, namespace, name) -> (manifest, where it was
    made, the DeviceTaintRule's timeAdded)."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.live: dict[tuple[str, str, str], tuple[dict[str, Any], str, int]] = {}
        for n, obj in enumerate(objects):
            self.live[self._key(obj)] = (obj, index("spec.objects", n), 0)
        self.deleted_claims: dict[tuple[str, str], str] = {}  # (namespace, name) -> the delete entry's path

    @staticmethod
    def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
        meta = obj["metadata"]
        return str(obj["kind"]), str(meta.get("namespace") or ""), str(meta["name"])

    def put(self, obj: dict[str, Any], path: str, at_ms: int, entry: int, op: str) -> ObjectChange:
        kind, namespace, name = key = self._key(obj)
        shown = f"{namespace}/{name}" if namespace else name
        old = self.live.get(key)
        if op == "create" and old is not None:
            raise FieldError(join(path, "metadata.name"), f"{kind} `{shown}` already exists at "
                                                          f"{format_duration(at_ms)} (made by {old[1]}): the API "
                                                          "server refuses the create (AlreadyExists); use `apply` to "
                                                          "change it")
        if old is None:
            held = self.deleted_claims.get((namespace, name)) if kind == "ResourceClaim" else None
            if held is not None:
                raise FieldError(join(path, "metadata.name"), f"ResourceClaim `{shown}` was deleted by {held}, but a "
                                                              "claim in use stays until its pods are done (its "
                                                              "delete-protection finalizer): give the new claim "
                                                              "another name")
            self.live[key] = (obj, path, at_ms)
            return ObjectChange(at_ms=at_ms, op="create", kind=kind, namespace=namespace, name=name, manifest=obj,
                                entry=entry, time_added_ms=at_ms)
        if kind in SCHEDULING_KINDS:
            raise FieldError(join(path, "kind"), f"changing a {kind} during a run is not modelled by dralab (the gang "
                                                 f"plugins keep its pods' state for the whole run); {shown} exists "
                                                 f"(made by {old[1]})")
        fields, message = _IMMUTABLE.get(kind, ((), ""))
        for dotted in fields:
            if _field(obj, dotted) != _field(old[0], dotted):
                raise FieldError(join(path, dotted), f"{message}: {kind} `{shown}` (made by {old[1]}) cannot change "
                                                     "it; delete the object and create another")
        time_added = old[2]
        if kind == TAINT_RULE_KIND and _field(obj, "spec.taint.effect") != _field(old[0], "spec.taint.effect"):
            time_added = at_ms  # the registry bumps timeAdded when the effect changes (devicetaintrule strategy)
        self.live[key] = (obj, path, time_added)
        return ObjectChange(at_ms=at_ms, op="update", kind=kind, namespace=namespace, name=name, manifest=obj,
                            entry=entry, time_added_ms=time_added)

    def delete(self, ref: tuple[str, str, str, str], path: str, at_ms: int, entry: int) -> ObjectChange:
        api_version, kind, namespace, name = ref
        shown = f"{namespace}/{name}" if namespace else name
        old = self.live.pop((kind, namespace, name), None)
        if old is None:
            raise FieldError(join(path, "metadata.name"), f"{kind} `{shown}` does not exist at "
                                                          f"{format_duration(at_ms)}: the API server refuses the "
                                                          "delete (NotFound)")
        group = str(old[0].get("apiVersion", "")).rpartition("/")[0]
        if api_version.rpartition("/")[0] != group:
            raise FieldError(join(path, "apiVersion"), f"{kind} `{shown}` is a {old[0].get('apiVersion')} object, "
                                                       f"not {api_version}")
        if kind == "ResourceClaim":
            self.deleted_claims[(namespace, name)] = path
        return ObjectChange(at_ms=at_ms, op="delete", kind=kind, namespace=namespace, name=name, entry=entry)

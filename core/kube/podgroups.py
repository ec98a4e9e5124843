"""Workload, PodGroup and CompositePodGroup of Kubernetes 1.36 and 1.37 (scheduling.k8s.io v1alpha2, v1alpha3,
v1beta1), checked as the API server checks them on create and converted to one internal *hub* shape, the
v1beta1 one, so that the scheduler, the autoscaler and the audits read a single shape whatever version a manifest
was written in. 1.35's v1alpha1 Workload with embedded pod groups stays in :mod:`dralab.core.kube.workloads`.

The hub (the lead's scheduler reads exactly this; see docs in the task "pgapi"):

- every object: `apiVersion: scheduling.k8s.io/v1beta1` (also a CompositePodGroup, which upstream serves only in
  v1alpha3: the hub is dralab's internal version, as the API server's internal version is no served one),
  `metadata.namespace` filled (`default`), `status` kept as read (a dump's conditions are evidence);
- PodGroup `spec`: `workloadRef?`, `parentCompositePodGroupName?`, `schedulingPolicy`, `schedulingConstraints?`,
  `resourceClaims?`, `disruptionMode` (default `{single: {}}`, the v1beta1 `+default`), `priorityClassName?`,
  `priority?`, `preemptionPolicy?` (filled by priority admission, see :func:`admit_priorities`);
- Workload `spec`: `controllerRef?`, `podGroupTemplates?` (each with the PodGroup's group fields and a `name`),
  `compositePodGroupTemplates?`;
- CompositePodGroup `spec`: `parentCompositePodGroupName?`, `workloadRef`, `schedulingPolicy` (`gang.minGroupCount`),
  `priorityClassName?`, `priority?`.

A pod joins a PodGroup through `spec.schedulingGroup.podGroupName` (1.36+, gate GenericWorkload); 1.35 had
`spec.workloadRef` instead (:func:`check_scheduling_group` refuses either under the other's releases).

dralab has PriorityClass objects (`scheduling.k8s.io/v1`, :func:`check_priority_class`) so that a group's
`priorityClassName` resolves as the priority admission plugin resolves it (plugin/pkg/admission/priority): the
named class's value (an unknown name is refused), or without a name the globalDefault class (the smallest value
if several), else priority 0.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from .fields import (
    FieldError,
    check_fields,
    checked_object,
    expect_bool,
    expect_enum,
    expect_int,
    expect_map,
    expect_str,
    join,
)
from .podgroup_convert import check_status, convert_composite_pod_group, convert_pod_group, convert_workload
from .podgroup_fields import HIGHEST_USER_PRIORITY, INT32_MIN, PREEMPTION_POLICIES, name_field
from .versions import LEGACY_VERSION, VERSIONS, Profile
from .workloads import check_workload_ref

__all__ = [
    "COMPOSITE_POD_GROUP_KIND",
    "HUB_API_VERSION",
    "POD_GROUP_KIND",
    "PRIORITY_CLASS_API_VERSION",
    "PRIORITY_CLASS_KIND",
    "SCHEDULING_API_VERSIONS",
    "SCHEDULING_KINDS",
    "WORKLOAD_KIND",
    "admit_priorities",
    "check_priority_class",
    "check_scheduling_group",
    "check_scheduling_object",
    "group_min_count",
    "is_gang",
    "pod_group_name",
    "topology_key",
]

HUB_API_VERSION = "scheduling.k8s.io/v1beta1"
WORKLOAD_KIND = "Workload"
POD_GROUP_KIND = "PodGroup"
COMPOSITE_POD_GROUP_KIND = "CompositePodGroup"
SCHEDULING_KINDS = (WORKLOAD_KIND, POD_GROUP_KIND, COMPOSITE_POD_GROUP_KIND)
# the versions this module reads (1.35's v1alpha1 is core/kube/workloads.py's); which a release serves is the
# profile's (core/kube/versions.py)
SCHEDULING_API_VERSIONS = ("scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1alpha3", HUB_API_VERSION)
PRIORITY_CLASS_API_VERSION = "scheduling.k8s.io/v1"
PRIORITY_CLASS_KIND = "PriorityClass"
# pkg/apis/scheduling: the two system classes every cluster has, with their fixed values
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}
SYSTEM_PREFIX = "system-"
DEFAULT_PRIORITY = 0  # DefaultPriorityWhenNoDefaultClassExists


def check_scheduling_object(obj: object, path: str, profile: Profile) -> dict[str, Any]:
    """Check a Workload, PodGroup or CompositePodGroup of any version `profile` serves (refused as the API server
    answers `no matches for kind` otherwise) and return it in the hub shape, a new object."""
    given = expect_map(obj, path)
    api_version = expect_str(given.get("apiVersion"), join(path, "apiVersion"), nonempty=True)
    kind = expect_enum(given.get("kind"), join(path, "kind"), SCHEDULING_KINDS)
    if api_version not in SCHEDULING_API_VERSIONS:
        raise FieldError(join(path, "apiVersion"), f"dralab reads {kind} in {', '.join(SCHEDULING_API_VERSIONS)} "
                                                   f"(1.35's `scheduling.k8s.io/v1alpha1` Workload elsewhere), got "
                                                   f"`{api_version}`")
    profile.check_api(api_version, kind, path)
    out, spec, spec_path = checked_object(given, path)
    if kind == WORKLOAD_KIND:
        hub_spec = convert_workload(spec, spec_path, api_version, profile)
    elif kind == POD_GROUP_KIND:
        hub_spec = convert_pod_group(spec, spec_path, api_version, profile)
    else:
        hub_spec = convert_composite_pod_group(spec, spec_path, profile)
    hub: dict[str, Any] = {"apiVersion": HUB_API_VERSION, "kind": kind, "metadata": out["metadata"],
                           "spec": hub_spec}
    if out.get("status") and kind != WORKLOAD_KIND:
        hub["status"] = check_status(out["status"], join(path, "status"), hub_spec.get("resourceClaims") or [])
    for key, value in out.items():  # fields dralab does not read, kept (a dump's own extras)
        if key not in ("apiVersion", "kind", "metadata", "spec", "status"):
            hub[key] = value
    return hub


# --- the pod's field -------------------------------------------------------------------------------------


def check_scheduling_group(pod_spec: dict[str, Any], spec_path: str, profile: Profile) -> None:
    """Check how a pod names its group under `profile`: `spec.schedulingGroup: {podGroupName}` in 1.36+ (a
    one-member union, so `podGroupName` is required; a DNS subdomain), `spec.workloadRef` in 1.35; each needs
    the GenericWorkload gate and is refused under the other's releases, naming the right field."""
    legacy = VERSIONS.index(profile.version) <= VERSIONS.index(LEGACY_VERSION)
    if pod_spec.get("workloadRef") is not None:
        ref_path = join(spec_path, "workloadRef")
        if not legacy:
            raise FieldError(ref_path, f"the 1.35 field; use spec.schedulingGroup (Kubernetes {profile.version} "
                                       "tombstoned `workloadRef`)")
        profile.require("GenericWorkload", ref_path, "`workloadRef`")
        check_workload_ref(pod_spec, spec_path)
    if pod_spec.get("schedulingGroup") is None:
        return
    group_path = join(spec_path, "schedulingGroup")
    if legacy:
        raise FieldError(group_path, f"the 1.36 field; Kubernetes {profile.version} uses spec.workloadRef")
    profile.require("GenericWorkload", group_path, "`schedulingGroup`")
    group = expect_map(pod_spec["schedulingGroup"], group_path)
    check_fields(group, group_path, ("podGroupName",))
    name_field(group.get("podGroupName"), join(group_path, "podGroupName"), label=False)


def pod_group_name(pod: Mapping[str, Any]) -> str | None:
    """The PodGroup a (checked) pod names in `spec.schedulingGroup.podGroupName`; None without one."""
    group = (pod.get("spec") or {}).get("schedulingGroup")
    name = group.get("podGroupName") if isinstance(group, dict) else None
    return str(name) if name else None


# --- reading the hub -------------------------------------------------------------------------------------


def is_gang(group: Mapping[str, Any]) -> bool:
    """Whether a hub PodGroup (or template) has the `gang` policy."""
    return isinstance(((group.get("spec") or group).get("schedulingPolicy") or {}).get("gang"), dict)


def group_min_count(group: Mapping[str, Any]) -> int | None:
    """A hub PodGroup's (or template's) `gang.minCount`; None for the basic policy."""
    gang = ((group.get("spec") or group).get("schedulingPolicy") or {}).get("gang")
    return int(gang["minCount"]) if isinstance(gang, dict) and "minCount" in gang else None


def topology_key(group: Mapping[str, Any]) -> str | None:
    """The node label key of a hub PodGroup's (or template's) one topology constraint; None without one."""
    topology = ((group.get("spec") or group).get("schedulingConstraints") or {}).get("topology") or []
    return str(topology[0]["key"]) if topology else None


# --- PriorityClass and priority admission ----------------------------------------------------------------


def check_priority_class(obj: object, path: str) -> dict[str, Any]:
    """A `scheduling.k8s.io/v1` PriorityClass (ValidatePriorityClass): a cluster-scoped name (`system-` names are
    reserved for the two system classes), `value` an int32 at most 1e9, `globalDefault`, `description`,
    `preemptionPolicy` (PreemptLowerPriority, the default, or Never). Returns a copy."""
    out = copy.deepcopy(expect_map(obj, path))
    check_fields(out, path, ("apiVersion", "kind", "metadata", "value", "globalDefault", "description",
                             "preemptionPolicy"))
    meta_path = join(path, "metadata")
    meta = expect_map(out.get("metadata") or {}, meta_path)
    name = name_field(meta.get("name"), join(meta_path, "name"), label=False)
    if meta.get("namespace") not in (None, ""):
        raise FieldError(join(meta_path, "namespace"), "a PriorityClass is cluster-scoped: leave it out")
    v_path = join(path, "value")
    if out.get("value") is None:
        raise FieldError(v_path, "missing required field")
    if name.startswith(SYSTEM_PREFIX):
        want = SYSTEM_PRIORITY_CLASSES.get(name)
        if want is None or out["value"] != want:
            raise FieldError(join(meta_path, "name"),
                             f"priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only "
                             "(system-node-critical, system-cluster-critical, with their fixed values)")
    else:
        expect_int(out["value"], v_path, minimum=INT32_MIN, maximum=HIGHEST_USER_PRIORITY)
    if out.get("globalDefault") is not None:
        expect_bool(out["globalDefault"], join(path, "globalDefault"))
    if out.get("description") is not None:
        expect_str(out["description"], join(path, "description"))
    if out.get("preemptionPolicy") is not None:
        expect_enum(out["preemptionPolicy"], join(path, "preemptionPolicy"), PREEMPTION_POLICIES)
    return out


def _classes(priority_classes: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, str]]:
    """name -> (value, preemptionPolicy), the system classes included."""
    out = {name: (value, "PreemptLowerPriority") for name, value in SYSTEM_PRIORITY_CLASSES.items()}
    for pc in priority_classes:
        out[pc["metadata"]["name"]] = (int(pc["value"]), str(pc.get("preemptionPolicy") or "PreemptLowerPriority"))
    return out


def _global_default(priority_classes: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The globalDefault class; with several (a race the admission plugin tries to prevent), the smallest value."""
    defaults = [pc for pc in priority_classes if pc.get("globalDefault") is True]
    return min(defaults, key=lambda pc: (int(pc["value"]), pc["metadata"]["name"])) if defaults else None


def admit_priorities(groups: Iterable[tuple[dict[str, Any], str]], priority_classes: Iterable[Mapping[str, Any]],
                     profile: Profile, *, admitted: bool = False) -> None:
    """Resolve the priority of hub PodGroups and CompositePodGroups (each with its path) in place, as the
    priority admission plugin does on create: `priorityClassName` must name a class (refused otherwise); without
    a name the globalDefault class is used (its name filled in), else priority 0; a given `priority` must equal
    the resolved one. PodGroup `preemptionPolicy` is filled from the class (default PreemptLowerPriority) and a
    given one must match, but only with PodGroupPreemptionPolicy on (the field does not exist otherwise).
    Nothing is done where the priority fields are not served: 1.36 with WorkloadAwarePreemption off.

    `admitted`: the groups come from a cluster dump, where admission has already run: a group that carries a
    `priority` is kept as it is (its PriorityClass need not be in the dump)."""
    if profile.version == "1.36" and not profile.enabled("WorkloadAwarePreemption"):
        return
    classes = list(priority_classes)
    by_name = _classes(classes)
    default = _global_default(classes)
    policy_on = profile.enabled("PodGroupPreemptionPolicy")
    for group, path in groups:
        spec, spec_path = group["spec"], join(path, "spec")
        if admitted and spec.get("priority") is not None:
            continue
        name = spec.get("priorityClassName")
        if name:
            if name not in by_name:
                raise FieldError(join(spec_path, "priorityClassName"), f"no PriorityClass with name {name} was found")
            value, preemption = by_name[name]
        elif default is not None:
            name = default["metadata"]["name"]
            value, preemption = by_name[name]
        else:
            value, preemption = DEFAULT_PRIORITY, "PreemptLowerPriority"
        if spec.get("priority") is not None and spec["priority"] != value:
            raise FieldError(join(spec_path, "priority"),
                             f"the integer value of priority ({spec['priority']}) must not be provided; priority "
                             f"admission computed {value} from the PriorityClass `{name or '(none)'}`")
        resolved: dict[str, Any] = {"priorityClassName": name} if name else {}
        resolved["priority"] = value
        if policy_on and group["kind"] == POD_GROUP_KIND:
            if spec.get("preemptionPolicy") not in (None, preemption):
                raise FieldError(join(spec_path, "preemptionPolicy"),
                                 f"the value `{spec['preemptionPolicy']}` must not be provided; priority admission "
                                 f"computed `{preemption}` from the PriorityClass")
            resolved["preemptionPolicy"] = preemption
        _place(spec, resolved)


def _place(spec: dict[str, Any], resolved: Mapping[str, Any]) -> None:
    """Put the resolved priority fields into `spec` keeping the hub's key order (they come after
    disruptionMode)."""
    tail = ("priorityClassName", "priority", "preemptionPolicy")
    rest = {k: v for k, v in spec.items() if k not in tail}
    merged = {**{k: spec[k] for k in tail if k in spec}, **resolved}
    spec.clear()
    spec.update(rest)
    spec.update({k: merged[k] for k in tail if k in merged})

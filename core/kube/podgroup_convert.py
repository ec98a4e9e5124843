"""Checking the spec of a scheduling.k8s.io Workload, PodGroup or CompositePodGroup of one served version and
converting it, field by field, to the hub shape (v1beta1) the rest of dralab reads.

What differs per version (kubernetes/kubernetes staging/src/k8s.io/api/scheduling/*/types.go):

- the PodGroup's template: v1alpha2 `podGroupTemplateRef.workload.{workloadName, podGroupTemplateName}`,
  v1alpha3/v1beta1 `workloadRef.{workloadName, templateName}`;
- the disruption mode: v1alpha2 a string `Pod` / `PodGroup` (gate WorkloadAwarePreemption), v1alpha3/v1beta1 a
  union `single: {}` / `all: {}` (no gate of its own: GenericWorkload, which serves the API, covers it);
- priorityClassName, priority: v1alpha2 gate WorkloadAwarePreemption, v1alpha3/v1beta1 no gate of their own;
- preemptionPolicy: v1alpha3/v1beta1 only, gate PodGroupPreemptionPolicy;
- parentCompositePodGroupName, compositePodGroupTemplates: v1alpha3/v1beta1 only, gate CompositePodGroup;
- schedulingConstraints (gate TopologyAwareWorkloadScheduling) and resourceClaims (gate
  DRAWorkloadResourceClaims): every version.

The cross-field rules are pkg/apis/scheduling/validation/validation.go's ValidateWorkloadSpec (template names
unique across the whole tree, a tree at most WorkloadMaxTreeDepth = 4 deep, one priority for every template, a
composite template with at least one child) and KEP-5710's: a group with the `basic` policy may not ask for the
`all` disruption mode (its pods are placed one by one, so they are not a unit that can be disrupted together).
"""

from __future__ import annotations

from typing import Any

from .fields import FieldError, check_fields, expect_enum, expect_list, expect_map, expect_str, index, join
from .podgroup_fields import (
    check_controller_ref,
    check_disruption_mode,
    check_disruption_mode_v1alpha2,
    check_policy,
    check_priority_fields,
    check_resource_claims,
    check_scheduling_constraints,
    check_workload_ref,
    name_field,
    requirer,
)
from .versions import Profile

__all__ = ["MAX_TEMPLATES", "MAX_TREE_DEPTH", "convert_composite_pod_group", "convert_pod_group", "convert_workload"]

MAX_TEMPLATES = 8  # WorkloadMaxPodGroupTemplates (and maxItems of every template list)
MAX_TREE_DEPTH = 4  # WorkloadMaxTreeDepth: composite templates at levels 1-3, pod group templates down to level 4
V1ALPHA2 = "scheduling.k8s.io/v1alpha2"
SINGLE: dict[str, Any] = {"single": {}}
CONDITION_STATUSES = ("True", "False", "Unknown")


def _group_fields(body: dict[str, Any], path: str, api_version: str, profile: Profile) -> dict[str, Any]:
    """The fields a PodGroup and a PodGroupTemplate share, in hub order: schedulingPolicy, schedulingConstraints,
    resourceClaims, disruptionMode (default `single`), priorityClassName, priority, preemptionPolicy."""
    v1alpha2 = api_version == V1ALPHA2
    out: dict[str, Any] = {"schedulingPolicy": check_policy(body.get("schedulingPolicy"),
                                                            join(path, "schedulingPolicy"))}
    if body.get("schedulingConstraints") is not None:
        c_path = join(path, "schedulingConstraints")
        requirer(profile, "TopologyAwareWorkloadScheduling")(c_path)
        out["schedulingConstraints"] = check_scheduling_constraints(body["schedulingConstraints"], c_path,
                                                                    v1alpha2=v1alpha2)
    if body.get("resourceClaims") is not None:
        r_path = join(path, "resourceClaims")
        requirer(profile, "DRAWorkloadResourceClaims")(r_path)
        out["resourceClaims"] = check_resource_claims(body["resourceClaims"], r_path)
    mode = SINGLE
    if body.get("disruptionMode") is not None:
        d_path = join(path, "disruptionMode")
        if v1alpha2:
            requirer(profile, "WorkloadAwarePreemption")(d_path)
            mode = check_disruption_mode_v1alpha2(body["disruptionMode"], d_path)
        else:
            mode = check_disruption_mode(body["disruptionMode"], d_path)
        if "all" in mode and "basic" in out["schedulingPolicy"]:
            raise FieldError(d_path, "the `all` disruption mode needs the `gang` policy: the pods of a `basic` group "
                                     "are placed one by one and cannot be disrupted as one unit (KEP-5710)")
    out["disruptionMode"] = {member: {} for member in mode}
    priority_gate = requirer(profile, "WorkloadAwarePreemption") if v1alpha2 else (lambda _p: None)
    check_priority_fields(body, path, out, gate=priority_gate,
                          preemption=None if v1alpha2 else requirer(profile, "PodGroupPreemptionPolicy"))
    return out


_V1ALPHA2_TEMPLATE = ("name", "schedulingPolicy", "schedulingConstraints", "resourceClaims", "disruptionMode",
                      "priorityClassName", "priority")
_TEMPLATE = (*_V1ALPHA2_TEMPLATE, "preemptionPolicy")
# CONFLICT: the v1beta1 CompositePodGroupTemplate has schedulingConstraints, disruptionMode and preemptionPolicy;
# the copy of v1alpha3 read lacks them. v1alpha3 and v1beta1 are the same types in 1.37 but for alpha gates
# (KEP-4671), so both read the v1beta1 field set.
_COMPOSITE_TEMPLATE = ("name", "schedulingPolicy", "schedulingConstraints", "disruptionMode", "priorityClassName",
                       "priority", "preemptionPolicy", "podGroupTemplates", "compositePodGroupTemplates")


class _Tree:
    """What ValidateWorkloadSpec checks across the whole template tree: unique names, one priority."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.priority: tuple[tuple[str, int | None], str] | None = None

    def name(self, name: str, path: str) -> None:
        if name in self.names:
            raise FieldError(path, f"duplicate template name `{name}` (also {self.names[name]}); names are unique "
                                   "across all the templates of a Workload")
        self.names[name] = path

    def same_priority(self, template: dict[str, Any], path: str) -> None:
        key = (template.get("priorityClassName", ""), template.get("priority"))
        if self.priority is None:
            self.priority = (key, path)
        elif key != self.priority[0]:
            first, where = self.priority
            raise FieldError(path, "all priority and priorityClassName values must be identical, detected multiple "
                                   f"values (this template {_shown(key)}, {where} {_shown(first)})")


def _shown(key: tuple[str, int | None]) -> str:
    return f"priorityClassName `{key[0]}` priority {'unset' if key[1] is None else key[1]}"


def _template_list(value: object, path: str) -> list[Any]:
    items = expect_list(value, path)
    if len(items) > MAX_TEMPLATES:
        raise FieldError(path, f"must have at most {MAX_TEMPLATES} items, got {len(items)}")
    return items


def _pod_group_templates(value: object, path: str, api_version: str, profile: Profile,
                         tree: _Tree) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(_template_list(value, path)):
        t_path = index(path, i)
        template = expect_map(item, t_path)
        check_fields(template, t_path, _V1ALPHA2_TEMPLATE if api_version == V1ALPHA2 else _TEMPLATE)
        name = name_field(template.get("name"), join(t_path, "name"), label=True)
        tree.name(name, t_path)
        hub = {"name": name, **_group_fields(template, t_path, api_version, profile)}
        tree.same_priority(hub, t_path)
        out.append(hub)
    return out


def _composite_templates(value: object, path: str, api_version: str, profile: Profile, tree: _Tree,
                         depth: int) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(_template_list(value, path)):
        t_path = index(path, i)
        if depth >= MAX_TREE_DEPTH:
            raise FieldError(t_path, f"maximum template hierarchy depth is {MAX_TREE_DEPTH} (WorkloadMaxTreeDepth): a "
                                     f"composite template at level {depth} leaves no level for its pod groups")
        template = expect_map(item, t_path)
        check_fields(template, t_path, _COMPOSITE_TEMPLATE)
        name = name_field(template.get("name"), join(t_path, "name"), label=True)
        tree.name(name, t_path)
        hub: dict[str, Any] = {"name": name, "schedulingPolicy": check_policy(
            template.get("schedulingPolicy"), join(t_path, "schedulingPolicy"), count_field="minGroupCount")}
        if template.get("schedulingConstraints") is not None:
            hub["schedulingConstraints"] = check_scheduling_constraints(template["schedulingConstraints"],
                                                                        join(t_path, "schedulingConstraints"))
        if template.get("disruptionMode") is not None:
            hub["disruptionMode"] = check_disruption_mode(template["disruptionMode"], join(t_path, "disruptionMode"))
        check_priority_fields(template, t_path, hub, gate=lambda _p: None,
                              preemption=requirer(profile, "PodGroupPreemptionPolicy"))
        tree.same_priority(hub, t_path)
        children = 0
        if template.get("podGroupTemplates") is not None:
            hub["podGroupTemplates"] = _pod_group_templates(
                template["podGroupTemplates"], join(t_path, "podGroupTemplates"), api_version, profile, tree)
            children += len(hub["podGroupTemplates"])
        if template.get("compositePodGroupTemplates") is not None:
            c_path = join(t_path, "compositePodGroupTemplates")
            hub["compositePodGroupTemplates"] = _composite_templates(
                template["compositePodGroupTemplates"], c_path, api_version, profile, tree, depth + 1)
            children += len(hub["compositePodGroupTemplates"])
        if not children:
            raise FieldError(t_path, "must have at least one child PodGroupTemplate or CompositePodGroupTemplate")
        out.append(hub)
    return out


def convert_workload(spec: dict[str, Any], spec_path: str, api_version: str, profile: Profile) -> dict[str, Any]:
    """A Workload's spec in the hub shape: controllerRef, and exactly one of podGroupTemplates (v1alpha2: required)
    and compositePodGroupTemplates (gate CompositePodGroup; not in v1alpha2)."""
    v1alpha2 = api_version == V1ALPHA2
    check_fields(spec, spec_path, ("controllerRef", "podGroupTemplates") if v1alpha2
                 else ("controllerRef", "podGroupTemplates", "compositePodGroupTemplates"))
    out: dict[str, Any] = {}
    if spec.get("controllerRef") is not None:
        out["controllerRef"] = check_controller_ref(spec["controllerRef"], join(spec_path, "controllerRef"))
    tree = _Tree()
    composite_path = join(spec_path, "compositePodGroupTemplates")
    has_composite = bool(spec.get("compositePodGroupTemplates"))
    if spec.get("compositePodGroupTemplates") is not None:
        requirer(profile, "CompositePodGroup")(composite_path)
    if bool(spec.get("podGroupTemplates")) == has_composite:
        if v1alpha2:
            raise FieldError(join(spec_path, "podGroupTemplates"), "missing required field: a Workload needs at least "
                                                                   "one pod group template")
        raise FieldError(spec_path, "exactly one of `podGroupTemplates` and `compositePodGroupTemplates` must be set "
                                    "(non-empty)")
    if has_composite:
        out["compositePodGroupTemplates"] = _composite_templates(spec["compositePodGroupTemplates"], composite_path,
                                                                 api_version, profile, tree, 1)
    else:
        out["podGroupTemplates"] = _pod_group_templates(spec["podGroupTemplates"], join(spec_path, "podGroupTemplates"),
                                                        api_version, profile, tree)
    return out


def _template_ref_v1alpha2(value: object, path: str) -> dict[str, Any]:
    """v1alpha2 `podGroupTemplateRef: {workload: {workloadName, podGroupTemplateName}}` (a one-member union, so
    `workload` is required) -> the hub's `workloadRef: {workloadName, templateName}`."""
    ref = expect_map(value, path)
    check_fields(ref, path, ("workload",))
    w_path = join(path, "workload")
    if ref.get("workload") is None:
        raise FieldError(path, "must specify one of: `workload`")
    workload = expect_map(ref["workload"], w_path)
    check_fields(workload, w_path, ("workloadName", "podGroupTemplateName"))
    return {"workloadName": name_field(workload.get("workloadName"), join(w_path, "workloadName"), label=False),
            "templateName": name_field(workload.get("podGroupTemplateName"), join(w_path, "podGroupTemplateName"),
                                       label=True)}


_V1ALPHA2_POD_GROUP = ("podGroupTemplateRef", "schedulingPolicy", "schedulingConstraints", "resourceClaims",
                       "disruptionMode", "priorityClassName", "priority")
_POD_GROUP = ("parentCompositePodGroupName", "workloadRef", "schedulingPolicy", "schedulingConstraints",
              "resourceClaims", "disruptionMode", "priorityClassName", "priority", "preemptionPolicy")


def convert_pod_group(spec: dict[str, Any], spec_path: str, api_version: str, profile: Profile) -> dict[str, Any]:
    """A PodGroup's spec in the hub shape (workloadRef, parentCompositePodGroupName, then the group fields)."""
    out: dict[str, Any] = {}
    if api_version == V1ALPHA2:
        check_fields(spec, spec_path, _V1ALPHA2_POD_GROUP)
        if spec.get("podGroupTemplateRef") is not None:
            out["workloadRef"] = _template_ref_v1alpha2(spec["podGroupTemplateRef"],
                                                        join(spec_path, "podGroupTemplateRef"))
    else:
        check_fields(spec, spec_path, _POD_GROUP)
        if spec.get("workloadRef") is not None:
            out["workloadRef"] = check_workload_ref(spec["workloadRef"], join(spec_path, "workloadRef"))
        _parent(spec, spec_path, out, profile, needs_gate=True)
    out.update(_group_fields(spec, spec_path, api_version, profile))
    return out


def _parent(spec: dict[str, Any], spec_path: str, out: dict[str, Any], profile: Profile, *, needs_gate: bool) -> None:
    """`parentCompositePodGroupName` (a DNS subdomain; a PodGroup's also needs the gate and `workloadRef`)."""
    if spec.get("parentCompositePodGroupName") in (None, ""):
        return
    p_path = join(spec_path, "parentCompositePodGroupName")
    if needs_gate:
        requirer(profile, "CompositePodGroup")(p_path)
        if "workloadRef" not in out:
            raise FieldError(join(spec_path, "workloadRef"), "missing required field: `parentCompositePodGroupName` "
                                                             "needs `workloadRef`")
    out["parentCompositePodGroupName"] = name_field(spec["parentCompositePodGroupName"], p_path, label=False)


def convert_composite_pod_group(spec: dict[str, Any], spec_path: str, profile: Profile) -> dict[str, Any]:
    """A v1alpha3 CompositePodGroup's spec: parentCompositePodGroupName, workloadRef (required), schedulingPolicy
    (`basic` | `gang: {minGroupCount}`), priorityClassName, priority."""
    check_fields(spec, spec_path, ("parentCompositePodGroupName", "workloadRef", "schedulingPolicy",
                                   "priorityClassName", "priority"))
    if spec.get("workloadRef") is None:
        raise FieldError(join(spec_path, "workloadRef"), "missing required field")
    out: dict[str, Any] = {}
    _parent(spec, spec_path, out, profile, needs_gate=False)
    out["workloadRef"] = check_workload_ref(spec["workloadRef"], join(spec_path, "workloadRef"))
    out["schedulingPolicy"] = check_policy(spec.get("schedulingPolicy"), join(spec_path, "schedulingPolicy"),
                                           count_field="minGroupCount")
    check_priority_fields(spec, spec_path, out, gate=lambda _p: None, preemption=None)
    return out


def check_status(value: object, path: str, claims: list[dict[str, Any]]) -> dict[str, Any]:
    """A PodGroup's (or CompositePodGroup's) status as a dump carries it, kept as evidence: `conditions[]` with a
    `type` (unique) and a `status` (True, False, Unknown), and `resourceClaimStatuses[]` whose names match
    `spec.resourceClaims` (ValidatePodGroupStatusUpdate)."""
    status = expect_map(value, path)
    seen: set[str] = set()
    c_path = join(path, "conditions")
    for i, item in enumerate(expect_list(status.get("conditions") or [], c_path)):
        i_path = index(c_path, i)
        condition = expect_map(item, i_path)
        kind = expect_str(condition.get("type"), join(i_path, "type"), nonempty=True)
        if kind in seen:
            raise FieldError(join(i_path, "type"), f"duplicate condition type `{kind}`")
        seen.add(kind)
        expect_enum(condition.get("status"), join(i_path, "status"), CONDITION_STATUSES)
    names = {claim["name"] for claim in claims}
    r_path = join(path, "resourceClaimStatuses")
    for i, item in enumerate(expect_list(status.get("resourceClaimStatuses") or [], r_path)):
        entry = expect_map(item, index(r_path, i))
        name = entry.get("name")
        if name not in names:
            raise FieldError(join(index(r_path, i), "name"), f"`{name}` must match the name of an entry in "
                                                             "`spec.resourceClaims`")
    return status

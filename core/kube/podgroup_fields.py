"""The field checks the scheduling.k8s.io Workload, PodGroup and CompositePodGroup APIs of Kubernetes 1.36 and
1.37 share (KEP-4671 with KEP-5832's decoupled API, KEP-5710, KEP-5732, KEP-5729, KEP-6012), each returning the
field in the hub shape (:mod:`dralab.core.kube.podgroups`: the v1beta1 shape).

Rules are restated from the API types' declarative validation tags (`+k8s:required`, `+k8s:minimum`,
`+k8s:maxItems`, `+k8s:unionMember`, `+k8s:format`) in kubernetes/kubernetes
staging/src/k8s.io/api/scheduling/{v1alpha2,v1alpha3,v1beta1}/types.go; the formats are apimachinery's:
`k8s-short-name` an RFC 1123 label, `k8s-long-name` an RFC 1123 subdomain, `k8s-label-key` a qualified name,
`k8s-path-segment-name` a name without '/' or '%' and other than '.' and '..'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .fields import (
    FieldError,
    check_fields,
    dns1123_label_error,
    dns1123_subdomain_error,
    expect_enum,
    expect_int,
    expect_list,
    expect_map,
    expect_str,
    index,
    join,
    qualified_name_error,
)
from .versions import Profile

__all__ = [
    "HIGHEST_USER_PRIORITY",
    "INT32_MAX",
    "INT32_MIN",
    "MAX_POD_GROUP_RESOURCE_CLAIMS",
    "PREEMPTION_POLICIES",
    "check_controller_ref",
    "check_disruption_mode",
    "check_disruption_mode_v1alpha2",
    "check_policy",
    "check_priority_fields",
    "check_resource_claims",
    "check_scheduling_constraints",
    "check_workload_ref",
    "name_field",
    "requirer",
    "union",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
HIGHEST_USER_PRIORITY = 1_000_000_000  # scheduling.HighestUserDefinablePriority
MAX_POD_GROUP_RESOURCE_CLAIMS = 4  # MaxPodGroupResourceClaims
MAX_TOPOLOGY_CONSTRAINTS = 1  # `+k8s:maxItems=1` on schedulingConstraints.topology
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
# v1alpha2 (1.36) spelled the disruption mode as a string; v1alpha3 and v1beta1 as a union
V1ALPHA2_DISRUPTION_MODES = {"Pod": "single", "PodGroup": "all"}


def name_field(value: object, path: str, *, label: bool) -> str:
    """A required name: an RFC 1123 label (`k8s-short-name`) or subdomain (`k8s-long-name`). An empty string
    is reported as missing, as declarative validation's RequiredValue does."""
    if value is None or value == "":
        raise FieldError(path, "missing required field")
    name = expect_str(value, path)
    error = dns1123_label_error(name) if label else dns1123_subdomain_error(name)
    if error is not None:
        raise FieldError(path, error)
    return name


def _path_segment_name(value: object, path: str) -> str:
    """apimachinery's IsPathSegmentName: any name a URL path segment can carry."""
    if value is None or value == "":
        raise FieldError(path, "missing required field")
    name = expect_str(value, path)
    if name in (".", ".."):
        raise FieldError(path, f"`{name}` may not be '.' or '..'")
    for bad in ("/", "%"):
        if bad in name:
            raise FieldError(path, f"`{name}` may not contain '{bad}'")
    return name


def union(value: dict[str, Any], path: str, members: tuple[str, ...]) -> str:
    """The one member of a `+union` set (not null); refuses none and several, as the union validator does."""
    given = [k for k in members if value.get(k) is not None]
    quoted = ", ".join(f"`{m}`" for m in members)
    if not given:
        raise FieldError(path, f"must specify one of: {quoted}")
    if len(given) > 1:
        raise FieldError(path, f"exactly one of {quoted} is required, but {' and '.join(given)} are set")
    return given[0]


def check_controller_ref(value: object, path: str) -> dict[str, Any]:
    """Workload.spec.controllerRef, a TypedLocalObjectReference: `kind` and `name` required path-segment names,
    `apiGroup` optional, a DNS subdomain."""
    ref = expect_map(value, path)
    check_fields(ref, path, ("apiGroup", "kind", "name"))
    out: dict[str, Any] = {}
    if ref.get("apiGroup") not in (None, ""):
        out["apiGroup"] = name_field(ref["apiGroup"], join(path, "apiGroup"), label=False)
    out["kind"] = _path_segment_name(ref.get("kind"), join(path, "kind"))
    out["name"] = _path_segment_name(ref.get("name"), join(path, "name"))
    return out


def check_policy(value: object, path: str, *, count_field: str = "minCount") -> dict[str, Any]:
    """A scheduling policy, the union `basic: {}` | `gang: {<count_field>: int32 >= 1}` (`minCount` for a
    PodGroup, `minGroupCount` for a CompositePodGroup)."""
    if value is None:
        raise FieldError(path, "missing required field")
    policy = expect_map(value, path)
    check_fields(policy, path, ("basic", "gang"))
    member = union(policy, path, ("basic", "gang"))
    m_path = join(path, member)
    body = expect_map(policy[member], m_path)
    if member == "basic":
        check_fields(body, m_path, ())
        return {"basic": {}}
    check_fields(body, m_path, (count_field,))
    c_path = join(m_path, count_field)
    if body.get(count_field) in (None, 0):  # declarative validation reports 0 as missing
        raise FieldError(c_path, "missing required field (a positive integer)")
    count = expect_int(body[count_field], c_path, minimum=1, maximum=INT32_MAX)
    return {"gang": {count_field: count}}


def check_scheduling_constraints(value: object, path: str, *, v1alpha2: bool = False) -> dict[str, Any]:
    """`schedulingConstraints: {topology: [{key}]}`: at most one constraint, its key a qualified label key
    (KEP-5732). CONFLICT: a pre-release v1alpha2 (kubernetes 056a015) named them `topologyConstraints[]
    .topologyKey`; the v1alpha2 types of the 1.36 release name them `topology[].key`, as v1alpha3 and v1beta1 do
    (followed; the old names are refused with the new ones named, so a stale manifest is not half-read)."""
    constraints = expect_map(value, path)
    if v1alpha2 and "topologyConstraints" in constraints:
        raise FieldError(join(path, "topologyConstraints"),
                         "a pre-release v1alpha2 name: Kubernetes 1.36 reads `schedulingConstraints.topology[].key`")
    check_fields(constraints, path, ("topology",))
    out: dict[str, Any] = {}
    if constraints.get("topology") is not None:
        t_path = join(path, "topology")
        items = expect_list(constraints["topology"], t_path)
        if len(items) > MAX_TOPOLOGY_CONSTRAINTS:
            raise FieldError(t_path, f"must have at most {MAX_TOPOLOGY_CONSTRAINTS} item (only one topology "
                                     f"constraint per group), got {len(items)}")
        topology = []
        for i, item in enumerate(items):
            i_path = index(t_path, i)
            entry = expect_map(item, i_path)
            if v1alpha2 and "topologyKey" in entry:
                raise FieldError(join(i_path, "topologyKey"), "a pre-release v1alpha2 name: Kubernetes 1.36 reads "
                                                              "`key`")
            check_fields(entry, i_path, ("key",))
            k_path = join(i_path, "key")
            if entry.get("key") in (None, ""):
                raise FieldError(k_path, "missing required field")
            key = expect_str(entry["key"], k_path)
            error = qualified_name_error(key)
            if error is not None:
                raise FieldError(k_path, f"invalid label key: {error}")
            topology.append({"key": key})
        out["topology"] = topology
    return out


def check_resource_claims(value: object, path: str) -> list[dict[str, Any]]:
    """`resourceClaims[]` (KEP-5729): at most 4, names unique DNS labels, each naming exactly one of a
    ResourceClaim and a ResourceClaimTemplate (DNS subdomains)."""
    items = expect_list(value, path)
    if len(items) > MAX_POD_GROUP_RESOURCE_CLAIMS:
        raise FieldError(path, f"must have at most {MAX_POD_GROUP_RESOURCE_CLAIMS} items, got {len(items)}")
    seen: dict[str, str] = {}
    out = []
    for i, item in enumerate(items):
        i_path = index(path, i)
        claim = expect_map(item, i_path)
        check_fields(claim, i_path, ("name", "resourceClaimName", "resourceClaimTemplateName"))
        name = name_field(claim.get("name"), join(i_path, "name"), label=True)
        if name in seen:
            raise FieldError(join(i_path, "name"), f"duplicate claim name `{name}` (also {seen[name]})")
        seen[name] = i_path
        member = union(claim, i_path, ("resourceClaimName", "resourceClaimTemplateName"))
        out.append({"name": name, member: name_field(claim[member], join(i_path, member), label=False)})
    return out


def check_disruption_mode(value: object, path: str) -> dict[str, Any]:
    """The v1alpha3/v1beta1 union `single: {}` | `all: {}` (the CompositePodGroup template's has the same
    members)."""
    mode = expect_map(value, path)
    check_fields(mode, path, ("single", "all"))
    member = union(mode, path, ("single", "all"))
    check_fields(expect_map(mode[member], join(path, member)), join(path, member), ())
    return {member: {}}


def check_disruption_mode_v1alpha2(value: object, path: str) -> dict[str, Any]:
    """v1alpha2 (1.36) spelled the mode as a string, `Pod` (each pod on its own) or `PodGroup` (all together);
    converted to the union v1alpha3 introduced for it: `Pod` -> `single`, `PodGroup` -> `all`."""
    if isinstance(value, dict):
        raise FieldError(path, "v1alpha2 spells the disruption mode as a string, one of `Pod`, `PodGroup` (the "
                               "`single`/`all` union is v1alpha3's and v1beta1's)")
    text = expect_enum(value, path, tuple(V1ALPHA2_DISRUPTION_MODES))
    return {V1ALPHA2_DISRUPTION_MODES[text]: {}}


def check_workload_ref(value: object, path: str) -> dict[str, Any]:
    """v1alpha3/v1beta1 `workloadRef: {workloadName (subdomain), templateName (label)}`."""
    ref = expect_map(value, path)
    check_fields(ref, path, ("workloadName", "templateName"))
    return {"workloadName": name_field(ref.get("workloadName"), join(path, "workloadName"), label=False),
            "templateName": name_field(ref.get("templateName"), join(path, "templateName"), label=True)}


def check_priority_fields(body: dict[str, Any], path: str, out: dict[str, Any], *, gate: Callable[[str], None],
                          preemption: Callable[[str], None] | None) -> None:
    """`priorityClassName` (a DNS subdomain) and `priority` (int32 <= 1e9, HighestUserDefinablePriority), each
    refused unless `gate(field path)` passes; `preemptionPolicy` likewise with `preemption` (None: the version
    has no such field). Copied into `out`."""
    if body.get("priorityClassName") not in (None, ""):
        p_path = join(path, "priorityClassName")
        gate(p_path)
        out["priorityClassName"] = name_field(body["priorityClassName"], p_path, label=False)
    if body.get("priority") is not None:
        p_path = join(path, "priority")
        gate(p_path)
        out["priority"] = expect_int(body["priority"], p_path, minimum=INT32_MIN, maximum=HIGHEST_USER_PRIORITY)
    if body.get("preemptionPolicy") is not None:
        p_path = join(path, "preemptionPolicy")
        if preemption is None:
            raise FieldError(p_path, "unknown field `preemptionPolicy` in this API version")
        preemption(p_path)
        out["preemptionPolicy"] = expect_enum(body["preemptionPolicy"], p_path, PREEMPTION_POLICIES)


def requirer(profile: Profile, gate: str) -> Callable[[str], None]:
    """`profile.require(gate, path, ...)` as a one-argument check, naming the field by its path's last part."""
    def require(path: str) -> None:
        profile.require(gate, path, f"`{path.rsplit('.', 1)[-1]}`")
    return require

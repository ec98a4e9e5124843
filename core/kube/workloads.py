"""Workload objects and gangs (KEP-4671, `scheduling.k8s.io/v1alpha1`, alpha in Kubernetes 1.35).

A Workload names its pod groups, each with a scheduling policy: `basic` (pods are scheduled one by one,
as without a Workload) or `gang` with a `minCount`: no pod of the group binds until `minCount` of them
can. A pod joins a group through `spec.workloadRef` (`name`, `podGroup`, optional `podGroupReplicaKey`:
each replica of a group is a gang of its own). In 1.36 the API moved to standalone PodGroup objects
(KEP-5832); dralab models the 1.35 shape, which is what a 1.35 cluster dump contains.

Shapes follow k8s.io/api/scheduling/v1alpha1 (WorkloadSpec.PodGroups, at most 8; PodGroupPolicy with
exactly one of Basic and Gang; GangSchedulingPolicy.MinCount > 0) and core/v1 WorkloadReference.

Clusters that gang-schedule today mostly use another API, the scheduler-plugins Coscheduling plugin
(kubernetes-sigs/scheduler-plugins, pkg/coscheduling): a `scheduling.x-k8s.io/v1alpha1` PodGroup CRD with
`spec.minMember` (and optional `minResources`, `scheduleTimeoutSeconds`), joined by pods through the label
`scheduling.x-k8s.io/pod-group: <name>` (same namespace). `check_pod_group` and `pod_group_label` read
those for `dralab audit`/`schedule`, which treat such a PodGroup as a gang of `minCount = minMember`; the
scheduler reactor does not read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .defaults import GANG_SCHEDULING_TIMEOUT_MS
from .fields import (
    FieldError,
    check_fields,
    checked_object,
    dns1123_label_error,
    dns1123_subdomain_error,
    expect_int,
    expect_list,
    expect_map,
    expect_str,
    index,
    join,
    qualified_name_error,
)
from .quantity import QuantityError, parse_quantity

WORKLOAD_API_VERSION = "scheduling.k8s.io/v1alpha1"
WORKLOAD_KIND = "Workload"
MAX_POD_GROUPS = 8  # scheduling/v1alpha1 WorkloadMaxPodGroups
INT32_MAX = 2**31 - 1
# kube-scheduler 1.35's GangScheduling plugin: the group's Permit deadline (home: core/kube/defaults.py),
# fixed upstream, a setting in dralab.
DEFAULT_GANG_TIMEOUT_MS = GANG_SCHEDULING_TIMEOUT_MS
# The kube-scheduler feature gates dralab models, with their 1.35 defaults. The only one so far decides
# whether a gang member waiting at Permit is visible to others: KEP-5278 sets status.nominatedNodeName
# on a pod whose binding cycle waits (beta, on by default, in 1.35).
SCHEDULER_FEATURE_GATES = {"NominatedNodeNameForExpectation": True}
# scheduler-plugins' Coscheduling (apis/scheduling/v1alpha1: PodGroup, PodGroupLabel)
POD_GROUP_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
POD_GROUP_KIND = "PodGroup"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


@dataclass(frozen=True)
class GangRef:
    """Which pod group (and replica) a pod belongs to: `spec.workloadRef` plus the pod's namespace."""

    namespace: str
    workload: str
    pod_group: str
    replica: str = ""

    @property
    def workload_key(self) -> str:
        return f"{self.namespace}/{self.workload}"

    @property
    def key(self) -> str:
        """`<namespace>/<workload>/<podGroup>`, with `/<replicaKey>` when the pod gives one."""
        base = f"{self.namespace}/{self.workload}/{self.pod_group}"
        return f"{base}/{self.replica}" if self.replica else base


def gang_ref(pod: dict[str, Any]) -> GangRef | None:
    """The pod's group, or None for a pod without `spec.workloadRef`."""
    ref = (pod.get("spec") or {}).get("workloadRef")
    if not isinstance(ref, dict):
        return None
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    return GangRef(namespace, str(ref.get("name") or ""), str(ref.get("podGroup") or ""),
                   str(ref.get("podGroupReplicaKey") or ""))


def group_policy(workload: dict[str, Any], pod_group: str) -> dict[str, Any] | None:
    """The `policy` of the named pod group of a Workload manifest; None if the group is not there."""
    for group in (workload.get("spec") or {}).get("podGroups") or []:
        if isinstance(group, dict) and group.get("name") == pod_group:
            policy: dict[str, Any] = group.get("policy") or {}
            return policy
    return None


def min_count(policy: dict[str, Any]) -> int | None:
    """The gang's `minCount`; None for the basic policy (no gang)."""
    gang = policy.get("gang")
    if not isinstance(gang, dict):
        return None
    return int(gang.get("minCount") or 1)


def _name(value: object, path: str, *, label: bool) -> str:
    if value is None or value == "":
        raise FieldError(path, "missing required field")
    name = expect_str(value, path)
    error = dns1123_label_error(name) if label else dns1123_subdomain_error(name)
    if error is not None:
        raise FieldError(path, error)
    return name


def check_workload(obj: object, path: str) -> dict[str, Any]:
    """Check a `scheduling.k8s.io/v1alpha1` Workload; return a copy with `metadata.namespace` filled in."""
    workload, spec, spec_path = checked_object(obj, path)
    check_fields(spec, spec_path, ("controllerRef", "podGroups"), required=("podGroups",))
    if spec.get("controllerRef") is not None:
        expect_map(spec["controllerRef"], join(spec_path, "controllerRef"))
    groups_path = join(spec_path, "podGroups")
    groups = expect_list(spec["podGroups"], groups_path)
    if not groups:
        raise FieldError(groups_path, "a Workload needs at least one pod group")
    if len(groups) > MAX_POD_GROUPS:
        raise FieldError(groups_path, f"at most {MAX_POD_GROUPS} pod groups, got {len(groups)}")
    seen: dict[str, str] = {}
    for i, item in enumerate(groups):
        g_path = index(groups_path, i)
        group = expect_map(item, g_path)
        check_fields(group, g_path, ("name", "policy"), required=("name", "policy"))
        name = _name(group["name"], join(g_path, "name"), label=True)
        if name in seen:
            raise FieldError(join(g_path, "name"), f"duplicate pod group `{name}` (also {seen[name]})")
        seen[name] = g_path
        p_path = join(g_path, "policy")
        policy = expect_map(group["policy"], p_path)
        check_fields(policy, p_path, ("basic", "gang"))
        given = [k for k in ("basic", "gang") if policy.get(k) is not None]
        if len(given) != 1:
            raise FieldError(p_path, "exactly one of `basic` and `gang` must be set")
        if given == ["basic"]:
            expect_map(policy["basic"], join(p_path, "basic"))
            continue
        gang_path = join(p_path, "gang")
        gang = expect_map(policy["gang"], gang_path)
        check_fields(gang, gang_path, ("minCount",), required=("minCount",))
        expect_int(gang["minCount"], join(gang_path, "minCount"), minimum=1, maximum=INT32_MAX)
    return workload


def check_workload_ref(spec: dict[str, Any], spec_path: str) -> None:
    """Check a pod's `spec.workloadRef` (if it has one)."""
    if spec.get("workloadRef") is None:
        return
    path = join(spec_path, "workloadRef")
    ref = expect_map(spec["workloadRef"], path)
    check_fields(ref, path, ("name", "podGroup", "podGroupReplicaKey"), required=("name", "podGroup"))
    _name(ref["name"], join(path, "name"), label=False)
    _name(ref["podGroup"], join(path, "podGroup"), label=True)
    if ref.get("podGroupReplicaKey") not in (None, ""):
        _name(ref["podGroupReplicaKey"], join(path, "podGroupReplicaKey"), label=True)


# --- scheduler-plugins Coscheduling PodGroups ---------------------------------------------------------


def pod_group_label(pod: dict[str, Any]) -> str | None:
    """The PodGroup a pod names with the `scheduling.x-k8s.io/pod-group` label; None without it (or empty:
    upstream's GetPodGroupLabel treats an empty value as no group)."""
    labels = (pod.get("metadata") or {}).get("labels")
    value = labels.get(POD_GROUP_LABEL) if isinstance(labels, dict) else None
    return str(value) if value else None


def check_pod_group(obj: object, path: str) -> dict[str, Any]:
    """Check a `scheduling.x-k8s.io/v1alpha1` PodGroup; return a copy with `metadata.namespace` filled in.

    The CRD's schema leaves `minMember` optional (0 means no gang); dralab requires it, >= 1, because a
    PodGroup without it would make every pod of the group wait for nothing, which is a dump's mistake worth
    an error rather than a silently ignored group. `minResources` is a ResourceList (qualified names,
    quantities >= 0); `scheduleTimeoutSeconds` an int32 >= 0. `status` is not read."""
    group, spec, spec_path = checked_object(obj, path)
    check_fields(spec, spec_path, ("minMember", "minResources", "scheduleTimeoutSeconds"), required=("minMember",))
    expect_int(spec["minMember"], join(spec_path, "minMember"), minimum=1, maximum=INT32_MAX)
    if spec.get("minResources") is not None:
        res_path = join(spec_path, "minResources")
        for name, value in expect_map(spec["minResources"], res_path).items():
            item_path = join(res_path, name)
            error = qualified_name_error(name)
            if error is not None:
                raise FieldError(item_path, f"invalid resource name: {error}")
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise FieldError(item_path, f"expected a quantity (e.g. `4`, `500m`, `16Gi`), got `{value}`")
            try:
                amount = parse_quantity(value)
            except QuantityError as e:
                raise FieldError(item_path, str(e)) from None
            if amount < 0:
                raise FieldError(item_path, f"must be greater than or equal to 0, got `{value}`")
    if spec.get("scheduleTimeoutSeconds") is not None:
        expect_int(spec["scheduleTimeoutSeconds"], join(spec_path, "scheduleTimeoutSeconds"), minimum=0,
                   maximum=INT32_MAX)
    return group

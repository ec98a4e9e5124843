"""v1 Pod and Node manifests: the checks dralab applies to what it reads, and resource arithmetic.

A manifest is kept as the plain dict it was loaded as (unknown Kubernetes fields are allowed and kept, except
the fields that change scheduling and are not modelled: core/kube/unmodelled.py).
What dralab reads is checked as the API server's validation would check it: names, labels, resource
quantities, priority, nodeSelector, tolerations and taints. Defaults the API server would fill and
dralab relies on (``apiVersion``, ``kind``, ``metadata.namespace``) are filled in.

:func:`pod_requests` and :func:`node_allocatable` give amounts in :func:`~dralab.core.kube.quantity.resource_amount`
units (milli-cpu; bytes; whole units for pods and extended resources such as ``nvidia.com/gpu``), computed
as kube-scheduler does (``k8s.io/component-helpers/resource.PodRequests``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .affinity import check_pod_placement
from .fields import (
    INT64_MAX,
    FieldError,
    check_metadata,
    dns1123_label_error,
    dns1123_subdomain_error,
    expect_bool,
    expect_enum,
    expect_int,
    expect_list,
    expect_map,
    expect_str,
    index,
    join,
    label_value_error,
    qualified_name_error,
    sanitize,
    type_name,
)
from .podgroups import check_scheduling_group
from .quantity import QuantityError, parse_quantity, resource_amount
from .resources import (
    POD_LEVEL_RESOURCES,
    is_extended_resource,
    is_hugepages,
    is_integer_resource,
    is_native_resource,
    node_allocatable,
    pod_requests,
)
from .unmodelled import check_unmodelled
from .versions import Profile
from .workloads import check_workload_ref

__all__ = [
    "TAINT_EFFECTS",
    "check_node",
    "check_pod",
    "is_extended_resource",
    "node_allocatable",
    "pod_requests",
]

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")
_STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_INT32 = (-(1 << 31), (1 << 31) - 1)


def _container_resource_name_error(name: str) -> str | None:
    error = qualified_name_error(name)
    if error is not None:
        return error
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not is_hugepages(name):
            return f"`{name}` is not a standard resource for containers (cpu, memory, ephemeral-storage, hugepages-*)"
    elif not is_native_resource(name) and not is_extended_resource(name):
        return f"`{name}` doesn't follow the extended resource name standard"
    return None


# --- quantities -----------------------------------------------------------------------------------------


def _check_quantity(name: str, value: object, path: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise FieldError(path, f"expected a quantity (e.g. `100m`, `1Gi`, `8`), got {type_name(value)}")
    try:
        q = parse_quantity(value)
    except QuantityError as e:
        raise FieldError(path, str(e)) from None
    if q < 0:
        raise FieldError(path, f"must be greater than or equal to 0, got `{value}`")
    if is_integer_resource(name) and q.denominator != 1:
        raise FieldError(path, f"must be an integer, got `{value}`")
    if resource_amount(name, q) > INT64_MAX:
        raise FieldError(path, f"`{value}` is too large (more than 2^63-1 {_unit(name)})")
    return q


def _unit(name: str) -> str:
    return "milli-cpu" if name == "cpu" else "units"


def _resource_list(value: object, path: str, *, container: bool) -> dict[str, Fraction]:
    if value is None:
        return {}
    mapping = expect_map(value, path)
    out: dict[str, Fraction] = {}
    for name, item in mapping.items():
        item_path = join(path, name)
        if container:
            error = _container_resource_name_error(name)
            if error is not None:
                raise FieldError(item_path, error)
        out[name] = _check_quantity(name, item, item_path)
    return out


def _check_resources(container: dict[str, Any], path: str) -> None:
    resources = container.get("resources")
    if resources is None:
        return
    res_path = join(path, "resources")
    res = expect_map(resources, res_path)
    limits = _resource_list(res.get("limits"), join(res_path, "limits"), container=True)
    requests = _resource_list(res.get("requests"), join(res_path, "requests"), container=True)
    for name, request in requests.items():
        req_path = join(join(res_path, "requests"), name)
        overcommit = is_native_resource(name) and not is_hugepages(name)
        if name in limits:
            if not overcommit and request != limits[name]:
                raise FieldError(req_path, f"must be equal to the {name} limit ({res['limits'][name]})")
            if request > limits[name]:
                raise FieldError(req_path, f"must be less than or equal to the {name} limit ({res['limits'][name]})")
        elif not overcommit:
            raise FieldError(
                join(join(res_path, "limits"), name),
                "missing required field: a limit must be set for a non-overcommitable resource",
            )
    if "claims" in res and res["claims"] is not None:
        for i, claim in enumerate(expect_list(res["claims"], join(res_path, "claims"))):
            claim_path = index(join(res_path, "claims"), i)
            c = expect_map(claim, claim_path)
            if "name" not in c:
                raise FieldError(join(claim_path, "name"), "missing required field")
            expect_str(c["name"], join(claim_path, "name"), nonempty=True)


# --- metadata -------------------------------------------------------------------------------------------


def _check_type_meta(obj: dict[str, Any], path: str, kind: str) -> None:
    for field, want in (("apiVersion", "v1"), ("kind", kind)):
        if obj.get(field) is None:
            obj[field] = want
        elif expect_str(obj[field], join(path, field)) != want:
            raise FieldError(join(path, field), f"expected `{want}`, got `{obj[field]}`")


# --- Pod ------------------------------------------------------------------------------------------------


def _check_containers(spec: dict[str, Any], path: str, field: str, seen: dict[str, str]) -> int:
    if spec.get(field) is None:
        return 0
    containers = expect_list(spec[field], join(path, field))
    for i, item in enumerate(containers):
        c_path = index(join(path, field), i)
        container = expect_map(item, c_path)
        name_path = join(c_path, "name")
        if "name" not in container:
            raise FieldError(name_path, "missing required field")
        name = expect_str(container["name"], name_path)
        error = dns1123_label_error(name)
        if error is not None:
            raise FieldError(name_path, error)
        if name in seen:
            raise FieldError(name_path, f"duplicate container name `{name}` (also {seen[name]})")
        seen[name] = c_path
        if field == "initContainers" and container.get("restartPolicy") is not None:
            expect_enum(container["restartPolicy"], join(c_path, "restartPolicy"), ("Always",))
        _check_resources(container, c_path)
    return len(containers)


def _check_tolerations(value: object, path: str) -> None:
    if value is None:
        return
    for i, item in enumerate(expect_list(value, path)):
        t_path = index(path, i)
        tol = expect_map(item, t_path)
        key = expect_str(tol.get("key", ""), join(t_path, "key")) if tol.get("key") is not None else ""
        op = tol.get("operator")
        operator = "Equal" if op in (None, "") else expect_enum(op, join(t_path, "operator"), TOLERATION_OPERATORS)
        if key:
            error = qualified_name_error(key)
            if error is not None:
                raise FieldError(join(t_path, "key"), error)
        elif operator != "Exists":
            raise FieldError(join(t_path, "operator"), "must be `Exists` when `key` is empty (match every taint)")
        value_ = tol.get("value")
        if value_ is not None:
            text = expect_str(value_, join(t_path, "value"))
            if operator == "Exists" and text:
                raise FieldError(join(t_path, "value"), "must be empty when `operator` is `Exists`")
            error = label_value_error(text)
            if error is not None:
                raise FieldError(join(t_path, "value"), error)
        effect = tol.get("effect")
        if effect not in (None, ""):
            expect_enum(effect, join(t_path, "effect"), TAINT_EFFECTS)
        if tol.get("tolerationSeconds") is not None:
            expect_int(tol["tolerationSeconds"], join(t_path, "tolerationSeconds"))
            if effect != "NoExecute":
                raise FieldError(join(t_path, "effect"), "must be `NoExecute` when `tolerationSeconds` is set")


def _check_pod(pod: object, path: str, profile: Profile | None = None, *, refuse_unmodelled: bool = True
               ) -> dict[str, Any]:
    """Check ``pod`` (already plain data, see :func:`sanitize`) and fill its defaults in place. With a
    ``profile``, how the pod names its group is checked against that release (``spec.workloadRef`` in 1.35,
    ``spec.schedulingGroup`` from 1.36); without one, as dralab always has (1.35's ``workloadRef``).
    ``refuse_unmodelled``: a field that changes scheduling and is not modelled is refused (a scenario's pod);
    False for a dump's pod, whose such fields ``dralab audit`` reports instead (core/kube/unmodelled.py)."""
    obj = expect_map(pod, path)
    _check_type_meta(obj, path, "Pod")
    if "metadata" not in obj:
        raise FieldError(join(path, "metadata"), "missing required field")
    meta = expect_map(obj["metadata"], join(path, "metadata"))
    check_metadata(meta, join(path, "metadata"), namespaced=True, name_required=True)
    spec_path = join(path, "spec")
    if "spec" not in obj:
        raise FieldError(spec_path, "missing required field")
    spec = expect_map(obj["spec"], spec_path)
    seen: dict[str, str] = {}
    if _check_containers(spec, spec_path, "containers", seen) == 0:
        raise FieldError(join(spec_path, "containers"), "missing required field: a Pod needs at least one container")
    _check_containers(spec, spec_path, "initContainers", seen)
    if spec.get("priority") is not None:
        expect_int(spec["priority"], join(spec_path, "priority"), minimum=_INT32[0], maximum=_INT32[1])
    if spec.get("nodeSelector") is not None:
        for key, item in expect_map(spec["nodeSelector"], join(spec_path, "nodeSelector")).items():
            expect_str(item, join(join(spec_path, "nodeSelector"), key))
    _check_tolerations(spec.get("tolerations"), join(spec_path, "tolerations"))
    check_pod_placement(spec, spec_path)  # topologySpreadConstraints, pod (anti-)affinity (affinity.py)
    if profile is None:
        check_workload_ref(spec, spec_path)
    else:
        check_scheduling_group(spec, spec_path, profile)
    if spec.get("nodeName") not in (None, ""):
        error = dns1123_subdomain_error(expect_str(spec["nodeName"], join(spec_path, "nodeName")))
        if error is not None:
            raise FieldError(join(spec_path, "nodeName"), error)
    _resource_list(spec.get("overhead"), join(spec_path, "overhead"), container=False)
    if spec.get("resources") is not None:
        res_path = join(spec_path, "resources")
        res = expect_map(spec["resources"], res_path)
        for field in ("requests", "limits"):
            for name in _resource_list(res.get(field), join(res_path, field), container=False):
                if name not in POD_LEVEL_RESOURCES and not is_hugepages(name):
                    raise FieldError(
                        join(join(res_path, field), name),
                        "pod-level resources support only cpu, memory and hugepages-*",
                    )
    for name, amount in pod_requests(obj).items():
        if amount > INT64_MAX:
            raise FieldError(spec_path, f"the pod's total request of {name} exceeds 2^63-1 {_unit(name)}")
    if refuse_unmodelled:
        check_unmodelled("Pod", obj, path)
    return obj


def check_pod(pod: object, path: str = "", *, profile: Profile | None = None, refuse_unmodelled: bool = True
              ) -> dict[str, Any]:
    """Check a v1 Pod manifest (under ``profile``'s release when given); return a plain copy with ``apiVersion``,
    ``kind`` and ``metadata.namespace`` filled in. Raises :class:`~dralab.core.kube.fields.FieldError`."""
    return _check_pod(sanitize(pod), path, profile, refuse_unmodelled=refuse_unmodelled)


# --- Node -----------------------------------------------------------------------------------------------


def _check_taints(value: object, path: str) -> None:
    if value is None:
        return
    seen: dict[tuple[str, str], str] = {}
    for i, item in enumerate(expect_list(value, path)):
        t_path = index(path, i)
        taint = expect_map(item, t_path)
        for field in ("key", "effect"):
            if taint.get(field) is None:
                raise FieldError(join(t_path, field), "missing required field")
        key = expect_str(taint["key"], join(t_path, "key"))
        error = qualified_name_error(key)
        if error is not None:
            raise FieldError(join(t_path, "key"), error)
        if taint.get("value") is not None:
            error = label_value_error(expect_str(taint["value"], join(t_path, "value")))
            if error is not None:
                raise FieldError(join(t_path, "value"), error)
        effect = expect_enum(taint["effect"], join(t_path, "effect"), TAINT_EFFECTS)
        if (key, effect) in seen:
            raise FieldError(
                t_path,
                f"duplicate taint `{key}:{effect}` (also {seen[(key, effect)]}); "
                "taints must be unique by key and effect",
            )
        seen[(key, effect)] = t_path


def _check_node(node: object, path: str) -> dict[str, Any]:
    """Check ``node`` (already plain data) and fill its defaults in place."""
    obj = expect_map(node, path)
    _check_type_meta(obj, path, "Node")
    if obj.get("metadata") is not None:
        meta = expect_map(obj["metadata"], join(path, "metadata"))
        check_metadata(meta, join(path, "metadata"), namespaced=False, name_required=False)
    if obj.get("spec") is not None:
        spec_path = join(path, "spec")
        spec = expect_map(obj["spec"], spec_path)
        _check_taints(spec.get("taints"), join(spec_path, "taints"))
        if spec.get("unschedulable") is not None:
            expect_bool(spec["unschedulable"], join(spec_path, "unschedulable"))
    status_path = join(path, "status")
    if "status" not in obj:
        raise FieldError(status_path, "missing required field: a Node template needs status.allocatable")
    status = expect_map(obj["status"], status_path)
    _resource_list(status.get("capacity"), join(status_path, "capacity"), container=False)
    _resource_list(status.get("allocatable"), join(status_path, "allocatable"), container=False)
    field = "allocatable" if status.get("allocatable") is not None else "capacity"
    if status.get(field) is None:
        raise FieldError(join(status_path, "allocatable"), "missing required field")
    if "pods" not in status[field]:
        raise FieldError(
            join(join(status_path, field), "pods"),
            "missing required field: a Node without allocatable pods runs no pod (kubelet's default is 110)",
        )
    check_unmodelled("Node", obj, path)  # a scenario's node template (a dump's nodes: core/dra/convert.py)
    return obj


def check_node(node: object, path: str = "") -> dict[str, Any]:
    """Check a v1 Node manifest (or a node group's template); return a plain copy with ``apiVersion``
    and ``kind`` filled in. Raises :class:`~dralab.core.kube.fields.FieldError`."""
    return _check_node(sanitize(node), path)

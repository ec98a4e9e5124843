"""ResourceClaim, ResourceClaimTemplate and Pod manifests, checked as the 1.35 API server would.

A claim's spec becomes :class:`~dralab.core.dra.model.Claim` requests, constraints and config (defaults
filled in: allocationMode ExactCount, count 1, toleration operator Equal); ``status.allocation`` and
``status.reservedFor`` are checked and kept as given. Templates and pods stay plain manifests (checked).
Errors are :class:`~dralab.core.kube.fields.FieldError` with the path of the field.
"""

from __future__ import annotations

from typing import Any

from ..kube.fields import expect_int, expect_map, expect_str, index, join
from ..kube.manifests import check_pod
from .checks import check_device_configuration, check_labels, check_metadata, check_selectors, check_tolerations
from .claimstatus import (
    RequestNames,
    check_allocation,
    check_device_statuses,
    check_request_refs,
    check_reserved_for,
    request_names,
)
from .model import Claim, Constraint, Request, SubRequest
from .validation import (
    DEVICE_CONFIG_MAX_SIZE,
    DEVICE_CONSTRAINTS_MAX_SIZE,
    DEVICE_REQUESTS_MAX_SIZE,
    FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE,
    OMIT,
    check_dns_label,
    check_dns_subdomain,
    check_fully_qualified_name,
    check_qualified_name,
    duplicate,
    fields,
    forbidden,
    invalid,
    not_found,
    not_supported,
    obj_bool,
    obj_list,
    obj_map,
    obj_str,
    quantity,
    required,
    required_str,
    too_many,
)

__all__ = ["check_claim_spec", "convert_claim", "convert_pod", "convert_template"]

_EXACT = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity")
_SUB = ("name", "deviceClassName", "selectors", "allocationMode", "count", "tolerations", "capacity")
_UNDER_EXACTLY = {
    f: "in resource.k8s.io/v1 this field belongs under `exactly` (v1beta1 put it in the request itself)" for f in _EXACT
}


# --- ResourceClaim / ResourceClaimTemplate ----------------------------------------------------------------


def convert_claim(obj: dict[str, Any], path: str) -> Claim:
    fields(obj, path, ("apiVersion", "kind", "metadata", "spec", "status"))
    name, namespace = check_metadata(obj, path, namespaced=True)
    spec = obj_map(obj, "spec", path) or {}
    requests, constraints, config = check_claim_spec(spec, join(path, "spec"))
    status_path = join(path, "status")
    status = obj_map(obj, "status", path) or {}
    fields(status, status_path, ("allocation", "reservedFor", "devices"))
    names = request_names(requests)
    allocation = obj_map(status, "allocation", status_path)
    if allocation is not None:
        check_allocation(allocation, join(status_path, "allocation"), names)
    reserved = check_reserved_for(status, status_path)
    if reserved and allocation is None:
        raise forbidden(join(status_path, "reservedFor"), "may not be specified when `allocated` is not set")
    check_device_statuses(status, status_path, allocation)
    meta = obj_map(obj, "metadata", path) or {}
    return Claim(
        namespace=namespace,
        name=name,
        uid=obj_str(meta, "uid", join(path, "metadata")),
        requests=requests,
        constraints=constraints,
        config=config,
        allocation=allocation,
        reserved_for=reserved,
        manifest=obj,
    )


def convert_template(obj: dict[str, Any], path: str) -> tuple[str, str]:
    """Check a ResourceClaimTemplate; return its (namespace, name)."""
    fields(obj, path, ("apiVersion", "kind", "metadata", "spec"))
    name, namespace = check_metadata(obj, path, namespaced=True)
    spec_path = join(path, "spec")
    spec = obj_map(obj, "spec", path)
    if spec is None:
        raise required(spec_path)
    fields(spec, spec_path, ("metadata", "spec"))
    meta = obj_map(spec, "metadata", spec_path) or {}
    meta_path = join(spec_path, "metadata")
    for key in meta:
        if key not in ("labels", "annotations"):
            raise forbidden(join(meta_path, key), "cannot be set for a template")
    check_labels(meta, meta_path)
    check_claim_spec(obj_map(spec, "spec", spec_path) or {}, join(spec_path, "spec"))
    return namespace, name


def check_claim_spec(
    spec: dict[str, Any], path: str
) -> tuple[tuple[Request, ...], tuple[Constraint, ...], tuple[dict[str, Any], ...]]:
    """A ResourceClaimSpec: (requests, constraints, config entries as given)."""
    fields(spec, path, ("devices",))
    devices_path = join(path, "devices")
    devices = obj_map(spec, "devices", path) or {}
    fields(devices, devices_path, ("requests", "constraints", "config"))
    requests: list[Request] = []
    for i, item in enumerate(obj_list(devices, "requests", devices_path, DEVICE_REQUESTS_MAX_SIZE)):
        request_path = index(join(devices_path, "requests"), i)
        request = _request(item, request_path)
        if any(r.name == request.name for r in requests):
            raise duplicate(request_path, request.name)
        requests.append(request)
    names = request_names(tuple(requests))
    constraints: list[Constraint] = []
    for i, item in enumerate(obj_list(devices, "constraints", devices_path, DEVICE_CONSTRAINTS_MAX_SIZE)):
        constraints.append(_constraint(item, index(join(devices_path, "constraints"), i), names))
    config = obj_list(devices, "config", devices_path, DEVICE_CONFIG_MAX_SIZE)
    for i, item in enumerate(config):
        entry_path = index(join(devices_path, "config"), i)
        entry = expect_map(item, entry_path)
        fields(entry, entry_path, ("requests", "opaque"))
        check_request_refs(entry, entry_path, names)
        check_device_configuration(entry, entry_path)
    return tuple(requests), tuple(constraints), tuple(config)


def _request(item: object, path: str) -> Request:
    request = expect_map(item, path)
    fields(request, path, ("name", "exactly", "firstAvailable"), hints=_UNDER_EXACTLY)
    name = check_dns_label(required_str(request, "name", path), join(path, "name"))
    exactly = obj_map(request, "exactly", path)
    first = obj_list(request, "firstAvailable", path)
    if exactly is None and not first:
        raise required(path, "exactly one of `exactly` or `firstAvailable` is required")
    if exactly is not None and first:
        raise invalid(
            path, OMIT, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"
        )
    if exactly is not None:
        exact_path = join(path, "exactly")
        fields(exactly, exact_path, _EXACT)
        return Request(name=name, exactly=_subrequest(exactly, exact_path, name, exact=True))
    first_path = join(path, "firstAvailable")
    if len(first) > FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE:
        raise too_many(first_path, len(first), FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE)
    subs: list[SubRequest] = []
    for i, entry in enumerate(first):
        sub_path = index(first_path, i)
        sub = expect_map(entry, sub_path)
        fields(
            sub,
            sub_path,
            _SUB,
            hints={"adminAccess": "adminAccess is only allowed in `exactly`, not in firstAvailable"},
        )
        sub_name = check_dns_label(required_str(sub, "name", sub_path), join(sub_path, "name"))
        if any(s.name == sub_name for s in subs):
            raise duplicate(sub_path, sub_name)
        subs.append(_subrequest(sub, sub_path, sub_name, exact=False))
    return Request(name=name, first_available=tuple(subs))


def _subrequest(req: dict[str, Any], path: str, name: str, *, exact: bool) -> SubRequest:
    class_path = join(path, "deviceClassName")
    device_class = check_dns_subdomain(required_str(req, "deviceClassName", path), class_path)
    selectors = check_selectors(req, path)
    mode = obj_str(req, "allocationMode", path) or "ExactCount"
    count = 0 if req.get("count") is None else expect_int(req["count"], join(path, "count"))
    if mode == "All":
        if count != 0:
            raise invalid(join(path, "count"), count, "must not be specified when allocationMode is 'All'")
    elif mode == "ExactCount":
        count = count or 1  # defaulted when unset (or 0)
        if count <= 0:
            raise invalid(join(path, "count"), count, "must be greater than zero")
    else:
        raise not_supported(join(path, "allocationMode"), mode, ("All", "ExactCount"))
    admin = bool(obj_bool(req, "adminAccess", path)) if exact else False
    tolerations = check_tolerations(req, path)
    capacity_path = join(path, "capacity")
    capacity = obj_map(req, "capacity", path) or {}
    fields(capacity, capacity_path, ("requests",))
    requests_path = join(capacity_path, "requests")
    capacity_requests = {}
    for key, value in (obj_map(capacity, "requests", capacity_path) or {}).items():
        check_qualified_name(key, join(requests_path, key))
        capacity_requests[key] = quantity(value, join(requests_path, key))
    return SubRequest(
        name=name,
        device_class=device_class,
        selectors=selectors,
        allocation_mode="All" if mode == "All" else "ExactCount",
        count=count,
        admin_access=admin,
        tolerations=tolerations,
        capacity_requests=capacity_requests,
    )


def _constraint(item: object, path: str, names: RequestNames) -> Constraint:
    constraint = expect_map(item, path)
    fields(constraint, path, ("requests", "matchAttribute", "distinctAttribute"))
    refs = check_request_refs(constraint, path, names)
    match = obj_str(constraint, "matchAttribute", path)
    distinct = obj_str(constraint, "distinctAttribute", path)
    if match and distinct:
        raise invalid(
            path,
            OMIT,
            "exactly one of `matchAttribute` or `distinctAttribute` is required, but multiple fields are set",
        )
    if not match and not distinct:
        raise required(path, "exactly one of `matchAttribute` or `distinctAttribute` is required")
    if match:
        check_fully_qualified_name(match, join(path, "matchAttribute"))
    else:
        check_fully_qualified_name(distinct, join(path, "distinctAttribute"))
    return Constraint(requests=refs, match_attribute=match or None, distinct_attribute=distinct or None)


# --- Pod --------------------------------------------------------------------------------------------------


def convert_pod(obj: dict[str, Any], path: str) -> tuple[str, str]:
    """Check a v1 Pod (as :func:`dralab.core.kube.manifests.check_pod` does, plus ``spec.resourceClaims`` and the
    containers' ``resources.claims``); return its (namespace, name). ``obj`` is not modified."""
    pod = check_pod(obj, path, refuse_unmodelled=False)  # checks a copy; a dump's unmodelled fields: audit reports
    spec_path = join(path, "spec")
    spec = pod["spec"]
    claims_path = join(spec_path, "resourceClaims")
    names: list[str] = []
    for i, item in enumerate(obj_list(spec, "resourceClaims", spec_path)):
        claim_path = index(claims_path, i)
        claim = expect_map(item, claim_path)
        name = check_dns_label(required_str(claim, "name", claim_path), join(claim_path, "name"))
        if name in names:
            raise duplicate(join(claim_path, "name"), name)
        names.append(name)
        by_name = obj_str(claim, "resourceClaimName", claim_path)
        by_template = obj_str(claim, "resourceClaimTemplateName", claim_path)
        if not by_name and not by_template:
            raise invalid(claim_path, OMIT, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`")
        if by_name and by_template:
            raise invalid(
                claim_path, OMIT, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"
            )
        field = "resourceClaimName" if by_name else "resourceClaimTemplateName"
        check_dns_subdomain(by_name or by_template, join(claim_path, field))
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(kind) or []):
            res_path = join(index(join(spec_path, kind), i), "resources")
            for j, ref in enumerate((container.get("resources") or {}).get("claims") or []):
                ref_path = join(index(join(res_path, "claims"), j), "name")
                if ref["name"] not in names:
                    detail = (
                        "must be one of the names in pod.spec.resourceClaims"
                        if names
                        else "no claims defined in pod.spec.resourceClaims"
                    )
                    raise not_found(ref_path, ref["name"], detail)
                expect_str(ref.get("request", ""), join(index(join(res_path, "claims"), j), "request"))
    return pod["metadata"]["namespace"], pod["metadata"]["name"]

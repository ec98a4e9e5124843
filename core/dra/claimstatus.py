"""References to a claim's requests, and a ResourceClaim's ``status``, checked as the 1.35 API server does.

``status.allocation`` and ``status.reservedFor`` stay plain manifests in the model; these checks make sure
that what the allocator reads from them (devices in use, request names) is well formed.
"""

from __future__ import annotations

from typing import Any

from ..kube.fields import expect_map, index, join
from .checks import (
    check_binding_conditions,
    check_device_configuration,
    check_node_selector,
    check_tolerations,
)
from .model import Request
from .validation import (
    ALLOCATED_DEVICE_STATUS_MAX_CONDITIONS,
    ALLOCATION_RESULTS_MAX_SIZE,
    DEVICE_CONFIG_MAX_SIZE,
    DEVICE_REQUESTS_MAX_SIZE,
    OMIT,
    RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE,
    check_dns_label,
    check_driver_name,
    check_pool_name,
    check_qualified_name,
    check_uid,
    duplicate,
    fields,
    invalid,
    not_supported,
    obj_bool,
    obj_list,
    obj_map,
    obj_str,
    quantity,
    required,
    required_str,
    string_list,
    too_many,
)

__all__ = [
    "RequestNames",
    "check_allocation",
    "check_device_statuses",
    "check_ref",
    "check_request_refs",
    "check_reserved_for",
    "request_names",
]

_RESULT = (
    "request",
    "driver",
    "pool",
    "device",
    "adminAccess",
    "tolerations",
    "bindingConditions",
    "bindingFailureConditions",
    "shareID",
    "consumedCapacity",
)
_REF = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"

RequestNames = dict[str, set[str] | None]  # request -> its subrequests (None for `exactly`)


# --- references to requests -------------------------------------------------------------------------------


def request_names(requests: tuple[Request, ...]) -> RequestNames:
    return {r.name: ({s.name for s in r.first_available} if r.exactly is None else None) for r in requests}


def check_ref(name: str, path: str, names: RequestNames) -> None:
    segments = name.split("/")
    if len(segments) > 2:
        raise invalid(path, name, _REF)
    for segment in segments:
        check_dns_label(segment, path)
    subs = names.get(segments[0], set())
    if segments[0] not in names or (len(segments) == 2 and segments[1] not in (subs or set())):
        raise invalid(path, name, _REF)


def check_request_refs(entry: dict[str, Any], path: str, names: RequestNames) -> tuple[str, ...]:
    refs = string_list(entry, "requests", path, DEVICE_REQUESTS_MAX_SIZE)
    for i, ref in enumerate(refs):
        ref_path = index(join(path, "requests"), i)
        check_ref(ref, ref_path, names)
        if ref in refs[:i]:
            raise duplicate(ref_path, ref)
    return tuple(refs)


# --- status -----------------------------------------------------------------------------------------------


def check_allocation(allocation: dict[str, Any], path: str, names: RequestNames) -> None:
    fields(allocation, path, ("devices", "nodeSelector", "allocationTimestamp"))
    devices_path = join(path, "devices")
    devices = obj_map(allocation, "devices", path) or {}
    fields(devices, devices_path, ("results", "config"))
    for i, item in enumerate(obj_list(devices, "results", devices_path, ALLOCATION_RESULTS_MAX_SIZE)):
        result_path = index(join(devices_path, "results"), i)
        result = expect_map(item, result_path)
        fields(result, result_path, _RESULT)
        check_ref(required_str(result, "request", result_path), join(result_path, "request"), names)
        _check_device_ref(result, result_path)
        obj_bool(result, "adminAccess", result_path)
        check_tolerations(result, result_path)
        check_binding_conditions(result, result_path)
        consumed_path = join(result_path, "consumedCapacity")
        for key, value in (obj_map(result, "consumedCapacity", result_path) or {}).items():
            check_qualified_name(key, join(consumed_path, key))
            quantity(value, join(consumed_path, key))
    for i, item in enumerate(obj_list(devices, "config", devices_path, 2 * DEVICE_CONFIG_MAX_SIZE)):
        entry_path = index(join(devices_path, "config"), i)
        entry = expect_map(item, entry_path)
        fields(entry, entry_path, ("source", "requests", "opaque"))
        source = obj_str(entry, "source", entry_path)
        if not source:
            raise required(join(entry_path, "source"))
        if source not in ("FromClaim", "FromClass"):
            raise not_supported(join(entry_path, "source"), source, ("FromClaim", "FromClass"))
        check_request_refs(entry, entry_path, names)
        check_device_configuration(entry, entry_path)
    if allocation.get("nodeSelector") is not None:
        check_node_selector(allocation["nodeSelector"], join(path, "nodeSelector"), one_term=False)
    obj_str(allocation, "allocationTimestamp", path)


def _check_device_ref(entry: dict[str, Any], path: str) -> tuple[str, str, str, str]:
    """(driver, pool, device, shareID) of an allocation result or a device status."""
    driver = check_driver_name(obj_str(entry, "driver", path), join(path, "driver"))
    pool = check_pool_name(obj_str(entry, "pool", path), join(path, "pool"))
    device = check_dns_label(required_str(entry, "device", path), join(path, "device"))
    share = obj_str(entry, "shareID", path)
    if share:
        check_uid(share, join(path, "shareID"))
    return driver, pool, device, share


def check_reserved_for(status: dict[str, Any], path: str) -> tuple[dict[str, Any], ...]:
    items = obj_list(status, "reservedFor", path, RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE)
    uids: list[str] = []
    for i, item in enumerate(items):
        ref_path = index(join(path, "reservedFor"), i)
        ref = expect_map(item, ref_path)
        fields(ref, ref_path, ("apiGroup", "resource", "name", "uid"))
        obj_str(ref, "apiGroup", ref_path)
        for field in ("resource", "name", "uid"):
            required_str(ref, field, ref_path)
        if ref["uid"] in uids:
            raise duplicate(ref_path, ref["uid"])
        uids.append(ref["uid"])
    return tuple(items)


def check_device_statuses(status: dict[str, Any], path: str, allocation: dict[str, Any] | None) -> None:
    results = ((allocation or {}).get("devices") or {}).get("results") or []
    allocated = {(r.get("driver"), r.get("pool"), r.get("device"), r.get("shareID") or "") for r in results}
    seen: set[tuple[str, str, str, str]] = set()
    for i, item in enumerate(obj_list(status, "devices", path)):
        entry_path = index(join(path, "devices"), i)
        entry = expect_map(item, entry_path)
        fields(entry, entry_path, ("driver", "pool", "device", "shareID", "conditions", "data", "networkData"))
        key = _check_device_ref(entry, entry_path)
        shown = "/".join(k for k in key if k)
        if key in seen:
            raise duplicate(entry_path, shown)
        seen.add(key)
        if key not in allocated:
            raise invalid(entry_path, shown, "must be an allocated device in the claim")
        conditions = obj_list(entry, "conditions", entry_path)
        if len(conditions) > ALLOCATED_DEVICE_STATUS_MAX_CONDITIONS:
            raise too_many(join(entry_path, "conditions"), len(conditions), ALLOCATED_DEVICE_STATUS_MAX_CONDITIONS)
        if entry.get("data") is not None and not isinstance(entry["data"], dict):
            raise invalid(join(entry_path, "data"), OMIT, "must be a valid JSON object")
        network = obj_map(entry, "networkData", entry_path)
        if network is not None:
            fields(network, join(entry_path, "networkData"), ("interfaceName", "ips", "hardwareAddress"))

"""ResourceSlice, DeviceClass and Node manifests to the DRA model, checked as the 1.35 API server would.

Each function takes one object (plain data, already through :func:`~dralab.core.kube.fields.sanitize`) and the
path of that object in its file, and returns the model object; the manifest itself is kept, unchanged, in
the model's ``manifest`` field. Errors are :class:`~dralab.core.kube.fields.FieldError`.
"""

from __future__ import annotations

from typing import Any

from ..kube.fields import expect_bool, expect_int, expect_map, expect_str, index, join
from ..kube.manifests import _check_taints, _resource_list
from ..kube.resources import is_extended_resource
from .checks import (
    check_binding_conditions,
    check_device_configuration,
    check_metadata,
    check_node_selector,
    check_selectors,
    check_taint,
)
from .model import Attribute, Capacity, Device, DeviceClass, DeviceID, NodeSelection, Slice
from .model import Node as NodeObject
from .slice_capacity import check_capacity, check_consumptions, check_counter_sets
from .validation import (
    DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH,
    DEVICE_CONFIG_MAX_SIZE,
    DEVICE_TAINTS_MAX_LENGTH,
    OMIT,
    RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE,
    RESOURCE_SLICE_MAX_DEVICES,
    RESOURCE_SLICE_MAX_DEVICES_WITH_TAINTS_OR_CONSUMES_COUNTERS,
    check_dns_label,
    check_dns_subdomain,
    check_driver_name,
    check_pool_name,
    check_qualified_name,
    duplicate,
    fields,
    invalid,
    is_semver,
    obj_bool,
    obj_list,
    obj_map,
    obj_str,
    qualify,
    required,
    required_str,
    too_long,
    too_many,
)

__all__ = ["convert_device_class", "convert_node", "convert_slice"]

_TOP = ("apiVersion", "kind", "metadata", "spec")
_SLICE_SPEC = (
    "driver",
    "pool",
    "nodeName",
    "nodeSelector",
    "allNodes",
    "perDeviceNodeSelection",
    "devices",
    "sharedCounters",
)
DEVICE_FIELDS = (  # a v1 device's fields (older.py: v1beta1's `basic` holds the same but `name`)
    "name",
    "attributes",
    "capacity",
    "consumesCounters",
    "nodeName",
    "nodeSelector",
    "allNodes",
    "taints",
    "bindsToNode",
    "bindingConditions",
    "bindingFailureConditions",
    "allowMultipleAllocations",
)
_ATTRIBUTE_KINDS = ("int", "bool", "string", "version")
_SLICE_NODE_FIELDS = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
_DEVICE_NODE_FIELDS = (
    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set "
    "to true in the ResourceSlice spec"
)


# --- DeviceClass ------------------------------------------------------------------------------------------


def convert_device_class(obj: dict[str, Any], path: str) -> DeviceClass:
    fields(obj, path, _TOP)
    name, _ = check_metadata(obj, path, namespaced=False)
    spec_path = join(path, "spec")
    spec = obj_map(obj, "spec", path) or {}
    fields(spec, spec_path, ("selectors", "config", "extendedResourceName"))
    selectors = check_selectors(spec, spec_path)
    config = obj_list(spec, "config", spec_path, DEVICE_CONFIG_MAX_SIZE)
    for i, item in enumerate(config):
        entry_path = index(join(spec_path, "config"), i)
        entry = expect_map(item, entry_path)
        fields(entry, entry_path, ("opaque",))
        check_device_configuration(entry, entry_path)
    extended: str | None = None
    if spec.get("extendedResourceName") is not None:
        extended = expect_str(spec["extendedResourceName"], join(spec_path, "extendedResourceName"))
        if not is_extended_resource(extended):
            raise invalid(join(spec_path, "extendedResourceName"), extended, "must be a valid extended resource name")
    return DeviceClass(
        name=name, selectors=selectors, config=tuple(config), extended_resource_name=extended, manifest=obj
    )


# --- Node -------------------------------------------------------------------------------------------------


def convert_node(obj: dict[str, Any], path: str) -> NodeObject:
    """A v1 Node: name, labels, taints and the quantities of status.capacity and status.allocatable are
    checked; everything else is kept as given."""
    name, _ = check_metadata(obj, path, namespaced=False)
    spec = obj_map(obj, "spec", path) or {}
    _check_taints(spec.get("taints"), join(join(path, "spec"), "taints"))
    status = obj_map(obj, "status", path) or {}
    for field in ("capacity", "allocatable"):  # what the scheduler fits pods into: a bad quantity is refused here
        _resource_list(status.get(field), join(join(path, "status"), field), container=False)
    labels = (obj_map(obj, "metadata", path) or {}).get("labels") or {}
    return NodeObject(name=name, labels=dict(labels), manifest=obj)


# --- ResourceSlice ----------------------------------------------------------------------------------------


def convert_slice(obj: dict[str, Any], path: str) -> Slice:
    fields(obj, path, _TOP)
    name, _ = check_metadata(obj, path, namespaced=False)
    spec_path = join(path, "spec")
    spec = obj_map(obj, "spec", path)
    if spec is None:
        raise required(spec_path)
    fields(spec, spec_path, _SLICE_SPEC)
    driver = check_driver_name(obj_str(spec, "driver", spec_path), join(spec_path, "driver"))

    pool_path = join(spec_path, "pool")
    pool = obj_map(spec, "pool", spec_path)
    if pool is None:
        raise required(pool_path)
    fields(pool, pool_path, ("name", "generation", "resourceSliceCount"))
    pool_name = check_pool_name(obj_str(pool, "name", pool_path), join(pool_path, "name"))
    generation = expect_int(pool.get("generation", 0), join(pool_path, "generation"))
    if generation < 0:
        raise invalid(join(pool_path, "generation"), generation, "must be greater than or equal to zero")
    count = expect_int(pool.get("resourceSliceCount", 0), join(pool_path, "resourceSliceCount"))
    if count <= 0:
        raise invalid(join(pool_path, "resourceSliceCount"), count, "must be greater than zero")

    selection, per_device = _slice_node_selection(spec, spec_path)
    devices = obj_list(spec, "devices", spec_path)
    counter_sets = obj_list(spec, "sharedCounters", spec_path)
    if devices and counter_sets:
        raise invalid(spec_path, OMIT, "only one of `sharedCounters` or `devices` is allowed")
    advanced = any(isinstance(d, dict) and (d.get("taints") or d.get("consumesCounters")) for d in devices)
    limit = RESOURCE_SLICE_MAX_DEVICES_WITH_TAINTS_OR_CONSUMES_COUNTERS if advanced else RESOURCE_SLICE_MAX_DEVICES
    if len(devices) > limit:
        raise too_many(join(spec_path, "devices"), len(devices), limit)
    out: list[Device] = []
    seen: set[str] = set()
    for i, item in enumerate(devices):
        device_path = index(join(spec_path, "devices"), i)
        device = _device(item, device_path, driver=driver, pool=pool_name, slice_name=name, per_device=per_device)
        if device.id.device in seen:
            raise duplicate(device_path, device.id.device)
        seen.add(device.id.device)
        out.append(device)
    return Slice(
        name=name,
        driver=driver,
        pool=pool_name,
        generation=generation,
        resource_slice_count=count,
        node_selection=selection,
        per_device_node_selection=per_device,
        devices=tuple(out),
        shared_counters=check_counter_sets(counter_sets, join(spec_path, "sharedCounters")),
        manifest=obj,
    )


def _slice_node_selection(spec: dict[str, Any], path: str) -> tuple[NodeSelection | None, bool]:
    chosen: list[str] = []
    node_name: str | None = None
    selector: dict[str, Any] | None = None
    if spec.get("nodeName") is not None:
        node_name = expect_str(spec["nodeName"], join(path, "nodeName"))
        if not node_name:
            raise invalid(join(path, "nodeName"), "", "must be either unset or set to a non-empty string")
        check_dns_subdomain(node_name, join(path, "nodeName"))
        chosen.append("`nodeName`")
    if spec.get("nodeSelector") is not None:
        selector = check_node_selector(spec["nodeSelector"], join(path, "nodeSelector"), one_term=True)
        chosen.append("`nodeSelector`")
    flags = {}
    for field in ("allNodes", "perDeviceNodeSelection"):
        flag = obj_bool(spec, field, path)
        if flag is False:
            raise invalid(join(path, field), False, "must be either unset or set to true")
        flags[field] = bool(flag)
        if flag:
            chosen.append(f"`{field}`")
    if not chosen:
        raise required(path, _SLICE_NODE_FIELDS)
    if len(chosen) > 1:
        raise invalid(path, "{" + ", ".join(chosen) + "}", _SLICE_NODE_FIELDS + ", but multiple fields are set")
    if flags["perDeviceNodeSelection"]:
        return None, True
    return NodeSelection(node_name=node_name, node_selector=selector, all_nodes=flags["allNodes"]), False


def _device_node_selection(device: dict[str, Any], path: str, per_device: bool) -> NodeSelection | None:
    present = [f for f in ("nodeName", "nodeSelector", "allNodes") if device.get(f) is not None]
    if not per_device:
        if present:
            raise invalid(
                path,
                OMIT,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to "
                "true in the ResourceSlice spec",
            )
        return None
    chosen: list[str] = []
    node_name: str | None = None
    selector: dict[str, Any] | None = None
    if "nodeName" in present:
        node_name = expect_str(device["nodeName"], join(path, "nodeName"))
        if not node_name:
            raise invalid(join(path, "nodeName"), "", "must not be empty")
        check_dns_subdomain(node_name, join(path, "nodeName"))
        chosen.append("`nodeName`")
    if "nodeSelector" in present:
        selector = check_node_selector(device["nodeSelector"], join(path, "nodeSelector"), one_term=False)
        chosen.append("`nodeSelector`")
    all_nodes = obj_bool(device, "allNodes", path)
    if all_nodes is False:
        raise invalid(join(path, "allNodes"), False, "must be either unset or set to true")
    if all_nodes:
        chosen.append("`allNodes`")
    if not chosen:
        raise required(path, _DEVICE_NODE_FIELDS)
    if len(chosen) > 1:
        raise invalid(path, "{" + ", ".join(chosen) + "}", _DEVICE_NODE_FIELDS)
    return NodeSelection(node_name=node_name, node_selector=selector, all_nodes=bool(all_nodes))


def _device(item: object, path: str, *, driver: str, pool: str, slice_name: str, per_device: bool) -> Device:
    device = expect_map(item, path)
    fields(device, path, DEVICE_FIELDS)
    name = check_dns_label(required_str(device, "name", path), join(path, "name"))
    attributes = obj_map(device, "attributes", path) or {}
    capacities = obj_map(device, "capacity", path) or {}
    total = len(attributes) + len(capacities)
    if total > RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE:
        raise invalid(
            path,
            total,
            "the total number of attributes and capacities must not exceed "
            f"{RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE}",
        )
    multi = bool(obj_bool(device, "allowMultipleAllocations", path))
    attrs: dict[str, Attribute] = {}
    for key, value in attributes.items():
        key_path = join(join(path, "attributes"), key)
        check_qualified_name(key, key_path)
        # A name with and without the driver's domain is the same attribute: the explicit form wins.
        if key == qualify(key, driver) or qualify(key, driver) not in attributes:
            attrs[qualify(key, driver)] = _attribute(value, key_path)
        else:
            _attribute(value, key_path)
    caps: dict[str, Capacity] = {}
    published: dict[str, str] = {}
    for key, value in capacities.items():
        key_path = join(join(path, "capacity"), key)
        check_qualified_name(key, key_path)
        capacity = check_capacity(value, key_path, multi)
        full = qualify(key, driver)
        if key == full or full not in capacities:
            caps[full] = capacity
            if key != full:
                published[full] = key
    taints = obj_list(device, "taints", path, DEVICE_TAINTS_MAX_LENGTH)
    conditions, failures = check_binding_conditions(device, path)
    return Device(
        id=DeviceID(driver, pool, name),
        slice_name=slice_name,
        attributes=attrs,
        capacity=caps,
        consumes_counters=check_consumptions(device, path),
        taints=tuple(check_taint(t, index(join(path, "taints"), i)) for i, t in enumerate(taints)),
        allow_multiple_allocations=multi,
        binds_to_node=bool(obj_bool(device, "bindsToNode", path)),
        binding_conditions=conditions,
        binding_failure_conditions=failures,
        node_selection=_device_node_selection(device, path, per_device),
        published_capacity_names=published,
    )


def _attribute(value: object, path: str) -> Attribute:
    attr = expect_map(value, path)
    fields(attr, path, _ATTRIBUTE_KINDS)
    present = [k for k in _ATTRIBUTE_KINDS if attr.get(k) is not None]
    if len(present) != 1:
        raise invalid(path, "" if not present else attr, "exactly one value must be specified")
    kind = present[0]
    raw = attr[kind]
    kind_path = join(path, kind)
    if kind == "int":
        return Attribute("int", expect_int(raw, kind_path))
    if kind == "bool":
        return Attribute("bool", expect_bool(raw, kind_path))
    text = expect_str(raw, kind_path)
    if kind == "version" and not is_semver(text):
        raise invalid(kind_path, text, "must be a string compatible with semver.org spec 2.0.0")
    if len(text.encode()) > DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH:
        raise too_long(kind_path, DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH)
    return Attribute("version" if kind == "version" else "string", text)

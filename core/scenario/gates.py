"""Fields a scenario may use only when their feature gate is on in its release profile (spec.kubernetes).

The API server of a release with a gate off does not serve the gated fields (upstream drops them on create,
`dropDisabledFields` in pkg/api/resource and pkg/api/pod), so the object would behave as if they were not
there. dralab models those fields; accepting them under a profile that has the gate off would run a cluster
that release cannot be. So they are refused, naming the field and the gate (house rule: never accept and
ignore a field that changes what Kubernetes would do).

Which gate guards which field: the resource.k8s.io/v1 types' `+featureGate=` tags (staging/src/k8s.io/api/
resource/v1/types.go) and the KEPs: 4815 partitionable devices, 5055 device taints, 5075 consumable capacity,
5007 binding conditions, 5018 admin access, 4816 prioritized list, 5004 extended resource, 4671 workloadRef.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..dra.cel_env import check_new_object_selectors
from ..dra.taint_rules import fault_rule, fault_rule_name, served_version
from ..kube.fields import FieldError, index, join
from ..kube.versions import GATES, Profile
from .dra import check_taint_rule

# field of a v1 ResourceSlice's spec / device -> the gate it needs
SLICE_FIELDS = {"sharedCounters": "DRAPartitionableDevices", "perDeviceNodeSelection": "DRAPartitionableDevices"}
DEVICE_FIELDS = {
    "consumesCounters": "DRAPartitionableDevices",
    "nodeName": "DRAPartitionableDevices",  # per-device node selection
    "nodeSelector": "DRAPartitionableDevices",
    "allNodes": "DRAPartitionableDevices",
    "taints": "DRADeviceTaints",
    "allowMultipleAllocations": "DRAConsumableCapacity",
    "bindsToNode": "DRADeviceBindingConditions",
    "bindingConditions": "DRADeviceBindingConditions",
    "bindingFailureConditions": "DRADeviceBindingConditions",
}
# field of a request's `exactly` or of a `firstAvailable` entry -> the gate it needs
REQUEST_FIELDS = {"adminAccess": "DRAAdminAccess", "tolerations": "DRADeviceTaints",
                  "capacity": "DRAConsumableCapacity"}
CONSTRAINT_FIELDS = {"distinctAttribute": "DRAConsumableCapacity"}
CLASS_FIELDS = {"extendedResourceName": "DRAExtendedResource"}


def _set(value: object) -> bool:
    """Whether a field is in use: present and not empty, false or null (a `false` or `[]` asks nothing)."""
    return value not in (None, False, "", [], {})


def _fields(obj: object, path: str, table: dict[str, str], profile: Profile) -> None:
    if not isinstance(obj, dict):
        return
    for name, gate in table.items():
        if _set(obj.get(name)):
            profile.require(gate, join(path, name), f"`{name}`")


def _items(obj: object, key: str) -> list[Any]:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []


def check_slice(slice_: dict[str, Any], path: str, profile: Profile) -> None:
    """A v1 ResourceSlice (a node group's template): shared counters, per-device node selection, device
    taints, consumable capacity and binding conditions."""
    spec_path = join(path, "spec")
    spec = slice_.get("spec")
    _fields(spec, spec_path, SLICE_FIELDS, profile)
    for k, device in enumerate(_items(spec, "devices")):
        d_path = index(join(spec_path, "devices"), k)
        _fields(device, d_path, DEVICE_FIELDS, profile)
        capacity = device.get("capacity") if isinstance(device, dict) else None
        for name, entry in (capacity.items() if isinstance(capacity, dict) else ()):
            if isinstance(entry, dict) and _set(entry.get("requestPolicy")):
                profile.require("DRAConsumableCapacity", join(join(join(d_path, "capacity"), name), "requestPolicy"),
                                "`requestPolicy`")


def check_claim_spec(spec: object, path: str, profile: Profile) -> None:
    """A ResourceClaim's spec (also a template's spec.spec): prioritized lists, admin access, tolerations,
    requested capacity and distinctAttribute."""
    devices_path = join(path, "devices")
    devices = spec.get("devices") if isinstance(spec, dict) else None
    for r, request in enumerate(_items(devices, "requests")):
        r_path = index(join(devices_path, "requests"), r)
        if not isinstance(request, dict):
            continue
        _fields(request.get("exactly"), join(r_path, "exactly"), REQUEST_FIELDS, profile)
        if _set(request.get("firstAvailable")):
            profile.require("DRAPrioritizedList", join(r_path, "firstAvailable"), "`firstAvailable`")
        for s, sub in enumerate(_items(request, "firstAvailable")):
            _fields(sub, index(join(r_path, "firstAvailable"), s), REQUEST_FIELDS, profile)
    for c, constraint in enumerate(_items(devices, "constraints")):
        _fields(constraint, index(join(devices_path, "constraints"), c), CONSTRAINT_FIELDS, profile)


def check_object(obj: dict[str, Any], path: str, profile: Profile) -> None:
    """One object of spec.objects: the DRA kinds' gated fields (other kinds have none dralab models)."""
    if obj.get("apiVersion") != "resource.k8s.io/v1":
        return
    kind = obj.get("kind")
    check_new_object_selectors(obj, path, profile)  # the release's CEL environment for new objects
    if kind == "DeviceClass":
        _fields(obj.get("spec"), join(path, "spec"), CLASS_FIELDS, profile)
    elif kind == "ResourceClaim":
        check_claim_spec(obj.get("spec"), join(path, "spec"), profile)
    elif kind == "ResourceClaimTemplate":
        spec = obj.get("spec")
        check_claim_spec(spec.get("spec") if isinstance(spec, dict) else None, join(join(path, "spec"), "spec"),
                         profile)
    elif kind == "ResourceSlice":
        check_slice(obj, path, profile)


def check_objects(objects: Sequence[object], path: str, profile: Profile) -> None:
    for i, obj in enumerate(objects):
        if isinstance(obj, dict):
            check_object(obj, index(path, i), profile)


def check_pod(pod: dict[str, Any], path: str, profile: Profile) -> None:
    """A pod's `spec.workloadRef` (KEP-4671): a 1.35 field behind GenericWorkload; 1.36 replaced it with
    `spec.schedulingGroup` (the field was tombstoned), so later releases do not have it."""
    spec = pod.get("spec")
    if not isinstance(spec, dict) or spec.get("workloadRef") is None:
        return
    where = join(join(path, "spec"), "workloadRef")
    if profile.version != "1.35":
        raise FieldError(where, f"Kubernetes {profile.version} has no Pod field `spec.workloadRef` (only 1.35 has it; "
                                "1.36 and later link a pod to its PodGroup with `spec.schedulingGroup.podGroupName`)")
    profile.require("GenericWorkload", where, "`spec.workloadRef`")


def check_workload_gangs(objects: Sequence[object], path: str, profile: Profile) -> None:
    """dralab's scheduler runs a Workload's pod groups with the GangScheduling plugin (all-or-nothing); a
    release that has that gate off would schedule the pods one by one, which dralab does not model: refused."""
    spec = GATES["GangScheduling"].get(profile.version)
    if spec is None or spec.stage == "removed":
        return
    for i, obj in enumerate(objects):
        if isinstance(obj, dict) and obj.get("kind") == "Workload" \
                and str(obj.get("apiVersion", "")).startswith("scheduling.k8s.io/"):
            profile.require("GangScheduling", join(index(path, i), "kind"),
                            "a Workload's pod groups (dralab schedules them all-or-nothing, the GangScheduling "
                            "plugin)")


def check_faults(faults: Sequence[object], path: str, profile: Profile) -> None:
    """A `device-unhealthy` fault makes the driver taint a device (core/controllers/drivers.py): device
    taints need DRADeviceTaints."""
    for i, fault in enumerate(faults):
        if isinstance(fault, dict) and fault.get("kind") == "device-taint":  # the rule it creates, as served
            rule = fault_rule(fault_rule_name(f"fault/{i}", fault), fault)
            rule["apiVersion"] = served_version(profile)
            check_taint_rule(rule, index(path, i), profile)
        if isinstance(fault, dict) and fault.get("kind") == "device-unhealthy":
            profile.require("DRADeviceTaints", join(index(path, i), "kind"), "a `device-unhealthy` fault (a device "
                                                                              "taint)")


def check_group(group: dict[str, Any], path: str, profile: Profile) -> None:
    """A node group: its ResourceSlice templates, and drivers that report devices unhealthy (a device taint)."""
    for j, template in enumerate(_items(group, "resourceSlices")):
        if isinstance(template, dict):
            check_slice(template, index(join(path, "resourceSlices"), j), profile)
    for d, driver in enumerate(_items(group, "drivers")):
        if isinstance(driver, dict) and _set(driver.get("unhealthy")):
            profile.require("DRADeviceTaints", join(index(join(path, "drivers"), d), "unhealthy"),
                            "a driver's `unhealthy` devices (a device taint)")

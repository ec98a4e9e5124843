"""resource.k8s.io objects of the older served versions (v1alpha3, v1beta1, v1beta2) converted to v1, as the API
server converts them, and back (for the round-trip tests and the docs' table).

Why: a dump of a 1.32-1.34 cluster prints its DeviceClasses, ResourceSlices, ResourceClaims and
ResourceClaimTemplates in the version its API server preferred (v1beta1 in 1.32, v1beta2 in 1.33), and an operator
may keep manifests in those versions long after. kube-apiserver reads every served version into one internal form
(v1's shape since 1.34) by the conversion functions of pkg/apis/resource/<version>/conversion.go; dralab reads
them the same way into a v1 manifest and checks that, so every rule of core/dra/convert.py and claims.py applies
unchanged. The manifest kept in the inventory is the converted v1 one (what `kubectl get` of the v1 resource
would print).

The rules (kubernetes/kubernetes pkg/apis/resource/v1beta1/conversion.go; v1alpha3 had the same shapes in
1.31-1.33 and the same functions; v1beta2 has v1's shape and no hand-written conversion):

1. ResourceSlice ``spec.devices[].basic`` (v1alpha3, v1beta1): its fields (attributes, capacity, consumesCounters,
   nodeName, nodeSelector, allNodes, taints, bindsToNode, bindingConditions, bindingFailureConditions,
   allowMultipleAllocations) become the device's own (`Convert_v1beta1_Device_To_resource_Device`).
2. ResourceSlice ``spec.nodeName: ""`` and ``spec.allNodes: false`` (v1alpha3, v1beta1: plain fields, `omitempty`)
   are unset in v1, where they are pointers (`Convert_v1beta1_ResourceSliceSpec_To_resource_ResourceSliceSpec`).
3. A request's own deviceClassName, selectors, allocationMode, count, adminAccess, tolerations, capacity
   (v1alpha3, v1beta1) move under ``exactly`` when any of them is set (`hasAnyMainRequestFieldsSet`: a string
   not empty, a count not 0, a list or pointer not nil); ``firstAvailable`` stays where it is. A request that
   sets both is converted as given and refused by v1's validation, as upstream ("It might be invalid but that
   will be caught in validation").
4. Everything else (DeviceClass, claim status, allocation results, metadata) has the same shape in every
   version and is copied.

Errors found in the converted object name the path in the file as written (``spec.devices[0].basic.attributes``,
``spec.devices.requests[0].count``): :func:`path_in_file`. (kube-apiserver itself names the internal path, which
is v1's; dralab names the one the user can find.)

Pure: data in, data out.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from ..kube.fields import FieldError, check_fields, expect_list, expect_map, index, join
from .convert import DEVICE_FIELDS

__all__ = [
    "BASIC_FIELDS",
    "OLDER_VERSIONS",
    "REQUEST_FIELDS",
    "SERVED",
    "from_v1",
    "path_in_file",
    "served_check",
    "to_v1",
]

GROUP = "resource.k8s.io"
V1 = "resource.k8s.io/v1"
KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
WRAPPED = ("resource.k8s.io/v1alpha3", "resource.k8s.io/v1beta1")  # `basic` and flat requests
OLDER_VERSIONS = (*WRAPPED, "resource.k8s.io/v1beta2")

# group/version -> the Kubernetes releases that serve the four DRA kinds in it (prerelease-lifecycle-gen tags of
# staging/src/k8s.io/api/resource/<version>/types.go: v1beta1 introduced 1.32, deprecated 1.35, removed 1.38 (the
# tags' defaults: +3, +3); v1beta2 introduced 1.33, deprecated 1.36, removed 1.39 (its
# zz_generated.prerelease-lifecycle.go); v1 GA in 1.34. v1alpha3 served them 1.31-1.33; from 1.34 it keeps only
# DeviceTaintRule (core/dra/taint_rules.py).
SERVED: dict[str, tuple[str, ...]] = {
    "resource.k8s.io/v1alpha3": ("1.31", "1.32", "1.33"),
    "resource.k8s.io/v1beta1": ("1.32", "1.33", "1.34", "1.35", "1.36", "1.37"),
    "resource.k8s.io/v1beta2": ("1.33", "1.34", "1.35", "1.36", "1.37", "1.38"),
    V1: ("1.34", "1.35", "1.36", "1.37", "1.38"),
}

BASIC_FIELDS = tuple(f for f in DEVICE_FIELDS if f != "name")  # v1beta1's `basic`: a v1 device but its name
REQUEST_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity")


def served_check(api_version: str, kind: str, version: str, path: str) -> None:
    """Refuse ``kind`` in ``api_version`` when Kubernetes ``version`` does not serve it (kube-apiserver answers
    `no matches for kind`), naming the releases that do and the versions this one serves."""
    releases = SERVED.get(api_version, ())
    if version in releases:
        return
    serves = ", ".join(f"`{v}`" for v, r in SERVED.items() if version in r)
    span = f"{releases[0]}-{releases[-1]}" if releases else "no release"
    raise FieldError(join(path, "apiVersion"), f"Kubernetes {version} does not serve {kind} in `{api_version}` "
                                               f"(served by {span}); it serves {serves}")


# --- older -> v1 ------------------------------------------------------------------------------------------------


def to_v1(obj: dict[str, Any], path: str = "") -> dict[str, Any]:
    """``obj`` (a DeviceClass, ResourceSlice, ResourceClaim or ResourceClaimTemplate of an older version) as the
    v1 object the API server converts it to; ``obj`` is not modified. The shape of the fields that conversion
    reads is checked here (a map where a map goes), with ``path`` in errors; the rest is v1's checker's job."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    out = copy.deepcopy(obj)
    out["apiVersion"] = V1
    if api_version not in WRAPPED:
        return out  # v1beta2: v1's shape
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    spec_path = join(path, "spec")
    if kind == "ResourceSlice":
        _slice_to_v1(spec, spec_path)
    elif kind == "ResourceClaim":
        _claim_spec_to_v1(spec, spec_path)
    elif kind == "ResourceClaimTemplate" and isinstance(spec.get("spec"), dict):
        _claim_spec_to_v1(spec["spec"], join(spec_path, "spec"))
    return out


def _slice_to_v1(spec: dict[str, Any], path: str) -> None:
    if spec.get("nodeName") == "":  # rule 2
        del spec["nodeName"]
    if spec.get("allNodes") is False:
        del spec["allNodes"]
    devices = spec.get("devices")
    if devices is None:
        return
    for i, item in enumerate(expect_list(devices, join(path, "devices"))):
        device_path = index(join(path, "devices"), i)
        device = expect_map(item, device_path)
        check_fields(device, device_path, ("name", "basic"))
        basic = device.pop("basic", None)
        if basic is None:
            continue
        basic = expect_map(basic, join(device_path, "basic"))
        check_fields(basic, join(device_path, "basic"), BASIC_FIELDS)
        device.update(basic)  # rule 1


def _claim_spec_to_v1(spec: dict[str, Any], path: str) -> None:
    devices = spec.get("devices")
    if not isinstance(devices, dict) or devices.get("requests") is None:
        return
    requests_path = join(join(path, "devices"), "requests")
    for i, item in enumerate(expect_list(devices["requests"], requests_path)):
        request = expect_map(item, index(requests_path, i))
        check_fields(request, index(requests_path, i), ("name", "firstAvailable", *REQUEST_FIELDS))
        if any(_set(request, f) for f in REQUEST_FIELDS):  # rule 3
            exactly = {f: request[f] for f in REQUEST_FIELDS if request.get(f) is not None}
            for f in REQUEST_FIELDS:
                request.pop(f, None)
            request["exactly"] = exactly
        else:
            for f in REQUEST_FIELDS:  # zero values: dropped, as the Go struct's omitempty does
                request.pop(f, None)


def _set(request: dict[str, Any], field: str) -> bool:
    """upstream's hasAnyMainRequestFieldsSet for one field: a string not "", a count not 0, anything else not nil."""
    value = request.get(field)
    if value is None:
        return False
    if field in ("deviceClassName", "allocationMode"):
        return bool(value != "")
    if field == "count":
        return bool(value != 0)
    return True


# --- v1 -> older (Convert_resource_*_To_v1beta1_*) ----------------------------------------------------------------


def from_v1(obj: dict[str, Any], api_version: str) -> dict[str, Any]:
    """The v1 object ``obj`` as the API server serves it in ``api_version`` (one of :data:`OLDER_VERSIONS`):
    every device wrapped in ``basic`` (upstream always sets it, even empty), a request's ``exactly`` fields put
    back on the request. Used to test that conversion round-trips."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = api_version
    if api_version not in WRAPPED:
        return out
    spec = out.get("spec") or {}
    if out["kind"] == "ResourceSlice":
        for device in spec.get("devices") or []:
            basic = {f: device.pop(f) for f in BASIC_FIELDS if f in device}
            device["basic"] = basic
    elif out["kind"] == "ResourceClaim":
        _claim_spec_from_v1(spec)
    elif out["kind"] == "ResourceClaimTemplate":
        _claim_spec_from_v1(spec.get("spec") or {})
    return out


def _claim_spec_from_v1(spec: dict[str, Any]) -> None:
    for request in (spec.get("devices") or {}).get("requests") or []:
        exactly = request.pop("exactly", None)
        if exactly:
            request.update(exactly)


# --- error paths ------------------------------------------------------------------------------------------------

_DEVICE_FIELD = re.compile(r"(spec\.devices\[\d+\])\.(" + "|".join(BASIC_FIELDS) + r")\b")
_EXACTLY = re.compile(r"(requests\[\d+\])\.exactly(?=\.|$)")


def path_in_file(path: str, api_version: str, kind: str) -> str:
    """The path, in the file as written in ``api_version``, of the v1 field at ``path`` (see the module doc)."""
    if api_version not in WRAPPED:
        return path
    if kind == "ResourceSlice":
        return _DEVICE_FIELD.sub(r"\1.basic.\2", path)
    if kind in ("ResourceClaim", "ResourceClaimTemplate"):
        return _EXACTLY.sub(r"\1", path)
    return path

"""Field checks shared by the resource.k8s.io/v1 converters, with the upstream limits and messages.

The rules and limits are those of Kubernetes 1.35 (``pkg/apis/resource/validation``, constants from
``k8s.io/api/resource/v1``). Messages follow the API server's shape (``Required value``, ``Invalid value:
"x": ...``, ``Too many: 129: must have at most 128 items``, ``Duplicate value: "x"``, ``Unsupported value:
...``, ``Forbidden: ...``); type errors use dralab's own (``expected int, got str``). Every check raises
:class:`~dralab.core.kube.fields.FieldError` with the path of the offending field; the loader adds the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ..kube.fields import (
    FieldError,
    check_fields,
    dns1123_label_error,
    dns1123_subdomain_error,
    expect_bool,
    expect_list,
    expect_map,
    expect_str,
    index,
    join,
    label_value_error,
    qualified_name_error,
    type_name,
)
from ..kube.quantity import QuantityError, parse_quantity

# --- limits (k8s.io/api/resource/v1 at v0.35.0) ----------------------------------------------------------
RESOURCE_SLICE_MAX_DEVICES = 128
RESOURCE_SLICE_MAX_DEVICES_WITH_TAINTS_OR_CONSUMES_COUNTERS = 64
RESOURCE_SLICE_MAX_COUNTER_SETS = 8
RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET = 32
RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE = 2
RESOURCE_SLICE_MAX_COUNTERS_PER_DEVICE_COUNTER_CONSUMPTION = 32
RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE = 32
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH = 64
DEVICE_MAX_DOMAIN_LENGTH = 63
DEVICE_MAX_ID_LENGTH = 32
DRIVER_NAME_MAX_LENGTH = 63
POOL_NAME_MAX_LENGTH = 253
DEVICE_TAINTS_MAX_LENGTH = 16
BINDING_CONDITIONS_MAX_SIZE = 4
BINDING_FAILURE_CONDITIONS_MAX_SIZE = 4
CAPACITY_REQUEST_POLICY_DISCRETE_MAX_OPTIONS = 10
DEVICE_REQUESTS_MAX_SIZE = 32  # = AllocationResultsMaxSize
ALLOCATION_RESULTS_MAX_SIZE = 32
DEVICE_CONSTRAINTS_MAX_SIZE = 32
DEVICE_CONFIG_MAX_SIZE = 32
DEVICE_SELECTORS_MAX_SIZE = 32
FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE = 8
DEVICE_TOLERATIONS_MAX_LENGTH = 16
CEL_SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024
RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE = 256
ALLOCATED_DEVICE_STATUS_MAX_CONDITIONS = 8

TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")  # sorted, as upstream lists them
TOLERATION_OPERATORS = ("Equal", "Exists")

OMIT = object()  # an "Invalid value" whose value is not worth showing


# --- upstream-shaped errors -------------------------------------------------------------------------------


def show(value: object) -> str:
    """A value as the API server prints it in an error: strings quoted, the rest as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Fraction):
        return str(value.numerator) if value.denominator == 1 else json.dumps(str(value))
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError):
        return json.dumps(str(value))


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, f"Required value: {detail}" if detail else "Required value")


def invalid(path: str, value: object, detail: str) -> FieldError:
    if value is OMIT:
        return FieldError(path, f"Invalid value: {detail}")
    return FieldError(path, f"Invalid value: {show(value)}: {detail}")


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, f"Forbidden: {detail}")


def too_many(path: str, count: int, limit: int) -> FieldError:
    return FieldError(path, f"Too many: {count}: must have at most {limit} items")


def too_long(path: str, limit: int) -> FieldError:
    return FieldError(path, f"Too long: may not be more than {limit} bytes")


def duplicate(path: str, value: object) -> FieldError:
    return FieldError(path, f"Duplicate value: {show(value)}")


def not_supported(path: str, value: object, allowed: Sequence[str]) -> FieldError:
    supported = ", ".join(show(a) for a in allowed)
    return FieldError(path, f"Unsupported value: {show(value)}: supported values: {supported}")


def not_found(path: str, value: object, detail: str) -> FieldError:
    return FieldError(path, f"Not found: {show(value)}: {detail}")


# --- structure --------------------------------------------------------------------------------------------

# Fields that exist in other versions of the API: a hint beats a bare "unknown field".
_ELSEWHERE = {
    "ints": "list-type attributes (`ints`, `bools`, `strings`, `versions`) are Kubernetes 1.36+ "
    "(DRAListTypeAttributes); 1.35 has `int`, `bool`, `string` and `version`",
    "basic": "resource.k8s.io/v1beta1 shape; in resource.k8s.io/v1 the fields of `basic` sit in the device itself",
    "derivedAttributes": "derived attributes are not part of Kubernetes 1.35",
}
for _alias in ("bools", "strings", "versions"):
    _ELSEWHERE[_alias] = _ELSEWHERE["ints"]


def fields(mapping: dict[str, Any], path: str, allowed: Sequence[str], hints: dict[str, str] | None = None) -> None:
    """Refuse a key outside ``allowed`` (with a hint when the key belongs to another API version)."""
    for key in mapping:
        if key in allowed:
            continue
        hint = (hints or {}).get(key) or _ELSEWHERE.get(key)
        if hint:
            raise FieldError(join(path, key), f"unknown field `{key}`: {hint}")
    check_fields(mapping, path, allowed)


def obj_map(obj: dict[str, Any], key: str, path: str) -> dict[str, Any] | None:
    """``obj[key]`` as a map, None when absent or null."""
    value = obj.get(key)
    return None if value is None else expect_map(value, join(path, key))


def obj_list(obj: dict[str, Any], key: str, path: str, limit: int | None = None) -> list[Any]:
    """``obj[key]`` as a list ([] when absent or null), refused past ``limit`` items as upstream does."""
    value = obj.get(key)
    if value is None:
        return []
    items = expect_list(value, join(path, key))
    if limit is not None and len(items) > limit:
        raise too_many(join(path, key), len(items), limit)
    return items


def obj_str(obj: dict[str, Any], key: str, path: str) -> str:
    """``obj[key]`` as a string, "" when absent or null."""
    value = obj.get(key)
    return "" if value is None else expect_str(value, join(path, key))


def obj_bool(obj: dict[str, Any], key: str, path: str) -> bool | None:
    value = obj.get(key)
    return None if value is None else expect_bool(value, join(path, key))


def required_str(obj: dict[str, Any], key: str, path: str) -> str:
    text = obj_str(obj, key, path)
    if not text:
        raise required(join(path, key))
    return text


def string_list(obj: dict[str, Any], key: str, path: str, limit: int | None = None) -> list[str]:
    items = obj_list(obj, key, path, limit)
    return [expect_str(item, index(join(path, key), i)) for i, item in enumerate(items)]


# --- names ------------------------------------------------------------------------------------------------

_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
    "characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is "
    "'[A-Za-z_][A-Za-z0-9_]*')"
)
_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?",
    re.ASCII,
)


def check_dns_label(name: str, path: str) -> str:
    error = dns1123_label_error(name)
    if error is not None:
        raise FieldError(path, error)
    return name


def check_dns_subdomain(name: str, path: str) -> str:
    error = dns1123_subdomain_error(name)
    if error is not None:
        raise FieldError(path, error)
    return name


def check_driver_name(name: str, path: str) -> str:
    """A driver name (also the domain of a qualified name): a DNS subdomain of at most 63 characters,
    compared without regard to case (upstream reuses the CSI driver name rule)."""
    if not name:
        raise required(path)
    if len(name) > DRIVER_NAME_MAX_LENGTH:
        raise too_long(path, DRIVER_NAME_MAX_LENGTH)
    if dns1123_subdomain_error(name.lower()) is not None:
        raise invalid(
            path,
            name,
            "a driver name must be a DNS subdomain: alphanumeric characters, '-' or '.', starting and ending "
            "with an alphanumeric character (e.g. 'gpu.example.com')",
        )
    return name


def check_pool_name(name: str, path: str) -> str:
    """One or more DNS subdomains separated by '/', at most 253 characters."""
    if not name:
        raise required(path)
    if len(name) > POOL_NAME_MAX_LENGTH:
        raise too_long(path, POOL_NAME_MAX_LENGTH)
    for part in name.split("/"):
        if dns1123_subdomain_error(part) is not None:
            what = f"`{part}` is not a DNS subdomain" if part else "a part is empty"
            raise invalid(path, name, f"a pool name is one or more DNS subdomains separated by '/' ({what})")
    return name


def check_c_identifier(name: str, path: str) -> None:
    if len(name) > DEVICE_MAX_ID_LENGTH:
        raise too_long(path, DEVICE_MAX_ID_LENGTH)
    if not _C_IDENTIFIER.fullmatch(name):
        raise invalid(path, name, _C_IDENTIFIER_MSG)


def check_qualified_name(name: str, path: str) -> None:
    """An attribute or capacity name: a C identifier (at most 32), optionally after a domain and '/'."""
    parts = name.split("/")
    if len(parts) == 1:
        check_c_identifier(name, path)
        return
    if len(parts) > 2:
        raise invalid(path, name, "must not contain more than one slash")
    domain, ident = parts
    if not domain:
        raise invalid(path, "", "the domain must not be empty")
    check_driver_name(domain, path)
    if not ident:
        raise invalid(path, "", "the name must not be empty")
    check_c_identifier(ident, path)


def check_fully_qualified_name(name: str, path: str) -> str:
    check_qualified_name(name, path)
    if "/" not in name:
        raise invalid(path, name, "a fully qualified name must be a domain and a name separated by a slash")
    return name


def qualify(name: str, driver: str) -> str:
    """The fully qualified form of an attribute or capacity name published by ``driver``."""
    return name if "/" in name else f"{driver}/{name}"


def check_label_name(name: str, path: str) -> str:
    if not name:
        raise required(path)
    error = qualified_name_error(name)
    if error is not None:
        raise invalid(path, name, error)
    return name


def check_label_value(value: str, path: str) -> str:
    error = label_value_error(value)
    if error is not None:
        raise invalid(path, value, error)
    return value


def check_uid(value: str, path: str) -> str:
    if not _UID.fullmatch(value):
        raise invalid(
            path,
            value,
            "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase "
            "hexadecimal characters",
        )
    return value


def is_semver(text: str) -> bool:
    return _SEMVER.fullmatch(text) is not None


# --- values -----------------------------------------------------------------------------------------------


def quantity(value: object, path: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise FieldError(path, f"expected a quantity (e.g. `100m`, `1Gi`, `8`), got {type_name(value)}")
    try:
        return parse_quantity(value)
    except QuantityError as e:
        raise FieldError(path, str(e)) from None


def text_of(value: object) -> str:
    """A quantity as the user wrote it, for messages."""
    return value if isinstance(value, str) else str(value)

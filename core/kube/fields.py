"""Small helpers to check loaded YAML/JSON data field by field, with the path of each field.

Every check raises :class:`FieldError` carrying the path of the offending field, written as a reader
of the file would find it (``spec.nodeGroups[1].max``), and what was expected. The scenario loader adds
the file name. Used by :mod:`dralab.core.scenario.load` and :mod:`dralab.core.kube.manifests`.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from collections.abc import Sequence
from typing import Any

from .durations import DurationError, format_duration, parse_duration
from .limits import MAX_CLUSTER_TIME_MS

__all__ = [
    "FieldError",
    "MAX_DEPTH",
    "MAX_NODES",
    "check_fields",
    "dns1123_label_error",
    "dns1123_subdomain_error",
    "expect_bool",
    "expect_duration",
    "expect_enum",
    "expect_int",
    "expect_list",
    "expect_map",
    "expect_number",
    "expect_str",
    "expect_string_map",
    "index",
    "join",
    "label_value_error",
    "qualified_name_error",
    "sanitize",
    "type_name",
]

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
# Bounds on a loaded document: values counted with every YAML alias expanded, and nesting depth.
MAX_NODES = 5_000_000
MAX_DEPTH = 100


class FieldError(ValueError):
    """A bad value at ``path`` (empty for the whole document); ``message`` says what was expected."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


def _wrong(expected: str, value: object, path: str) -> FieldError:
    return FieldError(path, f"expected {expected}, got {type_name(value)}")


def _quote_list(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def expect_map(value: object, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _wrong("map", value, path)
    for key in value:
        if not isinstance(key, str):
            raise FieldError(path, _bad_key(key))
    return value


def expect_list(value: object, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _wrong("list", value, path)
    return value


def expect_str(value: object, path: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise _wrong("str", value, path)
    if nonempty and not value:
        raise FieldError(path, "must not be empty")
    return value


def expect_bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise _wrong("bool", value, path)
    return value


def expect_int(value: object, path: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong("int", value, path)
    lo = INT64_MIN if minimum is None else minimum
    hi = INT64_MAX if maximum is None else maximum
    if value < lo:
        raise FieldError(path, f"must be >= {lo}, got {value}")
    if value > hi:
        raise FieldError(path, f"must be <= {hi}, got {value}")
    return value


def expect_number(value: object, path: str, *, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _wrong("number", value, path)
    number = float(value)
    if not math.isfinite(number):
        raise FieldError(path, f"must be a finite number, got {value}")
    if minimum is not None and number < minimum:
        raise FieldError(path, f"must be >= {minimum:g}, got {value}")
    return number


def expect_enum(value: object, path: str, allowed: Sequence[str]) -> str:
    text = expect_str(value, path)
    if text not in allowed:
        raise FieldError(path, f"expected one of {_quote_list(allowed)}, got `{text}`")
    return text


def expect_duration(value: object, path: str, *, positive: bool = False) -> int:
    """A duration field in whole milliseconds (see :mod:`dralab.core.kube.durations`), at most
    :data:`~dralab.core.kube.limits.MAX_CLUSTER_TIME_MS` (30 days): no time in a run is longer than that."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _wrong("duration (e.g. `30s`, `10m`, `1h30m`)", value, path)
    try:
        ms = parse_duration(value)
    except DurationError as e:
        raise FieldError(path, str(e)) from None
    if positive and ms == 0:
        raise FieldError(path, "must be longer than 0s")
    if ms > MAX_CLUSTER_TIME_MS:
        raise FieldError(path, f"must be <= {format_duration(MAX_CLUSTER_TIME_MS)} (30 days, dralab's limit on "
                               f"cluster time), got {format_duration(ms)}")
    return ms


def expect_string_map(value: object, path: str) -> dict[str, str]:
    mapping = expect_map(value, path)
    for key, item in mapping.items():
        expect_str(item, join(path, key))
    return mapping


def check_fields(mapping: dict[str, Any], path: str, allowed: Sequence[str], required: Sequence[str] = ()) -> None:
    """Refuse a key outside ``allowed`` and a missing key of ``required``."""
    for key in mapping:
        if key not in allowed:
            hint = difflib.get_close_matches(key, allowed, n=1)
            also = f" (did you mean `{hint[0]}`?)" if hint else ""
            raise FieldError(join(path, key), f"unknown field `{key}`; expected one of {_quote_list(allowed)}{also}")
    for key in required:
        if key not in mapping:
            raise FieldError(join(path, key), "missing required field")


# --- Kubernetes name syntax (k8s.io/apimachinery/pkg/util/validation) ---------------------------------

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def dns1123_label_error(name: str) -> str | None:
    """Why ``name`` is not an RFC 1123 label (``gpu-8x``), or None."""
    if len(name) > 63 or not _DNS1123_LABEL.fullmatch(name):
        return (
            f"`{name}` is not a valid name: expected an RFC 1123 label (at most 63 lower case "
            "alphanumeric characters or '-', starting and ending with an alphanumeric character)"
        )
    return None


def dns1123_subdomain_error(name: str) -> str | None:
    """Why ``name`` is not an RFC 1123 subdomain (``train-0.example``), or None."""
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        return (
            f"`{name}` is not a valid name: expected an RFC 1123 subdomain (at most 253 lower case "
            "alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character)"
        )
    return None


def qualified_name_error(name: str) -> str | None:
    """Why ``name`` is not a qualified name (``nvidia.com/gpu``, ``app``), or None."""
    prefix, slash, short = name.rpartition("/")
    if slash and (not prefix or dns1123_subdomain_error(prefix) is not None):
        return f"`{name}` is not a qualified name: the prefix before '/' must be a DNS subdomain"
    if len(short) > 63 or not _QUALIFIED_NAME_PART.fullmatch(short):
        return (
            f"`{name}` is not a qualified name: expected an optional DNS subdomain prefix and '/', then "
            "at most 63 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric"
        )
    return None


def label_value_error(value: str) -> str | None:
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        return (
            f"`{value}` is not a valid label value: at most 63 alphanumeric characters, '-', '_' or '.', "
            "starting and ending with an alphanumeric character (or empty)"
        )
    return None


# --- whole-document pass --------------------------------------------------------------------------------


def check_labels(value: object, path: str) -> None:
    if value is None:
        return
    for key, item in expect_map(value, path).items():
        item_path = join(path, key)
        error = qualified_name_error(key)
        if error is not None:
            raise FieldError(item_path, f"invalid label key: {error}")
        error = label_value_error(expect_str(item, item_path))
        if error is not None:
            raise FieldError(item_path, error)


def check_metadata(meta: dict[str, Any], path: str, *, namespaced: bool, name_required: bool) -> None:
    """ObjectMeta: the name (an RFC 1123 subdomain), the namespace (a label; `default` filled in), labels
    and annotations."""
    if "name" in meta or name_required:
        name_path = join(path, "name")
        if "name" not in meta:
            raise FieldError(name_path, "missing required field")
        error = dns1123_subdomain_error(expect_str(meta["name"], name_path))
        if error is not None:
            raise FieldError(name_path, error)
    if namespaced:
        if meta.get("namespace") in (None, ""):
            meta["namespace"] = "default"
        ns_path = join(path, "namespace")
        error = dns1123_label_error(expect_str(meta["namespace"], ns_path))
        if error is not None:
            raise FieldError(ns_path, error)
    check_labels(meta.get("labels"), join(path, "labels"))
    if meta.get("annotations") is not None:
        for key, item in expect_map(meta["annotations"], join(path, "annotations")).items():
            expect_str(item, join(join(path, "annotations"), key))
    if meta.get("ownerReferences") is not None:
        check_owner_references(meta["ownerReferences"], join(path, "ownerReferences"))


def check_owner_references(value: object, path: str) -> None:
    """apimachinery's ValidateOwnerReferences: apiVersion, kind, name and uid required, at most one
    `controller: true` (the workload controllers and the drain rules read that one)."""
    controllers = 0
    for i, ref in enumerate(expect_list(value, path)):
        ref_path = f"{path}[{i}]"
        ref = expect_map(ref, ref_path)
        for field_name in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(field_name):
                raise FieldError(join(ref_path, field_name), "missing required field")
            expect_str(ref[field_name], join(ref_path, field_name))
        for flag in ("controller", "blockOwnerDeletion"):
            if ref.get(flag) is not None:
                expect_bool(ref[flag], join(ref_path, flag))
        controllers += ref.get("controller") is True
        if controllers > 1:
            raise FieldError(ref_path, "only one reference can have controller set to true")


def checked_object(obj: object, path: str, *, body: str = "spec") -> tuple[dict[str, Any], dict[str, Any], str]:
    """A copy of a namespaced API object with its metadata checked (namespace filled in), its required
    `body` field (`spec`, or `template` for a PodTemplate) and that field's path."""
    out = copy.deepcopy(expect_map(obj, path))
    meta = expect_map(out.get("metadata") or {}, join(path, "metadata"))
    check_metadata(meta, join(path, "metadata"), namespaced=True, name_required=True)
    out["metadata"] = meta
    body_path = join(path, body)
    if out.get(body) is None:
        raise FieldError(body_path, "missing required field")
    return out, expect_map(out[body], body_path), body_path


def _bad_key(key: object) -> str:
    shown = str(key).lower() if isinstance(key, bool) else "null" if key is None else str(key)
    text = f"keys must be strings, got {type_name(key)} `{shown}`"
    if isinstance(key, bool):
        text += " (YAML reads unquoted yes/no/on/off/true/false as booleans: quote the key)"
    return text


def _trail_path(trail: list[str | int]) -> str:
    path = ""
    for part in trail:
        path = index(path, part) if isinstance(part, int) else join(path, part)
    return path


def sanitize(data: object, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> Any:
    """Copy loaded YAML into plain JSON-like data (dict with str keys, list, str, int, float, bool, None).

    Refuses values JSON cannot carry (binary, sets, timestamps given an explicit tag, NaN, infinities),
    non-string keys, self-containing aliases, nesting deeper than ``max_depth`` and documents that would
    hold more than ``max_nodes`` values with every alias expanded (alias bombs). The copy keeps sharing:
    a node reached through several aliases is copied once, so callers must copy before changing.
    """
    memo: dict[int, tuple[Any, int]] = {}
    active: set[int] = set()
    trail: list[str | int] = []

    def walk(value: object, depth: int) -> tuple[Any, int]:
        if value is None or isinstance(value, str | int):
            return value, 1
        if isinstance(value, float):
            if not math.isfinite(value):
                raise FieldError(_trail_path(trail), f"a non-finite number ({value}) is not allowed")
            return value, 1
        if not isinstance(value, dict | list):
            raise FieldError(_trail_path(trail), f"unsupported YAML value of type {type(value).__name__}")
        key = id(value)
        done = memo.get(key)
        if done is not None:
            return done
        if key in active:
            raise FieldError(_trail_path(trail), "a YAML alias refers to a node that contains it")
        if depth >= max_depth:
            raise FieldError(_trail_path(trail), f"nested deeper than {max_depth} levels")
        active.add(key)
        size = 1
        out: Any
        if isinstance(value, dict):
            out = {}
            for k, item in value.items():
                if not isinstance(k, str):
                    raise FieldError(_trail_path(trail), _bad_key(k))
                trail.append(k)
                out[k], n = walk(item, depth + 1)
                trail.pop()
                size += n
        else:
            out = []
            for i, item in enumerate(value):
                trail.append(i)
                copied, n = walk(item, depth + 1)
                trail.pop()
                out.append(copied)
                size += n
        if size > max_nodes:
            raise FieldError(
                _trail_path(trail),
                f"the document holds more than {max_nodes} values once YAML aliases are expanded",
            )
        active.discard(key)
        memo[key] = (out, size)
        return out, size

    return walk(data, 0)[0]

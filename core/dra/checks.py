"""Checks of the parts that several resource.k8s.io/v1 kinds share: node selectors, device taints and
tolerations, binding conditions, CEL selectors, opaque configuration, object metadata.

Messages and limits as in :mod:`dralab.core.dra.validation`; every check raises
:class:`~dralab.core.kube.fields.FieldError` with the path of the offending field.
"""

from __future__ import annotations

import json
from typing import Any

from ..kube.fields import FieldError, expect_int, expect_map, expect_str, index, join, qualified_name_error
from .cel import selector_problem
from .model import Taint, Toleration
from .validation import (
    BINDING_CONDITIONS_MAX_SIZE,
    BINDING_FAILURE_CONDITIONS_MAX_SIZE,
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
    DEVICE_SELECTORS_MAX_SIZE,
    DEVICE_TOLERATIONS_MAX_LENGTH,
    OMIT,
    OPAQUE_PARAMETERS_MAX_LENGTH,
    TAINT_EFFECTS,
    TOLERATION_OPERATORS,
    check_dns_label,
    check_dns_subdomain,
    check_driver_name,
    check_label_name,
    check_label_value,
    duplicate,
    fields,
    forbidden,
    invalid,
    not_supported,
    obj_list,
    obj_map,
    obj_str,
    required,
    string_list,
    too_long,
)

__all__ = [
    "SelectorFieldError",
    "check_binding_conditions",
    "check_cel_expression",
    "check_device_configuration",
    "check_labels",
    "check_metadata",
    "check_node_selector",
    "check_selectors",
    "check_taint",
    "check_toleration",
    "check_tolerations",
    "name_object",
]

_NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def check_node_selector(value: object, path: str, *, one_term: bool) -> dict[str, Any]:
    """A v1 NodeSelector, checked as ``corevalidation.ValidateNodeSelector`` does."""
    selector = expect_map(value, path)
    fields(selector, path, ("nodeSelectorTerms",))
    terms_path = join(path, "nodeSelectorTerms")
    terms = obj_list(selector, "nodeSelectorTerms", path)
    if not terms:
        raise required(terms_path, "must have at least one node selector term")
    if one_term and len(terms) != 1:
        raise invalid(terms_path, OMIT, "must have exactly one node selector term")
    for i, item in enumerate(terms):
        term_path = index(terms_path, i)
        term = expect_map(item, term_path)
        fields(term, term_path, ("matchExpressions", "matchFields"))
        for j, req in enumerate(obj_list(term, "matchExpressions", term_path)):
            _requirement(req, index(join(term_path, "matchExpressions"), j), on_fields=False)
        for j, req in enumerate(obj_list(term, "matchFields", term_path)):
            _requirement(req, index(join(term_path, "matchFields"), j), on_fields=True)
    return selector


def _requirement(value: object, path: str, *, on_fields: bool) -> None:
    req = expect_map(value, path)
    fields(req, path, ("key", "operator", "values"))
    key = obj_str(req, "key", path)
    op = obj_str(req, "operator", path)
    values = string_list(req, "values", path)
    op_path, values_path, key_path = join(path, "operator"), join(path, "values"), join(path, "key")
    if on_fields:
        if op not in ("In", "NotIn"):
            raise invalid(op_path, op, "not a valid selector operator")
        if len(values) != 1:
            raise required(
                values_path, "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"
            )
        if key != "metadata.name":
            raise invalid(key_path, key, "not a valid field selector key")
        check_dns_subdomain(values[0], index(values_path, 0))
        return
    if op in ("In", "NotIn") and not values:
        raise required(values_path, "must be specified when `operator` is 'In' or 'NotIn'")
    if op in ("Exists", "DoesNotExist") and values:
        raise forbidden(values_path, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
    if op in ("Gt", "Lt") and len(values) != 1:
        raise required(values_path, "must be specified single value when `operator` is 'Lt' or 'Gt'")
    if op not in _NODE_SELECTOR_OPERATORS:
        raise invalid(op_path, op, "not a valid selector operator")
    check_label_name(key, key_path)
    for i, item in enumerate(values):
        check_label_value(item, index(values_path, i))


def check_taint(value: object, path: str) -> Taint:
    taint = expect_map(value, path)
    fields(taint, path, ("key", "value", "effect", "timeAdded"))
    key = check_label_name(obj_str(taint, "key", path), join(path, "key"))
    text = obj_str(taint, "value", path)
    if text:
        check_label_value(text, join(path, "value"))
    effect = obj_str(taint, "effect", path)
    if not effect:
        raise required(join(path, "effect"))
    if effect not in TAINT_EFFECTS:
        raise not_supported(join(path, "effect"), effect, TAINT_EFFECTS)
    obj_str(taint, "timeAdded", path)
    return Taint(key=key, value=text, effect=effect)


def check_toleration(value: object, path: str) -> Toleration:
    tol = expect_map(value, path)
    fields(tol, path, ("key", "operator", "value", "effect", "tolerationSeconds"))
    key = obj_str(tol, "key", path)
    if key:
        check_label_name(key, join(path, "key"))
    operator = obj_str(tol, "operator", path) or "Equal"  # +default="Equal"
    text = obj_str(tol, "value", path)
    if operator == "Exists":
        if text:
            raise invalid(join(path, "value"), text, "must be empty for operator `Exists`")
    elif operator == "Equal":
        check_label_value(text, join(path, "value"))
    else:
        raise not_supported(join(path, "operator"), operator, TOLERATION_OPERATORS)
    effect = obj_str(tol, "effect", path)
    if effect and effect not in TAINT_EFFECTS:
        raise not_supported(join(path, "effect"), effect, TAINT_EFFECTS)
    seconds = tol.get("tolerationSeconds")
    if seconds is not None:
        seconds = expect_int(seconds, join(path, "tolerationSeconds"))
    return Toleration(key=key, operator=operator, value=text, effect=effect, toleration_seconds=seconds)


def check_tolerations(obj: dict[str, Any], path: str) -> tuple[Toleration, ...]:
    items = obj_list(obj, "tolerations", path, DEVICE_TOLERATIONS_MAX_LENGTH)
    return tuple(check_toleration(item, index(join(path, "tolerations"), i)) for i, item in enumerate(items))


def check_binding_conditions(obj: dict[str, Any], path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``bindingConditions`` and ``bindingFailureConditions`` of a device or an allocation result."""
    conds = string_list(obj, "bindingConditions", path, BINDING_CONDITIONS_MAX_SIZE)
    failures = string_list(obj, "bindingFailureConditions", path, BINDING_FAILURE_CONDITIONS_MAX_SIZE)
    for field, items in (("bindingConditions", conds), ("bindingFailureConditions", failures)):
        seen: set[str] = set()
        for i, item in enumerate(items):
            item_path = index(join(path, field), i)
            check_label_name(item, item_path)
            if item in seen:
                raise duplicate(item_path, item)
            seen.add(item)
    for i, item in enumerate(failures):
        if item in conds:
            raise invalid(
                index(join(path, "bindingFailureConditions"), i),
                item,
                "bindingFailureConditions must not overlap with bindingConditions",
            )
    if failures and not conds:
        raise invalid(
            join(path, "bindingConditions"), [], "bindingConditions are required to use bindingFailureConditions"
        )
    if conds and not failures:
        raise invalid(
            join(path, "bindingFailureConditions"), [], "bindingFailureConditions are required to use bindingConditions"
        )
    return tuple(conds), tuple(failures)


def check_selectors(obj: dict[str, Any], path: str) -> tuple[str, ...]:
    """``selectors``: CEL expressions (compiled later, by the CEL environment)."""
    out: list[str] = []
    for i, item in enumerate(obj_list(obj, "selectors", path, DEVICE_SELECTORS_MAX_SIZE)):
        sel_path = index(join(path, "selectors"), i)
        selector = expect_map(item, sel_path)
        fields(selector, sel_path, ("cel",))
        cel = obj_map(selector, "cel", sel_path)
        if cel is None:
            raise required(join(sel_path, "cel"))
        cel_path = join(sel_path, "cel")
        fields(cel, cel_path, ("expression",))
        expression = obj_str(cel, "expression", cel_path)
        if len(expression.encode()) > CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
            raise too_long(join(cel_path, "expression"), CEL_SELECTOR_EXPRESSION_MAX_LENGTH)
        if not expression.strip():
            raise required(join(cel_path, "expression"))
        check_cel_expression(expression, join(cel_path, "expression"))
        out.append(expression)
    return tuple(out)


class SelectorFieldError(FieldError):
    """A CEL selector the API server refuses when the object is created. The loader names the object in the
    message (:func:`name_object`), as the API server does ("The ResourceClaim "c" is invalid: ...")."""


def name_object(doc: object, error: FieldError) -> str:
    """``error.message``; for a :class:`SelectorFieldError`, prefixed with the object's kind and
    (namespace/)name, which a selector error in a large dump needs to be found."""
    if not isinstance(error, SelectorFieldError) or not isinstance(doc, dict):
        return error.message
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        return error.message
    name, namespace, kind = meta.get("name"), meta.get("namespace"), doc.get("kind")
    if not isinstance(name, str) or not isinstance(kind, str):
        return error.message
    if kind in ("ResourceClaim", "ResourceClaimTemplate"):
        name = f"{namespace if isinstance(namespace, str) and namespace else 'default'}/{name}"
    return f"{kind} {name} is invalid: {error.message}"


def check_cel_expression(expression: str, path: str) -> None:
    """Compile and type-check a selector as the API server does when the object is created
    (pkg/apis/resource/validation ``validateCELSelector``): a compile error is ``Invalid value``, a worst-case
    cost above resource.CELSelectorExpressionMaxCost is ``Forbidden: too complex, exceeds cost limit``.
    So a selector the API server would refuse is refused at load (exit 2), never at allocation."""
    problem = selector_problem(expression)
    if problem is None:
        return
    verdict, detail = problem
    if verdict == "forbidden":
        error = forbidden(path, detail)
    elif verdict == "too-long":
        error = too_long(path, CEL_SELECTOR_EXPRESSION_MAX_LENGTH)
    else:
        error = invalid(path, expression, detail)
    raise SelectorFieldError(error.path, error.message)


def check_device_configuration(entry: dict[str, Any], path: str) -> None:
    """The inline DeviceConfiguration of a class, claim or allocation config entry: ``opaque``."""
    opaque = obj_map(entry, "opaque", path)
    if opaque is None:
        raise required(join(path, "opaque"))
    op_path = join(path, "opaque")
    fields(opaque, op_path, ("driver", "parameters"))
    check_driver_name(obj_str(opaque, "driver", op_path), join(op_path, "driver"))
    params_path = join(op_path, "parameters")
    params = opaque.get("parameters")
    if params is None:
        raise required(params_path)
    if len(json.dumps(params, separators=(",", ":"))) > OPAQUE_PARAMETERS_MAX_LENGTH:
        raise too_long(params_path, OPAQUE_PARAMETERS_MAX_LENGTH)
    if not isinstance(params, dict):
        raise invalid(params_path, OMIT, "must be a valid JSON object")


def check_metadata(obj: dict[str, Any], path: str, *, namespaced: bool) -> tuple[str, str]:
    """Check ``metadata`` (name, namespace, labels, annotations, uid); other fields are kept unchecked.
    Returns (name, namespace); the namespace of a namespaced object defaults to ``default``."""
    meta_path = join(path, "metadata")
    meta = obj_map(obj, "metadata", path) or {}
    name_path = join(meta_path, "name")
    name = obj_str(meta, "name", meta_path)
    if not name and meta.get("generateName"):
        raise required(name_path, "dralab needs the name itself (the API server would generate one from generateName)")
    if not name:
        raise required(name_path, "name or generateName is required")
    check_dns_subdomain(name, name_path)
    namespace = obj_str(meta, "namespace", meta_path)
    if namespaced:
        namespace = check_dns_label(namespace or "default", join(meta_path, "namespace"))
    elif namespace:
        raise forbidden(join(meta_path, "namespace"), "not allowed on this type")
    check_labels(meta, meta_path)
    obj_str(meta, "uid", meta_path)
    return name, namespace


def check_labels(meta: dict[str, Any], path: str) -> None:
    """``labels`` (label keys and values) and ``annotations`` (qualified keys, string values) of ``meta``."""
    labels = obj_map(meta, "labels", path) or {}
    for key, value in labels.items():
        item_path = join(join(path, "labels"), key)
        check_label_name(key, item_path)
        check_label_value(expect_str(value, item_path), item_path)
    annotations = obj_map(meta, "annotations", path) or {}
    for key, value in annotations.items():
        item_path = join(join(path, "annotations"), key)
        error = qualified_name_error(key.lower())
        if error is not None:
            raise invalid(item_path, key, error)
        expect_str(value, item_path)

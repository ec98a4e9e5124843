"""The CEL environment a release's API server compiles a new object's selectors in.

Why: the API server compiles a selector of an object being created (or whose expression changes) in the
``environment.NewExpressions`` environment, which declares only what the release's feature gates enable;
an unchanged expression of a stored object is compiled in ``StoredExpressions``, which declares everything
(pkg/apis/resource/validation ``validateCELSelector``; k8s.io/dynamic-resource-allocation/cel compile.go,
``VersionedOptions.FeatureEnabled``). So a scenario's objects (new objects, under a release profile) may not
use a field of ``device`` their release has switched off, while a dump (objects the cluster already stored)
may. Upstream's compile_test.go "allow_multiple_allocations_disabled": with DRAConsumableCapacity off,
``device.allowMultipleAllocations`` is "undefined field 'allowMultipleAllocations'".

Gated today: ``device.allowMultipleAllocations`` (DRAConsumableCapacity: alpha, off, in 1.34 and 1.35; beta,
on, in 1.36 and 1.37). The list-type attributes of 1.36+ (DRAListTypeAttributes, ``includes``) are not
modelled by dralab (refused as unknown fields where they appear).
"""

from __future__ import annotations

import functools
from typing import Any

from ..kube.fields import FieldError, index, join
from ..kube.versions import Profile
from .cel import CelMatcher
from .cel_ast import CelSyntaxError
from .cel_errors import detail
from .cel_syntax import DEVICE_FIELDS, check
from .checks import SelectorFieldError
from .validation import invalid

__all__ = ["GATED_DEVICE_FIELDS", "check_new_object_selectors", "new_expression_error"]

# field of the CEL `device` -> the feature gate that declares it in NewExpressions
GATED_DEVICE_FIELDS = {"allowMultipleAllocations": "DRAConsumableCapacity"}


@functools.lru_cache(maxsize=1)
def _known() -> frozenset[str]:
    return CelMatcher().known_functions


def new_expression_error(expression: str, profile: Profile) -> str | None:
    """Upstream's detail if ``expression`` does not compile in ``profile``'s NewExpressions environment but
    does in the full one (errors of the full environment are the loader's: :func:`.checks.check_cel_expression`)."""
    off = {name for name, gate in GATED_DEVICE_FIELDS.items() if not profile.enabled(gate)}
    if not off:
        return None
    fields = {name: typ for name, typ in DEVICE_FIELDS.items() if name not in off}
    try:
        check(expression, _known(), fields)
    except CelSyntaxError as exc:
        try:
            check(expression, _known())
        except CelSyntaxError:
            return None
        return detail(expression, exc)
    return None


def _selectors(obj: Any, path: str) -> list[tuple[str, str]]:
    """(expression, path of its `expression` field) of each CEL selector in ``obj[selectors]``."""
    out: list[tuple[str, str]] = []
    items = obj.get("selectors") if isinstance(obj, dict) else None
    for i, item in enumerate(items if isinstance(items, list) else []):
        cel = item.get("cel") if isinstance(item, dict) else None
        expression = cel.get("expression") if isinstance(cel, dict) else None
        if isinstance(expression, str):
            out.append((expression, join(join(index(join(path, "selectors"), i), "cel"), "expression")))
    return out


def _claim_spec_selectors(spec: Any, path: str) -> list[tuple[str, str]]:
    devices = spec.get("devices") if isinstance(spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    out: list[tuple[str, str]] = []
    for r, request in enumerate(requests if isinstance(requests, list) else []):
        if not isinstance(request, dict):
            continue
        r_path = index(join(join(path, "devices"), "requests"), r)
        out += _selectors(request.get("exactly"), join(r_path, "exactly"))
        subs = request.get("firstAvailable")
        for s, sub in enumerate(subs if isinstance(subs, list) else []):
            out += _selectors(sub, index(join(r_path, "firstAvailable"), s))
    return out


def check_new_object_selectors(obj: dict[str, Any], path: str, profile: Profile) -> None:
    """Refuse a selector of a new DeviceClass, ResourceClaim or ResourceClaimTemplate (resource.k8s.io/v1)
    that uses what ``profile``'s release does not declare for new expressions."""
    kind = obj.get("kind")
    spec = obj.get("spec")
    if kind == "DeviceClass":
        found = _selectors(spec, join(path, "spec"))
    elif kind == "ResourceClaim":
        found = _claim_spec_selectors(spec, join(path, "spec"))
    elif kind == "ResourceClaimTemplate":
        inner = spec.get("spec") if isinstance(spec, dict) else None
        found = _claim_spec_selectors(inner, join(join(path, "spec"), "spec"))
    else:
        return
    for expression, e_path in found:
        problem = new_expression_error(expression, profile)
        if problem is not None:
            error: FieldError = invalid(e_path, expression, problem)
            raise SelectorFieldError(error.path, error.message)

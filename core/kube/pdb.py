"""policy/v1 PodDisruptionBudget: validation (pkg/apis/policy/validation ValidatePodDisruptionBudgetSpec), label
selector matching, and `status.disruptionsAllowed` as the disruption controller computes it
(pkg/controller/disruption/disruption.go: getExpectedScale, countHealthyPods, updatePdbStatus).

What preemption reads of a budget (filterPodsWithPDBViolation): its namespace, its selector, how many more pods
it lets go (`disruptionsAllowed`) and the pods already counted as disrupted (`status.disruptedPods`).

dralab's simplifications, said here because they change numbers:
- the expected count (upstream: the scale of the pods' controllers, or the matched pods for an integer
  `minAvailable`) is the number of matched pods that exist and have not finished;
- healthy = running and not being deleted (dralab pods are Ready once running);
- the status is computed when it is read (upstream: by the controller, a little later).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .fields import FieldError, check_fields, check_metadata, expect_enum, expect_int, expect_list, expect_map, join
from .nodeselector import requirement_matches

API_VERSION = "policy/v1"
KIND = "PodDisruptionBudget"
UNHEALTHY_POLICIES = ("IfHealthyBudget", "AlwaysAllow")
_PERCENT = re.compile(r"^(0|[1-9][0-9]*)%$")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _int_or_percent(value: object, path: str) -> int | str:
    if isinstance(value, str):
        if not _PERCENT.match(value):
            raise FieldError(path, f"a valid percent string must be a numeric string followed by an ending '%', "
                                   f"got {value!r}")
        if int(value[:-1]) > 100:
            raise FieldError(path, "must not be greater than 100%")
        return value
    return expect_int(value, path, minimum=0)


def _check_selector(value: object, path: str) -> dict[str, Any]:
    selector = expect_map(value, path)
    check_fields(selector, path, ("matchLabels", "matchExpressions"))
    for key, item in expect_map(selector.get("matchLabels") or {}, join(path, "matchLabels")).items():
        if not isinstance(item, str):
            raise FieldError(join(join(path, "matchLabels"), key), "expected a string")
    for i, req in enumerate(expect_list(selector.get("matchExpressions") or [], join(path, "matchExpressions"))):
        r_path = f"{join(path, 'matchExpressions')}[{i}]"
        req = expect_map(req, r_path)
        check_fields(req, r_path, ("key", "operator", "values"), required=("key", "operator"))
        op = expect_enum(req["operator"], join(r_path, "operator"), _OPERATORS)
        values = expect_list(req.get("values") or [], join(r_path, "values"))
        if (op in ("In", "NotIn")) != bool(values):
            raise FieldError(join(r_path, "values"), "must be specified when `operator` is 'In' or 'NotIn', and "
                                                     "empty otherwise")
    return selector


def check_pdb(obj: object, path: str) -> dict[str, Any]:
    """A checked copy of a policy/v1 PodDisruptionBudget of a scenario (its status is the controller's: refused)."""
    out = dict(expect_map(obj, path))
    check_fields(out, path, ("apiVersion", "kind", "metadata", "spec"), required=("metadata", "spec"))
    check_metadata(expect_map(out["metadata"], join(path, "metadata")), join(path, "metadata"), namespaced=True,
                   name_required=True)
    out["metadata"] = {**out["metadata"], "namespace": out["metadata"].get("namespace") or "default"}
    s_path = join(path, "spec")
    spec = expect_map(out["spec"], s_path)
    check_fields(spec, s_path, ("minAvailable", "maxUnavailable", "selector", "unhealthyPodEvictionPolicy"))
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        raise FieldError(s_path, "minAvailable and maxUnavailable cannot be both set")
    for field in ("minAvailable", "maxUnavailable"):
        if spec.get(field) is not None:
            _int_or_percent(spec[field], join(s_path, field))
    if spec.get("selector") is not None:
        _check_selector(spec["selector"], join(s_path, "selector"))
    if spec.get("unhealthyPodEvictionPolicy") is not None:
        expect_enum(spec["unhealthyPodEvictionPolicy"], join(s_path, "unhealthyPodEvictionPolicy"),
                    UNHEALTHY_POLICIES)
    return out


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector: every matchLabels pair and every expression. A PDB with no or an empty selector
    matches no pod (policy/v1; filterPodsWithPDBViolation skips an empty selector too)."""
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(requirement_matches(r, labels) for r in selector.get("matchExpressions") or [])


def _scaled(value: int | str, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent, rounding up."""
    if isinstance(value, str):
        return math.ceil(int(value[:-1]) * total / 100)
    return value


def disruptions_allowed(pdb: Mapping[str, Any], pods: Iterable[tuple[Mapping[str, str], bool]]) -> int:
    """status.disruptionsAllowed from the budget's matched pods, each (labels, healthy) of a pod in the budget's
    namespace that has not finished."""
    spec = pdb.get("spec") or {}
    selector = spec.get("selector")
    matched = [healthy for labels, healthy in pods if selector_matches(selector, labels)]
    expected, healthy = len(matched), sum(matched)
    if spec.get("maxUnavailable") is not None:
        desired = max(expected - _scaled(spec["maxUnavailable"], expected), 0)
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = 0  # neither set: the controller's desiredHealthy stays 0
    return max(healthy - desired, 0)

"""metav1.LabelSelector matching and the API server's validation of a Pod's topologySpreadConstraints and
podAffinity / podAntiAffinity (pkg/apis/core/validation/validation.go: validateTopologySpreadConstraints,
validatePodAffinityTerm, validateMatchLabelKeys...; apimachinery's ValidateLabelSelector).

Why here, in kube/: the scheduler's PodTopologySpread and InterPodAffinity plugins (scheduler/plugins/) and
the autoscaler's simulation read the same selectors, and the scenario loader refuses a malformed one with a
FieldError naming its path, as the API server would refuse the Pod.

Semantics kept from apimachinery's LabelSelectorAsSelector: a missing (nil) selector matches nothing, an
empty one (`{}`) matches everything; matchLabels and matchExpressions are ANDed.

matchLabelKeys / mismatchLabelKeys: from 1.34 the API server merges them into the labelSelector when the
pod is created (gates MatchLabelKeysInPodTopologySpreadSelectorMerge, beta on in 1.34, and
MatchLabelKeysInPodAffinity, GA since 1.33); before, kube-scheduler did the same merge when it read the
constraint (podtopologyspread/common.go filterTopologySpreadConstraints). Both give the same selector:
dralab merges when it reads the constraint (`merged_selector`), for every profile 1.34-1.37.

namespaceSelector: dralab keeps no Namespace labels, so a non-empty namespaceSelector cannot be evaluated
and is refused ("not modelled by dralab"); `{}` (all namespaces) is modelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .fields import (
    FieldError,
    check_fields,
    expect_enum,
    expect_int,
    expect_list,
    expect_map,
    expect_str,
    index,
    join,
    label_value_error,
    qualified_name_error,
)

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
INCLUSION_POLICIES = ("Honor", "Ignore")
ALL_NAMESPACES = "*"  # a term's namespaces when its namespaceSelector is {} (every namespace)

Selector = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str, tuple[str, ...]], ...]] | None


def compile_selector(selector: Mapping[str, Any] | None) -> Selector:
    """A LabelSelector as a hashable value (None: nil, matches nothing): matchLabels as (key, value) pairs,
    matchExpressions as (key, operator, values), both sorted."""
    if selector is None:
        return None
    labels = tuple(sorted((str(k), str(v)) for k, v in (selector.get("matchLabels") or {}).items()))
    exprs = tuple(sorted((str(e.get("key", "")), str(e.get("operator", "")), tuple(sorted(e.get("values") or ())))
                         for e in selector.get("matchExpressions") or ()))
    return labels, exprs


def selector_matches(selector: Selector, labels: Mapping[str, str]) -> bool:
    """labels.Selector.Matches: nil matches nothing, empty matches everything."""
    if selector is None:
        return False
    match_labels, exprs = selector
    for key, value in match_labels:
        if labels.get(key) != value:
            return False
    for key, op, values in exprs:
        present = key in labels
        if op == "In":
            if not present or labels[key] not in values:
                return False
        elif op == "NotIn":
            if present and labels[key] in values:
                return False
        elif op == "Exists":
            if not present:
                return False
        elif op == "DoesNotExist":
            if present:
                return False
        else:
            return False
    return True


def merged_selector(selector: Selector, keys: list[str] | None, labels: Mapping[str, str], *, mismatch: bool = False
                    ) -> Selector:
    """The selector with matchLabelKeys (`key In [the pod's value]`) or mismatchLabelKeys (`key NotIn [...]`)
    merged in; keys the pod has no label for are left out, as upstream."""
    if selector is None or not keys:
        return selector
    added = tuple((k, "NotIn" if mismatch else "In", (labels[k],)) for k in keys if k in labels)
    if not added:
        return selector
    return selector[0], tuple(sorted(selector[1] + added))


def pod_labels(manifest: Mapping[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = (manifest.get("metadata") or {}).get("labels") or {}
    return labels


def pod_namespace(manifest: Mapping[str, Any]) -> str:
    return str((manifest.get("metadata") or {}).get("namespace") or "default")


# --- validation (the API server's) -----------------------------------------------------------------------


def _label_key(key: object, path: str) -> str:
    text = expect_str(key, path)
    error = qualified_name_error(text)
    if error is not None:
        raise FieldError(path, error)
    return text


def check_label_selector(value: object, path: str) -> set[str]:
    """ValidateLabelSelector; returns the keys it names (for the matchLabelKeys overlap check)."""
    selector = expect_map(value, path)
    check_fields(selector, path, ("matchLabels", "matchExpressions"))
    keys: set[str] = set()
    if selector.get("matchLabels") is not None:
        ml_path = join(path, "matchLabels")
        for key, item in expect_map(selector["matchLabels"], ml_path).items():
            keys.add(_label_key(key, ml_path))
            error = label_value_error(expect_str(item, join(ml_path, key)))
            if error is not None:
                raise FieldError(join(ml_path, key), error)
    for i, item in enumerate(expect_list(selector.get("matchExpressions") or [], join(path, "matchExpressions"))):
        e_path = index(join(path, "matchExpressions"), i)
        expr = expect_map(item, e_path)
        check_fields(expr, e_path, ("key", "operator", "values"), ("key", "operator"))
        keys.add(_label_key(expr["key"], join(e_path, "key")))
        op = expect_enum(expr["operator"], join(e_path, "operator"), SELECTOR_OPERATORS)
        values = expect_list(expr.get("values") or [], join(e_path, "values"))
        if op in ("In", "NotIn") and not values:
            raise FieldError(join(e_path, "values"), "must be specified when `operator` is 'In' or 'NotIn'")
        if op in ("Exists", "DoesNotExist") and values:
            raise FieldError(join(e_path, "values"), "may not be specified when `operator` is 'Exists' or "
                                                     "'DoesNotExist'")
        for j, v in enumerate(values):
            error = label_value_error(expect_str(v, index(join(e_path, "values"), j)))
            if error is not None:
                raise FieldError(index(join(e_path, "values"), j), error)
    return keys


def _check_label_keys(value: object, path: str, selector_keys: set[str] | None, others: set[str]) -> set[str]:
    """matchLabelKeys / mismatchLabelKeys: label keys, not in the labelSelector, not in the other list."""
    out: set[str] = set()
    for i, key in enumerate(expect_list(value, path)):
        k_path = index(path, i)
        name = _label_key(key, k_path)
        if selector_keys is None:
            raise FieldError(k_path, "must not be specified when labelSelector is not set")
        if name in selector_keys:
            raise FieldError(k_path, f"exists in both matchLabelKeys and labelSelector: {name!r}")
        if name in others:
            raise FieldError(k_path, f"exists in both matchLabelKeys and mismatchLabelKeys: {name!r}")
        out.add(name)
    return out


def check_spread_constraints(value: object, path: str) -> None:
    """validateTopologySpreadConstraints: maxSkew > 0, a topologyKey, whenUnsatisfiable, minDomains > 0 and
    only with DoNotSchedule, the inclusion policies, no two constraints with the same topologyKey and
    whenUnsatisfiable, matchLabelKeys."""
    if value is None:
        return
    seen: dict[tuple[str, str], str] = {}
    for i, item in enumerate(expect_list(value, path)):
        c_path = index(path, i)
        c = expect_map(item, c_path)
        check_fields(c, c_path, ("maxSkew", "topologyKey", "whenUnsatisfiable", "labelSelector", "minDomains",
                                 "nodeAffinityPolicy", "nodeTaintsPolicy", "matchLabelKeys"),
                     ("maxSkew", "topologyKey", "whenUnsatisfiable"))
        expect_int(c["maxSkew"], join(c_path, "maxSkew"), minimum=1)
        key = _label_key(c["topologyKey"], join(c_path, "topologyKey"))
        when = expect_enum(c["whenUnsatisfiable"], join(c_path, "whenUnsatisfiable"), WHEN_UNSATISFIABLE)
        if c.get("minDomains") is not None:
            expect_int(c["minDomains"], join(c_path, "minDomains"), minimum=1)
            if when != "DoNotSchedule":
                raise FieldError(join(c_path, "minDomains"), "can only use minDomains if whenUnsatisfiable="
                                                             "DoNotSchedule")
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if c.get(policy) is not None:
                expect_enum(c[policy], join(c_path, policy), INCLUSION_POLICIES)
        if (key, when) in seen:
            raise FieldError(c_path, f"duplicate topologyKey {key!r} and whenUnsatisfiable {when!r} "
                                     f"(also {seen[(key, when)]})")
        seen[(key, when)] = c_path
        keys = (check_label_selector(c["labelSelector"], join(c_path, "labelSelector"))
                if c.get("labelSelector") is not None else None)
        if c.get("matchLabelKeys") is not None:
            _check_label_keys(c["matchLabelKeys"], join(c_path, "matchLabelKeys"), keys, set())


def _check_term(value: object, path: str) -> None:
    """validatePodAffinityTerm: topologyKey, labelSelector, namespaces, namespaceSelector, match/mismatch keys."""
    term = expect_map(value, path)
    check_fields(term, path, ("labelSelector", "namespaces", "topologyKey", "namespaceSelector", "matchLabelKeys",
                              "mismatchLabelKeys"), ("topologyKey",))
    _label_key(term["topologyKey"], join(path, "topologyKey"))
    keys = check_label_selector(term["labelSelector"], join(path, "labelSelector")) \
        if term.get("labelSelector") is not None else None
    for i, ns in enumerate(expect_list(term.get("namespaces") or [], join(path, "namespaces"))):
        expect_str(ns, index(join(path, "namespaces"), i), nonempty=True)
    if term.get("namespaceSelector") is not None:
        ns_path = join(path, "namespaceSelector")
        check_label_selector(term["namespaceSelector"], ns_path)
        sel = term["namespaceSelector"]
        if sel.get("matchLabels") or sel.get("matchExpressions"):
            raise FieldError(ns_path, "a non-empty namespaceSelector is not modelled by dralab (it keeps no "
                                      "Namespace labels); use `namespaces`, or {} for every namespace")
    match = _check_label_keys(term.get("matchLabelKeys") or [], join(path, "matchLabelKeys"), keys, set())
    _check_label_keys(term.get("mismatchLabelKeys") or [], join(path, "mismatchLabelKeys"), keys, match)


def check_pod_affinity(value: object, path: str) -> None:
    """spec.affinity's podAffinity and podAntiAffinity (nodeAffinity is the NodeAffinity plugin's)."""
    if value is None:
        return
    affinity = expect_map(value, path)
    for kind in ("podAffinity", "podAntiAffinity"):
        if affinity.get(kind) is None:
            continue
        k_path = join(path, kind)
        spec = expect_map(affinity[kind], k_path)
        check_fields(spec, k_path, ("requiredDuringSchedulingIgnoredDuringExecution",
                                    "preferredDuringSchedulingIgnoredDuringExecution"))
        req = join(k_path, "requiredDuringSchedulingIgnoredDuringExecution")
        for i, term in enumerate(expect_list(spec.get("requiredDuringSchedulingIgnoredDuringExecution") or [], req)):
            _check_term(term, index(req, i))
        pref = join(k_path, "preferredDuringSchedulingIgnoredDuringExecution")
        for i, item in enumerate(expect_list(spec.get("preferredDuringSchedulingIgnoredDuringExecution") or [],
                                             pref)):
            w_path = index(pref, i)
            weighted = expect_map(item, w_path)
            check_fields(weighted, w_path, ("weight", "podAffinityTerm"), ("weight", "podAffinityTerm"))
            expect_int(weighted["weight"], join(w_path, "weight"), minimum=1, maximum=100)
            _check_term(weighted["podAffinityTerm"], join(w_path, "podAffinityTerm"))


def check_pod_placement(spec: Mapping[str, Any], spec_path: str) -> None:
    """The hook manifests.py's Pod check calls: topologySpreadConstraints and pod (anti-)affinity."""
    check_spread_constraints(spec.get("topologySpreadConstraints"), join(spec_path, "topologySpreadConstraints"))
    check_pod_affinity(spec.get("affinity"), join(spec_path, "affinity"))

"""v1 NodeSelector matching (k8s.io/component-helpers/scheduling/corev1/nodeaffinity).

A NodeSelector matches when ANY of its terms matches; a term matches when ALL of its
matchExpressions (on labels) and matchFields (only `metadata.name` is supported upstream) match.
A term with no requirements matches nothing (upstream: an empty term selects no objects).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _number(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def requirement_matches(req: Mapping[str, Any], values_by_key: Mapping[str, str]) -> bool:
    key, op = req.get("key", ""), req.get("operator", "")
    values = list(req.get("values") or [])
    present = key in values_by_key
    value = values_by_key.get(key, "")
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        have, want = _number(value), _number(values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    if not all(requirement_matches(r, labels) for r in exprs):
        return False
    return all(requirement_matches(r, {"metadata.name": name}) for r in fields)


def node_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str], name: str) -> bool:
    """None matches every node (no constraint); an empty term list matches none."""
    if selector is None:
        return True
    return any(term_matches(t, labels, name) for t in selector.get("nodeSelectorTerms") or [])

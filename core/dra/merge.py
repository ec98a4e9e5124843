"""Several files, one cluster: the same object given twice is one object when both copies agree.

Why: a dump is often split by kind or by namespace, and the pieces overlap (`kubectl get deviceclasses -o yaml`
saved next to a bundle that has them too). The API server holds one object per kind, namespace and name; two
copies that are equal describe that one object and are read once. Two copies that differ cannot both be the
cluster's, so the read is refused naming both places and the first field (in key order) where they part: a
stale copy shows up as `metadata.resourceVersion`, an edited one as the field edited.

Copies are compared as read and converted (core/dra/older.py), so a v1beta1 and a v1 copy of one slice agree.
"""

from __future__ import annotations

from typing import Any

from ..kube.fields import index, join

__all__ = ["first_difference"]

_MISSING = object()


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The path of the first field where ``a`` and ``b`` differ (maps in sorted key order, lists by index), or
    None when they are equal. ``""`` means the values differ at the top."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            x, y = a.get(key, _MISSING), b.get(key, _MISSING)
            if x is _MISSING or y is _MISSING:
                return join(path, key)
            found = first_difference(x, y, join(path, key))
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, index(path, i))
            if found is not None:
                return found
        return None if len(a) == len(b) else index(path, min(len(a), len(b)))
    if type(a) is not type(b) or a != b:
        return path
    return None

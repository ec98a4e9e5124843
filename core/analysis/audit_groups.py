"""`dralab audit`'s pending pods grouped by cause, each group with what the cause means and what to do.

A list of fifty pending pods, each with a long message, does not say what to fix first; fifty pods under two
causes does. The causes are the audit's own reasons (core/analysis/audit.py: topology, capacity, fragmentation,
taint, selector, gang, ...), the words are core/analysis/causes.py's, so the table, the JSON and the HTML page
(core/analysis/audit_html.py) say the same thing. A pod of a 1.36+ PodGroup is grouped under the reason its
group gave it; the group's name is listed with the cause, as the PodGroup is what has to change.
"""

from __future__ import annotations

from typing import Any

from .causes import CAUSES

__all__ = ["UNKNOWN_ADVICE", "group_by_cause", "group_lines"]

UNKNOWN_ADVICE = "see the pods' messages (docs/audit.md, Reasons)"
SHOWN_PODS = 5  # pods named per group in the table; the JSON names them all


def group_by_cause(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The pending pods of an audit report that do not fit, by reason: most pods first, then by name.

    Each group: ``cause``, ``count``, ``pods`` (``namespace/name``, sorted), ``pod_groups`` (the PodGroups
    among them, when any), ``meaning`` and ``advice`` (from core/analysis/causes.py)."""
    pods: dict[str, list[str]] = {}
    groups: dict[str, set[str]] = {}
    for pod in report.get("pods") or []:
        if pod.get("node") is not None or not pod.get("reason"):
            continue
        cause = str(pod["reason"])
        pods.setdefault(cause, []).append(f"{pod['namespace']}/{pod['name']}")
        if pod.get("pod_group"):
            groups.setdefault(cause, set()).add(str(pod["pod_group"]))
    out = []
    for cause in sorted(pods, key=lambda c: (-len(pods[c]), c)):
        known = CAUSES.get(cause)
        row: dict[str, Any] = {"cause": cause, "count": len(pods[cause]), "pods": sorted(pods[cause])}
        if cause in groups:
            row["pod_groups"] = sorted(groups[cause])
        row["meaning"] = known.meaning if known is not None else ""
        row["advice"] = known.remedy if known is not None else UNKNOWN_ADVICE
        out.append(row)
    return out


def group_lines(groups: list[dict[str, Any]], shown: int = SHOWN_PODS) -> list[str]:
    """The table's section: per cause, one line with its pods (the first ``shown``) and one on what to do."""
    if not groups:
        return []
    lines = ["pending by cause:"]
    for g in groups:
        names = g["pods"][:shown]
        more = f", and {g['count'] - len(names)} more" if g["count"] > len(names) else ""
        plural = "pod" if g["count"] == 1 else "pods"
        in_groups = f" in PodGroup(s) {', '.join(g['pod_groups'])}" if g.get("pod_groups") else ""
        lines.append(f"  {g['cause']}: {g['count']} {plural}{in_groups} ({', '.join(names)}{more})")
        meaning = f"{g['meaning']}; " if g["meaning"] else ""
        lines.append(f"    {meaning}{g['advice']}")
    return lines

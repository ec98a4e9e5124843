"""The run summary's scale-down part (release profiles, which write cluster-autoscaler's scale-down events:
core/log/events_scaledown.py): nodes removed, empty or drained, deletions that failed, and how many nodes the
planner last found unremovable for each reason (simulator.UnremovableReason). Absent when the log has none of
those events (the legacy profile), so such summaries read as before."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..state.cluster import ClusterState


def scale_down_summary(state: ClusterState) -> dict[str, Any] | None:
    status = state.scale_down
    if not (status.removed or status.failed or status.unremovable or status.deleting):
        return None
    reasons = Counter(r for r in status.unremovable.values() if r)
    return {
        "removed": sum(status.removed.values()),
        "empty": status.removed.get("empty", 0),
        "drained": status.removed.get("drained", 0),
        "failed": status.failed,
        "unremovable": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def scale_down_lines(summary: dict[str, Any]) -> list[str]:
    """One line: `scale-down N nodes removed (E empty, D drained), F failed; unremovable: reason n, ...`."""
    sd = summary.get("scale_down")
    if not sd:
        return []
    line = f"scale-down {sd['removed']} node{'' if sd['removed'] == 1 else 's'} removed ({sd['empty']} empty, " \
           f"{sd['drained']} drained)" + (f", {sd['failed']} failed" if sd["failed"] else "")
    if sd["unremovable"]:
        line += "; unremovable: " + ", ".join(f"{k} {v}" for k, v in sd["unremovable"].items())
    return [line]

"""Why a PodGroup (1.36+) is pending, in the words a person asks the question in.

The scheduler writes what it saw on each pod (the PodScheduled condition: reason, message, dralab's cause and
evidence) and on the group (`PodGroupInitiallyScheduled`, or `PodGroupScheduled` in 1.36). This module reads
those back per group and names the one thing in the way, in this order:

- `missing`: the PodGroup (or its composite parent) does not exist yet;
- `min-count`: fewer pods exist than `minCount`: nothing will try the group until its controller makes more;
- `gated`: its pods carry scheduling gates;
- `priority-mismatch`: 1.37 refuses a group whose pods' priority differs from its own;
- `invalid-group`: another check of the group's validation failed (its pods name different schedulers);
- `preemption`: the group preempted lower-priority pods and waits for them to go;
- `group-claim`: a claim the whole group shares (KEP-5729) cannot be allocated;
- `topology`: no value of the group's topology key has room for `minCount` pods (the cluster as a whole may);
- `capacity` (or the pods' own cause: `fragmentation`, `taint`, ...): fewer than `minCount` pods fit.

The summary (`pod_groups`) and `dralab replay --pod` use it; `dralab audit` asks the same questions of a dump.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..state.cluster import FAILED, PENDING, RUNNING, SUCCEEDED, ClusterState
from ..state.gangs import PodGroupState

SCHEDULED = ("PodGroupInitiallyScheduled", "PodGroupScheduled")
LIST_LIMIT = 20  # pending groups listed in the summary (the counts cover all)


def group_pods(state: ClusterState, key: str) -> dict[str, list[str]]:
    """The group's pods by phase."""
    out: dict[str, list[str]] = {PENDING: [], RUNNING: [], SUCCEEDED: [], FAILED: []}
    for pod in state.gang.group_members.get(key, ()):
        out[state.pods[pod].phase].append(pod)
    return out


def scheduled(group: PodGroupState) -> bool:
    return any(c.status == "True" for t, c in group.conditions.items() if t in SCHEDULED)


def explain(state: ClusterState, key: str) -> tuple[str, str]:
    """(what is in the way, a sentence with the evidence) for a group with pending pods."""
    group = state.gang.podgroups.get(key)
    pods = group_pods(state, key)
    pending = [state.pods[p] for p in pods[PENDING]]
    if group is None:
        return "missing", f"PodGroup {key} does not exist; its {len(pending)} pods wait for it"
    conditions = [p.condition for p in pending if p.condition is not None]
    causes = Counter(c.cause for c in conditions)
    reasons = Counter(c.reason for c in conditions)
    # the order of the scheduler's cycle (and of `dralab audit`, core/analysis/audit_podgroups.py): PreEnqueue's
    # quorum first, then the pods' gates, the group's validation, preemption under way, the shared claim (no domain
    # helps a claim that fits no node), the topology domains, and capacity last
    first_not_ready = next((c for c in conditions if c.reason == "NotReadyForScheduling"), None)
    if first_not_ready is not None:
        kind = "missing" if first_not_ready.cause == "missing" else "min-count"
        return kind, f"{first_not_ready.message} ({first_not_ready.detail})"
    if reasons.get("SchedulingGated"):
        return "gated", f"{reasons['SchedulingGated']} of its pods carry scheduling gates"
    if reasons.get("SchedulerError"):  # the group's validation (upstream's validatePodGroup)
        message = next(c.message for c in conditions if c.reason == "SchedulerError")
        return ("priority-mismatch" if "priority" in message else "invalid-group"), message
    if causes.get("preemption"):
        message = next(c.message for c in conditions if c.cause == "preemption")
        return "preemption", message
    shared = {str(e.get("name")) for e in group.spec.get("resourceClaims") or [] if isinstance(e, dict)}
    if shared and any(c.cause in ("capacity", "topology", "fragmentation") and c.detail and
                      any(name in c.detail for name in shared) for c in conditions):
        detail = next(c.detail for c in conditions if any(name in c.detail for name in shared))
        return "group-claim", f"the pod group's shared claim cannot be allocated: {detail}"
    topology = next((c.message for c in conditions if "domain fits the pod group" in c.message), None)
    if topology is not None:
        return "topology", topology
    if not conditions:
        return "not-tried", "the scheduler has not tried the group yet"
    cause, _ = max(causes.items(), key=lambda kv: (kv[1], kv[0]))
    message = next(c.message for c in conditions if c.cause == cause)
    return ("capacity" if cause == "gang" else cause), message


def policy_text(group: PodGroupState) -> str:
    count = group.min_count
    text = f"gang minCount {count}" if count is not None else "basic"
    topology = group.topology_key
    return f"{text}, one {topology} domain" if topology else text


def summarize_groups(state: ClusterState) -> dict[str, Any] | None:
    """The summary's `pod_groups` object (None when the run has no PodGroup)."""
    groups = state.gang.podgroups
    waiting = {k for k in state.gang.group_members if k not in groups and state.gang.group_members[k]}
    if not groups and not waiting:
        return None
    pending_rows: list[dict[str, Any]] = []
    for key in [*groups, *sorted(waiting)]:
        pods = group_pods(state, key)
        if not pods[PENDING]:
            continue
        kind, why = explain(state, key)
        group = groups.get(key)
        pending_rows.append({
            "name": key,
            "policy": policy_text(group) if group is not None else "unknown (no PodGroup)",
            "pods": {phase.lower(): len(keys) for phase, keys in pods.items()},
            "blocked_by": kind,
            "why": why,
        })
    by_kind = Counter(row["blocked_by"] for row in pending_rows)
    return {
        "total": len(groups),
        "scheduled": sum(1 for g in groups.values() if scheduled(g)),
        "pending": len(pending_rows),
        "pending_by_reason": dict(sorted(by_kind.items())),
        "preempted": sum(1 for g in groups.values() if "DisruptionTarget" in g.conditions),
        "pending_groups": pending_rows[:LIST_LIMIT],
    }


def render_lines(summary: dict[str, Any] | None) -> list[str]:
    """The summary's lines about PodGroups."""
    if not summary:
        return []
    head = f"podgroups  {summary['scheduled']}/{summary['total']} scheduled"
    if summary["pending"]:
        head += f", {summary['pending']} pending (" + ", ".join(
            f"{k}: {v}" for k, v in summary["pending_by_reason"].items()) + ")"
    if summary["preempted"]:
        head += f", {summary['preempted']} preempted"
    lines = [head]
    for row in summary["pending_groups"][:5]:
        lines.append(f"  {row['name']} ({row['policy']}): {row['blocked_by']}: {row['why']}")
    return lines

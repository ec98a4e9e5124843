"""The summary's `kueue` counts: what Kueue did to its Workloads (admissions, evictions by reason, requeues,
deactivations by reason), from the fold of `KueueWorkloadUpdated` (core/state/provreq.py). Absent when the run's
Kueue wrote none (no Kueue, or the legacy model, whose summaries must read as they did)."""

from __future__ import annotations

from typing import Any

from ..state.cluster import ClusterState


def kueue_counts(state: ClusterState) -> dict[str, Any] | None:
    seen = state.provisioning.workload_transitions
    if not seen:
        return None

    def by_reason(kind: str) -> dict[str, int]:
        return {k.split("/", 1)[1]: n for k, n in sorted(seen.items()) if k.startswith(kind + "/")}

    return {"workloads": len(state.provisioning.workloads), "admissions": seen.get("Admitted", 0),
            "evictions": by_reason("Evicted"), "requeues": seen.get("Requeued", 0),
            "deactivations": by_reason("Deactivated")}


def kueue_lines(counts: dict[str, Any] | None) -> list[str]:
    """One line for a person: `kueue      2 admissions, 1 eviction (PodsReadyTimeout 1), 1 requeue`."""
    if not counts:
        return []

    def part(n: int, word: str, reasons: dict[str, int] | None = None) -> str:
        detail = f" ({', '.join(f'{r} {c}' for r, c in reasons.items())})" if reasons else ""
        return f"{n} {word}{'' if n == 1 else 's'}{detail}"

    evicted, deactivated = counts["evictions"], counts["deactivations"]
    return ["kueue      " + ", ".join([
        part(counts["workloads"], "workload"), part(counts["admissions"], "admission"),
        part(sum(evicted.values()), "eviction", evicted), part(counts["requeues"], "requeue"),
        part(sum(deactivated.values()), "deactivation", deactivated)])]

"""The end-of-run summary: a pure function of the final state (and the violations seen).

The JSON shape is a contract that scripts rely on: later work adds keys, never renames them.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from ..checks.invariants import Violation
from ..run.config import policies
from ..state.cluster import ClusterState
from .autoscaler_status import autoscaler_summary, summary_line
from .causes import explain_lines
from .kueue_summary import kueue_counts, kueue_lines
from .podgroups import render_lines, summarize_groups
from .scale_down_summary import scale_down_lines, scale_down_summary
from .waits import pending_cause, schedule_waits, time_to_schedule

if TYPE_CHECKING:
    from .run_metrics import RunMetrics


def summarize(state: ClusterState, violations: list[Violation], *, seed: int | None = None,
              metrics: RunMetrics | None = None, conflicts: int | None = None) -> dict[str, Any]:
    """The summary of the final state; with `metrics` (computed over the run's log, core/analysis/metrics.py) it
    gains the top-level metric keys and a `metrics` object with the rest. `conflicts`: decisions refused on
    append because an object they read had moved (optimistic concurrency; the log does not record them, so
    only the run that made them can say: `sim` from the simulator, `run` from its actors)."""
    run = state.run
    config = run.config if run else {}
    pending = state.pending_pods()
    by_reason = Counter(pending_cause(state, p) for p in pending)
    added: dict[str, int] = {name: g.created - g.initial for name, g in sorted(state.node_groups.items())}
    gangs = state.gang.gangs()
    summary = {
        "scenario": run.scenario if run else None,
        "seed": run.seed if run else seed,
        "policy": policies(config),
        "pods": {
            "total": len(state.pods),
            "scheduled": sum(1 for p in state.pods.values() if p.bound_t >= 0),
            "pending": len(pending),
            "pending_by_reason": dict(sorted(by_reason.items())),
            "failed": len(state.pods_by_phase["Failed"]),  # ended as Failed (e.g. their node was deleted)
        },
        "gangs": {
            "total": len(gangs),
            "bound": sum(1 for g in gangs if g in state.gang.bound),
            "waiting": len({r.gang for r in state.gang.reservations.values()}),
            "timeouts": state.gang.timeouts,
        },
        "nodes_added": added,
        "nodes_deleted": {name: g.deleted for name, g in sorted(state.node_groups.items()) if g.deleted},
        "time_to_schedule_s": time_to_schedule(schedule_waits(state)),
        "events": state.events_applied,
        "invariant_violations": [v.to_json() for v in violations],
        "records": state.offset,
        "sim_time_s": state.t / 1000,
    }
    kueue = kueue_counts(state)
    if kueue is not None:  # Kueue's Workloads as a release modelled them (core/controllers/kueue_broker.py)
        summary["kueue"] = kueue
    groups = summarize_groups(state)
    if groups is not None:  # 1.36+ PodGroups: how many scheduled, and why each pending one is
        summary["pod_groups"] = groups
    if (scale_down := scale_down_summary(state)) is not None:  # release profiles: the autoscaler's scale-down
        summary["scale_down"] = scale_down
    if (autoscaler := autoscaler_summary(state)) is not None:  # its Events (release profiles; issue 22)
        summary["autoscaler"] = autoscaler
    if metrics is not None:
        summary.update(metrics.contract())
        summary["metrics"] = metrics.details()
    if conflicts is not None:
        summary["conflicts"] = conflicts
    return summary


def render_text(summary: dict[str, Any]) -> str:
    """The summary a person reads at a glance."""
    pods, tts = summary["pods"], summary["time_to_schedule_s"]

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}s"

    release = summary.get("kubernetes") or {}
    lines = [
        f"scenario {summary['scenario']}  seed {summary['seed']}  autoscaler policy {summary['policy']['autoscaler']}",
        *([f"release    Kubernetes {release['version']}; upstream bugs in it: {', '.join(release['upstreamBugs'])} "
           "(docs/upstream-bugs.md)"] if release.get("upstreamBugs") else []),
        f"pods       {pods['scheduled']}/{pods['total']} scheduled, {pods['pending']} pending"
        + (f" ({', '.join(f'{k}: {v}' for k, v in pods['pending_by_reason'].items())})" if pods["pending"] else "")
        + (f", {pods['failed']} failed" if pods.get("failed") else ""),
        *explain_lines(pods["pending_by_reason"], indent=" " * 11),  # what each cause means, what to do
        *([f"gangs      {summary['gangs']['bound']}/{summary['gangs']['total']} bound, "
           f"{summary['gangs']['waiting']} waiting at Permit, {summary['gangs']['timeouts']} member(s) timed out"]
          if summary.get("gangs", {}).get("total") else []),
        *render_lines(summary.get("pod_groups")),
        *kueue_lines(summary.get("kueue")),
        "nodes      " + (", ".join(f"+{n} {g}" for g, n in summary["nodes_added"].items()) or "no node groups"),
        *scale_down_lines(summary),
        f"scheduling p50 {fmt(tts['p50'])}  p99 {fmt(tts['p99'])}",
        *summary_line(summary),
        *_metric_lines(summary),
        f"log        {summary['events']} events in {summary['records']} records, "
        f"{summary['sim_time_s']:.0f}s of cluster time"
        + (f", {summary['conflicts']} conflict{'' if summary['conflicts'] == 1 else 's'} (stale decisions refused)"
           if summary.get("conflicts") is not None else ""),
    ]
    violations = summary["invariant_violations"]
    lines.append(
        "invariants all held"
        if not violations
        else "invariants VIOLATED:\n"
        + "\n".join(f"  - {v['invariant']} @ {v['offset']}: {v['message']}" for v in violations)
    )
    return "\n".join(lines)


def _metric_lines(summary: dict[str, Any]) -> list[str]:
    """Two lines of the run's metrics, when the summary has them: what the GPUs cost and what pods waited."""
    if "gpu_hours_paid" not in summary:
        return []
    details = summary.get("metrics") or {}
    ratio = (details.get("gpu_allocation_ratio") or {}).get("mean")
    n = summary["scale_ups_without_pod"]
    gpus = (f"GPUs       {summary['gpu_hours_paid']:.1f} GPU-h paid, {summary['gpu_hours_idle']:.1f} idle, "
            f"{details.get('gpu_hours_unready', 0.0):.1f} not ready"
            + (f", {ratio:.0%} allocated" if ratio is not None else "")
            + _stranded(summary)
            + (f", {details['gpu_hours_free_while_groups_wait']:.1f} free while pod groups wait rejected"
               if details.get("gpu_hours_free_while_groups_wait") else "")
            + (f"; {n} scale-up{'' if n == 1 else 's'} brought no pod" if n else ""))
    waited = summary["pending_pod_seconds_by_reason"]
    total = sum(waited.values())
    pending = (f"pending    {total:.0f} pod-seconds ("
               + ", ".join(f"{k} {v:.0f}" for k, v in sorted(waited.items(), key=lambda kv: -kv[1])) + ")")
    return [gpus, *([pending] if total else [])]


def _stranded(summary: dict[str, Any]) -> str:
    """The GPUs line's stranded part: GPU-hours no pending pod could use where they were, by cause."""
    stranded = summary.get("gpu_hours_stranded")
    if not stranded:
        return ""
    causes = summary.get("gpu_hours_stranded_by_cause") or {}
    return (f", {stranded:.1f} stranded ("
            + ", ".join(f"{k} {v:.1f}" for k, v in sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))) + ")")

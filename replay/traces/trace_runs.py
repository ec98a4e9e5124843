"""Time-aware trace runs with the autoscaler in the loop (issue 9, "beyond the paper").

The FGD protocol (replay/traces/fgd.py) answers "how well does a score policy pack a fixed cluster"; these runs
answer the autoscaler's question: pods arrive and leave at the trace's times, node groups start small and
the cluster-autoscaler model grows and shrinks them, and the same scenario is simulated once per autoscaler
policy (`count`, `dra`, `atomic`) so the policies can be compared on what the cluster cost (idle and paid
GPU-hours) and what the pods waited (pending pod-seconds, time to schedule).

Three importers feed it: the openb trace's time-aware scenario (`openb.timed_scenario`), the Philly job
trace (`philly.philly_scenario`) and the Pollux workloads with durations from Philly
(`pollux.pollux_scenario`). All produce scenario documents checked by `parse_scenario`, like a hand-written
scenario: the runs go through the same simulator, reactors and metrics as `dralab sim`.

Everything here is a function of its inputs (no clock, no randomness outside the run's seed); the CLI
(cli/trace_cmd.py) adds the progress lines and the wall time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

POLICIES = ("count", "dra", "atomic")
ROW_KEYS = ("policy", "gpu_hours_idle", "gpu_hours_paid", "gpu_hours_unused", "pending_pod_seconds",
            "time_to_schedule_p50_s", "time_to_schedule_p99_s", "pods", "pods_never_scheduled", "nodes_added",
            "scale_ups", "scale_ups_without_pod", "invariant_violations")


class TraceRunError(ValueError):
    """Bad input to a trace run (a file, a row or an option); the message says which. The CLI exits 2."""


def parse_policies(text: str) -> list[str]:
    """`count,dra,atomic` (any subset, in the order given, no repeats)."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in POLICIES]
    if not names or bad:
        raise TraceRunError(f"--autoscaler: expected a comma list of {', '.join(POLICIES)}, got {text!r}")
    if len(set(names)) != len(names):
        raise TraceRunError(f"--autoscaler: a policy is listed twice in {text!r}")
    return names


def openb_document(nodes_path: str, pods_path: str, *, start_h: float = 0.0, hours: float = 24.0,
                   start_fraction: float = 0.0, provision_delay: tuple[str, str] = ("2m", "4m"),
                   carry_in: bool = True, seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """The openb trace's time-aware scenario over [start_h, start_h + hours) hours after its first creation,
    and what the import kept (`openb.TimedWindow` as a dict). Bad files raise TraceRunError (file:line)."""
    from .openb import read_nodes, read_pod_times, read_pods, timed_scenario

    if start_h < 0:
        raise TraceRunError(f"--start: must be >= 0 hours after the trace's first pod, got {start_h}")
    name = "openb-" + os.path.splitext(os.path.basename(pods_path))[0].replace("openb_pod_list_", "")
    try:
        nodes, pods, times = read_nodes(nodes_path), read_pods(pods_path), read_pod_times(pods_path)
        doc, window = timed_scenario(nodes, pods, times, start_s=round(start_h * 3600), hours=hours,
                                     start_fraction=start_fraction, provision_delay=provision_delay,
                                     carry_in=carry_in, name=name, seed=seed)
    except ValueError as exc:  # OpenbError (file:line: column), or the window's options
        raise TraceRunError(str(exc)) from None
    info = asdict(window)
    if not doc["spec"]["workload"]:
        raise TraceRunError(f"{pods_path}: no pod runs in the window ({start_h} h + {hours} h after the first "
                            "creation); pick another --start")
    return doc, info


def philly_document(jobs_path: str, *, cluster: str | None = None, start: str | None = None, hours: float = 24.0,
                    max_nodes: int = 64, start_nodes: int = 0, provision_delay: tuple[str, str] | None = None,
                    seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Philly jobs of `cluster` submitted in [start, start + hours) as a scenario (replay/traces/philly.py), and
    a digest of the window (jobs, gangs, GPUs asked)."""
    from .philly import PhillyError, load_philly, philly_scenario, pods_of, select

    begin: datetime | None = None
    if start:
        for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"):
            try:
                begin = datetime.strptime(start, fmt)
                break
            except ValueError:
                continue
        else:
            raise TraceRunError(f"--start: expected YYYY-MM-DD[ HH:MM:SS], got {start!r}")
    _check_window(hours, max_nodes, start_nodes)
    try:
        jobs = select(load_philly(jobs_path), start=begin, hours=hours, cluster=cluster)
    except PhillyError as exc:
        raise TraceRunError(str(exc)) from None
    except OSError as exc:
        raise TraceRunError(f"{jobs_path}: cannot read: {exc.strerror or exc}") from None
    if not jobs:
        raise TraceRunError(f"{jobs_path}: no job of cluster {cluster or '(any)'} in the window "
                            f"({start or 'its first job'} + {hours} h)")
    name = "philly" + (f"-{cluster[:12]}" if cluster else "")
    doc = philly_scenario(jobs, name=name, hours=hours, max_nodes=max_nodes, start_nodes=start_nodes, seed=seed,
                          provision_delay=provision_delay)
    info = {"first_job": jobs[0].submitted.isoformat(sep=" "), "hours": hours, "cluster": cluster,
            "jobs": len(jobs), "gangs": sum(1 for j in jobs if len(pods_of(j, 8)) > 1),
            "pods": sum(len(pods_of(j, 8)) for j in jobs), "gpus_asked": sum(j.gpus for j in jobs),
            "max_nodes": max_nodes, "start_nodes": start_nodes, "provision_delay": provision_delay}
    return doc, info


def _check_window(hours: float, max_nodes: int, start_nodes: int) -> None:
    if not 0 < hours <= 24 * 366:
        raise TraceRunError(f"--hours: must be in (0, 8784], got {hours}")
    if max_nodes < 1 or not 0 <= start_nodes <= max_nodes:
        raise TraceRunError(f"--max-nodes/--start-nodes: need max >= 1 and 0 <= start <= max, got {max_nodes}, "
                            f"{start_nodes}")


def pollux_document(workload_path: str, jobs_path: str, *, start_h: float = 0.0, hours: float = 24.0,
                    max_nodes: int = 64, start_nodes: int = 0, provision_delay: tuple[str, str] | None = None,
                    seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Pollux workload's jobs arriving in [start_h, start_h + hours) hours as a scenario (replay/traces/pollux.py),
    their durations drawn with `seed` from the Philly jobs of `jobs_path`, and a digest of the window (jobs,
    gangs, GPUs asked, how the durations were matched)."""
    from .philly import PhillyError, load_philly
    from .pollux import PolluxError, draw_durations, load_workload, matched_counts, pollux_scenario

    if not 0 <= start_h <= 24 * 366:
        raise TraceRunError(f"--start: must be 0 to 8784 hours after the workload's start, got {start_h}")
    _check_window(hours, max_nodes, start_nodes)
    path = workload_path
    try:
        jobs = load_workload(path)
        path = jobs_path
        philly = load_philly(path)
    except (PolluxError, PhillyError) as exc:
        raise TraceRunError(str(exc)) from None
    except OSError as exc:
        raise TraceRunError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        drawn = draw_durations(jobs, philly, seed)
    except ValueError as exc:
        raise TraceRunError(f"{jobs_path}: {exc}") from None
    start_s = round(start_h * 3600)
    window = [(j, d) for j, d in zip(jobs, drawn, strict=True) if start_s <= j.time_s < start_s + hours * 3600]
    if not window:
        raise TraceRunError(f"{workload_path}: no job arrives in the window ({start_h} h + {hours} h after its start)")
    stem = os.path.splitext(os.path.basename(workload_path))[0].lower()
    name = ("pollux-" + "".join(c if c.isascii() and c.isalnum() else "-" for c in stem)[:40]).strip("-")
    doc = pollux_scenario(jobs, drawn, name=name, start_s=start_s, hours=hours, max_nodes=max_nodes,
                          start_nodes=start_nodes, seed=seed, provision_delay=provision_delay)
    durations = sorted(d.duration_s for _, d in window)
    end_s = hours * 3600
    info = {"workload": os.path.basename(workload_path), "start_h": start_h, "hours": hours, "jobs": len(window),
            "gangs": sum(1 for j, _ in window if j.replicas > 8),
            "pods": sum(-(-j.replicas // 8) for j, _ in window),
            "gpus_asked": sum(j.replicas for j, _ in window),
            "gpu_hours_asked_in_window": round(sum(j.replicas * min(d.duration_s, end_s - (j.time_s - start_s))
                                                   for j, d in window) / 3600, 1),
            "durations_matched": matched_counts([d for _, d in window]),
            "duration_p50_s": durations[len(durations) // 2], "duration_max_s": durations[-1],
            "jobs_ending_after_window": sum(1 for j, d in window if j.time_s - start_s + d.duration_s > end_s),
            "max_nodes": max_nodes, "start_nodes": start_nodes, "provision_delay": provision_delay}
    return doc, info


@dataclass(frozen=True)
class PolicyRun:
    """One policy's run: the figures of the table, and what it takes to write its log."""

    row: dict[str, Any]
    scenario: Any
    entries: list[tuple[int, bytes]]


def run_policy(doc: dict[str, Any], policy: str, seed: int = 0) -> PolicyRun:
    """Simulate `doc` under autoscaler `policy` (the document's own policy replaced) and measure it: the
    metrics over the log up to the scenario's end, as `dralab sim` computes them."""
    from dralab.core.analysis.metrics import metrics_from_entries
    from dralab.core.analysis.waits import percentile
    from dralab.core.scenario.load import ScenarioError, parse_scenario

    from ..simulation.sim import Simulator

    spec = {**doc["spec"], "policy": {**doc["spec"].get("policy", {}), "autoscaler": policy}}
    try:
        scenario = parse_scenario({**doc, "spec": spec}, f"<{doc['metadata']['name']}>")
    except ScenarioError as exc:
        raise TraceRunError(str(exc)) from None
    result = Simulator(scenario, seed).run()
    m = metrics_from_entries(result.entries, end_ms=scenario.duration_ms)
    pods = list(result.state.pods.values())
    waits = [(p.bound_t - p.created_t) / 1000 for p in pods if p.bound_t >= 0]
    row = {
        "policy": policy,
        "gpu_hours_idle": round(m.gpu_hours_idle, 3),
        "gpu_hours_paid": round(m.gpu_hours_paid, 3),
        # paid - used by share: every paid GPU-hour doing no work (idle, not ready yet, and "wanted": free GPUs
        # some pending pod could use, even when that pod's selector rules the node out). Idle is the lower
        # bound of the waste, this the upper one; they part when pods wait that the free GPUs cannot serve.
        "gpu_hours_unused": round(m.gpu_hours_paid - m.gpu_hours_used_share, 3),
        "pending_pod_seconds": round(sum(m.pending_pod_seconds_by_reason.values()), 3),
        "time_to_schedule_p50_s": percentile(waits, 50),
        "time_to_schedule_p99_s": percentile(waits, 99),
        "pods": len(pods),
        "pods_never_scheduled": sum(1 for p in pods if p.bound_t < 0),
        "nodes_added": sum(m.nodes_added.values()),
        "scale_ups": m.scale_ups,
        "scale_ups_without_pod": m.scale_ups_without_pod,
        "invariant_violations": len(result.violations),
        "pending_pod_seconds_by_reason": {k: round(v, 3) for k, v in sorted(m.pending_pod_seconds_by_reason.items())},
        "nodes_added_by_group": {k: v for k, v in sorted(m.nodes_added.items()) if v},
        "gpu_hours_used": round(m.gpu_hours_used, 3),
        "records": len(result.entries),
    }
    return PolicyRun(row, scenario, result.entries)


def write_run_log(directory: str, run: PolicyRun, seed: int) -> str:
    """`DIR/<scenario>-<policy>.dralog`, with the header `dralab sim --log-file` writes, for `dralab report`."""
    from dralab.core.run.config import policies, run_config

    from ..logs.logfile import make_header, write_log

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{run.scenario.name}-{run.row['policy']}.dralog")
    header = make_header(scenario=run.scenario.name, seed=seed, policy=policies(run_config(run.scenario)),
                         mode="sim")
    write_log(path, header, run.entries)
    return path


def compare(doc: dict[str, Any], policies: list[str], *, seed: int = 0, log_dir: str | None = None,
            done: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """The table's rows, one per policy in the order given (each run independent: same document and seed);
    `done` is told of each row as it comes (the CLI's progress line). With `log_dir` each row gains `log`."""
    rows = []
    for policy in policies:
        run = run_policy(doc, policy, seed)
        row = dict(run.row)
        if log_dir:
            row["log"] = write_run_log(log_dir, run, seed)
        rows.append(row)
        if done is not None:
            done(row)
    return rows


def render_table(title: str, rows: list[dict[str, Any]]) -> str:
    """The text table: one line per policy."""

    def num(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    head = (f"{'policy':<8} {'idle GPU-h':>10} {'unused GPU-h':>12} {'paid GPU-h':>10} {'pending pod-s':>13} "
            f"{'tts p50':>8} {'tts p99':>8} {'never sched':>11} {'nodes added':>11} {'scale-ups':>9} {'no pod':>6}")
    lines = [title, head]
    for r in rows:
        lines.append(f"{r['policy']:<8} {num(r['gpu_hours_idle'], '.1f'):>10} {num(r['gpu_hours_unused'], '.1f'):>12} "
                     f"{num(r['gpu_hours_paid'], '.1f'):>10} "
                     f"{num(r['pending_pod_seconds'], '.0f'):>13} {num(r['time_to_schedule_p50_s'], '.1f'):>8} "
                     f"{num(r['time_to_schedule_p99_s'], '.1f'):>8} {r['pods_never_scheduled']:>11} "
                     f"{r['nodes_added']:>11} {r['scale_ups']:>9} {r['scale_ups_without_pod']:>6}")
    for r in rows:
        if r["invariant_violations"]:
            lines.append(f"{r['policy']}: {r['invariant_violations']} invariant violation(s): see its log")
    return "\n".join(lines) + "\n"

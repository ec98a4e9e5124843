"""The series `dralab report` draws, extracted from a run's log in one pass (pure: no clock, no I/O).

Why one pass: a 1,000-node day is hundreds of thousands of records, and folding it once per plot would
make a report take minutes. :func:`extract` drives the incremental fold behind core/analysis/metrics.py (its
`MetricsFold`: the same GPU counting, pending reasons and idle definition as the summary's metrics, so the
report and `dralab sim`'s numbers cannot disagree) and samples what it keeps after every record. A sample
is taken at the record's cluster time (clamped never to go backwards, as the metrics clamp it); several
records at one instant give one sample, the state after the last of them; a sample equal to the previous
one is dropped. So every series is a step function: `values[i]` holds from `t[i]` until `t[i + 1]`.

The headline numbers are the metrics of that same fold (`MetricsFold.result`, the code
:func:`dralab.core.analysis.metrics.compute_metrics` returns through; tests/test_report.py checks they are equal):
folding twice would double the time of a big report.
The fold ends at the last record; :func:`align` then carries every run of a report to one end, the latest of
their scenarios' durations (recorded in RunStarted's config, `duration_ms`) and their last records, holding each
run's state after its last record (its nodes billed) until then, without simulating further (issue 22: a run
whose log ends early, because nothing happened after the pods ran, must not look cheaper than one that waited
on). A damaged log is carried only to the other run's end. The final counts are
:func:`dralab.core.analysis.summary.summarize` of the final state.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dralab.core.analysis.metrics_fold import MetricsFold
from dralab.core.analysis.run_metrics import RunMetrics
from dralab.core.analysis.summary import summarize
from dralab.core.log.events import Record, ScaleUpFailed, ScaleUpRequested
from dralab.core.state.cluster import ClusterState

NODE_STATES = ("provisioning", "not ready", "ready")  # live states, stacked; "deleted" is cumulative
DELETED = "deleted"
GPU_COLUMNS = ("paid", "ready", "used", "idle", "unready", "stranded")


@dataclass
class Steps:
    """A step function sampled at event times: `columns[k][i]` holds from `t[i]` until `t[i + 1]`."""

    t: list[float] = field(default_factory=list)  # cluster seconds
    columns: dict[Any, list[float]] = field(default_factory=dict)

    def at(self, key: Any, t_s: float) -> float:
        """The value of column `key` at cluster time `t_s` (0 before the first sample or for a missing key)."""
        i = bisect_right(self.t, t_s) - 1
        col = self.columns.get(key)
        return 0.0 if i < 0 or col is None else col[i]


class _Sampler:
    """Builds a Steps from snapshots of a small dict, one per record; keeps only changes."""

    def __init__(self) -> None:
        self.t: list[float] = []
        self.rows: list[dict[Any, float]] = []

    def add(self, t_s: float, row: dict[Any, float]) -> None:
        if self.rows and self.t[-1] == t_s:  # same instant: the state after the last record holds
            self.t.pop()
            self.rows.pop()
        if self.rows and self.rows[-1] == row:
            return
        self.t.append(t_s)
        self.rows.append(row)

    def steps(self, keys: Iterable[Any] = ()) -> Steps:
        names: dict[Any, None] = dict.fromkeys(keys)
        for row in self.rows:
            names.update(dict.fromkeys(row))
        return Steps(list(self.t), {k: [row.get(k, 0) for row in self.rows] for k in names})


@dataclass(frozen=True)
class ScaleUp:
    """A decision of the autoscaler: `delta` nodes asked of `group` at `t_s` (a failure: `delta` refused)."""

    t_s: float
    group: str
    delta: int
    pods: int = 0
    reason: str = ""  # ScaleUpFailed: out-of-stock | quota | instance-failed


@dataclass
class RunData:
    """Everything one run's report shows."""

    path: str
    header: dict[str, Any]
    end_s: float
    pending: Steps  # reason -> pending pods
    nodes: Steps  # (group, state) -> nodes; state in NODE_STATES, or DELETED (cumulative)
    gpus: Steps  # GPU_COLUMNS -> GPUs (idle may be fractional: unused shares of partitioned GPUs)
    scale_ups: list[ScaleUp]
    scale_up_failures: list[ScaleUp]
    waits_s: list[float]  # creation to binding, seconds, every pod ever bound
    never_scheduled: int  # pods never bound
    summary: dict[str, Any]  # summarize() of the final state, with the metrics
    metrics: RunMetrics
    records: int
    damage: str | None = None
    log_end_s: float = 0.0  # the last record's cluster time (end_s: where the totals end, after align)
    fold: MetricsFold | None = None  # the fold, kept to carry the totals past the last record (align)

    @property
    def groups(self) -> list[str]:
        return sorted({g for g, _ in self.nodes.columns})

    def label(self) -> str:
        """Who this run is in a legend: its policy, else its file."""
        policy = self.header.get("policy")
        name = policy.get("autoscaler") if isinstance(policy, dict) else None
        return f"autoscaler {name}" if name else self.path


def _node_status(state: ClusterState, name: str) -> tuple[str, str] | None:
    """(group, live state) of a node name in the fold, None when it is neither a Node nor a VM coming."""
    node = state.nodes.get(name)
    if node is not None:
        return node.group, "ready" if node.ready else "not ready"
    vm = state.provisioning_nodes.get(name)
    if vm is not None:
        return vm.group, "provisioning"
    return None


def _gpu_row(replay: MetricsFold) -> dict[Any, float]:
    idle = replay._idle_unused() + replay.ready_held  # the metrics' idle: unwanted free GPUs and held ones
    replay.stranded.flush(replay.state)  # what integrate would count from here (once per record: same answer)
    return {"paid": replay.paid_gpus, "ready": replay.ready_gpus, "used": replay.ready_used,
            "idle": round(idle, 6), "unready": replay.unready_gpus,
            "stranded": sum(replay.stranded.by_cause.values())}


def series(records: Iterable[tuple[int, Record]]) -> tuple[Steps, Steps, Steps, list[ScaleUp], list[ScaleUp],
                                                          MetricsFold, RunMetrics, int]:
    """One fold over `records`: (pending by reason, nodes by group and state, GPUs, scale-ups, scale-up
    failures, the fold (its final state), the run's metrics to the last record, the number of records). Per
    record it costs what the metrics' fold costs plus the nodes the record writes."""
    replay = MetricsFold()
    pending, nodes, gpus = _Sampler(), _Sampler(), _Sampler()
    status: dict[str, tuple[str, str]] = {}  # node name -> (group, live state)
    node_counts: Counter[tuple[str, str]] = Counter()
    ups: list[ScaleUp] = []
    failures: list[ScaleUp] = []
    now: int | None = None
    count = 0
    for offset, record in records:
        count += 1
        t = record.t if now is None else max(record.t, now)
        if now is not None:
            replay.integrate(t - now)
        now = t
        replay.step(offset, record, t)
        state = replay.state
        t_s = t / 1000
        for key in record.writes():
            if not key.startswith("node/"):
                continue
            name = key[5:]
            old, new = status.get(name), _node_status(state, name)
            if old == new:
                continue
            if old is not None:
                node_counts[old] -= 1
            if new is not None:
                node_counts[new] += 1
                status[name] = new
            else:
                del status[name]
                node_counts[(old[0], DELETED)] += 1  # type: ignore[index]  # old is set: old != new
        for event in record.events:
            if isinstance(event, ScaleUpRequested):
                ups.append(ScaleUp(t_s, event.group, event.delta, len(event.pods)))
            elif isinstance(event, ScaleUpFailed):
                failures.append(ScaleUp(t_s, event.group, event.delta, reason=event.reason))
        pending.add(t_s, {k: v for k, v in replay.by_cause.items() if v})
        nodes.add(t_s, {k: v for k, v in node_counts.items() if v})
        gpus.add(t_s, _gpu_row(replay))
    metrics = replay.result(now or 0)
    return (pending.steps(), nodes.steps(), gpus.steps(GPU_COLUMNS), ups, failures, replay, metrics, count)


def extract(path: str, header: dict[str, Any], records: Iterable[tuple[int, Record]],
            damage: str | None = None) -> RunData:
    """The report's data for one log (its decoded records, in order; an iterator is fine: one pass)."""
    pending, nodes, gpus, ups, failures, fold, metrics, count = series(records)
    state = fold.state
    end_s = metrics.end_s
    summary = summarize(state, [], metrics=metrics)
    waits = sorted((p.bound_t - p.created_t) / 1000 for p in state.pods.values() if p.bound_t >= 0)
    return RunData(
        path=path, header=dict(header), end_s=end_s, pending=pending, nodes=nodes, gpus=gpus,
        scale_ups=ups, scale_up_failures=failures, waits_s=waits,
        never_scheduled=sum(1 for p in state.pods.values() if p.bound_t < 0),
        summary=summary, metrics=metrics, records=count, damage=damage, log_end_s=end_s, fold=fold,
    )


def scenario_end_ms(run: RunData) -> int:
    """Where the run's totals should end: its scenario's duration (RunStarted's config) or its last record,
    whichever is later; a damaged log (a recording cut short) at its last record."""
    last = round(run.log_end_s * 1000)
    if run.damage is not None or run.fold is None or run.fold.state.run is None:
        return last
    duration = run.fold.state.run.config.get("duration_ms")
    return max(last, duration) if isinstance(duration, int) else last


def align(runs: Sequence[RunData]) -> int:
    """Carry every run's totals to one end (ms): the latest of their :func:`scenario_end_ms`. Past its last
    record a run's state holds (its nodes are billed, its pending pods wait) as the summary of `dralab sim`
    bills them to the scenario's duration; nothing is simulated. Returns the end."""
    end = max((scenario_end_ms(run) for run in runs), default=0)
    for run in runs:
        done = round(run.end_s * 1000)
        if run.fold is None or end <= done:
            continue
        run.fold.integrate(end - done)
        run.metrics = run.fold.result(end)
        run.summary = summarize(run.fold.state, [], metrics=run.metrics)
        run.end_s = end / 1000
    return end



def resample(steps: Steps, points: int, end_s: float) -> Steps:
    """The step function read at most `points` uniformly spaced times from 0 to `end_s` (what a plot of a
    long run needs: a few thousand vertices, not one per record). Short series are returned as they are,
    with a last sample at `end_s` so the final state is drawn to the end of the run."""
    if len(steps.t) <= points:
        t = list(steps.t)
        cols = {k: list(v) for k, v in steps.columns.items()}
        if t and t[-1] < end_s:
            t.append(end_s)
            for v in cols.values():
                v.append(v[-1])
        return Steps(t, cols)
    grid = [end_s * i / (points - 1) for i in range(points)]
    idx = [bisect_right(steps.t, x) - 1 for x in grid]
    return Steps(grid, {k: [v[i] if i >= 0 else 0 for i in idx] for k, v in steps.columns.items()})


def headline(run: RunData) -> dict[str, Any]:
    """The numbers of the summary table, in display order (values: str, int, float or None)."""
    s, m = run.summary, run.metrics
    pods = s["pods"]
    policy = run.header.get("policy")
    nodes_end: Counter[str] = Counter()
    for (_, state), v in run.nodes.columns.items():
        if v and state != DELETED:
            nodes_end[state] += int(v[-1])
    return {
        "file": run.path,
        "scenario": run.header.get("scenario"),
        "seed": run.header.get("seed"),
        "policy": ", ".join(f"{k} {v}" for k, v in sorted(policy.items())) if isinstance(policy, dict) else policy,
        "mode": run.header.get("mode"),
        "records": run.records,
        "cluster time (s)": round(run.end_s, 1),
        "last record (s)": round(run.log_end_s, 1),
        "pods": pods["total"],
        "bound": pods["scheduled"],
        "pending at end": pods["pending"],
        "pending by reason": ", ".join(f"{k} {v}" for k, v in pods["pending_by_reason"].items()) or "-",
        "failed": pods["failed"],
        "nodes at end (ready / not ready / provisioning)":
            f"{nodes_end['ready']} / {nodes_end['not ready']} / {nodes_end['provisioning']}",
        "nodes added": ", ".join(f"{g} +{n}" for g, n in s["nodes_added"].items()) or "-",
        "nodes deleted": sum(int(v[-1]) for (_, st), v in run.nodes.columns.items() if st == DELETED and v),
        "scale-ups": m.scale_ups,
        "scale-ups without pod": m.scale_ups_without_pod,
        "GPU-hours paid": round(m.gpu_hours_paid, 3),
        "GPU-hours used": round(m.gpu_hours_used, 3),
        "idle GPU-hours": round(m.gpu_hours_idle, 3),
        "stranded GPU-hours": round(m.gpu_hours_stranded, 3),
        "stranded by cause": ", ".join(f"{k} {v:.3f}" for k, v in sorted(m.gpu_hours_stranded_by_cause.items(),
                                                                          key=lambda kv: (-kv[1], kv[0]))) or "-",
        "GPU allocation ratio (mean)": None if m.gpu_allocation_ratio_mean is None
        else round(m.gpu_allocation_ratio_mean, 4),
        "time to schedule p50 (s)": m.time_to_schedule_s["p50"],
        "time to schedule p99 (s)": m.time_to_schedule_s["p99"],
        "pending pod-seconds": round(sum(m.pending_pod_seconds_by_reason.values()), 1),
    }


def input_mismatch(runs: Sequence[RunData]) -> str | None:
    """Why two runs are not of the same inputs (scenario name or seed differ), None when they are."""
    if len(runs) < 2:
        return None
    a, b = runs[0].header, runs[1].header
    diffs = [f"{k} {a.get(k)!r} vs {b.get(k)!r}" for k in ("scenario", "seed") if a.get(k) != b.get(k)]
    return "the two logs are not of the same inputs: " + "; ".join(diffs) if diffs else None


def span_mismatch(runs: Sequence[RunData]) -> str | None:
    """When two runs' logs end at different cluster times, say how the totals were made comparable (align)."""
    a, b = (run.log_end_s for run in runs[:2]) if len(runs) >= 2 else (0.0, 0.0)
    if len(runs) < 2 or abs(a - b) <= 0.01 * max(a, b):
        return None
    if abs(runs[0].end_s - runs[1].end_s) > 1e-9:  # not aligned (the caller did not align them)
        return (f"the logs end at different cluster times ({a:g} s vs {b:g} s): totals such as GPU-hours and "
                "pending pod-seconds cover different spans")
    return (f"the logs end at different cluster times ({a:g} s vs {b:g} s): totals such as GPU-hours and pending "
            f"pod-seconds cover the same span, 0 to {runs[0].end_s:g} s, each run's state after its last record "
            "held (its nodes billed) until then")

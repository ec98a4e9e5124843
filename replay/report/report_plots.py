"""The figures of `dralab report`, drawn with matplotlib (Agg: no display, no network) from report_data.

Every figure has one column per run (one or two), sharing both axes, so that two runs of the same inputs
compare at a glance: the same cluster-time axis, the same counts, the same colours for the same reason,
group or state. Time plots mark the autoscaler's scale-up decisions (purple ticks at the top, thin lines
down). Series of long runs are read at a bounded number of times (report_data.resample), which keeps the
inlined SVG small and the drawing fast whatever the number of records.

Output is deterministic for the same data (fixed SVG id salt, no date in the metadata), so the same log
gives the same report byte for byte.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.figure import Figure  # noqa: E402

from ..logs.output_files import atomic_output  # noqa: E402
from .report_data import DELETED, NODE_STATES, RunData, ScaleUp, Steps, resample  # noqa: E402

PLOT_POINTS = 1500  # vertices per series at most
MAX_LINES = 60  # scale-ups drawn as lines across a time plot at most (beyond: ticks only)
MAX_GROUPS = 6  # node groups drawn one per row; the rest are summed as "other groups"
COLUMN_W, ROW_H = 6.4, 2.6  # inches
STATE_COLOURS = {"provisioning": "#f2c14e", "not ready": "#f78154", "ready": "#4d9078"}
GPU_COLOURS = {"paid": "#555555", "ready": "#1f77b4", "used": "#2ca02c", "idle": "#d62728", "stranded": "#ff7f0e"}
SCALE_UP_COLOUR = "#7b3fa0"
FAILED_COLOUR = "#000000"
# (name, title) in the order the report shows them; the names are the PNG files' (NAME.png)
PLOTS = (
    ("pending", "Pending pods by reason"),
    ("nodes", "Nodes by group and state"),
    ("gpus", "GPUs: allocation and idle fraction"),
    ("time_to_schedule", "Time to schedule (pod creation to binding)"),
    ("scale_ups", "Scale-up decisions"),
)

# text.parse_math off: names from a log ("$x$") are text, never mathtext to parse
plt.rcParams.update({"text.parse_math": False, "svg.fonttype": "none", "svg.hashsalt": "dralab-report", "font.size": 9,
                     "axes.titlesize": 10, "legend.fontsize": 8})


class TimeAxis:
    """One cluster-time unit for every plot of a report: seconds, minutes or hours by the longest run."""

    def __init__(self, end_s: float) -> None:
        self.div, self.unit = (3600.0, "h") if end_s > 3 * 3600 else (60.0, "min") if end_s > 300 else (1.0, "s")
        self.end = max(end_s, 1.0)

    def x(self, seconds: Sequence[float]) -> list[float]:
        return [s / self.div for s in seconds]

    def label(self) -> str:
        return f"cluster time ({self.unit})"


def _columns(runs: Sequence[RunData], rows: int, title: str) -> tuple[Figure, Any]:
    fig, axes = plt.subplots(rows, len(runs), figsize=(COLUMN_W * len(runs), ROW_H * rows + 0.6),
                             sharex=True, sharey="row", squeeze=False, layout="constrained")
    fig.suptitle(title, fontweight="bold")
    return fig, axes


def _mark_scale_ups(ax: Any, ups: Sequence[ScaleUp], axis: TimeAxis, failures: Sequence[ScaleUp] = ()) -> None:
    """Scale-up decisions as ticks along the top of a time plot, with faint lines down to the axis."""
    xs = axis.x([u.t_s for u in ups])
    if 0 < len(ups) <= MAX_LINES:  # lines down only while they stay readable; ticks always
        ax.vlines(xs, 0, 1, transform=ax.get_xaxis_transform(), colors=SCALE_UP_COLOUR, alpha=0.18, linewidth=0.8)
    if ups:
        ax.plot(xs, [1.0] * len(xs), "v", transform=ax.get_xaxis_transform(), color=SCALE_UP_COLOUR,
                markersize=5, clip_on=False, label="scale-up")
    if failures:
        ax.plot(axis.x([f.t_s for f in failures]), [1.0] * len(failures), "x", transform=ax.get_xaxis_transform(),
                color=FAILED_COLOUR, markersize=5, clip_on=False, label="scale-up failed")


def _stack(ax: Any, steps: Steps, keys: Sequence[Any], labels: Sequence[str], colours: Sequence[str],
           axis: TimeAxis, end_s: float) -> None:
    """Columns `keys` of a step series stacked (each step held until the next sample)."""
    data = resample(steps, PLOT_POINTS, end_s)
    if not data.t:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="#888888")
        return
    ys = [data.columns.get(k, [0.0] * len(data.t)) for k in keys]
    if ys:
        ax.stackplot(axis.x(data.t), *ys, labels=labels, colors=colours, step="post", alpha=0.85, linewidth=0)


def _finish(axes: Any, runs: Sequence[RunData], axis: TimeAxis, ylabel: str) -> None:
    """Titles, labels, the common x range; past a run's last record (when the other run is longer) its
    final state is drawn held, on a grey background that says the log ended there."""
    for col, run in enumerate(runs):
        axes[0][col].set_title(run.label())
        axes[-1][col].set_xlabel(axis.label())
        for r, row in enumerate(axes):
            row[col].set_xlim(0, axis.end / axis.div)
            row[col].grid(alpha=0.25)
            last = run.log_end_s if run.fold is not None else run.end_s  # the state holds past the last record
            if last < axis.end * 0.999:
                row[col].axvspan(last / axis.div, axis.end / axis.div, color="#bbbbbb", alpha=0.25, lw=0)
                if r == 0:
                    row[col].text(last / axis.div, 0.5, " log ends", transform=row[col].get_xaxis_transform(),
                                  color="#666666", va="center")
    for row in axes:
        row[0].set_ylabel(ylabel)
        row[0].set_ylim(bottom=0)


def _palette(n: int) -> list[str]:
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [matplotlib.colors.to_hex(cmap(i % cmap.N)) for i in range(n)]


def plot_pending(runs: Sequence[RunData], axis: TimeAxis) -> Figure:
    """Pending pods over time, stacked by the reason the scheduler recorded (pending_cause)."""
    reasons = sorted({r for run in runs for r in run.pending.columns})
    colours = _palette(len(reasons))
    fig, axes = _columns(runs, 1, "Pending pods by reason")
    for col, run in enumerate(runs):
        ax = axes[0][col]
        _stack(ax, run.pending, reasons, reasons, colours, axis, axis.end)
        _mark_scale_ups(ax, run.scale_ups, axis, run.scale_up_failures)
        if reasons or run.scale_ups:
            ax.legend(loc="upper left", ncols=2)
    _finish(axes, runs, axis, "pending pods")
    return fig


def _node_rows(runs: Sequence[RunData]) -> list[tuple[str, list[str]]]:
    """(row title, groups summed in it): the first MAX_GROUPS - 1 groups alone, the rest together."""
    groups = sorted({g for run in runs for g in run.groups})
    if len(groups) <= MAX_GROUPS:
        return [(g or "(no group)", [g]) for g in groups]
    head, rest = groups[:MAX_GROUPS - 1], groups[MAX_GROUPS - 1:]
    return [*((g or "(no group)", [g]) for g in head), (f"{len(rest)} other groups", rest)]


def _group_steps(steps: Steps, groups: Sequence[str]) -> Steps:
    """The node series of some groups summed, by state."""
    states = (*NODE_STATES, DELETED)
    cols = {s: [sum(steps.columns.get((g, s), [0.0] * len(steps.t))[i] for g in groups) for i in range(len(steps.t))]
            for s in states}
    return Steps(list(steps.t), cols)


def plot_nodes(runs: Sequence[RunData], axis: TimeAxis) -> Figure:
    """Nodes of each group over time, stacked by state (provisioning: the cloud is making the VM; not
    ready: registered, not Ready; ready), and the nodes deleted so far (dashed, cumulative)."""
    rows = _node_rows(runs) or [("(no nodes)", [])]
    fig, axes = _columns(runs, len(rows), "Nodes by group and state")
    for col, run in enumerate(runs):
        for r, (title, groups) in enumerate(rows):
            ax = axes[r][col]
            steps = _group_steps(run.nodes, groups)
            _stack(ax, steps, NODE_STATES, NODE_STATES, [STATE_COLOURS[s] for s in NODE_STATES], axis, axis.end)
            deleted = resample(Steps(steps.t, {DELETED: steps.columns[DELETED]}), PLOT_POINTS, axis.end)
            if deleted.t and any(deleted.columns[DELETED]):
                ax.step(axis.x(deleted.t), deleted.columns[DELETED], where="post", linestyle="--", color="#333333",
                        linewidth=1.2, label="deleted (so far)")
            _mark_scale_ups(ax, [u for u in run.scale_ups if u.group in groups], axis,
                            [f for f in run.scale_up_failures if f.group in groups])
            ax.text(0.99, 0.95, title, transform=ax.transAxes, ha="right", va="top", fontweight="bold")
            if r == 0:
                ax.legend(loc="upper left", ncols=3)
    _finish(axes, runs, axis, "nodes")
    return fig


def plot_gpus(runs: Sequence[RunData], axis: TimeAxis) -> Figure:
    """Top: GPUs paid (every registered node), of Ready nodes, used by bound pods, idle (the metrics'
    definition: unused and wanted by no pending pod, or held at Permit) and stranded (free, and no pending pod
    could use them there: core/analysis/stranded.py). Bottom: idle fraction (idle /
    paid) and allocation ratio (used / GPUs of Ready nodes)."""
    fig, axes = _columns(runs, 2, "GPUs: allocation and idle fraction")
    for col, run in enumerate(runs):
        data = resample(run.gpus, PLOT_POINTS, axis.end)
        xs = axis.x(data.t)
        top, bottom = axes[0][col], axes[1][col]
        for name, colour in GPU_COLOURS.items():
            top.step(xs, data.columns.get(name, []), where="post", color=colour, label=f"{name} GPUs",
                     linewidth=2.6 if name == "paid" else 1.3, alpha=0.5 if name == "paid" else 1.0)
        paid, ready, used, idle = (data.columns.get(k, []) for k in ("paid", "ready", "used", "idle"))
        bottom.step(xs, [i / p if p else float("nan") for i, p in zip(idle, paid, strict=True)], where="post",
                    color=GPU_COLOURS["idle"], label="idle fraction (idle / paid)")
        bottom.step(xs, [u / r if r else float("nan") for u, r in zip(used, ready, strict=True)], where="post",
                    color=GPU_COLOURS["used"], label="allocation ratio (used / ready)")
        bottom.set_ylim(0, 1.05)
        for ax in (top, bottom):
            _mark_scale_ups(ax, run.scale_ups, axis)
        top.legend(loc="upper left", ncols=3)
        bottom.legend(loc="upper left", ncols=2)
        if not any(paid):
            top.text(0.5, 0.5, "no GPUs in this run", transform=top.transAxes, ha="center", color="#888888")
    _finish(axes, runs, axis, "GPUs")
    axes[1][0].set_ylabel("fraction")
    return fig


def plot_time_to_schedule(runs: Sequence[RunData]) -> Figure:
    """Top: histogram of the seconds from a pod's creation to its binding. Bottom: their CDF over all pods,
    so it ends below 1 by the share never scheduled (said in the legend)."""
    fig, axes = plt.subplots(2, len(runs), figsize=(COLUMN_W * len(runs), 2 * ROW_H + 0.6), sharex=True,
                             sharey="row", squeeze=False, layout="constrained")
    fig.suptitle("Time to schedule (pod creation to binding)", fontweight="bold")
    longest = max((w for run in runs for w in run.waits_s), default=1.0) or 1.0
    bins = [longest * i / 40 for i in range(41)]
    for col, run in enumerate(runs):
        hist, cdf = axes[0][col], axes[1][col]
        total = len(run.waits_s) + run.never_scheduled
        if run.waits_s:
            hist.hist(run.waits_s, bins=bins, color="#1f77b4", alpha=0.85, label=f"{len(run.waits_s)} pods bound")
            xs = [0.0, *run.waits_s, longest]
            ys = [0.0, *(i / total for i in range(1, len(run.waits_s) + 1)), len(run.waits_s) / total]
            cdf.step(xs, ys, where="post", color="#1f77b4", label="share of all pods bound within x")
        else:
            hist.text(0.5, 0.5, "no pod was bound", transform=hist.transAxes, ha="center", color="#888888")
        if run.never_scheduled:
            cdf.axhline(len(run.waits_s) / total, color="#d62728", linestyle="--",
                        label=f"{run.never_scheduled} of {total} pods never scheduled")
        hist.set_title(run.label())
        if col == 0:
            hist.set_ylabel("pods")
            cdf.set_ylabel("share of pods")
        cdf.set_xlabel("seconds from creation to binding")
        cdf.set_ylim(0, 1.02)
        cdf.set_xlim(0, longest)
        for ax in (hist, cdf):
            ax.grid(alpha=0.25)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="lower right" if ax is cdf else "upper right")
    return fig


def plot_scale_ups(runs: Sequence[RunData], axis: TimeAxis) -> Figure:
    """Each scale-up decision at its time, one lane per node group; the marker's size is the nodes asked,
    crosses are the cloud's refusals (ScaleUpFailed)."""
    groups = sorted({u.group for run in runs for u in (*run.scale_ups, *run.scale_up_failures)})
    lane = {g: i for i, g in enumerate(groups)}
    fig, axes = plt.subplots(1, len(runs), figsize=(COLUMN_W * len(runs), 0.6 + max(1.6, 0.45 * len(groups) + 1)),
                             sharex=True, sharey=True, squeeze=False, layout="constrained")
    fig.suptitle("Scale-up decisions", fontweight="bold")
    for col, run in enumerate(runs):
        ax = axes[0][col]
        if run.scale_ups:
            ax.scatter(axis.x([u.t_s for u in run.scale_ups]), [lane[u.group] for u in run.scale_ups],
                       s=[12 + 10 * max(u.delta, 0) for u in run.scale_ups], color=SCALE_UP_COLOUR, alpha=0.6,
                       label=f"{len(run.scale_ups)} scale-ups (size: nodes asked)")
        if run.scale_up_failures:
            ax.scatter(axis.x([f.t_s for f in run.scale_up_failures]), [lane[f.group] for f in run.scale_up_failures],
                       marker="x", color=FAILED_COLOUR, label=f"{len(run.scale_up_failures)} refused by the cloud")
        if not groups:
            ax.text(0.5, 0.5, "no scale-up in this run", transform=ax.transAxes, ha="center", color="#888888")
        else:
            ax.legend(loc="upper right")
        ax.set_title(run.label())
        ax.set_xlabel(axis.label())
        ax.set_xlim(0, axis.end / axis.div)
        ax.grid(alpha=0.25)
    axes[0][0].set_yticks(range(len(groups)), [g or "(no group)" for g in groups])
    axes[0][0].set_ylim(-0.7, max(len(groups) - 0.3, 0.7))
    return fig


def figures(runs: Sequence[RunData]) -> list[tuple[str, str, Figure]]:
    """(name, title, figure) of every plot, in PLOTS order."""
    axis = TimeAxis(max(run.end_s for run in runs))
    made = {
        "pending": plot_pending(runs, axis),
        "nodes": plot_nodes(runs, axis),
        "gpus": plot_gpus(runs, axis),
        "time_to_schedule": plot_time_to_schedule(runs),
        "scale_ups": plot_scale_ups(runs, axis),
    }
    return [(name, title, made[name]) for name, title in PLOTS]


def svg(fig: Figure) -> str:
    """The figure as an inline <svg> element (no XML prolog or doctype)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def png(fig: Figure, path: str) -> None:
    """Write the figure as a PNG beside `path` and rename it into place (never through a link)."""
    with atomic_output(path, "--png-dir") as fh:
        fig.savefig(fh, format="png", dpi=100, metadata={"Software": None})


def close(fig: Figure) -> None:
    plt.close(fig)

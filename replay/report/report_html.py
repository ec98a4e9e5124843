"""The HTML of `dralab report`: one self-contained file (inline CSS, inline SVG plots; no script, no link,
no font: it opens offline and off a mail attachment).

Every string that comes from a log (file names, scenario, policy, group and reason names inside the table)
goes through html.escape: a log is untrusted input, and a scenario named `<script>` must stay text. The SVG
plots are matplotlib's output, whose text it escapes itself (labels are written as XML text nodes).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from dralab.core.analysis.causes import explain_lines

from .report_data import RunData, headline

CSS = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1400px; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; font-weight: normal; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.warn { background: #fff3cd; border: 1px solid #e0b000; padding: 0.5em 0.8em; margin: 0.8em 0; }
.note { color: #555; font-size: 0.9em; max-width: 70em; }
figure { margin: 0.8em 0; }
figure svg { max-width: 100%; height: auto; }
"""

NOTES = {
    "pending": "Pods waiting to be scheduled, stacked by the reason the scheduler recorded on them "
               "(their PodScheduled condition's cause; gang: waiting at Permit; not-yet-tried: not looked at "
               "yet). Purple ticks: the autoscaler's scale-up decisions; crosses: scale-ups the cloud refused.",
    "nodes": "Nodes of each node group, stacked by state: provisioning (the cloud is making the VM, no Node "
             "yet), not ready (registered, not Ready), ready. Dashed: nodes deleted so far.",
    "gpus": "GPUs as core/analysis/metrics.py counts them (extended */gpu resources and DRA devices). Paid: GPUs of "
            "every registered node; used: GPUs of bound pods; idle: unused GPUs of Ready nodes that no "
            "pending pod could use, plus GPUs held at Permit. The lower plot: idle / paid, and used / GPUs of "
            "Ready nodes.",
    "time_to_schedule": "Seconds from a pod's creation to its binding, for every pod ever bound. The CDF is "
                        "over all pods, so pods never scheduled keep it below 1 (dashed line).",
    "scale_ups": "Every ScaleUpRequested of the autoscaler, one lane per node group, sized by the nodes "
                 "asked; crosses: ScaleUpFailed (out of stock, quota, instance failed).",
}


def _cell(value: Any) -> str:
    if value is None:
        return '<td class="num">-</td>'
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, int | float):
        text = f"{value:g}" if isinstance(value, float) else str(value)
        return f'<td class="num">{html.escape(text)}</td>'
    return f"<td>{html.escape(str(value))}</td>"


def summary_table(runs: Sequence[RunData]) -> str:
    """The headline numbers, one column per run (the comparison table when there are two)."""
    rows = [headline(run) for run in runs]
    head = "".join(f"<th>{html.escape(run.label())}</th>" for run in runs) if len(runs) > 1 else "<th></th>"
    body = []
    for key in rows[0]:
        body.append(f"<tr><th>{html.escape(key)}</th>" + "".join(_cell(row.get(key)) for row in rows) + "</tr>")
    return f'<table class="summary"><tr><th></th>{head}</tr>\n' + "\n".join(body) + "</table>"


def render(runs: Sequence[RunData], plots: Sequence[tuple[str, str, str]], *, title: str | None = None,
           warnings: Sequence[str] = ()) -> str:
    """The page: title, warnings, the summary table, then each plot (name, title, inline SVG) with a note."""
    default = "dralab report: " + " vs ".join(str(run.header.get("scenario") or run.path) for run in runs[:1])
    if len(runs) > 1:
        default += " (" + " vs ".join(run.label() for run in runs) + ")"
    heading = html.escape(title if title is not None else default)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{heading}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{heading}</h1>",
        '<p class="note">Cluster time on every time axis, from the log\'s records (the run ends at its last '
        "record). Figures: " + ", ".join(f'<a href="#{html.escape(name)}">{html.escape(t)}</a>'
                                         for name, t, _ in plots) + ".</p>",
    ]
    parts += [f'<div class="warn">{html.escape(w)}</div>' for w in warnings]
    parts += ["<h2>Summary</h2>", summary_table(runs)]
    for name, plot_title, svg in plots:
        parts.append(f'<h2 id="{html.escape(name)}">{html.escape(plot_title)}</h2>')
        parts.append(f'<p class="note">{html.escape(NOTES.get(name, ""))}</p>')
        parts.append(f'<figure class="plot" data-plot="{html.escape(name)}">{svg}</figure>')
        if name == "pending":  # what each reason seen means, what to do (core/analysis/causes.py)
            seen = [str(k) for run in runs for k, col in run.pending.columns.items() if any(col)]
            parts += [f'<p class="note cause">{html.escape(line)}</p>' for line in explain_lines(seen, indent="")]
    parts.append("</body></html>\n")
    return "\n".join(parts)

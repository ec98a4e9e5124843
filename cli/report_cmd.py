"""`dralab report LOG [LOG2] --html report.html`: a run's story in pictures (issue 9).

One self-contained HTML file (inline SVG, no network needed to open it) with the summary table and five
plots over cluster time: pending pods by reason, nodes by group and state, GPU allocation and idle
fraction, the time-to-schedule distribution, and the autoscaler's scale-ups; with `--png-dir` each plot
also as DIR/NAME.png. With two logs (e.g. the same scenario under `--autoscaler count` and `dra`) the
runs are drawn side by side on the same axes. See docs/report.md.

The data comes from one fold per log (replay/report/report_data.py), the figures from replay/report/report_plots.py,
the page from replay/report/report_html.py. stdout gets one line, where the report was written (`-o json`: one
object naming the files); warnings go to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .inputs import InputError, add_output_format, output_dir, output_file, reading, resolve_output, stream_log_file


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="an HTML report (and PNG plots) of a run's log, or two side by side")
    p.add_argument("logs", nargs="+", metavar="LOG", help="one .dralog file, or two of the same inputs to compare")
    p.add_argument("--html", metavar="FILE",
                   help="the HTML file to write (self-contained: opens with no network)")
    add_output_format(p, legacy_file="--html")
    p.add_argument("--png-dir", metavar="DIR", help="also write each plot as DIR/NAME.png (created if missing)")
    p.add_argument("--title", metavar="TEXT", help="the report's title (default: from the scenario and policies)")
    p.add_argument("--log-format", choices=["console", "json"], default="console")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning")


def _load(path: str, warnings: list[str]) -> Any:
    """One log's report data, or InputError naming the file (unreadable, undecodable, or damaged with
    nothing intact). A damaged log with an intact prefix (a recording cut short) is drawn up to the
    damage, and said so in `warnings`."""
    from dralab.replay.report.report_data import extract

    log = stream_log_file(path)  # one pass, a block at a time: memory is the report's series, not the log
    with reading(path):
        data = extract(path, log.header, log.records())
    if log.damage:
        data.damage = log.damage  # carried no further than its last record (report_data.align)
        if not log.count:
            raise InputError(f"{path}: damaged log, nothing intact: {log.damage}")
        note = f"{path}: damaged log, drawn up to the damage ({log.count} records): {log.damage}"
        warnings.append(note)
        sys.stderr.write(f"dralab: warning: {note}\n")
    return data


def _make_dir(path: str) -> None:
    from dralab.replay.logs.output_files import OutputPathError, make_dir

    try:
        make_dir(path, "--png-dir")
    except OutputPathError as exc:
        raise InputError(str(exc)) from None


def _write(path: str, text: str) -> None:
    from dralab.replay.logs.output_files import atomic_output

    try:
        with atomic_output(path, "--html", text=True) as f:
            f.write(text)
    except OSError as exc:
        raise InputError(f"--html: {path}: cannot write the report: {exc.strerror or exc}") from None


def cmd_report(args: argparse.Namespace) -> int:
    if len(args.logs) > 2:
        raise InputError(f"report: at most two logs (one run, or two to compare), got {len(args.logs)}: "
                         + ", ".join(args.logs))
    resolve_output(args, file_attr="html", file_option="--html")
    if not args.html:
        raise InputError("--html: name the HTML file to write (e.g. --html report.html)")
    output_file(args.html, "--html")
    output_dir(args.png_dir, "--png-dir")
    warnings: list[str] = []
    runs = [_load(path, warnings) for path in args.logs]

    from dralab.replay.report import report_html, report_plots
    from dralab.replay.report.report_data import align, input_mismatch, span_mismatch

    mismatch = input_mismatch(runs)
    if mismatch:
        warnings.append(mismatch + " (drawn side by side anyway: compare with care)")
        sys.stderr.write(f"dralab: warning: {mismatch}\n")
    warnings += [f"{run.path}: the log has no records" for run in runs if not run.records]
    align(runs)  # the same span for every run: the scenario's duration, nodes billed until then (issue 22)
    span = span_mismatch(runs)
    if span:
        warnings.append(span)
    if args.png_dir:
        _make_dir(args.png_dir)
    plots = []
    pngs: list[str] = []
    for name, title, fig in report_plots.figures(runs):
        try:
            plots.append((name, title, report_plots.svg(fig)))
            if args.png_dir:
                target = os.path.join(args.png_dir, f"{name}.png")
                try:
                    report_plots.png(fig, target)
                except OSError as exc:
                    raise InputError(f"--png-dir: {target}: cannot write the plot: {exc.strerror or exc}") from None
                pngs.append(target)
        finally:
            report_plots.close(fig)
    _write(args.html, report_html.render(runs, plots, title=args.title, warnings=warnings))
    if args.output == "json":
        sys.stdout.write(json.dumps({"html": args.html, "logs": list(args.logs), "plots": [p[0] for p in plots],
                                     "png": pngs, "warnings": warnings}) + "\n")
    else:
        where = f" and {len(plots)} PNGs in {args.png_dir}" if args.png_dir else ""
        sys.stdout.write(f"report written to {args.html}{where}\n")
    return 0


COMMANDS = {"report": cmd_report}

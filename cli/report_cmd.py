"""`dralab report LOG [LOG2] -o report.html`: a run's story in pictures (issue 9).

One self-contained HTML file (inline SVG, no network needed to open it) with the summary table and five
plots over cluster time: pending pods by reason, nodes by group and state, GPU allocation and idle
fraction, the time-to-schedule distribution, and the autoscaler's scale-ups; with `--png-dir` each plot
also as DIR/NAME.png. With two logs (e.g. the same scenario under `--autoscaler count` and `dra`) the
runs are drawn side by side on the same axes. See docs/report.md.

The data comes from one fold per log (replay/report_data.py), the figures from replay/report_plots.py,
the page from replay/report_html.py. stdout gets one line, where the report was written; warnings go to
stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .inputs import InputError, reading, stream_log_file


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="an HTML report (and PNG plots) of a run's log, or two side by side")
    p.add_argument("logs", nargs="+", metavar="LOG", help="one .dralog file, or two of the same inputs to compare")
    p.add_argument("-o", "--output", dest="output", metavar="FILE", required=True,
                   help="the HTML file to write (self-contained: opens with no network)")
    p.add_argument("--png-dir", metavar="DIR", help="also write each plot as DIR/NAME.png (created if missing)")
    p.add_argument("--title", metavar="TEXT", help="the report's title (default: from the scenario and policies)")
    p.add_argument("--log-format", choices=["console", "json"], default="console")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning")


def _check_output(path: str) -> None:
    """Fail before the work, not after it, when `-o` cannot be written."""
    if os.path.isdir(path):
        raise InputError(f"{path}: -o names a directory, not a file")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise InputError(f"{path}: cannot write the report: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise InputError(f"{path}: cannot write the report: permission denied")


def _png_dir(path: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{path}: cannot create the --png-dir directory: {exc.strerror or exc}") from None
    if not os.path.isdir(path) or not os.access(path, os.W_OK):
        raise InputError(f"{path}: --png-dir is not a writable directory")


def _load(path: str, warnings: list[str]) -> Any:
    """One log's report data, or InputError naming the file (unreadable, undecodable, or damaged with
    nothing intact). A damaged log with an intact prefix (a recording cut short) is drawn up to the
    damage, and said so in `warnings`."""
    from dralab.replay.report_data import extract

    log = stream_log_file(path)  # one pass, a block at a time: memory is the report's series, not the log
    with reading(path):
        data = extract(path, log.header, log.records())
    if log.damage:
        if not log.count:
            raise InputError(f"{path}: damaged log, nothing intact: {log.damage}")
        note = f"{path}: damaged log, drawn up to the damage ({log.count} records): {log.damage}"
        warnings.append(note)
        sys.stderr.write(f"dralab: warning: {note}\n")
    return data


def _write(path: str, text: str) -> None:
    tmp = f"{path}.part"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the report: {exc.strerror or exc}") from None


def cmd_report(args: argparse.Namespace) -> int:
    if len(args.logs) > 2:
        raise InputError(f"report: at most two logs (one run, or two to compare), got {len(args.logs)}: "
                         + ", ".join(args.logs))
    _check_output(args.output)
    if args.png_dir:
        _png_dir(args.png_dir)
    warnings: list[str] = []
    runs = [_load(path, warnings) for path in args.logs]

    from dralab.replay import report_html, report_plots
    from dralab.replay.report_data import input_mismatch, span_mismatch

    mismatch = input_mismatch(runs)
    if mismatch:
        warnings.append(mismatch + " (drawn side by side anyway: compare with care)")
        sys.stderr.write(f"dralab: warning: {mismatch}\n")
    warnings += [f"{run.path}: the log has no records" for run in runs if not run.records]
    span = span_mismatch(runs)
    if span:
        warnings.append(span)
    plots = []
    for name, title, fig in report_plots.figures(runs):
        try:
            plots.append((name, title, report_plots.svg(fig)))
            if args.png_dir:
                target = os.path.join(args.png_dir, f"{name}.png")
                try:
                    report_plots.png(fig, target)
                except OSError as exc:
                    raise InputError(f"{target}: cannot write the plot: {exc.strerror or exc}") from None
        finally:
            report_plots.close(fig)
    _write(args.output, report_html.render(runs, plots, title=args.title, warnings=warnings))
    where = f" and {len(plots)} PNGs in {args.png_dir}" if args.png_dir else ""
    sys.stdout.write(f"report written to {args.output}{where}\n")
    return 0


COMMANDS = {"report": cmd_report}

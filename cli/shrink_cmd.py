"""`dralab shrink FILE --until TARGET --log SMALL`: delta-debug a failing run down to the few external inputs
(arrivals, pods, starting nodes, node groups, other scenario records) and the short run that still show
TARGET (an invariant, or an outcome of replay/simulation/outcomes.py such as `double-scale-up`), and write that run's
log. The algorithm is replay/simulation/shrink.py's; this module reads the log, reports progress on stderr and the
summary on stdout. Exit 0 when a smaller failing run was written, 1 when the simulator does not
reproduce the target from the log's inputs, 2 for invalid input (the file, the option, what was wrong).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from .inputs import InputError, add_output_format, output_file, reading, resolve_output, stream_log_file

EXIT_OK, EXIT_FOUND = 0, 1
FORMATS = ("text", "json")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("shrink", help="remove external inputs of a failing run while a target still happens, "
                                      "and write the smallest log found")
    p.add_argument("file", help="a .dralog file (sim or live)")
    p.add_argument("--until", required=True, metavar="TARGET",
                   help="what must still happen: an invariant name or an outcome (double-scale-up, "
                        "scale-up-without-pod, pod-pending); an unknown name lists them all")
    p.add_argument("--log", dest="out", metavar="SMALL",
                   help="write the smallest failing run's log to SMALL (.dralog)")
    add_output_format(p, FORMATS, legacy_file="--log")
    p.add_argument("--summary", choices=FORMATS, default=None,
                   help="the summary's format (an older name of -o, kept for scripts)")
    p.add_argument("--max-trials", type=int, default=2000, metavar="N",
                   help="simulate at most N candidate runs (default 2000)")
    p.add_argument("--timeout", type=float, default=0.0, metavar="SECONDS",
                   help="stop searching after this much wall time and keep the best found (default 0: none)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--log-format", choices=["console", "json"], default="console")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning")


def _records(path: str) -> tuple[dict[str, Any], list[Any]]:
    logf = stream_log_file(path)  # only the external inputs are kept: the decisions pass by
    with reading(path):
        records = [record for _, record in logf.records() if record.source == "scenario"]
    if logf.damage:
        sys.stderr.write(f"dralab: warning: {path}: {logf.damage}; shrinking the intact prefix\n")
    return logf.header, records


def _units(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in counts.items())


def render_text(summary: dict[str, Any]) -> str:
    if not summary["reproduced"]:
        return (f"{summary['file']}: the simulator does not reproduce {summary['target']} from the log's "
                f"{summary['inputs_before']} external inputs ({_units(summary['units_before'])}); nothing shrunk"
                + (f" (the simulation failed: {summary['error']})" if summary.get("error") else ""))
    where = summary["where"]
    lines = [
        f"{summary['target']}: {summary['inputs_before']} -> {summary['inputs_after']} external inputs "
        f"in {summary['trials']} trials ({summary['wall_s']} s, stopped at {summary['stopped']})",
        f"  before: {_units(summary['units_before'])}; {summary['duration_before_s']:g} s",
        f"  after:  {_units(summary['units_after'])}; {summary['duration_after_s']:g} s"
        + (f" (inputs moved {summary['shifted_earlier_s']:g} s earlier)" if summary["shifted_earlier_s"] else ""),
        f"  happens at offset {where['offset']}, t={where['t_ms'] / 1000:g} s of the small log"
        + (" (judged at the end of the run)" if not where["early"] else ""),
    ]
    if summary.get("out"):
        lines.append(f"  wrote {summary['out']} ({summary['records']} records)")
    return "\n".join(lines)


def cmd_shrink(args: argparse.Namespace) -> int:
    from dralab.core.run.config import policies
    from dralab.replay.logs.logfile import make_header, write_log
    from dralab.replay.simulation.outcomes import resolve_target, target_names
    from dralab.replay.simulation.shrink import Shrinker, final_log
    from dralab.replay.simulation.shrink_units import InputsError

    try:
        target = resolve_target(args.until)
    except KeyError:
        raise InputError(f"--until: unknown target {args.until!r}; valid: {', '.join(target_names())}") from None
    if args.max_trials < 1:
        raise InputError(f"--max-trials: must be >= 1, got {args.max_trials}")
    if args.timeout < 0:
        raise InputError(f"--timeout: must be >= 0, got {args.timeout}")
    resolve_output(args, FORMATS, file_attr="out", file_option="--log", alias_attr="summary")
    output_file(args.out, "--log")
    header, records = _records(args.file)
    if not records:
        raise InputError(f"{args.file}: no external inputs (records with source 'scenario') to shrink")
    last = [0.0]

    def progress(p: dict[str, Any]) -> None:
        now = time.monotonic()
        if args.quiet or (now - last[0] < 0.5 and not p["holds"]):
            return
        last[0] = now
        sys.stderr.write(f"shrink: trial {p['trial']} {'holds' if p['holds'] else 'gone '} "
                         f"{_units(p['units'])}, {p['duration_s']:g} s ({p['elapsed_s']} s)\n")

    try:
        shrinker = Shrinker(records, target, max_trials=args.max_trials, timeout_s=args.timeout, progress=progress)
    except InputsError as exc:
        raise InputError(f"{args.file}: {exc}") from None
    result = shrinker.run()
    summary: dict[str, Any] = {"file": args.file, **result.to_json()}
    total = ("arrivals", "nodes", "node_groups", "objects", "other")  # pods are inside arrivals
    summary["inputs_before"] = sum(result.before[k] for k in total)
    summary["inputs_after"] = sum(result.after[k] for k in total)
    if result.reproduced:
        small = final_log(result)
        summary["where"] = {"offset": result.where.offset, "t_ms": result.where.t, "early": target.early}
        summary["records"] = len(small.entries)
        if args.out:
            run = records[0].events[0]
            out_header = make_header(
                scenario=str(header.get("scenario", getattr(run, "scenario", ""))), seed=result.seed,
                policy=header.get("policy") or policies(dict(getattr(run, "config", {}))), mode="sim",
                shrunk_from=Path(args.file).name,
                shrink={"until": target.name, "removed": result.removed, "units_after": result.after,
                        "duration_ms": result.duration_after_ms, "shifted_ms": result.shift_ms,
                        "where": summary["where"]},
            )
            write_log(args.out, out_header, small.entries)
            summary["out"] = args.out
    if args.output == "json":
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        sys.stdout.write(render_text(summary) + "\n")
    return EXIT_OK if result.reproduced else EXIT_FOUND


COMMANDS = {"shrink": cmd_shrink}

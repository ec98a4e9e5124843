"""`dralab check FILE`: every invariant over a recorded log, in one pass (core/checks/log_check.py).

  --invariant NAME        check only this invariant (repeatable; default: all of them)
  --liveness-bound DUR    how long a pod may fit and stay pending (default 10m; 90s, 5m, 1h30m; bare number: s)

Prints a table by invariant (held, or violated with the count and the first offset), then the first
violations with their offset, cluster time and message; `-o json` prints one object instead. Exit 0
when every invariant checked held, 1 when one was violated or the file is damaged (the intact prefix
is checked, and the damage said), 2 for bad input (unreadable file, unknown invariant, bad duration, a
record the checks cannot process, a file that would decompress past its budget) and when no record
could be checked (an empty log, or nothing intact): the report then says "nothing checked" and holds
no invariant as held. The file is read as a stream: memory is a block, not the log.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from .inputs import InputError, reading, stream_log_file

EXIT_OK, EXIT_FOUND, EXIT_NOTHING = 0, 1, 2
SHOWN = 20  # violations listed in the table; the JSON has them all


def add_parser(sub: Any) -> None:
    p = sub.add_parser("check", help="check every invariant over a recorded log (exit 1 if one is violated)")
    p.add_argument("file", help="a .dralog file")
    p.add_argument("--invariant", action="append", metavar="NAME", default=[],
                   help="check only this invariant (repeatable; default all; an unknown name lists them)")
    p.add_argument("--liveness-bound", default="10m", metavar="DURATION",
                   help="how long a pod that could be scheduled may stay pending (default 10m)")
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")
    p.add_argument("--log-format", choices=["console", "json"], default="console")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning")


class _Decoded:
    """The file's records, decoded lazily; stops at the first entry that does not decode (noted)."""

    def __init__(self, logf: Any) -> None:
        self.logf = logf
        self.error: str | None = None

    def __iter__(self) -> Iterator[Any]:
        from dralab.core.log.events import LogDecodeError

        try:
            yield from self.logf.records()
        except LogDecodeError as exc:
            self.error = str(exc)
            for _ in self.logf:  # to the end of the file, for its damage (a stream learns it there)
                pass


def cmd_check(args: argparse.Namespace) -> int:
    from dralab.core.checks.log_check import ALL_INVARIANTS, LogCheckError, check_records, unknown_invariants
    from dralab.core.kube.durations import DurationError, parse_duration

    unknown = unknown_invariants(args.invariant)
    if unknown:
        raise InputError(f"--invariant: unknown {', '.join(unknown)}; valid names: {', '.join(ALL_INVARIANTS)}")
    try:
        bound = parse_duration(args.liveness_bound)
    except DurationError as exc:
        raise InputError(f"--liveness-bound: {exc}") from None
    if bound < 1:
        raise InputError(f"--liveness-bound: must be at least 1ms, got {args.liveness_bound!r}")
    logf = stream_log_file(args.file)
    decoded = _Decoded(logf)
    try:
        with reading(args.file):
            result = check_records(decoded, only=args.invariant or None, liveness_bound_ms=bound)
    except LogCheckError as exc:
        raise InputError(f"{args.file}: {exc}") from None
    damage = logf.damage or decoded.error
    report = {"file": args.file, **result.to_json(), "damage": damage, "checked": result.records}
    report["ok"] = result.ok and damage is None and result.records > 0
    if args.output == "json":
        sys.stdout.write(json.dumps(report) + "\n")
    else:
        sys.stdout.write(render_text(report) + "\n")
    if not result.records:
        sys.stderr.write(f"dralab: error: {args.file}: {_nothing(damage)}\n")
        return EXIT_NOTHING
    return EXIT_OK if report["ok"] else EXIT_FOUND


def _nothing(damage: str | None) -> str:
    """Why a log gave no record to check."""
    return f"nothing checked: damaged log, nothing intact: {damage}" if damage else \
        "nothing checked: the log holds no records"


def render_text(report: dict[str, Any]) -> str:
    """The per-invariant table, then the first violations."""
    if not report["records"]:
        lines = [f"{report['file']}: {_nothing(report['damage'])}"]
    else:
        lines = [f"{report['file']}: {report['records']} records checked"]
        if report["damage"]:
            lines.append(f"damaged: {report['damage']} (only the intact prefix before it was checked)")
    invariants = report["invariants"]
    width = max((len(name) for name in invariants), default=0)
    for name, row in invariants.items():
        status = ("not checked" if row["held"] is None else "held" if row["held"]
                  else f"VIOLATED  {row['violations']}x, first at offset {row['first_offset']}")
        lines.append(f"  {name.ljust(width)}  {status}")
    violations = report["violations"]
    if violations:
        lines.append(f"first violations ({min(len(violations), SHOWN)} of {len(violations)}):")
        for v in violations[:SHOWN]:
            lines.append(f"  offset {v['offset']}  t={v['t'] / 1000:g}s  {v['invariant']}: {v['message']}")
    return "\n".join(lines)


COMMANDS = {"check": cmd_check}

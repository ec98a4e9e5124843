"""`dralab export FILE`: a run's log as JSON lines, for jq, pandas or a notebook (docs/log-format.md#json-lines).

The `.dralog` file is MessagePack in compressed blocks, read through dralab's Python. This prints it as text any
tool reads, one JSON object a line: a `header` line (the export's own `schema` number, and the file's header),
then one `record` line per record (its offset, `t`, the reactor that wrote it as `source`, the `view` offset its
decision was computed on, its idempotency `id`, the record schema `v`, and its events with every field, defaults
included), or with `--events` one `event` line per event; then an `end` line (records and events written, and the
damage if the file has a damaged tail). Lines are written as they are read: memory is one block of the log,
whatever its length (replay/logs/logfile.py LogStream), and a reader can stop early (`| head`).

The line shapes are versioned apart from dralab: `EXPORT_SCHEMA` changes only when a key is removed, renamed or
changes meaning; new keys may appear in any line (readers ignore keys they do not know). Event fields follow the
log's own rules (docs/log-format.md#versioning-rules: fields only added, with defaults), and old records are
upcast by the log's decoder, so an old log exports in today's shapes.

Exit status: 0 done; 1 the log is damaged (its intact prefix was written, the `end` line and a warning say
where it stops); 2 the file cannot be read as a log at all (not a dralog, a decompression bomb, unreadable).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import IO, Any

from .inputs import InputError, reading, stream_log_file

EXPORT_SCHEMA = 1  # docs/log-format.md#json-lines: bump only when a key is removed, renamed or changes meaning
EXIT_OK, EXIT_DAMAGED = 0, 1


def add_parser(sub: Any) -> None:
    p = sub.add_parser("export", help="print a .dralog's records and events as JSON lines (jq, pandas)")
    p.add_argument("file", help="a .dralog file")
    p.add_argument("-o", "--output", choices=["jsonl"], default="jsonl",
                   help="what goes to stdout: jsonl, one JSON object a line (the only format today)")
    p.add_argument("--events", action="store_true",
                   help="one line per event (with its record's offset, t, source and view) instead of one per record")
    p.add_argument("--log-format", choices=["console", "json"], default="console")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning")


def header_line(path: str, header: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "header", "schema": EXPORT_SCHEMA, "file": path, "header": header}


def record_line(offset: int, record: Any) -> dict[str, Any]:
    """A record as its line: where and when it was decided, by whom, on which view, and its events."""
    return {"kind": "record", "offset": offset, "t": record.t, "source": record.source, "view": record.view,
            "id": record.id, "v": record.v, "events": list(record.events)}


def event_lines(offset: int, record: Any) -> Iterator[dict[str, Any]]:
    """A record as one line per event, each carrying its record's context and its place in the record."""
    import msgspec

    for index, event in enumerate(record.events):
        fields = msgspec.to_builtins(event)
        yield {"kind": "event", "offset": offset, "index": index, "t": record.t, "source": record.source,
               "view": record.view, "id": record.id, "type": fields["type"], "event": fields}


class ReaderGone(Exception):
    """stdout's reader went away (`| head`); apart from OSError, which `reading` takes for the log's."""


class _Lines:
    """Writes the lines to `out` (bytes) as they come; msgspec encodes Structs (the events) directly, in their
    declaration order, the tag `type` first."""

    def __init__(self, out: IO[bytes]) -> None:
        import msgspec

        self.out = out
        self.encode = msgspec.json.Encoder().encode

    def write(self, line: dict[str, Any]) -> None:
        try:
            self.out.write(self.encode(line) + b"\n")
        except BrokenPipeError:
            raise ReaderGone from None


def export(path: str, out: IO[bytes], per_event: bool = False) -> dict[str, Any]:
    """Write `path` to `out` as JSON lines; the `end` line's content (records, events, damage) is returned."""
    from dralab.core.log.events import LogDecodeError

    logf = stream_log_file(path)
    lines = _Lines(out)
    lines.write(header_line(path, logf.header))
    records = events = 0
    undecodable: str | None = None
    with reading(path):
        try:
            for offset, record in logf.records():
                if per_event:
                    for line in event_lines(offset, record):
                        lines.write(line)
                else:
                    lines.write(record_line(offset, record))
                records += 1
                events += len(record.events)
        except LogDecodeError as exc:  # what came before it was written: a damaged tail, as check treats it
            undecodable = str(exc)
    end = {"kind": "end", "records": records, "events": events, "damage": logf.damage or undecodable}
    lines.write(end)
    return end


def cmd_export(args: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    try:
        end = export(args.file, out, per_event=args.events)
        out.flush()
    except (ReaderGone, BrokenPipeError):  # the reader stopped (`| head`): not an error; Python kept quiet at exit
        _quiet_stdout()
        return EXIT_OK
    if end["damage"]:
        if not end["records"]:
            raise InputError(f"{args.file}: nothing to export: damaged log, nothing intact: {end['damage']}")
        sys.stderr.write(f"dralab: warning: {args.file}: damaged log, exported its intact prefix "
                         f"({end['records']} records): {end['damage']}\n")
        return EXIT_DAMAGED
    return EXIT_OK


def _quiet_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


COMMANDS = {"export": cmd_export}

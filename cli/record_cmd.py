"""`dralab record`: capture a live run's Redis stream into a `.dralog` file while the run goes on.

Thin: options are checked here, the recording itself is dralab.actors.recorder (its own consumer group,
so the run's trimming waits for it). `--log FILE` is the log file; `-o text|json` the summary's format, as in
every command (an older `-o FILE`, as issue 7 spelled it, is still taken as the file, with a warning).

Exit status: 0 recorded (stopped by --until-idle, --max-entries or SIGINT/SIGTERM), 1 a problem found
(gaps in the recording, or no run appeared on the stream within --wait), 2 invalid input (options, a
stream already trimmed below offset 1, a stream that is not a dralab run, an unwritable FILE), 3 Redis
unreachable (at the start, or for longer than --reconnect mid-recording; what was received is kept).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import sys
from typing import Any

from .bounds import check_redis_url
from .inputs import InputError, add_output_format, output_file, resolve_output

EXIT_OK, EXIT_FOUND, EXIT_UNAVAILABLE = 0, 1, 3  # as in cli.py (2: InputError, raised)
STREAM_NAME = re.compile(r"[A-Za-z0-9._:/-]{1,200}")  # as `dralab run --stream`


def add_parser(sub: Any) -> None:
    p = sub.add_parser("record", help="record a live run's Redis stream into a .dralog file while it runs")
    p.add_argument("--redis", metavar="URL", default=os.environ.get("DRALAB_REDIS_URL") or None,
                   help="Redis URL (default: $DRALAB_REDIS_URL); prefer the variable: a command line is visible "
                        "to others")
    p.add_argument("--stream", required=True, metavar="NAME", help="the run's stream name (`dralab run --stream`)")
    p.add_argument("--log", dest="file", metavar="FILE",
                   help="the .dralog file to write (FILE.part until the recording ends)")
    add_output_format(p, ("text", "json"), legacy_file="--log")
    p.add_argument("--wait", type=float, default=30.0, metavar="SECONDS",
                   help="wait this long for the stream to appear and its first record to arrive (default 30)")
    p.add_argument("--until-idle", type=float, default=10.0, metavar="SECONDS",
                   help="stop once no new entry arrived for this long (default 10; 0: never, stop with a signal)")
    p.add_argument("--max-entries", type=int, default=0, metavar="N", help="stop after N records (default 0: no limit)")
    p.add_argument("--reconnect", type=float, default=30.0, metavar="SECONDS",
                   help="how long to wait for an unreachable Redis mid-recording before giving up (default 30)")
    p.add_argument("--progress-every", type=float, default=5.0, metavar="SECONDS",
                   help="a record.progress log line this often (default 5; 0: none)")
    p.add_argument("--summary", choices=["text", "json"], default=None,
                   help="the summary's format (an older name of -o, kept for scripts)")
    p.add_argument("--log-format", choices=["console", "json"], default="console",
                   help="stderr log lines: readable (default) or one JSON object per line")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info")


def _check(args: argparse.Namespace) -> None:
    if not args.redis:
        raise InputError("--redis: no Redis URL given (and DRALAB_REDIS_URL is not set); record reads a live "
                         "run's stream on Redis")
    check_redis_url(args.redis)
    if not STREAM_NAME.fullmatch(args.stream) or "{" in args.stream:
        raise InputError(f"--stream: {args.stream!r} is not a valid stream name "
                         "(letters, digits and . _ : - /, 1 to 200 characters)")
    for name, value in (("--wait", args.wait), ("--until-idle", args.until_idle), ("--reconnect", args.reconnect),
                        ("--progress-every", args.progress_every), ("--max-entries", args.max_entries)):
        if value < 0:
            raise InputError(f"{name}: must be >= 0, got {value}")
    resolve_output(args, file_attr="file", file_option="--log", alias_attr="summary")
    if not args.file:
        raise InputError("--log: name the .dralog file to write (e.g. --log live.dralog)")
    output_file(args.file, "--log")


def render_text(summary: dict[str, Any]) -> str:
    why = {"idle": "no new entry for --until-idle", "signal": "stopped by a signal", "max_entries": "--max-entries",
           "unavailable": "Redis unreachable", "no_run": "no run appeared within --wait"}.get(summary["stopped"], "")
    if not summary["file"]:
        return f"nothing recorded from stream {summary['stream']} ({why})"
    text = (f"recorded {summary['records']} records (offsets {summary['first_offset']} to {summary['last_offset']}) "
            f"of stream {summary['stream']} to {summary['file']}; stopped: {summary['stopped']} ({why})")
    if summary["gaps"]:
        text += "; gaps (offsets gone from the stream): " + ", ".join(f"{a}-{b}" for a, b in summary["gaps"])
    return text


def cmd_record(args: argparse.Namespace) -> int:
    import structlog

    from dralab.actors.bus import BusUnavailable
    from dralab.actors.recorder import RecordError, RecordOptions, header_fields, record
    from dralab.replay.logs.logfile import LogWriter, make_header

    _check(args)
    options = RecordOptions(stream=args.stream, path=args.file, wait_s=args.wait, until_idle_s=args.until_idle,
                            max_entries=args.max_entries, progress_every_s=args.progress_every,
                            reconnect_s=args.reconnect)

    def open_writer(path: str, first: Any) -> tuple[Any, dict[str, Any]]:
        header = make_header(**header_fields(first))
        return LogWriter(path, header), header

    async def main() -> Any:
        loop = asyncio.get_running_loop()

        def hook(recorder: Any) -> None:  # SIGTERM (docker compose stop) or Ctrl-C: close the file, keep all
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, recorder.stop)

        try:
            return await record(args.redis, options, open_writer, hook)
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)

    try:
        result = asyncio.run(main())
    except BusUnavailable as exc:
        sys.stderr.write(f"dralab: error: {exc}\n")
        return EXIT_UNAVAILABLE
    except RecordError as exc:
        raise InputError(str(exc)) from None
    except OSError as exc:  # the file cannot be written
        raise InputError(f"--log: {args.file}: cannot write: {exc.strerror or exc}") from None
    summary = result.to_json()
    structlog.get_logger("dralab.record").info(
        "record.done", file=result.file, records=result.records, stopped=result.stopped, gaps=len(result.gaps))
    if args.output == "json":
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        sys.stdout.write(render_text(summary) + "\n")
    sys.stdout.flush()
    if result.error:
        sys.stderr.write(f"dralab: error: {result.error}\n")
        return EXIT_UNAVAILABLE
    if result.gaps or result.stopped == "no_run":
        return EXIT_FOUND
    return EXIT_OK


COMMANDS = {"record": cmd_record}

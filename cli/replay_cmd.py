"""`dralab replay FILE`: check, inspect and re-run a recorded log.

  --verify          recompute every decision from the view it was made on; exit 1 at the first divergence
    --jobs N        split the log at its snapshots and check the parts in N processes (same report)
    --ray ADDRESS   check the parts as Ray tasks on that cluster ("local": start one on this machine)
  --at OFFSET|TIME  the cluster state at that point (a whole number is an offset; 90s, 5m, 1h30m a time)
  --explain POD     every event and decision about one pod, with the reasons
  --with KEY=VALUE  the recorded external inputs through reactors with a changed setting, in the
                    simulator; the recorded, baseline and changed runs' metrics side by side

Exit status: 0 done (and, with --verify, no divergence); 1 a divergence or a damaged log (--verify), a
pod that is not in the log (--explain); 2 invalid input (file, option), said with what and where; 3 the
Ray cluster of --ray cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import structlog

from .inputs import InputError, output_file, read_log_file, reading, stream_log_file

EXIT_OK, EXIT_FOUND, EXIT_UNAVAILABLE = 0, 1, 3
log = structlog.get_logger("dralab")


def add_parser(sub: Any, common: Any) -> None:
    rep = sub.add_parser("replay", help="verify, inspect (time travel, a pod's story) or re-run (what-if) a log")
    rep.add_argument("file", help="a .dralog file")
    rep.add_argument("--verify", action="store_true",
                     help="recompute every decision from its view; exit 1 at the first divergence")
    rep.add_argument("--jobs", type=int, default=1, metavar="N",
                     help="--verify: split the log at its snapshots and check the parts in N processes "
                          "(default 1: one pass; the report is the same)")
    rep.add_argument("--ray", metavar="ADDRESS", help="--verify: check the parts as Ray tasks on this cluster "
                     "(local: start one on this machine); its workers must read the log at the same path")
    rep.add_argument("--at", metavar="OFFSET|TIME",
                     help="print the cluster state at a log offset (a whole number) or a cluster time (90s, 5m)")
    rep.add_argument("--explain", metavar="POD", help="tell the story of one pod (name, ns/name or pod/ns/name)")
    rep.add_argument("--with", dest="settings", action="append", metavar="KEY=VALUE", default=[],
                     help="what-if: re-run the recorded inputs with a reactor setting changed, e.g. "
                          "autoscaler.policy=dra (repeatable)")
    rep.add_argument("--log", dest="log_file", metavar="FILE", help="with --with: write the what-if run's log")
    common(rep)


def _emit(args: argparse.Namespace, out: dict[str, Any], text: str) -> None:
    sys.stdout.write((json.dumps(out) if args.output == "json" else text) + "\n")
    sys.stdout.flush()


def _open(path: str) -> Any:
    logf = read_log_file(path)
    if logf.damage:
        log.warning("log.damaged", file=path, damage=logf.damage, intact_entries=len(logf.entries))
    return logf


def _damaged(logf: Any, path: str) -> None:
    """After a pass over a stream, the warning `_open` gives a whole file at once."""
    if logf.damage:
        log.warning("log.damaged", file=path, damage=logf.damage, intact_entries=logf.count)


def cmd_replay(args: argparse.Namespace) -> int:
    chosen = [name for name, on in (("--verify", args.verify), ("--at", args.at is not None),
                                    ("--explain", args.explain is not None), ("--with", bool(args.settings))) if on]
    if not chosen:
        raise InputError("replay: nothing to do; say --verify, --at OFFSET|TIME, --explain POD or --with KEY=VALUE")
    if len(chosen) > 1:
        raise InputError(f"replay: one of --verify, --at, --explain, --with at a time (got {' and '.join(chosen)})")
    if args.log_file and not args.settings:
        raise InputError("replay: --log goes with --with (it writes the what-if run's log)")
    output_file(args.log_file, "--log")
    if args.jobs < 1:
        raise InputError(f"replay: --jobs must be >= 1, got {args.jobs}")
    if (args.jobs > 1 or args.ray) and not args.verify:
        raise InputError("replay: --jobs and --ray go with --verify")
    if args.at is not None:
        return _at(args)
    if args.verify:  # these two read the file as a stream: memory is a block (and a window), not the log
        return _verify(args, stream_log_file(args.file))
    if args.explain is not None:
        return _explain(args, stream_log_file(args.file))
    return _whatif(args, _open(args.file))


def _verify(args: argparse.Namespace, logf: Any) -> int:
    from dralab.core.checks.invariants import check
    from dralab.replay.simulation.verify import verify

    started = time.perf_counter()
    with reading(args.file):
        if args.jobs > 1 or args.ray:
            from dralab.replay.simulation.verify_parts import verify_parallel

            if args.ray:  # a local Ray on loopback with its own token, or the cluster at the address, probed first
                from dralab.actors.live_runtime import ServiceUnavailable, ray_runtime

                try:
                    with ray_runtime(None if args.ray == "local" else args.ray, args.log_format):
                        result, why = verify_parallel(args.file, args.jobs, "connected", stream=logf)
                except ServiceUnavailable as exc:
                    sys.stderr.write(f"dralab: replay --verify --ray: {exc}\n")
                    return EXIT_UNAVAILABLE
            else:
                result, why = verify_parallel(args.file, args.jobs, None, stream=logf)
            if why is None:  # split: no damage (a damaged log is checked in one pass); the count from the blocks
                logf.count = result.records or 0
            else:
                log.info("verify.sequential", file=args.file, reason=why)
        else:
            result = verify(logf)
    _damaged(logf, args.file)  # verify's first pass reads the whole file: count and damage are the file's
    log.debug("verify.done", decisions=result.checked, wall_s=round(time.perf_counter() - started, 3))
    ok = result.ok and not logf.damage
    records = logf.count
    out: dict[str, Any] = {
        "file": args.file, "header": logf.header, "ok": ok, "decisions_checked": result.checked,
        "by_source": result.sources, "records": records, "damage": logf.damage,
        "invariant_violations": [v.to_json() for v in check(result.state)],
        "divergence": result.divergence.to_json() if result.divergence else None,
    }
    if logf.damage and not records:
        text = f"damaged log: {logf.damage}; no intact record before it, nothing to verify"
    elif result.divergence:
        text = result.divergence.render()
    elif logf.damage:
        text = (f"damaged log: {logf.damage}; the intact prefix ({records} records, "
                f"{result.checked} decisions) verifies")
    else:
        text = (f"verified {result.checked} decisions in {records} records "
                f"({', '.join(f'{k}: {v}' for k, v in sorted(result.sources.items()))}): no divergence")
    _emit(args, out, text)
    return EXIT_OK if ok else EXIT_FOUND


SEEN_WINDOW = 50_000  # records before the point searched for each reactor's latest decision


def _at(args: argparse.Namespace) -> int:
    """Seeks instead of reading the whole file: the nearest snapshot at or before the point, the tail
    folded from there (replay/logs/logfile_reader.py), and a window of the records before the point for what
    each reactor had seen."""
    from dralab.core.log.events import decode_record
    from dralab.replay.logs.logfile import LogFileError
    from dralab.replay.logs.logfile_reader import open_log
    from dralab.replay.simulation.timetravel import PointError, describe, parse_point, reactors_seen, render

    try:
        point = parse_point(args.at)
    except PointError as exc:
        raise InputError(str(exc)) from None
    with reading(args.file):
        reader = open_log(args.file)
    with reader:
        last = reader.last_offset
        if point.kind == "offset":
            if point.value > last:
                raise InputError(f"--at {point.value}: the log ends at offset {last}")
            offset = point.value
        else:
            try:
                offset = reader.offset_at_time(point.value) or 0
            except LogFileError as exc:
                raise InputError(str(exc)) from None
        with reading(args.file):  # a record that does not decode, a body past the file's budget: exit 2
            state = reader.state_at(offset)
            window = []
            for at, payload in reader.entries_from(max(1, offset - SEEN_WINDOW + 1)):
                if at > offset:
                    break
                window.append((at, decode_record(payload, at)))
        if reader.damage:
            log.warning("log.damaged", file=args.file, damage=reader.damage)
    desc = describe(state, reactors_seen(window))
    desc.update({"file": args.file, "at": {"kind": point.kind, "value": point.value}, "log_end": last})
    _emit(args, desc, render(desc))
    return EXIT_OK


def _explain(args: argparse.Namespace, logf: Any) -> int:
    from dralab.replay.simulation.timetravel import explain, render_story

    with reading(args.file):
        result = explain(logf.records(), args.explain)
    _damaged(logf, args.file)
    result["file"] = args.file
    if not result["found"]:
        _emit(args, result, f"pod {result['pod']}: not in {args.file}")
        return EXIT_FOUND
    _emit(args, result, render_story(result))
    return EXIT_OK


def _whatif(args: argparse.Namespace, logf: Any) -> int:
    from dralab.core.log.events import LogDecodeError
    from dralab.replay.logs.logfile import make_header, write_log
    from dralab.replay.simulation.whatif_run import SettingError, render_table, run_whatif, side_by_side

    started = time.perf_counter()
    try:
        result = run_whatif(logf.entries, list(args.settings))
    except SettingError as exc:
        raise InputError(f"{args.file}: {exc}") from None
    except LogDecodeError as exc:
        raise InputError(f"{args.file}: {exc}") from None
    label = ", ".join(f"{k}={v}" for k, v in result.settings.items())
    if args.log_file:
        header = dict(logf.header)
        header = make_header(scenario=str(header.get("scenario", "")), seed=int(header.get("seed", 0)),
                             policy={"autoscaler": str(result.whatif["policy"]["autoscaler"])}, mode="sim",
                             whatif_of=args.file, whatif=result.settings)
        write_log(args.log_file, header, result.whatif_entries)
        log.info("log.written", file=args.log_file, records=len(result.whatif_entries))
    out = {"file": args.file, "with": result.settings, "baseline_identical": result.baseline_identical,
           "rows": [{k: v for k, v in r.items() if k != "format"} for r in side_by_side(result)],
           "runs": {"recorded": result.recorded, "baseline": result.baseline, "whatif": result.whatif},
           "wall_s": round(time.perf_counter() - started, 3)}
    _emit(args, out, render_table(result, label))
    return EXIT_OK


COMMANDS = {"replay": cmd_replay}

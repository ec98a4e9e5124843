"""The `dralab` command: a thin front end over dralab.replay (sim, verify) and dralab.actors (run).

Exit status: 0 success; 1 the run or check found a problem (a divergence, a damaged log, a run
that timed out or was interrupted, a livelocked simulation); 2 invalid input (scenario, log file,
options), said with the file and the field; 3 a service could not be reached (Redis, Ray).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import structlog

from dralab.actors.logs import configure
from dralab.replay.logs.output_files import OutputPathError

from . import (
    __version__,
    allocate_cmd,
    audit_cmd,
    chaos_cmd,
    check_cmd,
    export_cmd,
    record_cmd,
    replay_cmd,
    report_cmd,
    shrink_cmd,
    trace_cmd,
    whatif_cmd,
)
from .bounds import check_redis_url, seed_arg
from .inputs import InputError, add_profile_flags, load_scenario_input, output_file, profile_flags

EXIT_OK, EXIT_FOUND, EXIT_INPUT, EXIT_UNAVAILABLE = 0, 1, 2, 3
STREAM_NAME = re.compile(r"[A-Za-z0-9._:/-]{1,200}")
log = structlog.get_logger("dralab")


def _policy_override(p: argparse.ArgumentParser) -> None:
    p.add_argument("--autoscaler", choices=["count", "dra", "atomic"], metavar="POLICY",
                   help="override the scenario's spec.policy.autoscaler: count, dra or atomic")
    add_profile_flags(p)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", choices=["text", "json"], default="text",
                   help="summary format on stdout (json: one object; logs stay on stderr)")
    p.add_argument("--log-format", choices=["console", "json"], default="console",
                   help="stderr log lines: readable (default) or one JSON object per line")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dralab",
        description="An emulator of the Kubernetes control plane for accelerator (DRA) workloads: "
        "scheduler, autoscaler and node lifecycle over one event log, with exact replay.",
        epilog="Exit status: 0 ok, 1 a problem found, 2 invalid input, 3 Redis or Ray unreachable. "
        "See docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"dralab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sim = sub.add_parser("sim", help="run a scenario in one process on virtual time (deterministic)")
    sim.add_argument("scenario", help="scenario YAML file")
    sim.add_argument("--seed", type=seed_arg, help="random seed, 0 to 2^63-1 (default: the scenario's, else 0)")
    sim.add_argument("--log", dest="log_file", metavar="FILE", help="write the run's log to FILE (.dralog)")
    _policy_override(sim)
    _common(sim)

    run = sub.add_parser("run", help="run a scenario live: reactors as Ray actors, events on Redis")
    run.add_argument("scenario", help="scenario YAML file")
    run.add_argument("--seed", type=seed_arg, help="random seed, 0 to 2^63-1 (default: the scenario's, else 0)")
    run.add_argument("--log", dest="log_file", metavar="FILE", help="write the run's log to FILE (.dralog)")
    run.add_argument("--ray", metavar="ADDRESS", help="join this Ray cluster (default: start Ray locally)")
    run.add_argument("--redis", metavar="URL", default=os.environ.get("DRALAB_REDIS_URL") or None,
                     help="Redis URL (default: $DRALAB_REDIS_URL, else a private redis-server if on PATH, "
                          "else the embedded bus); prefer the variable: a command line is visible to others")
    run.add_argument("--stream", metavar="NAME", help="Redis stream name (default: dralab:<scenario>:<run id>)")
    run.add_argument("--speed", type=float, default=20.0,
                     help="cluster seconds per wall second (default 20: 10 min of cluster time in 30 s)")
    run.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                     help="give up after this much wall time (default 600)")
    run.add_argument("--embedded", action="store_true", help="use the embedded bus even if redis-server exists")
    run.add_argument("--trim-every", type=float, default=5.0, metavar="SECONDS",
                     help="trim the stream this often, below what every consumer group, the recorder and every "
                          "reactor's snapshot no longer need (default 5; 0: never, Redis keeps the whole run)")
    run.add_argument("--snapshot-every", type=int, default=5000, metavar="ENTRIES",
                     help="each reactor actor saves its view as a snapshot after this many entries (also every 10 s "
                          "while entries arrive; never twice within 2 s) (default 5000; 0: never, a restart "
                          "refolds the log and the stream is never trimmed)")
    run.add_argument("--driver-shards", type=int, default=1, metavar="N",
                     help="device-driver actors, each hosting the drivers of a share of the nodes (default 1)")
    run.add_argument("--hosts", type=int, default=0, metavar="N",
                     help="deal the reactors into N host actors, each folding the log once for all its reactors "
                          "(default 0: one actor per reactor); one per core is a good start")
    run.add_argument("--metrics-port", type=int, default=0, metavar="PORT",
                     help="serve Prometheus metrics at http://HOST:PORT/metrics while the run goes on "
                          "(default 0: off); see docs/deploy.md#observability")
    run.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                     help="address the metrics endpoint binds to (default 127.0.0.1: this machine only)")
    run.add_argument("--progress-every", type=float, default=2.0, metavar="SECONDS",
                     help="progress line on stderr this often: in place on a terminal, else a run.progress log "
                          "line (default 2; 0: none)")
    _policy_override(run)
    _common(run)

    replay_cmd.add_parser(sub, _common)

    allocate_cmd.add_parser(sub)
    audit_cmd.add_parsers(sub)
    whatif_cmd.add_parser(sub)
    shrink_cmd.add_parser(sub)
    check_cmd.add_parser(sub)
    record_cmd.add_parser(sub)
    chaos_cmd.add_parser(sub)
    trace_cmd.add_parser(sub)
    report_cmd.add_parser(sub)
    export_cmd.add_parser(sub)
    return parser


def _emit(args: argparse.Namespace, summary: dict[str, Any], text: str) -> None:
    if args.output == "json":
        sys.stdout.write(json.dumps(summary, sort_keys=False) + "\n")
    else:
        sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _kubernetes(scenario: Any) -> dict[str, Any]:
    """The summary's `kubernetes`: the release emulated and the gates not at their default."""
    from dralab.core.kube.kueue import broker_config
    from dralab.core.kube.versions import summary
    from dralab.core.scenario.model import effective_profile

    return summary(effective_profile(scenario), kueue=broker_config(scenario.objects) is not None)


def _seed(args: argparse.Namespace, scenario: Any) -> int:
    if args.seed is not None:
        return int(args.seed)
    return int(scenario.seed) if scenario.seed is not None else 0


def cmd_sim(args: argparse.Namespace) -> int:
    from dralab.core.analysis.metrics import metrics_from_entries
    from dralab.core.analysis.summary import render_text, summarize
    from dralab.core.run.config import policies, run_config
    from dralab.replay.logs.logfile import make_header, write_log
    from dralab.replay.simulation.sim import Simulator

    scenario = load_scenario_input(args.scenario, args.autoscaler, profile_flags(args))
    output_file(args.log_file, "--log")
    seed = _seed(args, scenario)
    log.info("sim.start", scenario=scenario.name, seed=seed, duration_s=scenario.duration_ms / 1000)
    from dralab.replay.simulation.sim import SimulationStuck

    try:
        result = Simulator(scenario, seed).run()
    except SimulationStuck as exc:
        sys.stderr.write(f"dralab: error: {scenario.source}: {exc}\n")
        return EXIT_FOUND
    if args.log_file:
        header = make_header(scenario=scenario.name, seed=seed, policy=policies(run_config(scenario)), mode="sim")
        write_log(args.log_file, header, result.entries)
        log.info("log.written", file=args.log_file, records=len(result.entries))
    # Metrics over the log up to the scenario's end: nodes are paid until then even when nothing happens.
    metrics = metrics_from_entries(result.entries, end_ms=scenario.duration_ms)
    summary = summarize(result.state, result.violations, seed=seed, metrics=metrics, conflicts=result.conflicts)
    summary["mode"] = "sim"
    summary["kubernetes"] = _kubernetes(scenario)
    _emit(args, summary, render_text(summary))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from dralab.actors.gc_tuning import TENURE_EVERY
    from dralab.actors.live import LiveOptions, run_live
    from dralab.actors.live_runtime import BadRedisURL, ServiceUnavailable, StreamInUse
    from dralab.actors.reactor_loop import SnapshotPolicy
    from dralab.core.analysis.metrics import metrics_from_entries
    from dralab.core.analysis.summary import render_text, summarize

    scenario = load_scenario_input(args.scenario, args.autoscaler, profile_flags(args))
    output_file(args.log_file, "--log")  # before anything starts: the file is made once Redis and Ray answer
    _check_run_options(args)
    options = LiveOptions(
        seed=_seed(args, scenario), ray_address=args.ray, redis_url=args.redis, stream=args.stream,
        speed=args.speed, timeout_s=args.timeout, embedded=args.embedded, log_file=args.log_file,
        log_format=args.log_format, trim_every_s=args.trim_every, drivers_shards=args.driver_shards,
        snapshots=SnapshotPolicy(every=args.snapshot_every), metrics_port=args.metrics_port,
        metrics_host=args.metrics_host, progress_every_s=args.progress_every, hosts=args.hosts,
        gc_tenure_every=TENURE_EVERY,
    )
    sink = _run_log(args, scenario, options.seed)
    try:
        result = run_live(scenario, options, sink)
    except (StreamInUse, BadRedisURL) as exc:
        raise InputError(str(exc)) from None
    except ServiceUnavailable as exc:
        _failed(str(exc), sink)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:  # before the run's own handler was in place, or a second Ctrl-C
        _failed("interrupted", sink)
        raise
    except Exception as exc:  # the run failed inside: what was recorded is kept, said in one line
        from dralab.actors.log_sink import SinkError

        if isinstance(exc, SinkError) and sink is not None and not sink.opened:
            raise InputError(str(exc)) from None  # the file could not even be made: invalid input
        log.debug("run.failed", exc_info=True)
        _failed(f"the run failed: {type(exc).__name__}: {exc}", sink)
        return EXIT_FOUND
    finally:
        if sink is not None:
            sink.close()  # already closed by the run on every ending it saw; this covers the rest
    if sink is not None:
        log.info("log.written", file=args.log_file, records=sink.records)
    # A completed run (past its duration, or settled: nothing would change any more) is measured up to the
    # scenario's end, as sim measures it; an interrupted or timed-out one up to its last record.
    metrics = metrics_from_entries(result.entries, end_ms=scenario.duration_ms if result.completed else None)
    summary = summarize(result.state, result.violations, seed=options.seed, metrics=metrics,
                        conflicts=_conflicts(result.extra))
    summary.update(result.extra)
    summary["kubernetes"] = _kubernetes(scenario)
    _emit(args, summary, render_text(summary))
    if result.error:  # the bus went away mid-run: what was recorded is kept (--log), exit 3
        _failed(result.error, sink)
        return EXIT_UNAVAILABLE
    if not result.completed:
        why = "interrupted" if result.extra.get("interrupted") else f"timed out after --timeout {args.timeout:g}s"
        _failed(f"the run {why}", sink)
        return EXIT_FOUND
    if sink is not None and sink.error:
        _failed("the run completed but its log could not be finished", sink)
        return EXIT_FOUND
    return EXIT_OK


def _conflicts(extra: dict[str, Any]) -> int:
    """A live run's conflicts: the appends its actors saw refused (actors/reactor_loop.py counts them)."""
    actors = extra.get("actors") or {}
    return sum(int(s.get("conflicts") or 0) for s in actors.values() if isinstance(s, dict))


def _check_run_options(args: argparse.Namespace) -> None:
    """`dralab run`'s numeric and name options, before anything starts (exit 2, naming the option)."""
    check_redis_url(args.redis)
    if args.speed <= 0:
        raise InputError(f"--speed: must be > 0, got {args.speed}")
    if args.trim_every < 0:
        raise InputError(f"--trim-every: must be >= 0, got {args.trim_every}")
    if args.driver_shards < 1:
        raise InputError(f"--driver-shards: must be >= 1, got {args.driver_shards}")
    if args.hosts < 0:
        raise InputError(f"--hosts: must be >= 0, got {args.hosts}")
    if args.snapshot_every < 0:
        raise InputError(f"--snapshot-every: must be >= 0, got {args.snapshot_every}")
    if not 0 <= args.metrics_port <= 65535:
        raise InputError(f"--metrics-port: must be 0 (off) or a port from 1 to 65535, got {args.metrics_port}")
    if args.progress_every < 0:
        raise InputError(f"--progress-every: must be >= 0, got {args.progress_every}")
    if args.stream is not None and not STREAM_NAME.fullmatch(args.stream):
        raise InputError(f"--stream: {args.stream!r} is not a valid stream name "
                         "(letters, digits and . _ : - /, 1 to 200 characters)")


def _run_log(args: argparse.Namespace, scenario: Any, seed: int) -> Any:
    """The run's `--log` file as a sink the driver writes each record to as it records it (None without
    --log). The file is made once Redis and Ray answer, before the run starts (actors/live.py)."""
    if not args.log_file:
        return None
    from dralab.actors.log_sink import RecordSink
    from dralab.core.run.config import policies, run_config
    from dralab.replay.logs.logfile import LogWriter, make_header

    header = make_header(scenario=scenario.name, seed=seed, policy=policies(run_config(scenario)),
                         mode="cluster" if args.ray else "local")
    return RecordSink(lambda: LogWriter(args.log_file, header), args.log_file)


def _failed(message: str, sink: Any) -> None:
    """A failed run's one line: what went wrong, and what it left (`--log`)."""
    kept = f"; {sink.kept()}" if sink is not None else ""
    sys.stderr.write(f"dralab: error: {message}{kept}\n")


COMMANDS = {
    "sim": cmd_sim, "run": cmd_run, "allocate": allocate_cmd.cmd_allocate,
    **audit_cmd.COMMANDS,
    **whatif_cmd.COMMANDS,
    **shrink_cmd.COMMANDS,
    **check_cmd.COMMANDS,
    **record_cmd.COMMANDS,
    **replay_cmd.COMMANDS,
    **chaos_cmd.COMMANDS,
    **trace_cmd.COMMANDS,
    **report_cmd.COMMANDS,
    **export_cmd.COMMANDS,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure(args.log_format, args.log_level)
    try:
        return COMMANDS[args.command](args)
    except (InputError, OutputPathError) as exc:  # OutputPathError: an output path changed during the work
        sys.stderr.write(f"dralab: error: {exc}\n")
        return EXIT_INPUT
    except KeyboardInterrupt:
        sys.stderr.write("dralab: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())

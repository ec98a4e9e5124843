"""`dralab chaos SCENARIO --seeds 1-1000`: the scenario under many random fault schedules, invariants
checked in each run, every failing seed's log kept (and shrunk).

Each seed draws its own schedule (replay/simulation/chaos.py: kinds, times, targets, parameters) and runs in the
simulator with the scenario's seed; the seeds run on `--jobs` processes, and since a seed's run is a
function of the seed alone the results do not depend on `--jobs`. Progress goes to stderr, the summary
(a table, or one JSON object with `-o json`) to stdout. Exit 0 when every seed held, 1 when some
failed (their logs are in `--out`), 2 for invalid input (the option or file and what was wrong).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Any

from dralab.core.kube.limits import MAX_SEED

from .inputs import InputError, add_output_format, load_scenario_input, output_dir, resolve_output
from .pool import finished

EXIT_OK, EXIT_FOUND, EXIT_UNAVAILABLE = 0, 1, 3  # as in cli.py (2: InputError, raised)
FORMATS = ("text", "json")
MAX_SEEDS = 10_000_000
MAX_RATE = 3600  # faults per simulated hour: fault times are whole seconds
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")

# The worker processes' scenario and options (set once per process by _init).
_WORKER: dict[str, Any] = {}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("chaos", help="run a scenario under random fault schedules, one per seed; keep and shrink "
                                     "the runs that break an invariant")
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--seeds", default="1-100", metavar="RANGE",
                   help="chaos seeds: N, A-B or a comma list of those, e.g. 1-1000 (default 1-100)")
    p.add_argument("--kinds", metavar="K1,K2",
                   help="fault kinds to draw from (default: every kind but redis-restart and foreign-writer, "
                        "which are live only; --live adds them)")
    p.add_argument("--rate", type=float, default=6.0, metavar="N",
                   help="faults per simulated hour, on average (default 6)")
    p.add_argument("--jobs", type=int, default=0, metavar="N",
                   help="processes running seeds (default 0: one per core of this machine)")
    p.add_argument("--out", default="chaos-out", metavar="DIR",
                   help="where failing seeds' logs go: DIR/<scenario>-seed<k>.dralog (default chaos-out)")
    p.add_argument("--shrink", action=argparse.BooleanOptionalAction, default=True,
                   help="also write a shrunk log of each failure, <...>.small.dralog (default on)")
    p.add_argument("--shrink-trials", type=int, default=150, metavar="N",
                   help="simulate at most N candidate runs per shrink (default 150)")
    p.add_argument("--live", action="store_true",
                   help="run each seed on the live system (Ray actors, a private redis-server): real kills, pauses "
                        "and a real Redis restart; seeds run one after another")
    p.add_argument("--speed", type=float, default=30.0, metavar="X",
                   help="--live: cluster seconds per wall second (default 30)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="--live: a seed whose run takes longer (wall seconds) fails as run-error (default 600)")
    p.add_argument("--redis", metavar="URL", help="--live: use this Redis (then redis-restart faults are skipped: "
                                                   "only a Redis the run started itself is restarted)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run the seeds as Ray tasks on this cluster (`auto`: a local Ray on every core); the "
                        "results, kept logs and shrinks are those of the local pool (docs/deploy.md); --live: join "
                        "this Ray cluster (default: start one locally)")
    p.add_argument("--hosts", type=int, default=0, metavar="N",
                   help="--live: deal the reactors into N host actors, as `dralab run --hosts` (default 0: an actor "
                        "per reactor); a kill or a pause then stops a host's every reactor")
    add_output_format(p, FORMATS)
    p.add_argument("--summary", choices=FORMATS, default=None,
                   help="the summary's format (an older name of -o, kept for scripts)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--log-format", choices=["console", "json"], default="console")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning")


def parse_seeds(text: str) -> list[int]:
    """`1-1000`, `7`, `1,5,9-12` -> the seeds in order, each once; InputError says what is wrong."""
    seeds: dict[int, None] = {}
    for part in text.split(","):
        m = _RANGE.fullmatch(part.strip())
        if not m:
            raise InputError(f"--seeds: {part.strip()!r} is not a seed (N) or a range (A-B) of whole numbers")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise InputError(f"--seeds: {part.strip()} is an empty range (its start is after its end)")
        if hi > MAX_SEED:
            raise InputError(f"--seeds: {part.strip()}: seeds must be < 2^63 ({MAX_SEED + 1})")
        if len(seeds) + hi - lo + 1 > MAX_SEEDS:
            raise InputError(f"--seeds: at most {MAX_SEEDS} seeds")
        seeds.update(dict.fromkeys(range(lo, hi + 1)))
    return list(seeds)


def _options(args: argparse.Namespace) -> Any:
    from dralab.replay.simulation.chaos import DEFAULT_KINDS, LIVE_KINDS, ChaosError, ChaosOptions, check_kinds

    if not 0 < args.rate <= MAX_RATE:  # inf divided by zero; 1e9 drew 100,000 faults a seed for minutes
        raise InputError(f"--rate: must be > 0 and at most {MAX_RATE} faults per simulated hour (one a second), "
                         f"got {args.rate}")
    if args.jobs < 0:
        raise InputError(f"--jobs: must be >= 1 (or 0: one per core), got {args.jobs}")
    if args.shrink_trials < 1:
        raise InputError(f"--shrink-trials: must be >= 1, got {args.shrink_trials}")
    kinds = DEFAULT_KINDS
    if args.live:
        if not args.speed > 0:
            raise InputError(f"--speed: must be > 0, got {args.speed}")
        if not args.timeout > 0:
            raise InputError(f"--timeout: must be > 0 seconds, got {args.timeout}")
        if args.hosts < 0:
            raise InputError(f"--hosts: must be >= 0, got {args.hosts}")
        from .chaos_live import LiveChaosOptions, redis_restart_possible

        kinds = LIVE_KINDS
        if redis_restart_possible(LiveChaosOptions(redis_url=args.redis)):
            kinds = (*LIVE_KINDS, "redis-restart")
    if args.kinds is not None:
        try:
            kinds = check_kinds([k.strip() for k in args.kinds.split(",") if k.strip()])
        except ChaosError as exc:
            raise InputError(f"--kinds: {exc}") from None
    _check_out(args.out)
    return ChaosOptions(kinds=kinds, rate=float(args.rate), out_dir=args.out, shrink=args.shrink,
                        shrink_trials=args.shrink_trials)


def _check_out(out: str) -> None:
    """DIR must be a writable folder, or one that can be made (it is made when a seed first fails)."""
    path = os.path.abspath(out)
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(f"--out: {out} exists and is not a folder")
    while not os.path.exists(path):
        path = os.path.dirname(path)
    if not os.access(path, os.W_OK):
        raise InputError(f"--out: cannot write into {path}")


def _init(scenario: Any, options: Any) -> None:
    _WORKER["scenario"], _WORKER["options"] = scenario, options


def _run(seed: int) -> Any:
    from dralab.replay.simulation.chaos import run_seed

    return run_seed(_WORKER["scenario"], seed, _WORKER["options"])


def _run_shipped(seed: int) -> tuple[Any, dict[str, bytes]]:
    """A seed on a Ray worker, which may be another machine: its logs are kept in a folder of its own there
    and come back with the result, to be written into --out here (`_land`)."""
    import dataclasses
    import tempfile
    from pathlib import Path

    from dralab.replay.simulation.chaos import run_seed

    with tempfile.TemporaryDirectory(prefix="dralab-chaos-") as tmp:
        result = run_seed(_WORKER["scenario"], seed, dataclasses.replace(_WORKER["options"], out_dir=tmp))
        files = {os.path.basename(f): Path(f).read_bytes() for f in result.files}
    return result, files


def _land(shipped: tuple[Any, dict[str, bytes]], out_dir: str) -> Any:
    """The kept logs of a seed run on Ray, written into --out under the names and paths the local pool gives."""
    from pathlib import Path

    from dralab.replay.logs.output_files import atomic_output

    result, files = shipped
    if files:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        with atomic_output(str(Path(out_dir) / name), "--out") as f:
            f.write(data)
    result.files = [str(Path(out_dir) / os.path.basename(f)) for f in result.files]
    return result


def cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class _Progress:
    """`chaos: 37/1000 seeds, 2 failed, 4.1 seeds/s, about 3m left`: in place on a terminal (twice a second),
    else a line when seeds finished (at most every 2 s) or every 30 s."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.total, self.quiet = total, quiet
        self.started = self.last = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.done = 0
        self.printed = False

    def update(self, done: int, failed: int, force: bool = False) -> None:
        now = time.monotonic()
        quiet_for = now - self.last
        if force and not self.tty and done == self.done and self.printed:
            return  # the last line already said it
        if self.quiet or not (force or (self.tty and quiet_for >= 0.5) or quiet_for >= 30
                              or (done != self.done and quiet_for >= 2)):
            return
        self.last, self.done, self.printed = now, done, True
        rate = done / max(now - self.started, 1e-9)
        left = (self.total - done) / rate if done else 0.0
        line = (f"chaos: {done}/{self.total} seeds, {failed} failed, {rate:.2g} seeds/s"
                + (f", about {_dur(left)} left" if 0 < done < self.total else ""))
        sys.stderr.write(("\r" + line + "\x1b[K" + ("\n" if force else "")) if self.tty else line + "\n")
        sys.stderr.flush()


def _dur(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds < 90 else f"{seconds / 60:.0f}m" if seconds < 5400 else f"{seconds / 3600:.1f}h"


def run_seeds(scenario: Any, seeds: list[int], options: Any, jobs: int, progress: _Progress,
              ray: str | None = None) -> list[Any]:
    """Every seed's SeedResult, in seed order. One job: in this process (a test can patch an invariant);
    `ray`: as Ray tasks, the kept logs shipped back into --out."""
    results: dict[int, Any] = {}
    failed = 0
    run = _run_shipped if ray else _run
    for batch in finished(run, _init, (scenario, options), seeds, jobs, ray=ray):
        for r in batch:
            if ray:
                r = _land(r, options.out_dir)
            results[r.seed] = r
            failed += not r.ok
        progress.update(len(results), failed)
    progress.update(len(results), failed, force=True)
    return [results[s] for s in seeds]


def summarize(scenario: Any, seeds_text: str, results: list[Any], options: Any, jobs: int,
              wall_s: float) -> dict[str, Any]:
    by_invariant: dict[str, list[int]] = {}
    kinds: dict[str, int] = {}
    for r in results:
        for name in r.failures:
            by_invariant.setdefault(name, []).append(r.seed)
        for kind, n in r.kinds.items():
            kinds[kind] = kinds.get(kind, 0) + n
    failed = [r for r in results if not r.ok]
    hours = sum(r.sim_ms for r in results) / 3_600_000
    return {
        "scenario": scenario.name, "file": scenario.source, "seeds": seeds_text, "kinds": list(options.kinds),
        "rate_per_hour": options.rate, "seeds_run": len(results), "seeds_failed": len(failed),
        "ok": not failed,
        "failures_by_invariant": {name: {"seeds": len(s), "first_seeds": s[:10]}
                                  for name, s in sorted(by_invariant.items())},
        "faults_injected": sum(r.faults for r in results), "faults_by_kind": dict(sorted(kinds.items())),
        "cluster_hours": round(hours, 3), "wall_s": round(wall_s, 2), "jobs": jobs,
        "cluster_hours_per_wall_minute": round(hours / max(wall_s / 60, 1e-9), 1),
        "out": options.out_dir, "files": [f for r in failed for f in r.files],
        "digests": {str(r.seed): r.digest for r in results},
        "failed": [{"seed": r.seed, "first": r.first, "message": r.message, "failures": r.failures,
                    "files": r.files, **({"shrunk": r.shrunk} if r.shrunk else {})} for r in failed],
    }


def render_text(s: dict[str, Any]) -> str:
    w = 24
    lines = [f"chaos {s['scenario']} ({s['file']}): seeds {s['seeds']}, {s['rate_per_hour']:g} faults per "
             f"simulated hour, {len(s['kinds'])} kinds",
             f"  {'seeds run':<{w}}{s['seeds_run']:>8}",
             f"  {'seeds failed':<{w}}{s['seeds_failed']:>8}"]
    for name, f in s["failures_by_invariant"].items():
        more = ", ..." if f["seeds"] > len(f["first_seeds"]) else ""
        lines.append(f"    {name:<{w - 2}}{f['seeds']:>8}  seeds {', '.join(map(str, f['first_seeds']))}{more}")
    lines += [f"  {'faults injected':<{w}}{s['faults_injected']:>8}",
              f"  {'simulated cluster-hours':<{w}}{s['cluster_hours']:>8.1f}",
              f"  {'wall time':<{w}}{s['wall_s']:>8.1f} s on {s['jobs']} job(s), "
              f"{s['cluster_hours_per_wall_minute']:g} cluster-hours per minute",
              f"  {'files kept':<{w}}{len(s['files']):>8}" + (f"  in {s['out']}/" if s["files"] else "")]
    for r in s["failed"][:10]:
        lines.append(f"    seed {r['seed']}: {r['first']}: {r['message'][:100]}")
        for f in r["files"]:
            lines.append(f"      {f}")
    if len(s["failed"]) > 10:
        lines.append(f"    ... {len(s['failed']) - 10} more failing seeds (-o json lists them all)")
    lines.append("every seed held" if s["ok"] else
                 "replay a kept log with `dralab replay FILE --verify`; `dralab check FILE` lists its violations")
    return "\n".join(lines)


def cmd_chaos(args: argparse.Namespace) -> int:
    seeds = parse_seeds(args.seeds)
    options = _options(args)
    scenario = load_scenario_input(args.scenario)
    resolve_output(args, FORMATS, alias_attr="summary")
    output_dir(args.out, "--out")
    jobs = 1 if args.live else min(args.jobs or cores(), len(seeds))
    started = time.monotonic()
    progress = _Progress(len(seeds), args.quiet)
    if args.live:
        from .chaos_live import LiveChaosOptions, run_live_seeds

        live = LiveChaosOptions(speed=args.speed, timeout_s=args.timeout, ray_address=args.ray, redis_url=args.redis,
                                hosts=args.hosts)
        from dralab.actors.live_runtime import ServiceUnavailable

        try:
            results = run_live_seeds(scenario, seeds, options, live, progress)
        except ServiceUnavailable as exc:
            sys.stderr.write(f"dralab: error: {exc}\n")
            return EXIT_UNAVAILABLE
    else:
        from dralab.actors.ray_sweep import RaySweepUnavailable

        try:
            results = run_seeds(scenario, seeds, options, jobs, progress, ray=args.ray)
        except RaySweepUnavailable as exc:
            sys.stderr.write(f"dralab: error: {exc}\n")
            return EXIT_UNAVAILABLE
        if args.ray:
            from dralab.actors.ray_sweep import LAST_SWEEP

            jobs = LAST_SWEEP["cpus"]  # the Ray cluster's CPUs: what ran seeds at once
    summary = summarize(scenario, args.seeds, results, options, jobs, time.monotonic() - started)
    if args.ray and not args.live:
        summary["ray"] = args.ray
    summary["mode"] = "live" if args.live else "sim"
    if args.live:
        summary["speed"] = args.speed
    sys.stdout.write((json.dumps(summary) if args.output == "json" else render_text(summary)) + "\n")
    sys.stdout.flush()
    return EXIT_OK if summary["ok"] else EXIT_FOUND


COMMANDS = {"chaos": cmd_chaos}

"""`dralab trace openb --nodes FILE --pods FILE --policy NAME --seeds 42-51`: the FGD paper's openb experiment.

The CSVs are imported into a dralab scenario (replay/traces/openb.py), checked by the scenario loader like any
scenario, reduced to the arrays the protocol runs on (replay/traces/fgd_cluster.py), and run once per seed
(replay/traces/fgd.py) on `--jobs` processes; a seed's run is a function of the seed alone, so the results do not
depend on `--jobs`. stdout: the table of median GPU allocation and fragmentation at arrived 50..130 %, or one
JSON object with `-o json`; `--csv-dir` also writes one row per seed in the layout of the FGD authors' cached
results (`analysis_allo_discrete.csv`, `analysis_frag_discrete.csv`, `analysis_frag_ratio_discrete.csv`).
`--compat fgd-go` draws from Go's math/rand as the authors' simulator does, so each seed reproduces its cached
run; `--compare DIR` checks every row against the cached files in DIR, column for column (exit 1 if a row
differs). Progress on stderr. Exit 2 on bad input.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from typing import Any

from dralab.core.kube.limits import MAX_CLUSTER_TIME_MS

from .bounds import seed_arg
from .chaos_cmd import cores, parse_seeds
from .inputs import InputError, output_dir
from .pool import finished

FORMATS = ("text", "json")
COMPAT = ("fgd-go",)  # replay/traces/fgd.py COMPAT_MODES (not imported here: the parser loads fast)
# (file, RunResult field, whether the file has the total_gpus column): the cached results' three layouts
CSV_FILES = (("analysis_allo_discrete.csv", "alloc", True), ("analysis_frag_discrete.csv", "frag", False),
             ("analysis_frag_ratio_discrete.csv", "frag_idle", False))
_WORKER: dict[str, Any] = {}


def add_parser(sub: Any) -> None:
    from dralab.replay.traces.fgd_policies import POLICY_NAMES

    p = sub.add_parser("trace", help="replay a real trace (openb: the FGD fragmentation experiment, or --time-aware "
                                     "with the autoscaler; philly, pollux: jobs and gangs with the autoscaler)")
    p.add_argument("trace", choices=["openb", "philly", "pollux"], help="which trace format")
    p.add_argument("--nodes", metavar="FILE", help="openb: node list CSV (openb_node_list_gpu_node.csv)")
    p.add_argument("--pods", metavar="FILE", help="openb: pod list CSV (openb_pod_list_*.csv)")
    p.add_argument("--policy", metavar="NAME", help=f"openb FGD protocol: score policy: {', '.join(POLICY_NAMES)}")
    p.add_argument("--seeds", default="42-51", metavar="RANGE", help="N, A-B or a comma list (default 42-51)")
    p.add_argument("--csv-dir", metavar="DIR", help="write analysis_allo_discrete.csv, analysis_frag_discrete.csv and "
                                                    "analysis_frag_ratio_discrete.csv")
    p.add_argument("--compat", choices=COMPAT, help="fgd-go: reproduce the FGD authors' simulator decision for "
                                                    "decision (Go's math/rand stream, its draw order)")
    p.add_argument("--compare", metavar="DIR", help="compare each seed's rows with the cached results in DIR "
                                                    "(analysis_*_discrete.csv); exit 1 if any differs")
    p.add_argument("-o", "--output", choices=FORMATS, default="text", help="stdout format (default text)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="processes running seeds (0: one per core; "
                                                                     "default 1)")
    p.add_argument("--ray", metavar="ADDRESS", help="openb FGD protocol: run the seeds as Ray tasks on this cluster "
                                                   "(`auto`: a local Ray on every core); the same results as --jobs")
    p.add_argument("--job-list", metavar="FILE", help="philly: the job list CSV (philly.csv); pollux: the Philly "
                                                      "jobs the durations are drawn from")
    p.add_argument("--workload", metavar="FILE", help="pollux: a Pollux workload CSV (workload-N.csv)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--log-format", choices=["console", "json"], default="console")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning")
    add_time_aware_options(p)

def load_cluster(nodes: str, pods: str) -> tuple[Any, str]:
    """The trace as the protocol's arrays, through a checked scenario; InputError names file/line/column."""
    cluster, workload, _ = load_trace(nodes, pods)
    return cluster, workload


def load_trace(nodes: str, pods: str) -> tuple[Any, str, tuple[int, ...]]:
    """:func:`load_cluster` and the cluster's nodes in the trace's node-name order (for `--compat`)."""
    from dralab.core.scenario.load import ScenarioError, parse_scenario
    from dralab.replay.traces.fgd_cluster import ClusterError, build_cluster, trace_order
    from dralab.replay.traces.openb import OpenbError, read_nodes, read_pods, to_scenario

    workload = os.path.splitext(os.path.basename(pods))[0]
    try:
        node_list, pod_list = read_nodes(nodes), read_pods(pods)
        doc = to_scenario(node_list, pod_list, workload)
        scenario = parse_scenario(doc, f"<openb {workload}>")
        cluster = build_cluster(scenario)
        return cluster, workload, trace_order(cluster, node_list)
    except (OpenbError, ScenarioError, ClusterError) as exc:
        raise InputError(str(exc)) from None


def _init(cluster: Any, policy: str, compat: str, sources: tuple[int, ...]) -> None:
    _WORKER.update(cluster=cluster, policy=policy, compat=compat, sources=sources)


def _run(seed: int) -> Any:
    from dralab.replay.traces.fgd import run_seed

    w = _WORKER
    return run_seed(w["cluster"], w["policy"], seed, compat=w["compat"], sources=w["sources"])


class _Progress:
    """`trace: 3/10 seeds, 4.2s per seed`: a line on stderr when a seed finishes (a run takes seconds)."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.total, self.quiet, self.started, self.done = total, quiet, time.monotonic(), 0

    def update(self, done: int) -> None:
        if self.quiet or done == self.done:
            return
        self.done = done
        per = (time.monotonic() - self.started) / done
        sys.stderr.write(f"trace: {done}/{self.total} seeds, {per:.1f}s per seed\n")
        sys.stderr.flush()


def run_seeds(cluster: Any, policy: str, seeds: list[int], jobs: int, quiet: bool, compat: str = "",
              sources: tuple[int, ...] | None = None, ray: str | None = None) -> list[Any]:
    """Every seed's RunResult, in seed order (the pool pattern of `dralab chaos`; `ray`: as Ray tasks)."""
    progress = _Progress(len(seeds), quiet)
    results: dict[int, Any] = {}
    for batch in finished(_run, _init, (cluster, policy, compat, sources), seeds, jobs, ray=ray):
        for r in batch:
            results[r.seed] = r
        progress.update(len(results))
    return [results[s] for s in seeds]


def write_csv(directory: str, workload: str, results: list[Any], total_gpus: int) -> list[str]:
    """The cached results' layouts: workload, sc_policy, tune, seed, (total_gpus: allocation only), columns
    0..130."""
    from dralab.replay.logs.output_files import OutputPathError, atomic_output, make_dir
    from dralab.replay.traces.fgd import TUNE
    from dralab.replay.traces.fgd_metrics import BUCKETS
    from dralab.replay.traces.fgd_policies import CACHED_NAMES

    try:
        make_dir(directory, "--csv-dir")
    except OutputPathError as exc:
        raise InputError(str(exc)) from None
    paths = []
    for name, field, with_gpus in CSV_FILES:
        path = os.path.join(directory, name)
        head = ["workload", "sc_policy", "tune", "seed", *(["total_gpus"] if with_gpus else [])]
        try:
            with atomic_output(path, "--csv-dir", text=True) as f:
                w = csv.writer(f, lineterminator="\n")
                w.writerow([*head, *(str(i) for i in range(BUCKETS))])
                for r in results:
                    w.writerow([workload, CACHED_NAMES[r.policy], TUNE, r.seed, *([total_gpus] if with_gpus else []),
                                *(repr(v) for v in getattr(r, field))])
        except OSError as exc:
            raise InputError(f"--csv-dir: cannot write {path}: {exc.strerror or exc}") from None
        paths.append(path)
    return paths


def render_text(report: dict[str, Any]) -> str:
    mode = f", compat {report['compat']}" if report.get("compat") else ""
    lines = [f"trace {report['trace']}, policy {report['policy']}{mode}, seeds {report['seeds']} "
             f"({len(report['per_seed'])} runs, {report['wall_s']:.1f}s)",
             "arrived %  GPU alloc % (median)  frag % of GPUs (median)"]
    for mark, alloc in report["alloc_pct"].items():
        lines.append(f"{mark:>9}  {alloc:>20.2f}  {report['frag_pct'][mark]:>23.2f}")
    return "\n".join(lines) + "\n"


def cmd_trace(args: argparse.Namespace) -> int:
    from dralab.replay.traces.fgd import medians
    from dralab.replay.traces.fgd_cache import CacheError, compare, read_cached, render_comparison
    from dralab.replay.traces.fgd_policies import POLICY_NAMES

    if args.trace in ("philly", "pollux") or args.time_aware:
        if args.ray:  # one run per autoscaler policy, in this process: nothing to spread
            raise InputError("--ray: runs the seeds of the openb FGD protocol; time-aware runs are one per policy, "
                             "in this process")
        return cmd_time_aware(args)
    for option, value in (("--nodes", args.nodes), ("--pods", args.pods), ("--policy", args.policy)):
        if value is None:
            raise InputError(f"{option}: required by `dralab trace openb` (the FGD protocol)")
    started = time.monotonic()
    if args.policy not in POLICY_NAMES:
        raise InputError(f"--policy: unknown policy {args.policy!r}; expected one of {', '.join(POLICY_NAMES)}")
    if args.jobs < 0:
        raise InputError(f"--jobs: must be >= 1 (or 0: one per core), got {args.jobs}")
    seeds = parse_seeds(args.seeds)
    if len(seeds) > 10_000:
        raise InputError("--seeds: at most 10000 seeds")
    output_dir(args.csv_dir, "--csv-dir")
    cluster, workload, sources = load_trace(args.nodes, args.pods)
    expected = None
    if args.compare:
        try:
            expected = read_cached(args.compare, workload, args.policy)
        except CacheError as exc:
            raise InputError(str(exc)) from None
    from dralab.actors.ray_sweep import RaySweepUnavailable

    try:
        results = run_seeds(cluster, args.policy, seeds, args.jobs or cores(), args.quiet, args.compat or "", sources,
                            ray=args.ray)
    except RaySweepUnavailable as exc:
        sys.stderr.write(f"dralab: error: {exc}\n")
        return 3
    report: dict[str, Any] = {"trace": workload, "policy": args.policy, "seeds": args.seeds,
                              "compat": args.compat or "", **medians(results),
                              "wall_s": round(time.monotonic() - started, 3),
                              "per_seed": [{"seed": r.seed, "pods": r.pods, "failed": r.failed,
                                            "alloc_pct_100": r.alloc[100], "frag_pct_100": r.frag[100]}
                                           for r in results]}
    if args.csv_dir:
        report["csv"] = write_csv(args.csv_dir, workload, results, cluster.total_gpus)
    if expected is not None:
        report["compare"] = compare(expected, results)
    if args.output == "json":
        sys.stdout.write(json.dumps(report) + "\n")
    else:
        sys.stdout.write(render_text(report))
        if expected is not None:
            sys.stdout.write(render_comparison(report["compare"], args.compare))
    return 1 if expected is not None and report["compare"]["differing"] else 0


# --- Time-aware runs (`--time-aware`, `philly` and `pollux`): the autoscaler in the loop, one run per autoscaler policy
# (replay/traces/trace_runs.py); see docs/traces.md "Time-aware runs".


def add_time_aware_options(p: Any) -> None:
    g = p.add_argument_group("time-aware runs (openb --time-aware, philly, pollux)")
    g.add_argument("--time-aware", action="store_true", help="openb: pods arrive at creation_time and leave at "
                                                             "deletion_time; node groups grown by the autoscaler")
    g.add_argument("--start", metavar="S", help="openb: hours after the trace's first pod (default 0); "
                                                "philly: YYYY-MM-DD[ HH:MM:SS] (default: the first job); "
                                                "pollux: hours after the workload's start (default 0)")
    g.add_argument("--hours", type=float, default=24.0, metavar="H", help="the window's length (default 24)")
    g.add_argument("--autoscaler", default="count,dra,atomic", metavar="LIST",
                   help="autoscaler policies to compare (default count,dra,atomic)")
    g.add_argument("--log-dir", metavar="DIR", help="keep each run's log as DIR/<scenario>-<policy>.dralog")
    g.add_argument("--seed", type=seed_arg, default=0,
                   help="the runs' seed; pollux: also the duration draws (default 0)")
    g.add_argument("--start-fraction", type=float, default=0.0, metavar="F",
                   help="openb: share of each node group Ready at t=0 (default 0)")
    g.add_argument("--provision-delay", default="2m-4m", metavar="MIN-MAX",
                   help="scale-up to Ready, drawn per node (default 2m-4m)")
    g.add_argument("--no-carry-in", action="store_true",
                   help="openb: leave out pods created before the window that still run at its start")
    g.add_argument("--cluster", metavar="VC", help="philly: one virtual cluster (default: all)")
    g.add_argument("--max-nodes", type=int, default=64, metavar="N", help="philly, pollux: node group max "
                                                                       "(default 64)")
    g.add_argument("--start-nodes", type=int, default=0, metavar="N", help="philly, pollux: nodes at t=0 "
                                                                         "(default 0)")


def _time_aware_document(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    from dralab.core.kube.durations import parse_duration
    from dralab.replay.traces.trace_runs import openb_document, philly_document, pollux_document

    low, _, high = args.provision_delay.partition("-")
    high = high or low
    try:
        if parse_duration(low) > parse_duration(high):
            raise ValueError("min above max")
    except ValueError as exc:
        raise InputError(f"--provision-delay: expected MIN-MAX durations (2m-4m), got {args.provision_delay!r}: "
                         f"{exc}") from None
    if args.trace == "pollux":
        for option, value, what in (("--workload", args.workload, "a Pollux workload CSV (workload-N.csv)"),
                                    ("--job-list", args.job_list, "the Philly job list the durations come from "
                                                                  "(philly.csv)")):
            if not value:
                raise InputError(f"{option}: `dralab trace pollux` needs {what}")
        for option, value in (("--cluster", args.cluster), ("--nodes", args.nodes), ("--pods", args.pods),
                              ("--policy", args.policy)):
            if value is not None:
                raise InputError(f"{option}: not an option of `dralab trace pollux`")
        try:
            start_h = float(args.start) if args.start is not None else 0.0
        except ValueError:
            raise InputError(f"--start: expected hours after the workload's start, got {args.start!r}") from None
        return pollux_document(args.workload, args.job_list, start_h=start_h, hours=args.hours,
                               max_nodes=args.max_nodes, start_nodes=args.start_nodes,
                               provision_delay=(low, high), seed=args.seed)
    if args.trace == "philly":
        if not args.job_list:
            raise InputError("--job-list: `dralab trace philly` needs the job list CSV (--job-list philly.csv)")
        return philly_document(args.job_list, cluster=args.cluster, start=args.start, hours=args.hours,
                               max_nodes=args.max_nodes, start_nodes=args.start_nodes,
                               provision_delay=(low, high), seed=args.seed)
    for option, value in (("--nodes", args.nodes), ("--pods", args.pods)):
        if value is None:
            raise InputError(f"{option}: required by `dralab trace openb --time-aware`")
    if args.policy is not None:
        raise InputError("--policy: a score policy of the FGD protocol; --time-aware compares --autoscaler policies")
    try:
        start_h = float(args.start) if args.start is not None else 0.0
    except ValueError:
        raise InputError(f"--start: expected hours after the trace's first pod, got {args.start!r}") from None
    if not 0.0 <= args.start_fraction <= 1.0:
        raise InputError(f"--start-fraction: must be in [0, 1], got {args.start_fraction}")
    return openb_document(args.nodes, args.pods, start_h=start_h, hours=args.hours,
                          start_fraction=args.start_fraction, provision_delay=(low, high),
                          carry_in=not args.no_carry_in, seed=args.seed)


def cmd_time_aware(args: argparse.Namespace) -> int:
    """One simulation per autoscaler policy of the same scenario; a table (or one JSON object) of their
    figures. Progress (one line per run, with its CPU time) on stderr unless --quiet."""
    from dralab.replay.simulation.sim import SimulationStuck
    from dralab.replay.traces.trace_runs import TraceRunError, compare, parse_policies, render_table

    started, cpu = time.monotonic(), time.process_time()
    try:
        policies = parse_policies(args.autoscaler)
        if not 0 < args.hours <= MAX_CLUSTER_TIME_MS / 3_600_000:
            raise InputError(f"--hours: must be in (0, {MAX_CLUSTER_TIME_MS // 3_600_000}] (30 days, dralab's limit "
                             f"on cluster time), got {args.hours}")
        output_dir(args.log_dir, "--log-dir")
        doc, window = _time_aware_document(args)
        if not args.quiet:
            sys.stderr.write(f"trace: {len(doc['spec']['workload'])} arrivals imported; running "
                             f"{', '.join(policies)}\n")
        last = [time.process_time()]

        def done(row: dict[str, Any]) -> None:
            if not args.quiet:
                now = time.process_time()
                sys.stderr.write(f"trace: {row['policy']} done ({now - last[0]:.1f}s CPU, {row['records']} records)\n")
                sys.stderr.flush()
                last[0] = now

        rows = compare(doc, policies, seed=args.seed, log_dir=args.log_dir, done=done)
    except TraceRunError as exc:
        raise InputError(str(exc)) from None
    except OSError as exc:
        raise InputError(f"--log-dir: cannot write {exc.filename or args.log_dir}: {exc.strerror or exc}") from None
    except SimulationStuck as exc:  # as `dralab sim`: a finding about the model, exit 1
        sys.stderr.write(f"dralab: error: trace {args.trace}: {exc}\n")
        return 1
    name = doc["metadata"]["name"]
    report = {"trace": args.trace, "scenario": name, "window": window, "seed": args.seed, "policies": rows,
              "wall_s": round(time.monotonic() - started, 3), "cpu_s": round(time.process_time() - cpu, 3)}
    if args.output == "json":
        sys.stdout.write(json.dumps(report) + "\n")
    else:
        title = (f"trace {args.trace} ({name}), {args.hours:g} h window, seed {args.seed}: "
                 f"{len(doc['spec']['workload'])} arrivals ({report['cpu_s']:.1f}s CPU)")
        sys.stdout.write(render_table(title, rows))
        for row in rows:
            if "log" in row:
                sys.stdout.write(f"log {row['policy']}: {row['log']}\n")
    return 0


COMMANDS = {"trace": cmd_trace}

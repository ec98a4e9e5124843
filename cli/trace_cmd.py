"""`dralab trace openb --nodes FILE --pods FILE --policy NAME --seeds 42-51`: the FGD paper's openb experiment.

The CSVs are imported into a dralab scenario (replay/openb.py), checked by the scenario loader like any
scenario, reduced to the arrays the protocol runs on (replay/fgd_cluster.py), and run once per seed
(replay/fgd.py) on `--jobs` processes; a seed's run is a function of the seed alone, so the results do not
depend on `--jobs`. stdout: the table of median GPU allocation and fragmentation at arrived 50..130 %, or one
JSON object with `-o json`; `--csv-dir` also writes one row per seed in the layout of the FGD authors' cached
results (`analysis_allo_discrete.csv`, `analysis_frag_discrete.csv`). Progress on stderr. Exit 2 on bad input.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from typing import Any

from .chaos_cmd import cores, parse_seeds
from .inputs import InputError

FORMATS = ("text", "json")
_WORKER: dict[str, Any] = {}


def add_parser(sub: Any) -> None:
    from dralab.replay.fgd_policies import POLICY_NAMES

    p = sub.add_parser("trace", help="replay a real trace (openb: the FGD fragmentation experiment)")
    p.add_argument("trace", choices=["openb"], help="which trace format")
    p.add_argument("--nodes", required=True, metavar="FILE", help="node list CSV (openb_node_list_gpu_node.csv)")
    p.add_argument("--pods", required=True, metavar="FILE", help="pod list CSV (openb_pod_list_*.csv)")
    p.add_argument("--policy", required=True, metavar="NAME", help=f"score policy: {', '.join(POLICY_NAMES)}")
    p.add_argument("--seeds", default="42-51", metavar="RANGE", help="N, A-B or a comma list (default 42-51)")
    p.add_argument("--csv-dir", metavar="DIR", help="write analysis_allo_discrete.csv and analysis_frag_discrete.csv")
    p.add_argument("-o", "--output", choices=FORMATS, default="text", help="stdout format (default text)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="processes running seeds (0: one per core; "
                                                                     "default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--log-format", choices=["console", "json"], default="console")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning")


def load_cluster(nodes: str, pods: str) -> tuple[Any, str]:
    """The trace as the protocol's arrays, through a checked scenario; InputError names file/line/column."""
    from dralab.core.scenario import ScenarioError, parse_scenario
    from dralab.replay.fgd_cluster import ClusterError, build_cluster
    from dralab.replay.openb import OpenbError, read_nodes, read_pods, to_scenario

    workload = os.path.splitext(os.path.basename(pods))[0]
    try:
        doc = to_scenario(read_nodes(nodes), read_pods(pods), workload)
        scenario = parse_scenario(doc, f"<openb {workload}>")
        return build_cluster(scenario), workload
    except (OpenbError, ScenarioError, ClusterError) as exc:
        raise InputError(str(exc)) from None


def _init(cluster: Any, policy: str) -> None:
    _WORKER["cluster"], _WORKER["policy"] = cluster, policy


def _run(seed: int) -> Any:
    from dralab.replay.fgd import run_seed

    return run_seed(_WORKER["cluster"], _WORKER["policy"], seed)


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


def run_seeds(cluster: Any, policy: str, seeds: list[int], jobs: int, quiet: bool) -> list[Any]:
    """Every seed's RunResult, in seed order (the pool pattern of `dralab chaos`)."""
    progress = _Progress(len(seeds), quiet)
    results: dict[int, Any] = {}
    if jobs == 1 or len(seeds) == 1:
        _init(cluster, policy)
        for seed in seeds:
            results[seed] = _run(seed)
            progress.update(len(results))
    else:
        import multiprocessing
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, len(seeds)), mp_context=ctx, initializer=_init,
                                 initargs=(cluster, policy)) as pool:
            pending = {pool.submit(_run, seed) for seed in seeds}
            try:
                while pending:
                    done, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                    for future in done:
                        r = future.result()
                        results[r.seed] = r
                    progress.update(len(results))
            except BaseException:
                for future in pending:
                    future.cancel()
                raise
    return [results[s] for s in seeds]


def write_csv(directory: str, workload: str, results: list[Any], total_gpus: int) -> list[str]:
    """The cached results' layout: workload, sc_policy, tune, seed, total_gpus, then columns 0..130."""
    from dralab.replay.fgd import BUCKETS, TUNE
    from dralab.replay.fgd_policies import CACHED_NAMES

    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--csv-dir: cannot make {directory}: {exc.strerror or exc}") from None
    header = ["workload", "sc_policy", "tune", "seed", "total_gpus", *(str(i) for i in range(BUCKETS))]
    paths = []
    for name, field in (("analysis_allo_discrete.csv", "alloc"), ("analysis_frag_discrete.csv", "frag")):
        path = os.path.join(directory, name)
        try:
            with open(path, "w", newline="") as f:
                w = csv.writer(f, lineterminator="\n")
                w.writerow(header)
                for r in results:
                    w.writerow([workload, CACHED_NAMES[r.policy], TUNE, r.seed, total_gpus, *getattr(r, field)])
        except OSError as exc:
            raise InputError(f"--csv-dir: cannot write {path}: {exc.strerror or exc}") from None
        paths.append(path)
    return paths


def render_text(report: dict[str, Any]) -> str:
    lines = [f"trace {report['trace']}, policy {report['policy']}, seeds {report['seeds']} "
             f"({len(report['per_seed'])} runs, {report['wall_s']:.1f}s)",
             "arrived %  GPU alloc % (median)  frag % of GPUs (median)"]
    for mark, alloc in report["alloc_pct"].items():
        lines.append(f"{mark:>9}  {alloc:>20.2f}  {report['frag_pct'][mark]:>23.2f}")
    return "\n".join(lines) + "\n"


def cmd_trace(args: argparse.Namespace) -> int:
    from dralab.replay.fgd import medians
    from dralab.replay.fgd_policies import POLICY_NAMES

    started = time.monotonic()
    if args.policy not in POLICY_NAMES:
        raise InputError(f"--policy: unknown policy {args.policy!r}; expected one of {', '.join(POLICY_NAMES)}")
    if args.jobs < 0:
        raise InputError(f"--jobs: must be >= 1 (or 0: one per core), got {args.jobs}")
    seeds = parse_seeds(args.seeds)
    if len(seeds) > 10_000:
        raise InputError("--seeds: at most 10000 seeds")
    cluster, workload = load_cluster(args.nodes, args.pods)
    results = run_seeds(cluster, args.policy, seeds, args.jobs or cores(), args.quiet)
    report: dict[str, Any] = {"trace": workload, "policy": args.policy, "seeds": args.seeds, **medians(results),
                              "wall_s": round(time.monotonic() - started, 3),
                              "per_seed": [{"seed": r.seed, "pods": r.pods, "failed": r.failed,
                                            "alloc_pct_100": r.alloc[100], "frag_pct_100": r.frag[100]}
                                           for r in results]}
    if args.csv_dir:
        report["csv"] = write_csv(args.csv_dir, workload, results, cluster.total_gpus)
    if args.output == "json":
        sys.stdout.write(json.dumps(report) + "\n")
    else:
        sys.stdout.write(render_text(report))
    return 0


COMMANDS = {"trace": cmd_trace}

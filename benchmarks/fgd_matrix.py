"""The whole FGD experiment matrix (issue 9): every openb trace x policy x seed, with a progress line, its
wall time, and each (trace, policy)'s median GPU allocation at 100% arrived next to the cached one.

    python benchmarks/fgd_matrix.py [--traces DIR] [--policies all|a,b] [--seeds 42-51] [--jobs 2]
                                    [--compat fgd-go] [--out results.json] [--markdown table.md]

Each run is replay/traces/fgd.py `run_seed`, what `dralab trace openb` runs per seed. With `--compat fgd-go` every
run is also compared with the cached rows column for column (replay/traces/fgd_cache.py) and the count of rows that
match is reported; without it the medians are compared (the paper's acceptance: within 0.3 points for
BestFit, FGD and Packing, 0.5 for Random). Runs go to `--jobs` processes, or with `--ray ADDRESS|auto` to Ray tasks
(cli/fgd_matrix_tasks.py); each worker imports a trace once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

TRACES = ("default", "cpu050", "cpu100", "cpu200", "cpu250", "gpushare100", "gpushare40", "gpushare60", "gpushare80",
          "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33", "multigpu20", "multigpu30", "multigpu40", "multigpu50")
def cached_medians(traces: Path) -> dict[tuple[str, str], float]:
    """Median over the seeds of the cached allocation at 100% arrived, by (trace, policy)."""
    import csv

    from dralab.replay.traces.fgd_policies import CACHED_NAMES

    names = {v: k for k, v in CACHED_NAMES.items()}
    values: dict[tuple[str, str], list[float]] = {}
    with open(traces / "fgd_expected_results" / "analysis_allo_discrete.csv", newline="") as f:
        for row in csv.DictReader(f):
            trace = row["workload"].removeprefix("openb_pod_list_")
            values.setdefault((trace, names[row["sc_policy"]]), []).append(float(row["100"]))
    return {k: median(v) for k, v in values.items()}


def main() -> int:
    from dralab.chaos_cmd import parse_seeds
    from dralab.fgd_matrix_tasks import init, run
    from dralab.pool import finished
    from dralab.replay.traces.fgd_policies import POLICY_NAMES

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from traces_path import real_trace  # $DRALAB_TRACES, or ../shared/traces beside the repository

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default=str(real_trace("openb")))
    ap.add_argument("--trace-names", default=",".join(TRACES))
    ap.add_argument("--policies", default="all")
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--ray", metavar="ADDRESS", help="run the tasks as Ray tasks on this cluster (auto: a local Ray "
                                                    "on every core); every worker needs --traces at the same path")
    ap.add_argument("--compat", default="", choices=["", "fgd-go"])
    ap.add_argument("--out", help="write every run's row and the summary as JSON")
    ap.add_argument("--markdown", help="write the per (trace, policy) table as Markdown")
    args = ap.parse_args()
    policies = list(POLICY_NAMES) if args.policies == "all" else args.policies.split(",")
    traces = args.trace_names.split(",")
    tasks = [(t, p, s) for t in traces for p in policies for s in parse_seeds(args.seeds)]
    root = Path(args.traces)
    compare = bool(args.compat)
    started, rows = time.monotonic(), []
    for batch in finished(run, init, (str(root), tasks, args.compat, compare), list(range(len(tasks))), args.jobs,
                          ray=args.ray):
        rows.extend(batch)
        if batch:
            done, elapsed = len(rows), time.monotonic() - started
            eta = elapsed / done * (len(tasks) - done)
            sys.stderr.write(f"matrix: {done}/{len(tasks)} runs, {elapsed / 60:.1f} min, about {eta / 60:.1f} min "
                             f"left\n")
            sys.stderr.flush()
    wall = time.monotonic() - started
    order = {task: i for i, task in enumerate(tasks)}  # the rows in task order, however they finished
    rows.sort(key=lambda r: order[(r["trace"], r["policy"], r["seed"])])
    cache = cached_medians(root)
    table = []
    for t in traces:
        for p in policies:
            mine = [r for r in rows if r["trace"] == t and r["policy"] == p]
            ours = round(median(r["alloc_100"] for r in mine), 2)
            theirs = cache.get((t, p))
            entry: dict[str, Any] = {"trace": t, "policy": p, "ours": ours,
                                     "cached": theirs, "diff": round(ours - theirs, 2) if theirs is not None else None}
            if compare:
                entry["rows_matched"] = f"{sum(r['matched'] for r in mine)}/{sum(r['rows'] for r in mine)}"
            table.append(entry)
    summary = {"runs": len(rows), "wall_s": round(wall, 1), "cpu_s": round(sum(r["cpu_s"] for r in rows), 1),
               "jobs": args.jobs, "compat": args.compat, "table": table, **({"ray": args.ray} if args.ray else {})}
    if compare:
        summary["rows"] = sum(r["rows"] for r in rows)
        summary["matched"] = sum(r["matched"] for r in rows)
    lines = [f"| trace | policy | ours | cached | diff{' | rows matched' if compare else ''} |",
             f"|---|---|---|---|---{'|---' if compare else ''}|"]
    for e in table:
        cached = "" if e["cached"] is None else f"{e['cached']:.2f}"
        diff = "" if e["diff"] is None else f"{e['diff']:+.2f}"
        lines.append(f"| {e['trace']} | {e['policy']} | {e['ours']:.2f} | {cached} | {diff}"
                     + (f" | {e['rows_matched']}" if compare else "") + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    print(f"{len(rows)} runs in {wall / 60:.1f} min on {args.jobs} jobs ({summary['cpu_s'] / 60:.1f} CPU min)"
          + (f"; {summary['matched']}/{summary['rows']} cached rows matched column for column" if compare else ""))
    if args.markdown:
        Path(args.markdown).write_text(text)
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "runs": rows}, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "table"}))
    return 0 if not compare or summary["matched"] == summary["rows"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmarks of two trees side by side, in one run: is a change of structure within noise?

A restructuring (issue 19) must not cost speed. On a shared, noisy machine two runs an hour apart say
little; this runs each benchmark in tree A, then in tree B, alternating for several rounds, and compares
the CPU time each child process used (user + system, from the kernel: steadier than wall time under load).
Each tree needs its own venv at TREE/.venv with dralab installed from that tree, so a benchmark there
imports that tree's code. The benchmarks are run by their own scripts as they are in each tree.

    python benchmarks/side_by_side.py --before /tmp/before --after . [--rounds 3]

Prints one row per benchmark: median CPU seconds before and after and their ratio (after / before).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

# (name, script, arguments): small enough for a few rounds of each on two cores
BENCHMARKS = (
    ("sim: day, 2 h x 200 nodes", "benchmarks/day_bench.py", ["--hours", "2", "--nodes", "200"]),
    ("scheduler: 500 nodes x 2,500 DRA pods", "benchmarks/scheduler_bench.py", ["--nodes", "500", "--pods", "2500"]),
    ("allocator figures", "benchmarks/dra_bench.py", ["--repeat", "5"]),
    ("autoscaler loop: 1,000 nodes", "benchmarks/autoscaler_bench.py", ["--repeat", "1"]),
    ("audit + schedule: 500 nodes", "benchmarks/audit_bench.py", []),
    ("fold and verify: 1 h x 500 nodes", "benchmarks/replay_bench.py", ["--hours", "1", "--nodes", "500",
                                                                        "--repeat", "1"]),
)


def cpu_of(tree: Path, script: str, args: list[str]) -> float:
    """CPU seconds (user + system) of one run of `script` in `tree`, with that tree's venv."""
    python = tree / ".venv" / "bin" / "python"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([str(python), script, *args], cwd=tree, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: {script} failed:\n{proc.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="the tree before the change (with .venv)")
    ap.add_argument("--after", type=Path, default=Path("."), help="the tree after (default: here)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", metavar="TEXT", help="run only benchmarks whose name contains TEXT")
    ap.add_argument("-o", "--output", choices=["text", "json"], default="text")
    args = ap.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    rows = []
    for name, script, bench_args in BENCHMARKS:
        if args.only and args.only not in name:
            continue
        times: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            for label, tree in trees.items():
                times[label].append(cpu_of(tree, script, bench_args))
        before, after = statistics.median(times["before"]), statistics.median(times["after"])
        rows.append({"benchmark": name, "before_cpu_s": round(before, 2), "after_cpu_s": round(after, 2),
                     "ratio": round(after / before, 3), "rounds": args.rounds})
        if args.output == "text":
            print(f"{name:42} before {before:7.2f} s  after {after:7.2f} s  ratio {after / before:5.3f}", flush=True)
    if args.output == "json":
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

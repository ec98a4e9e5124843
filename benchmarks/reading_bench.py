"""Peak memory of the commands that read a whole log (issue 18): `replay --verify` and `check` on the 24 h
day log, each in a subprocess whose peak RSS the kernel reports (wait4's ru_maxrss), for one or more
dralab installs measured in the same run (before and after a change: pass each one's python).

    python benchmarks/reading_bench.py [--log day.dralog] [--python NAME=PYTHON ...] [--command verify|check ...]

Without `--log` the day log is written first (benchmarks/day_bench.py --hours 24 --no-invariants, about
40 s) to a temporary directory. Each `--python NAME=PATH` is an interpreter with dralab installed (a
venv's bin/python); the default is this interpreter, named `this`. Every run prints its peak RSS, wall and
CPU time and exit status; the commands' own output is discarded (only the status and the memory matter here).
docs/log-format.md ("Bounded reading") has the figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = {
    "verify": ["replay", "{log}", "--verify", "-o", "json"],
    "check": ["check", "{log}", "-o", "json"],
    "report": ["report", "{log}", "-o", "{tmp}/report.html"],  # not by default: its plots cost more than reading
}


def peak(argv: list[str]) -> tuple[int, float, float, float]:
    """Run `argv`; its exit status, wall and CPU seconds, and peak resident memory in MiB (the child's
    alone: wait4 reports that process's own usage; CPU time is steadier than wall on a shared machine)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return proc.returncode, time.perf_counter() - started, cpu, usage.ru_maxrss / 1024  # Linux: KiB


def day_log(directory: str) -> str:
    path = os.path.join(directory, "day.dralog")
    bench = Path(__file__).with_name("day_bench.py")
    subprocess.run([sys.executable, str(bench), "--hours", "24", "--no-invariants", "--log", path],
                   check=True, cwd=bench.parent, stdout=subprocess.DEVNULL)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", metavar="FILE", help="the log to read (default: write the 24 h day log first)")
    ap.add_argument("--python", action="append", default=[], metavar="NAME=PATH",
                    help="an interpreter with dralab installed, measured under NAME (repeatable)")
    ap.add_argument("--command", action="append", choices=sorted(COMMANDS), default=[],
                    help="what to measure (repeatable; default: verify and check)")
    args = ap.parse_args()
    pythons = [p.split("=", 1) for p in args.python] or [["this", sys.executable]]
    if any(len(p) != 2 for p in pythons):
        ap.error("--python takes NAME=PATH")
    with tempfile.TemporaryDirectory() as tmp:
        log = args.log or day_log(tmp)
        print(f"log {log}: {os.path.getsize(log) / 1e6:.1f} MB")
        for command in args.command or ["verify", "check"]:
            for name, python in pythons:
                argv = [python, "-m", "dralab", *(a.format(log=log, tmp=tmp) for a in COMMANDS[command])]
                code, wall, cpu, rss = peak(argv)
                print(f"{command:<7} {name:<8} peak RSS {rss:6.0f} MiB  wall {wall:6.1f} s  CPU {cpu:6.1f} s  "
                      f"exit {code}", flush=True)


if __name__ == "__main__":
    main()

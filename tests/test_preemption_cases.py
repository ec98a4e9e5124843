"""Fidelity: upstream's DefaultPreemption tables (tests/scheduler_cases/preemption/, restated as snapshots in the
format of tests/workload_cases/README.md) played against dralab's scheduler with the workload cases' runner
(tests/test_workload_cases_run.py: the dump folded, the claim controller, the scheduler and the lifecycle reactor
until they settle, time advancing to wake-ups). A victim of dralab's own preemption is ended after its
grace period (the runner's Lifecycle reactor); a victim counts from its PodTerminating (graceful deletion) as well
as from its PodEvicted.

The README's "Results" table is checked against the files (`test_results_match_readme`)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from test_workload_cases import _problems, load_case
from test_workload_cases_run import Run, check

CASES = Path(__file__).parent / "scheduler_cases" / "preemption"
README = CASES / "README.md"


def case_files() -> list[Path]:
    return sorted(CASES.glob("*.yaml"))


PreemptionRun = Run  # counts a victim from its PodTerminating (graceful deletion) as well as its PodEvicted


@pytest.mark.parametrize("path", case_files(), ids=lambda p: p.stem)
def test_case_is_well_formed(path: Path) -> None:
    assert _problems(path) == []


@pytest.mark.parametrize("path", case_files(), ids=lambda p: p.stem)
def test_case(path: Path) -> None:
    test, manifests = load_case(path)
    spec = test["spec"]
    if spec.get("skip"):
        pytest.skip(spec["skip"])
    run = PreemptionRun(spec, manifests, path.name)
    problems = check(run, spec.get("expect") or {})
    assert problems == [], f"{path.name}:\n  " + "\n  ".join(problems)


def test_results_match_readme() -> None:
    """| cases | pass | skip | in the README, against the files (every case not skipped must pass test_case)."""
    counts: Counter[str] = Counter()
    for path in case_files():
        test, _ = load_case(path)
        counts["cases"] += 1
        counts["skip" if test["spec"].get("skip") else "pass"] += 1
    m = re.search(r"\|\s*preemption\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|", README.read_text())
    assert m is not None, "README.md has no Results row for preemption"
    assert tuple(int(g) for g in m.groups()) == (counts["cases"], counts["pass"], counts["skip"])

"""Upstream's DynamicResources test entries for device binding conditions (KEP-5007) and DRA extended resources
(KEP-5004), and NodeResourcesFit's entries for DRA-backed extended resources (fit_test.go), restated as dralab
cases (tests/scheduler_cases/dra-binding/, format of tests/workload_cases/README.md) and played against the
scheduler with the workload cases' runner (a dump folded, then the claim controller and the scheduler until idle)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_workload_cases import load_case
from test_workload_cases_run import Run, check

CASES = Path(__file__).resolve().parent / "scheduler_cases" / "dra-binding"
README = CASES / "README.md"
GROUPS = ("binding", "extended", "fit")


def files() -> list[Path]:
    return sorted(CASES.glob("*.yaml"))


@pytest.mark.parametrize("path", files(), ids=lambda p: p.stem)
def test_case(path: Path) -> None:
    test, manifests = load_case(path)
    spec = test["spec"]
    assert test["metadata"]["name"] == path.stem and spec["group"] in GROUPS and path.stem.startswith(spec["group"])
    assert spec["upstream"] or spec.get("origin") == "dralab"
    if spec.get("skip"):
        pytest.skip(spec["skip"])
    problems = check(Run(spec, manifests, path.name), spec.get("expect") or {})
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("group", GROUPS)
def test_counts_match_readme(group: str) -> None:
    specs = [s for s in (load_case(p)[0]["spec"] for p in files()) if s["group"] == group]
    upstream = [s for s in specs if s["upstream"]]
    counts = (len(upstream), sum(1 for s in upstream if not s.get("skip")), sum(1 for s in upstream if s.get("skip")),
              sum(1 for s in specs if not s["upstream"]))
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in README.read_text().splitlines()]
    table = [tuple(int(c) for c in r[1:5]) for r in rows if r and r[0] == group and len(r) >= 5
             and all(re.fullmatch(r"\d+", c) for c in r[1:5])]
    assert table == [counts], f"README row for {group}: {table}, files: {counts}"

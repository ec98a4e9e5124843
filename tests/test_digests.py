"""Every log dralab makes stays byte-identical across a change of structure (issue 19): each scenario in
scenarios/ under each autoscaler policy and seeds 0-2, the committed fixture logs, and a short day of the
day benchmark, against the digests committed in benchmarks/digests.json (benchmarks/digests.py computes
them; a change that means to change behaviour recomputes the file and says why in its commit)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import digests  # noqa: E402


def test_every_log_is_byte_identical_to_the_committed_digests() -> None:
    expected = json.loads((ROOT / "benchmarks" / "digests.json").read_text())
    assert set(expected["scenarios"]) >= {f"{p.relative_to(ROOT)}|count|0" for p in digests.scenario_files()}, \
        "a scenario has no committed digest: recompute benchmarks/digests.json"
    assert digests.differences(expected, digests.compute(2.0, 200)) == []

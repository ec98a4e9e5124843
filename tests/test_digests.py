"""Every log dralab makes stays byte-identical across a change of structure (issue 19): each scenario in
scenarios/ under each autoscaler policy and seeds 0-2, the committed fixture logs, and a short day of the
day benchmark, against the digests committed in benchmarks/digests.json (benchmarks/digests.py computes
them; a change that means to change behaviour recomputes the file and says why in its commit).

Two scenario sections: "scenarios" runs every file under the legacy profile (what dralab emulated before
Kubernetes version profiles: its digests are those committed before profiles existed, the proof that the 1.35
legacy model did not change), "scenarios-own-profile" each file under its own spec.kubernetes (default 1.37)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import digests  # noqa: E402


def test_every_log_is_byte_identical_to_the_committed_digests() -> None:
    expected = json.loads((ROOT / "benchmarks" / "digests.json").read_text())
    files = digests.scenario_files()
    legacy = [p for p in files if digests.loads_under_legacy(p)]  # 1.36/1.37 APIs do not (docs/versions.md)
    for part, required in (("scenarios", legacy), ("scenarios-own-profile", files)):
        assert set(expected[part]) >= {f"{p.relative_to(ROOT)}|count|0" for p in required}, \
            f"a scenario has no committed digest in {part}: recompute benchmarks/digests.json"
    assert digests.differences(expected, digests.compute(2.0, 200)) == []


def test_the_legacy_section_forces_the_legacy_profile_and_the_own_section_does_not() -> None:
    """A scenario marked 1.35 with only the Workload gates runs its DRA allocator without the alpha features
    the legacy model has on, and records its release: the two sections must differ for it (else one of them
    is not computed as it says)."""
    files = [ROOT / "scenarios" / "gang-quickstart.yaml"]
    legacy = digests.scenario_digests(files)
    own = digests.scenario_digests(files, own_profile=True)
    assert set(legacy) == set(own)
    assert all(legacy[k] != own[k] for k in legacy)

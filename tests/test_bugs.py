"""The upstream-bug registry (core/kube/bugs.py): switches named after upstream issues, on in the releases that
have the bug, set per scenario, recorded in the run configuration, refused when unknown."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dralab.core.kube.bugs import BUGS, KUEUE_VERSIONS, Bug, until
from dralab.core.kube.fields import FieldError
from dralab.core.kube.versions import (
    LEGACY_PROFILE,
    VERSIONS,
    make_profile,
    profile_config,
    profile_from_config,
    summary,
)

ROOT = Path(__file__).resolve().parents[1]


def test_every_bug_names_its_tracker_and_known_versions() -> None:
    for name, bug in BUGS.items():
        tracker, _, number = name.partition("#")
        assert tracker in ("autoscaler", "kubernetes", "kueue") and number.isdigit(), name
        assert number in bug.url, name
        versions = KUEUE_VERSIONS if bug.component == "kueue" else VERSIONS
        assert set(bug.present) <= set(versions), name
        if bug.fixed_in and bug.fixed_in in versions:  # fixed within the emulated range: not present from then
            assert all(v not in bug.present for v in versions[versions.index(bug.fixed_in):]), name


def test_until_lists_the_versions_before_the_fix() -> None:
    assert until("1.36") == ("1.34", "1.35")
    assert until("") == VERSIONS
    assert until("0.17", KUEUE_VERSIONS) == ("0.14", "0.15", "0.16")
    with pytest.raises(ValueError, match="not kueue versions"):
        Bug("kueue", "t", "u", ("1.35",))


def test_a_bug_follows_the_release_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = Bug("cluster-autoscaler", "t", "https://github.com/kubernetes/autoscaler/issues/1", until("1.36"), "1.36")
    monkeypatch.setitem(BUGS, "autoscaler#1", fake)
    assert make_profile("1.35").bug("autoscaler#1")
    assert not make_profile("1.36").bug("autoscaler#1")
    assert make_profile("1.37", bugs={"autoscaler#1": True}).bug("autoscaler#1")
    assert not make_profile("1.34", bugs={"autoscaler#1": False}).bug("autoscaler#1")
    assert not LEGACY_PROFILE.bug("autoscaler#1")  # logs from before profiles: no bug
    assert "autoscaler#1" in summary(make_profile("1.35"))["upstreamBugs"]
    assert "autoscaler#1" not in summary(make_profile("1.37")).get("upstreamBugs", [])  # (1.37 has open bugs)
    with pytest.raises(KeyError):
        make_profile("1.37").bug("autoscaler#2")


def test_switches_and_kueue_version_are_recorded_and_read_back() -> None:
    profile = make_profile("1.36", bugs={"autoscaler#3886": True}, kueue="0.16")
    entry = profile_config(profile)
    assert entry is not None and entry["bugs"] == {"autoscaler#3886": True} and entry["kueue"] == "0.16"
    back = profile_from_config(entry)
    assert back.bug("autoscaler#3886") and back.kueue == "0.16"
    plain = profile_config(make_profile("1.36"))
    assert plain is not None and "bugs" not in plain and "kueue" not in plain  # older run configs read the same


def test_unknown_switch_and_kueue_version_are_refused_with_their_path() -> None:
    from dralab.core.scenario.kubernetes import check_kubernetes

    with pytest.raises(FieldError, match=r"spec\.kubernetes\.bugs\.autoscaler#1: unknown upstream bug"):
        check_kubernetes({"bugs": {"autoscaler#1": True}}, {})
    with pytest.raises(FieldError, match=r"spec\.kubernetes\.kueue: unsupported Kueue version `0\.9`"):
        check_kubernetes({"kueue": "0.9"}, {})
    with pytest.raises(FieldError, match=r"spec\.kubernetes\.bugs\.autoscaler#3886"):
        check_kubernetes({"bugs": {"autoscaler#3886": "yes"}}, {})


def test_the_3886_switch_is_the_recheck_setting() -> None:
    """scale-down-race with the re-check on, and autoscaler#3886 switched on in spec.kubernetes.bugs: the same log
    as the scenario's own `recheckBeforeDelete: false`."""
    from dralab.core.scenario.load import parse_scenario
    from dralab.replay.simulation.sim import simulate

    doc = yaml.safe_load((ROOT / "scenarios" / "scale-down-race.yaml").read_text())
    original = simulate(parse_scenario(doc, "race.yaml"), 1)
    doc["spec"]["autoscaler"]["scaleDown"]["recheckBeforeDelete"] = True
    doc["spec"]["kubernetes"]["bugs"] = {"autoscaler#3886": True}
    switched = simulate(parse_scenario(doc, "race.yaml"), 1)
    assert switched.entries[1:] == original.entries[1:]  # the first entry is the run configuration
    assert b"autoscaler#3886" in switched.entries[0][1]
    doc["spec"]["kubernetes"]["bugs"] = {}
    fixed = simulate(parse_scenario(doc, "race.yaml"), 1)
    assert not any(b"NodeDeleted" in payload for _, payload in fixed.entries)
    assert any(b"NodeDeleted" in payload for _, payload in original.entries)


def test_the_command_line_sets_switches_over_the_scenario() -> None:
    from dralab.core.kube.versions import ProfileFlags, parse_bugs
    from dralab.core.scenario.kubernetes import check_kubernetes

    assert parse_bugs("autoscaler#3886=true") == {"autoscaler#3886": True}
    with pytest.raises(FieldError, match=r"--bugs: unknown upstream bug `autoscaler#1`"):
        parse_bugs("autoscaler#1=true")
    flags = ProfileFlags(bugs={"autoscaler#3886": False}, kueue="0.15")
    assert flags.given()
    profile, _, _ = check_kubernetes({"bugs": {"autoscaler#3886": True}}, {}, flags=flags)
    assert not profile.bug("autoscaler#3886") and profile.kueue == "0.15"


def test_run_takes_bugs_flag(tmp_path: Path) -> None:
    """`dralab sim --bugs autoscaler#3886=true` on scale-down-race with the re-check on: the node is deleted."""
    import json
    import subprocess
    import sys

    doc = yaml.safe_load((ROOT / "scenarios" / "scale-down-race.yaml").read_text())
    doc["spec"]["autoscaler"]["scaleDown"]["recheckBeforeDelete"] = True
    path = tmp_path / "race.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = {}
    for bugs in ("", "autoscaler#3886=true"):
        proc = subprocess.run([sys.executable, "-m", "dralab.cli", "sim", str(path), "-o", "json", "--bugs", bugs],
                              capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        out[bugs] = json.loads(proc.stdout)
    assert "autoscaler#3886" in out["autoscaler#3886=true"]["kubernetes"]["upstreamBugs"]
    assert "autoscaler#3886" not in out[""]["kubernetes"].get("upstreamBugs", [])
    bad = subprocess.run([sys.executable, "-m", "dralab.cli", "sim", str(path), "--bugs", "nope#1=true"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "--bugs: unknown upstream bug `nope#1`" in bad.stderr


def test_the_docs_list_every_bug_and_every_upstream_scenario() -> None:
    """docs/upstream-bugs.md has a row per registered bug, and names every scenario under scenarios/upstream/ (each
    of which exists)."""
    import re

    doc = (ROOT / "docs" / "upstream-bugs.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| [")]
    named = {re.match(r"\| \[([^\]]+)\]", row).group(1) for row in rows}  # type: ignore[union-attr]
    assert set(BUGS) <= named, sorted(set(BUGS) - named)
    files = {p.name for p in (ROOT / "scenarios" / "upstream").glob("*.yaml")}
    mentioned = set(re.findall(r"upstream/([\w.-]+\.yaml)", doc))
    assert mentioned <= files, sorted(mentioned - files)
    assert files <= mentioned, sorted(files - mentioned)


def test_the_3886_scenario_shows_both_outcomes() -> None:
    from dralab.core.scenario.load import load_scenario, parse_scenario
    from dralab.replay.simulation.sim import simulate

    path = ROOT / "scenarios" / "upstream" / "autoscaler-3886-scale-down-race.yaml"
    with_bug = simulate(load_scenario(str(path)), 1)
    assert any(b"NodeDeleted" in payload for _, payload in with_bug.entries)
    doc = yaml.safe_load(path.read_text())
    doc["spec"]["kubernetes"]["bugs"] = {"autoscaler#3886": False}
    fixed = simulate(parse_scenario(doc, path.name), 1)
    assert not any(b"NodeDeleted" in payload for _, payload in fixed.entries) and fixed.violations == []

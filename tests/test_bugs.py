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
    assert "autoscaler#1" in summary(make_profile("1.35"))["upstreamBugs"]  # beside the real bugs of 1.35
    assert "autoscaler#1" not in summary(make_profile("1.37")).get("upstreamBugs", [])
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

"""kube-scheduler and kube-controller-manager bugs of the upstream-bug registry (core/kube/bugs.py), each shown by
its scenario under scenarios/upstream/ with the bug and without it: the switch follows the release, and setting it
(`spec.kubernetes.bugs`, as `--bugs` does) gives the other outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dralab.core.kube.bugs import BUGS
from dralab.core.log.events import PodTerminating, PodUnschedulable, decode_record
from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import simulate

UPSTREAM = Path(__file__).resolve().parents[1] / "scenarios" / "upstream"


def run(name: str, bugs: dict[str, bool] | None = None, version: str | None = None) -> Any:
    doc = yaml.safe_load((UPSTREAM / f"{name}.yaml").read_text())
    if bugs is not None:
        doc["spec"]["kubernetes"]["bugs"] = bugs
    if version is not None:
        doc["spec"]["kubernetes"]["version"] = version
    return simulate(parse_scenario(doc, f"{name}.yaml"), doc["spec"]["seed"])


def events(result: Any, kind: type) -> list[tuple[int, Any]]:
    out = []
    for offset, payload in result.entries:
        record = decode_record(payload, offset)
        out += [(record.t, e) for e in record.events if isinstance(e, kind)]
    return out


def bound(result: Any) -> set[str]:
    return {p.key.rsplit("/", 1)[1] for p in result.state.pods.values() if p.node is not None}


def test_the_entries_name_their_releases() -> None:
    assert BUGS["kubernetes#137617"].present == ("1.35",) and BUGS["kubernetes#137617"].fixed_in == "1.36"
    assert BUGS["kubernetes#139016"].present == ("1.35", "1.36") and BUGS["kubernetes#139016"].fixed_in == "1.37"
    assert BUGS["kubernetes#141290"].present == ("1.34", "1.35", "1.36", "1.37")
    assert BUGS["kubernetes#141290"].component == "kube-controller-manager"
    assert BUGS["kubernetes#139034"].present == ("1.34", "1.35", "1.36")
    assert BUGS["kubernetes#139034"].fixed_in == "1.37"


def test_137617_a_gang_sharing_a_claim_never_completes_in_1_35() -> None:
    buggy = run("gang-shared-claim")
    assert bound(buggy) == set()  # nothing ever runs
    refused = [e for _, e in events(buggy, PodUnschedulable) if "in the process of being allocated" in e.message]
    assert refused and all(e.reason == "Unschedulable" for e in refused)
    assert refused[0].message == "resource claim default/single-gpu is in the process of being allocated"
    timeouts = [t for t, e in events(buggy, PodUnschedulable) if "timeout" in e.message]
    assert timeouts and min(timeouts) == 300_000  # the gang's deadline: the first worker released, again and again
    fixed = run("gang-shared-claim", bugs={"kubernetes#137617": False})
    assert bound(fixed) == {"worker-0", "worker-1"}
    assert not any("in the process" in e.message for _, e in events(fixed, PodUnschedulable))


def test_139016_mixed_claims_fail_score_in_1_35_and_1_36_only() -> None:
    for version in ("1.35", "1.36"):
        buggy = run("mixed-claims-score", version=version)
        assert bound(buggy) == {"worker-0"}, version
        pod = buggy.state.pods["pod/default/worker-1"]
        assert pod.condition is not None and pod.condition.reason == "SchedulerError"
        assert "number of allocations 1 is smaller than number of claims" in pod.condition.message
        assert len(buggy.state.nodes) == 2  # the autoscaler adds nothing for a SchedulerError pod
    for version in ("1.34", "1.37"):  # 1.34: no DRA Score; 1.37: fixed
        assert bound(run("mixed-claims-score", version=version)) == {"worker-0", "worker-1"}, version
    assert bound(run("mixed-claims-score", bugs={"kubernetes#139016": False})) == {"worker-0", "worker-1"}
    # a single feasible node: Score is not run, no error even with the bug (schedulePod's shortcut)
    doc = yaml.safe_load((UPSTREAM / "mixed-claims-score.yaml").read_text())
    doc["spec"]["nodes"][0]["count"] = 1
    doc["spec"]["nodeGroups"][0].update(min=1, max=1)
    one = simulate(parse_scenario(doc, "one.yaml"), 2)
    assert bound(one) == {"worker-0", "worker-1"}


def test_141290_taint_eviction_skips_extended_resource_pods() -> None:
    buggy = run("device-taint-extended-resource")
    deleted = {e.pod.rsplit("/", 1)[1] for _, e in events(buggy, PodTerminating)}
    assert deleted == {"infer"}  # `train` keeps its tainted GPUs
    assert buggy.state.pods["pod/default/train"].phase == "Succeeded"
    fixed = run("device-taint-extended-resource", bugs={"kubernetes#141290": False})
    deleted = {(t, e.pod.rsplit("/", 1)[1]) for t, e in events(fixed, PodTerminating)}
    assert deleted == {(60_000, "infer"), (60_000, "train")}


def test_legacy_profile_has_none_of_them() -> None:
    from dralab.core.kube.versions import LEGACY_PROFILE

    names = ("kubernetes#137617", "kubernetes#139016", "kubernetes#139034", "kubernetes#141290")
    assert not any(LEGACY_PROFILE.bug(name) for name in names)


def test_139034_a_committed_share_leaves_its_counters_free_before_1_37() -> None:
    buggy = run("shared-device-counters")  # 1.36
    pods = buggy.state.pods
    assert pods["pod/default/notebook"].node == pods["pod/default/finetune"].node == "gpu-0"
    devices = {r["device"] for c in buggy.state.dra.claims.values() if c.allocation is not None
               for r in c.allocation["devices"]["results"]}
    assert devices == {"gpu-0", "gpu-0-3g-0"}  # the whole GPU shared, and a partition of it: a double allocation
    assert any("counters-within-capacity" in str(v) for v in buggy.violations)
    for fixed in (run("shared-device-counters", version="1.37"),
                  run("shared-device-counters", bugs={"kubernetes#139034": False})):
        assert fixed.state.pods["pod/default/finetune"].node not in (None, "gpu-0")  # a node the autoscaler added
        assert not fixed.violations

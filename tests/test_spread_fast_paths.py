"""The fast-path property test (tests/test_scheduler_fast_paths.py) with pods that depend on other pods:
topology spread constraints (DoNotSchedule and ScheduleAnyway, minDomains, inclusion policies) and required
pod (anti-)affinity, mixed with pods that depend on nothing. The optimised scheduler must skip its feasibility
cache and failure memo for the former (their answer is not a function of the node's usage) and keep them for
the latter, and decide exactly as the plain profile loop (plain.py, with PodTopologySpread and
InterPodAffinity registered in profile.py).

Seen to fail when the failure memo was not skipped for dependent pods (a pod of another app got the first
one's spread failure) and when the feasibility cache answered them."""

from __future__ import annotations

import random
from typing import Any

import pytest
import test_scheduler_fast_paths as base
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dralab.core.log.events import PodUnschedulable

APPS = ("a", "b", "c")


def dependent_pod(r: random.Random, i: int) -> dict[str, Any]:
    manifest = PLAIN_POD(r, i)
    spec, meta = manifest["spec"], manifest["metadata"]
    app = r.choice(APPS)
    meta["labels"] = {"app": app}
    roll = r.random()
    if roll < 0.35:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": r.choice((1, 1, 2)), "topologyKey": "zone",
            "whenUnsatisfiable": r.choice(("DoNotSchedule", "DoNotSchedule", "ScheduleAnyway")),
            "labelSelector": {"matchLabels": {"app": app}},
            **({"minDomains": 3} if r.random() < 0.2 else {}),
            **({"nodeTaintsPolicy": "Honor"} if r.random() < 0.3 else {})}]
        if spec["topologySpreadConstraints"][0]["whenUnsatisfiable"] != "DoNotSchedule":
            spec["topologySpreadConstraints"][0].pop("minDomains", None)
    elif roll < 0.55:
        kind = r.choice(("podAffinity", "podAntiAffinity", "podAntiAffinity"))
        spec["affinity"] = {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": r.choice(APPS)}}}]}}
    return manifest


PLAIN_POD = base.random_pod


@pytest.fixture(autouse=True)
def _dependent_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "random_pod", dependent_pod)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), nodes=st.integers(0, 12), rounds=st.integers(1, 6),
       score=st.sampled_from(("most-allocated", "least-allocated")))
def test_fast_paths_decide_as_the_plain_framework_with_spread_and_affinity(seed: int, nodes: int, rounds: int,
                                                                           score: str) -> None:
    base.decide_both(seed, nodes, rounds, score)


def test_the_check_exercises_spread_and_affinity_failures() -> None:
    """The random pods do fail on spread and affinity (a check that cannot see them would prove nothing)."""
    causes: set[str] = set()
    for seed in range(8):
        lg = base.Log()
        r = random.Random(seed)
        for i in range(6):
            lg.node(f"n{i}", template=base.random_node(r))
        for i in range(30):
            lg.pod(dependent_pod(r, i))
        sched = base.Scheduler()
        events = sched.react(lg.state, 1_000, base.decision_rng(seed, "scheduler", lg.state.offset, 1_000)).events
        causes.update(e.cause for e in events if isinstance(e, PodUnschedulable))
    assert {"spread", "affinity"} <= causes


def test_incremental_counts_equal_a_recount(monkeypatch: pytest.MonkeyPatch) -> None:
    """The decision's counts kept incrementally over Cycle.moves (placement.py: spread_counts, existing, own)
    equal a full recount over the decision's pods at every attempt of the random runs above."""
    from dralab.core.scheduler import placement
    from dralab.core.scheduler.plugins import inter_pod_affinity as ipa
    from dralab.core.scheduler.plugins import pod_topology_spread as pts

    checked = [0]
    spread, existing, own = (placement.CyclePods.spread_counts, placement.CyclePods.existing,
                             placement.CyclePods.own)

    def spread_checked(self: placement.CyclePods, pod: Any, cs: Any) -> Any:
        got = spread(self, pod, cs)
        assert got == pts.domain_counts(pod, cs, self.domain_nodes(), self)
        checked[0] += 1
        return got

    def existing_checked(self: placement.CyclePods, pod: Any) -> Any:
        got = existing(self, pod)
        assert got == ipa.existing_anti(pod, self.with_anti())
        checked[0] += 1
        return got

    def own_checked(self: placement.CyclePods, affinity: Any, anti: Any) -> Any:
        got = own(self, affinity, anti)
        placed = [(p, n) for n in self.domain_nodes() for p in self.on(n.name)]
        assert got == ipa.own_counts(affinity, anti, placed)
        checked[0] += 1
        return got

    monkeypatch.setattr(placement.CyclePods, "spread_counts", spread_checked)
    monkeypatch.setattr(placement.CyclePods, "existing", existing_checked)
    monkeypatch.setattr(placement.CyclePods, "own", own_checked)
    for seed in range(12):
        base.decide_both(seed, 8, 4, "least-allocated")
    assert checked[0] > 100

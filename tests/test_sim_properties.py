"""Properties of whole simulated runs over small generated scenarios (hypothesis).

Scenarios: 1-3 node groups (GPU size, max, provisioning delay range, maybe a GPU taint, a price), a few
starting nodes, 1-15 pods with random GPU asks, arrival times, priorities, tolerations and run times, and
random scheduler / autoscaler settings. Each property runs the real simulator end to end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from builders import GPU_TAINT, GPU_TOLERATION, arrival, group, node_template, pod, scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dralab.core.checks.invariants import check
from dralab.core.log.events import PodBound, PodCreated, decode_record
from dralab.core.scenario.load import EXPANDERS, SCORE_STRATEGIES, Scenario
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import SimResult, Simulator
from dralab.replay.simulation.verify import verify

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class GroupSpec:
    gpu: int
    max: int
    delay_s: tuple[int, int]
    tainted: bool
    initial: int


@dataclass(frozen=True)
class PodSpec:
    gpu: int
    at_s: int
    tolerates: bool
    priority: int | None
    run_for_s: int | None

    def fits(self, g: GroupSpec) -> bool:
        return self.gpu <= g.gpu and (self.tolerates or not g.tainted)


@dataclass(frozen=True)
class Case:
    groups: tuple[GroupSpec, ...]
    pods: tuple[PodSpec, ...]
    score: str
    expander: str
    scan_s: int
    duration_s: int

    def scenario(self) -> Scenario:
        groups = [
            group(f"g{i}", max=g.max, delay=(f"{g.delay_s[0]}s", f"{g.delay_s[1]}s"), cost=float(1 + g.gpu * (i + 1)),
                  template=node_template(gpu=g.gpu, taints=[GPU_TAINT] if g.tainted else None))
            for i, g in enumerate(self.groups)
        ]
        workload: list[dict[str, Any]] = [
            arrival(f"{p.at_s}s", pod(f"p{i}", gpu=p.gpu, priority=p.priority,
                                      tolerations=[GPU_TOLERATION] if p.tolerates else None),
                    run_for=None if p.run_for_s is None else f"{p.run_for_s}s")
            for i, p in enumerate(self.pods)
        ]
        nodes = {f"g{i}": g.initial for i, g in enumerate(self.groups) if g.initial}
        return scenario(groups, nodes=nodes, workload=workload, duration=f"{self.duration_s}s", score=self.score,
                        expander=self.expander, scan_interval=f"{self.scan_s}s")


@st.composite
def group_specs(draw: st.DrawFn, min_max: int = 0) -> GroupSpec:
    mx = draw(st.integers(min_max, max(min_max, 4)))
    low = draw(st.integers(0, 60))
    return GroupSpec(
        gpu=draw(st.sampled_from([1, 2, 4, 8])),
        max=mx,
        delay_s=(low, low + draw(st.integers(0, 30))),
        tainted=draw(st.sampled_from([False, False, True])),
        initial=draw(st.integers(0, min(mx, 2))),
    )


pod_specs = st.builds(
    PodSpec,
    gpu=st.sampled_from([0, 1, 1, 2, 2, 3, 4, 4, 6, 8]),
    at_s=st.integers(0, 120),
    tolerates=st.booleans(),
    priority=st.sampled_from([None, 0, 10]),
    run_for_s=st.none() | st.integers(1, 300),
)


@st.composite
def cases(draw: st.DrawFn, *, roomy: bool = False) -> Case:
    """`roomy`: every group's max is at least the number of pods, so a pod that fits a group's template
    always finds room (a group at max has a node with nothing else on it) and must end up scheduled."""
    n = draw(st.integers(1, 15))
    pods = tuple(draw(st.lists(pod_specs, min_size=n, max_size=n)))
    groups = tuple(draw(st.lists(group_specs(len(pods) if roomy else 0), min_size=1, max_size=3)))
    scan_s = draw(st.integers(5, 30))
    last = max(p.at_s for p in pods)
    slowest = max(g.delay_s[1] for g in groups)
    # long enough for every pod to go through one scale-up round after another; each round may first wait for
    # its GPU pods to be 30 s old (cluster-autoscaler's unschedulablePodWithGpuTimeBuffer, release profiles)
    duration_s = last + (len(pods) + 2) * (scan_s + slowest + 1 + 30) if roomy else draw(st.integers(last + 1, 900))
    return Case(groups, pods, draw(st.sampled_from(SCORE_STRATEGIES)), draw(st.sampled_from(EXPANDERS)), scan_s,
                duration_s)


def run(case: Case, seed: int) -> SimResult:
    return Simulator(case.scenario(), seed).run()


@SETTINGS
@given(case=cases(), seed=st.integers(0, 2**32))
def test_same_seed_same_log_bytes(case: Case, seed: int) -> None:
    a, b = run(case, seed), run(case, seed)
    assert a.entries == b.entries
    assert a.state == b.state and a.conflicts == b.conflicts and a.decisions == b.decisions


@SETTINGS
@given(case=cases(), seed=st.integers(0, 2**32))
def test_invariants_always_hold(case: Case, seed: int) -> None:
    result = run(case, seed)
    assert result.violations == []
    assert check(result.state) == []
    # and the log says what the scenario said: every pod arrived exactly once
    created = [e for _, p in result.entries for e in decode_record(p, 0).events if isinstance(e, PodCreated)]
    assert len(created) == len(case.pods) == len(result.state.pods)
    bound = [e.pod for _, p in result.entries for e in decode_record(p, 0).events if isinstance(e, PodBound)]
    assert len(bound) == len(set(bound))


@SETTINGS
@given(case=cases(), seed=st.integers(0, 2**32))
def test_every_decision_verifies(case: Case, seed: int) -> None:
    result = run(case, seed)
    report = verify(LogFile("x", {}, result.entries))
    assert report.ok, report.divergence.render() if report.divergence else ""
    decisions = [decode_record(p, o) for o, p in result.entries]
    assert report.checked == sum(1 for r in decisions if r.source != "scenario") > 0
    assert report.state == result.state


@SETTINGS
@given(case=cases(roomy=True), seed=st.integers(0, 2**32))
def test_pods_that_fit_and_have_room_get_scheduled(case: Case, seed: int) -> None:
    result = run(case, seed)
    assert result.violations == []
    for i, p in enumerate(case.pods):
        state = result.state.pods[f"pod/default/p{i}"]
        if any(p.fits(g) for g in case.groups):
            assert state.bound_t >= 0, f"p{i} ({p}) still {state.phase}: {state.condition}"
        else:
            assert state.phase == "Pending"

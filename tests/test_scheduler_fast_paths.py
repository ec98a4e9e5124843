"""An independent check of the scheduler's fast paths (issue 19).

The reactor answers most attempts from caches kept within and across decisions (the per-shape
feasibility cache, the decision's failure memo, the static node lists, the DRA failure memo) and from an
inlined fit check and score. Here the optimised scheduler and a plain one (`fast_paths = False`:
core/scheduler/plain.py, every filter on every node visited) decide the same random clusters and pods,
decision after decision on the same log, and must write the same events: the same bindings, in the same
order, and the same pending reasons, messages and causes. Between decisions the cluster moves (pods
arrive and finish, nodes come, turn NotReady or Ready, get tainted), so the caches kept across decisions
are exercised too.

It was seen to fail on each of these deliberate breaks: the feasibility cache or the failure memo keyed
without the pod's requests, the kept node lists never renewed, the fold's journal ignored by the
feasibility cache, its block scan off by one, the DRA failure memo keyed without the node.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from builders import GPU_TAINT, GPU_TOLERATION, Log, node_template, pod
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dralab.core.engine.contract import decision_rng
from dralab.core.log.events import NodeNotReady, NodeReady, NodeTaintsChanged, PodBound
from dralab.core.scenario.load import load_scenario
from dralab.core.scheduler.reactor import SCORE_POLICIES, Scheduler
from dralab.replay.simulation.sim import SimulationStuck, Simulator

ZONES = ("a", "b")


def random_node(r: random.Random) -> dict[str, Any]:
    return node_template(
        gpu=r.choice((0, 1, 2, 4, 8)), cpu=str(r.choice((2, 4, 8, 16))), memory=f"{r.choice((4, 16, 64))}Gi",
        pods=r.choice((2, 3, 5, 110)), labels={"zone": r.choice(ZONES)},
        taints=[GPU_TAINT] if r.random() < 0.2 else None, unschedulable=r.random() < 0.05)


def random_pod(r: random.Random, i: int) -> dict[str, Any]:
    return pod(
        f"p{i}", gpu=r.choice((0, 0, 1, 2, 4, 8)), cpu=r.choice((None, "500m", "1", "2", "6")),
        memory=r.choice((None, "1Gi", "8Gi")), priority=r.choice((None, 0, 10)),
        node_selector={"zone": r.choice(ZONES)} if r.random() < 0.3 else None,
        tolerations=[GPU_TOLERATION] if r.random() < 0.5 else None)


def move(lg: Log, r: random.Random, t: int, next_node: list[int], next_pod: list[int]) -> None:
    """What happens between two decisions: pods arrive (often the same shapes again), finish; nodes come,
    turn NotReady or Ready again, get tainted or untainted."""
    for _ in range(r.randint(0, 6)):
        next_pod[0] += 1
        lg.pod(random_pod(r, next_pod[0]), t=t)
    running = sorted(k for k, p in lg.state.pods.items() if p.node is not None and p.phase == "Running")
    for k in r.sample(running, min(len(running), r.randint(0, 3))):
        lg.finish(k, t=t)
    names = sorted(lg.state.nodes)
    if r.random() < 0.3:
        next_node[0] += 1
        lg.node(f"n{next_node[0]}", template=random_node(r), t=t)
    if names and r.random() < 0.3:
        name = r.choice(names)
        lg.append(NodeNotReady(name=name) if lg.state.nodes[name].ready else NodeReady(name=name), t=t)
    if names and r.random() < 0.2:
        name = r.choice(names)
        lg.append(NodeTaintsChanged(name=name, taints=() if lg.state.nodes[name].taints else (GPU_TAINT,)), t=t)


def decide_both(seed: int, nodes: int, rounds: int, score: str) -> list[tuple[int, int, int]]:
    """Run both schedulers round after round; assert their events are equal; return per round (bindings,
    pending, nodes) so a caller can see what was exercised."""
    r = random.Random(seed)
    lg = Log()
    for i in range(nodes):
        lg.node(f"n{i}", template=random_node(r), ready=r.random() > 0.1)
    next_node, next_pod = [nodes], [0]
    for _ in range(r.randint(1, 3 * nodes + 3)):
        next_pod[0] += 1
        lg.pod(random_pod(r, next_pod[0]))
    fast, plain = Scheduler(score=score), Scheduler(score=score)
    plain.fast_paths = False
    seen = []
    now = 1_000
    for _ in range(rounds):
        view = lg.state
        got = fast.react(view, now, decision_rng(seed, "scheduler", view.offset, now)).events
        want = plain.react(view, now, decision_rng(seed, "scheduler", view.offset, now)).events
        assert got == want, f"seed {seed}, {score}, t={now}: the fast paths decided otherwise"
        bound = sum(isinstance(e, PodBound) for e in got)
        seen.append((bound, len(got) - bound, len(view.nodes)))
        if got:
            lg.append(*got, t=now, source="scheduler")
        now += r.choice((1_000, 30_000, 400_000))  # within and past the unschedulable pods' backoff
        move(lg, r, now, next_node, next_pod)
    return seen


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), nodes=st.integers(0, 12), rounds=st.integers(1, 6),
       score=st.sampled_from(SCORE_POLICIES))
def test_fast_paths_decide_as_the_plain_framework_on_small_clusters(seed: int, nodes: int, rounds: int,
                                                                    score: str) -> None:
    decide_both(seed, nodes, rounds, score)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), nodes=st.integers(101, 180), score=st.sampled_from(SCORE_POLICIES))
def test_fast_paths_decide_as_the_plain_framework_when_only_some_nodes_are_scored(seed: int, nodes: int,
                                                                                  score: str) -> None:
    """Past 100 nodes upstream stops at numFeasibleNodesToFind from a rotating start: the feasibility
    cache's block-wise scan and the failure memo's replayed start are then checked too."""
    decide_both(seed, nodes, 4, score)


def test_the_check_exercises_bindings_and_failures() -> None:
    seen = [x for seed in range(6) for x in decide_both(seed, 8, 4, "most-allocated")]
    assert sum(b for b, _, _ in seen) > 10 and sum(p for _, p, _ in seen) > 10


def test_the_switch_is_not_part_of_the_configuration() -> None:
    assert "fast_paths" not in repr(Scheduler())
    try:
        Scheduler(**{"fast_paths": False})
    except TypeError:
        pass
    else:
        raise AssertionError("a run's configuration could switch the fast paths off")


SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").rglob("*.yaml"))


def whole_log(path: Path, seed: int, fast_paths: bool) -> list[tuple[int, bytes]] | str:
    """The scenario's log with every reactor, the scheduler's fast paths on or off."""
    sim = Simulator(load_scenario(str(path)), seed)
    for reactor in sim.reactors:
        if isinstance(reactor, Scheduler):
            reactor.fast_paths = fast_paths
    try:
        entries: list[tuple[int, bytes]] = sim.run().entries
    except SimulationStuck as exc:  # a finding is an outcome too: the same one
        return f"stuck: {exc}"
    return entries


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_logs_the_same_with_the_plain_framework(path: Path) -> None:
    """With DRA claims, gangs, bookings and faults too (the DRA failure memo and the pods with claims are
    not covered by the random clusters above): the whole log, byte for byte."""
    assert whole_log(path, 0, False) == whole_log(path, 0, True)

"""The cloud and lifecycle reactors: the cloud accepts requested nodes (NodeProvisioning, its timing drawn
then), lifecycle registers them and turns them Ready on time, pods finish."""

from __future__ import annotations

import random

import pytest
from builders import GPU, Log, arrival, group, initial_state, node_template, pod, scenario

from dralab.core.cluster.nodes import GROUP_LABEL
from dralab.core.controllers.cloud import Cloud
from dralab.core.controllers.lifecycle import Lifecycle
from dralab.core.engine.contract import decide, decision_rng
from dralab.core.log.events import NodeCreated, NodeProvisioning, NodeReady, PodFinished
from dralab.core.state.cluster import ClusterState

NOW = 5_000


def react(view: ClusterState, now: int = NOW, seed: int = 0) -> tuple[tuple[object, ...], int | None]:
    decision = Lifecycle().react(view, now, decision_rng(seed, "lifecycle", view.offset, now))
    return decision.events, decision.wake_at


def cloud(view: ClusterState, now: int = NOW, seed: int = 0) -> tuple[object, ...]:
    return Cloud().react(view, now, decision_rng(seed, "cloud", view.offset, now)).events


def serve(lg: Log, now: int = NOW, seed: int = 0) -> list[NodeProvisioning]:
    """The cloud answers the open scale-ups at `now`; its decision is appended."""
    events = cloud(lg.state, now, seed)
    if events:
        lg.append(*events, t=now)  # type: ignore[arg-type]
    return [e for e in events if isinstance(e, NodeProvisioning)]


def gpu_log(delay: tuple[int, int] = (30_000, 45_000), initial: int = 0) -> Log:
    lg = Log()
    lg.group("gpu", max=10, template=node_template(gpu=8, labels={"kind": "a100"}), delay=delay)
    for i in range(initial):
        lg.node(f"gpu-{i}", group="gpu")
    return lg


def test_idle_cluster_nothing_to_do() -> None:
    assert react(gpu_log(initial=2).state) == ((), None)


def test_creates_outstanding_nodes_with_group_names() -> None:
    lg = gpu_log()
    lg.scale_up("gpu", 3)
    assert react(lg.state) == ((), None)  # lifecycle waits for the cloud
    made = serve(lg)
    assert [e.name for e in made] == ["gpu-0", "gpu-1", "gpu-2"]
    assert lg.state.node_groups["gpu"].outstanding == 3  # accepted, not registered: still coming
    for e in made:
        assert e.group == "gpu" and e.register_at == e.ready_at  # notReadyFor 0: registers as it turns Ready
        assert NOW + 30_000 <= e.ready_at <= NOW + 45_000
        assert e.node["metadata"]["name"] == e.name
        labels = e.node["metadata"]["labels"]
        assert labels["kind"] == "a100" and labels[GROUP_LABEL] == "gpu" and labels["kubernetes.io/hostname"] == e.name
        assert e.node["status"]["allocatable"][GPU] == "8"
    events, wake = react(lg.state)
    assert events == () and wake == min(e.ready_at for e in made)
    first = min(made, key=lambda e: e.ready_at)
    events, _ = react(lg.state, now=first.ready_at)
    assert events[:2] == (NodeCreated(name=first.name, group="gpu", node=first.node, ready_at=first.ready_at),
                          NodeReady(name=first.name))


def test_names_continue_after_initial_and_earlier_nodes() -> None:
    lg = gpu_log(initial=2)
    lg.scale_up("gpu", 1)
    serve(lg)
    lg.append(*react(lg.state, now=10**6)[0], t=10**6)
    lg.scale_up("gpu", 2)
    assert [e.name for e in serve(lg, now=10**6)] == ["gpu-3", "gpu-4"]
    assert lg.state.nodes_by_group["gpu"].keys() == {"gpu-0", "gpu-1", "gpu-2"}


def test_created_nodes_are_not_created_again() -> None:
    lg = gpu_log()
    lg.scale_up("gpu", 2)
    serve(lg)
    assert cloud(lg.state) == ()
    lg.append(*react(lg.state, now=10**6)[0], t=10**6)
    assert lg.state.node_groups["gpu"].outstanding == 0
    events, _ = react(lg.state, now=10**6)
    assert not any(isinstance(e, NodeCreated) for e in events)


def test_template_is_not_mutated() -> None:
    lg = gpu_log()
    before = repr(lg.state.node_groups["gpu"].template)
    lg.scale_up("gpu", 2)
    serve(lg, seed=3)
    assert repr(lg.state.node_groups["gpu"].template) == before


def test_fixed_delay() -> None:
    lg = gpu_log(delay=(12_000, 12_000))
    lg.scale_up("gpu", 2)
    assert [e.ready_at for e in serve(lg)] == [NOW + 12_000] * 2
    assert react(lg.state) == ((), NOW + 12_000)


def test_delays_are_drawn_across_the_range_and_fixed_by_the_seed() -> None:
    lg = gpu_log(delay=(30_000, 45_000))
    lg.scale_up("gpu", 1)
    seen = set()
    for seed in range(40):
        events = cloud(lg.state, seed=seed)
        assert cloud(lg.state, seed=seed) == events
        seen.add(events[0].ready_at)  # type: ignore[attr-defined]
    assert len(seen) > 20 and all(NOW + 30_000 <= t <= NOW + 45_000 for t in seen)


def test_node_ready_at_ready_at_not_before() -> None:
    lg = gpu_log(delay=(30_000, 30_000))
    lg.scale_up("gpu", 1)
    serve(lg)
    ready_at = lg.state.provisioning_nodes["gpu-0"].ready_at
    assert ready_at == NOW + 30_000
    assert react(lg.state, now=ready_at - 1) == ((), ready_at)
    lg.append(*react(lg.state, now=ready_at)[0][:1], t=ready_at)  # registered, not Ready yet
    assert lg.state.nodes["gpu-0"].ready_at == ready_at and not lg.state.nodes["gpu-0"].ready
    events, wake = react(lg.state, now=ready_at)
    assert events == (NodeReady(name="gpu-0"),) and wake is None
    events, _ = react(lg.state, now=ready_at + 10_000)  # late wake-up: still turns Ready
    assert events == (NodeReady(name="gpu-0"),)
    lg.append(*events, t=ready_at)
    assert lg.state.nodes["gpu-0"].ready and lg.state.nodes["gpu-0"].ready_t == ready_at
    assert react(lg.state, now=ready_at + 1) == ((), None)


def test_node_without_ready_time_waits() -> None:
    lg = gpu_log()
    lg.node("manual", ready=False, ready_at=-1, initial=False)
    assert react(lg.state, now=10**9) == ((), None)


def test_pod_finishes_after_run_for() -> None:
    lg = gpu_log(initial=1)
    k = lg.pod(pod("job", gpu=1), run_for_ms=60_000)
    forever = lg.pod(pod("svc", gpu=1))
    lg.bind(k, "gpu-0", t=1_000)
    lg.bind(forever, "gpu-0", t=1_000)
    assert react(lg.state, now=1_000) == ((), 61_000)
    assert react(lg.state, now=60_999) == ((), 61_000)
    events, wake = react(lg.state, now=61_000)
    assert events == (PodFinished(pod=k),) and wake is None
    lg.append(*events, t=61_000)
    assert lg.state.pods[k].phase == "Succeeded" and lg.state.pods[k].finished_t == 61_000
    assert react(lg.state, now=120_000) == ((), None)


def test_pending_pod_does_not_finish() -> None:
    lg = gpu_log()
    lg.pod(pod("job", gpu=1), run_for_ms=1)
    assert react(lg.state, now=10**9) == ((), None)


def test_wake_is_the_earliest_pending_time() -> None:
    lg = gpu_log(delay=(40_000, 40_000), initial=1)
    lg.scale_up("gpu", 1)
    serve(lg, now=0)  # gpu-1 registers and turns Ready at 40 s
    a = lg.pod(pod("a", gpu=1), run_for_ms=50_000)
    b = lg.pod(pod("b", gpu=1), run_for_ms=25_000)
    lg.bind(a, "gpu-0", t=1_000)
    lg.bind(b, "gpu-0", t=2_000)
    assert react(lg.state, now=3_000) == ((), 27_000)
    lg.finish(b, t=27_000)
    assert react(lg.state, now=27_000) == ((), 40_000)
    lg.scale_up("gpu", 1)  # a node accepted now at 30 s is Ready at 70 s, after pod a finishes at 51 s
    assert [e.name for e in serve(lg, now=30_000)] == ["gpu-2"]
    assert react(lg.state, now=30_000) == ((), 40_000)


def test_everything_due_at_once() -> None:
    lg = gpu_log(delay=(0, 0), initial=1)
    lg.scale_up("gpu", 1)
    serve(lg, now=0)
    k = lg.pod(pod("a", gpu=1), run_for_ms=10)
    lg.bind(k, "gpu-0", t=0)
    lg.scale_up("gpu", 1)
    serve(lg, now=10)
    events, wake = react(lg.state, now=10)
    assert [type(e) for e in events] == [NodeCreated, NodeReady, NodeCreated, NodeReady, PodFinished]
    assert wake is None


def test_scenario_initial_nodes_are_group_dash_index_and_ready() -> None:
    sc = scenario([group("a", max=3), group("b", max=2, template=node_template(gpu=2))], nodes={"a": 2, "b": 1},
                  workload=[arrival("1s", pod("p"))])
    state = initial_state(sc)
    assert list(state.nodes) == ["a-0", "a-1", "b-0"]
    assert all(n.ready for n in state.nodes.values())
    assert {g: (s.created, s.initial, s.outstanding, s.target_size) for g, s in state.node_groups.items()} == {
        "a": (2, 2, 0, 2), "b": (1, 1, 0, 1)}
    assert react(state) == ((), None)


def test_decide_is_reproducible() -> None:
    lg = gpu_log()
    lg.scale_up("gpu", 4)
    a, wake_a = decide(Cloud(), lg.state, NOW, seed=11)
    b, wake_b = decide(Cloud(), lg.state, NOW, seed=11)
    assert a == b and wake_a == wake_b and a is not None
    assert a.source == "cloud" and a.view == lg.state.offset and a.t == NOW
    lg.append(*a.events, t=NOW)
    c, _ = decide(Lifecycle(), lg.state, 10**6, seed=11)
    assert c is not None and c.source == "lifecycle"


@pytest.mark.parametrize("seed", range(5))
def test_rng_is_only_used_for_ranges(seed: int) -> None:
    class NoRandom(random.Random):
        def randint(self, a: int, b: int) -> int:  # pragma: no cover - failing path
            raise AssertionError("rng used for a fixed delay")

    lg = gpu_log(delay=(7_000, 7_000))
    lg.scale_up("gpu", 2)
    events = Cloud().react(lg.state, NOW, NoRandom(seed)).events
    assert [e.ready_at for e in events if isinstance(e, NodeProvisioning)] == [NOW + 7_000] * 2

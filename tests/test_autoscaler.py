"""The autoscaler reactor: which pods it helps, upcoming nodes, max, binpacking, template filters, expanders."""

from __future__ import annotations

import random
from typing import Any

import pytest
from builders import GPU, GPU_TAINT, GPU_TOLERATION, Log, node_template, pod

from dralab.core.autoscaler.provisioning.estimator import binpack
from dralab.core.autoscaler.reactor import Autoscaler
from dralab.core.autoscaler.simulation.capacity import Simulation
from dralab.core.engine.contract import decision_rng
from dralab.core.log.events import NodeCreated, PodUnschedulable, ScaleUpRequested
from dralab.core.scheduler.plugins.dynamic_resources import DraPlugin
from dralab.core.scheduler.reactor import Scheduler
from dralab.core.state.cluster import ClusterState

NOW = 20_000


def react(view: ClusterState, seed: int = 0, **settings: Any) -> tuple[ScaleUpRequested | None, int | None]:
    decision = Autoscaler(**settings).react(view, NOW, decision_rng(seed, "autoscaler", view.offset, NOW))
    assert len(decision.events) <= 1
    event = decision.events[0] if decision.events else None
    assert event is None or isinstance(event, ScaleUpRequested)
    return event, decision.wake_at


def scale_up(view: ClusterState, seed: int = 0, **settings: Any) -> ScaleUpRequested | None:
    return react(view, seed, **settings)[0]


def g(*, max: int = 10, cost: float = 0.0, **template: Any) -> dict[str, Any]:
    """A node group's settings: its max, its price and its template (`node_template` keywords)."""
    return {"max": max, "cost": cost, "template": node_template(**template)}


def groups(**specs: dict[str, Any]) -> Log:
    """A log defining one node group per keyword (name=g(...)), in keyword order."""
    lg = Log()
    for name, spec in specs.items():
        lg.group(name, **spec)
    return lg


def pending(lg: Log, manifest: dict[str, Any], *, reason: str = "Unschedulable") -> str:
    k = lg.pod(manifest)
    lg.append(PodUnschedulable(pod=k, reason=reason, message="0/0 nodes are available.", cause="no-nodes"))
    return k


# ---------------------------------------------------------------- which pods


def test_scales_up_for_an_unschedulable_pod() -> None:
    lg = groups(gpu=g(gpu=8))
    k = pending(lg, pod("p", gpu=2))
    event, wake = react(lg.state)
    assert event == ScaleUpRequested(group="gpu", delta=1, pods=(k,))
    assert wake == NOW + 10_000


def test_ignores_pods_the_scheduler_has_not_marked_unschedulable() -> None:
    lg = groups(gpu=g(gpu=8))
    lg.pod(pod("fresh", gpu=2))  # no condition yet
    pending(lg, pod("errored", gpu=2), reason="SchedulerError")
    event, wake = react(lg.state)
    assert event is None and wake == NOW + 10_000


def test_ignores_bound_pods() -> None:
    lg = groups(gpu=g(gpu=8))
    lg.node("gpu-0", group="gpu")
    k = pending(lg, pod("p", gpu=2))
    lg.bind(k, "gpu-0")
    assert scale_up(lg.state) is None


@pytest.mark.parametrize("interval", [1, 10_000, 45_000])
def test_wakes_one_scan_interval_later(interval: int) -> None:
    lg = groups(gpu=g(gpu=8))
    assert react(lg.state, scan_interval_ms=interval)[1] == NOW + interval
    pending(lg, pod("p", gpu=1))
    assert react(lg.state, scan_interval_ms=interval)[1] == NOW + interval


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown expander"):
        Autoscaler(expander="cheapest")
    with pytest.raises(ValueError, match="scan interval"):
        Autoscaler(scan_interval_ms=0)


# ---------------------------------------------------------------- upcoming nodes


def test_requested_nodes_absorb_the_pods_they_were_asked_for() -> None:
    lg = groups(gpu=g(gpu=8))
    k = pending(lg, pod("p", gpu=2))
    first = scale_up(lg.state)
    assert first is not None and first.pods == (k,)
    lg.append(first)
    assert scale_up(lg.state) is None  # requested, not created yet


def test_created_not_ready_nodes_absorb_pods() -> None:
    lg = groups(gpu=g(gpu=8))
    pending(lg, pod("p", gpu=2))
    lg.scale_up("gpu", 1)
    lg.node("gpu-0", group="gpu", ready=False, ready_at=NOW + 30_000, initial=False)
    assert lg.state.node_groups["gpu"].outstanding == 0
    assert scale_up(lg.state) is None


def test_upcoming_capacity_is_counted_not_just_node_count() -> None:
    lg = groups(gpu=g(gpu=8))
    keys = [pending(lg, pod(f"p{i}", gpu=4)) for i in range(3)]
    lg.scale_up("gpu", 1)  # one upcoming node holds two of the three pods
    event = scale_up(lg.state)
    assert event == ScaleUpRequested(group="gpu", delta=1, pods=(keys[2],))


def test_not_ready_node_outside_any_group_is_not_upcoming() -> None:
    lg = groups(gpu=g(gpu=8))
    lg.node("stray", ready=False)
    k = pending(lg, pod("p", gpu=2))
    assert scale_up(lg.state) == ScaleUpRequested(group="gpu", delta=1, pods=(k,))


def test_upcoming_node_of_another_shape_does_not_absorb() -> None:
    lg = groups(small=g(gpu=1, max=1), big=g(gpu=8))
    lg.scale_up("small", 1)
    k = pending(lg, pod("p", gpu=4))
    assert scale_up(lg.state) == ScaleUpRequested(group="big", delta=1, pods=(k,))


def test_no_second_scale_up_once_the_new_node_is_ready() -> None:
    lg = groups(gpu=g(gpu=8))
    pending(lg, pod("p", gpu=2))
    lg.scale_up("gpu", 1)
    lg.node("gpu-0", group="gpu", ready=True, initial=False)  # Ready, the scheduler has not run yet
    assert scale_up(lg.state) is None


# ---------------------------------------------------------------- max


def test_room_is_max_minus_target_size() -> None:
    lg = groups(gpu=g(gpu=8, max=3))
    lg.node("gpu-0", group="gpu")
    lg.scale_up("gpu", 1)
    lg.node("gpu-1", group="gpu", initial=False)  # ready, full
    for name in ("gpu-0", "gpu-1"):
        lg.bind(lg.pod(pod(f"fill-{name}", gpu=8)), name)
    keys = [pending(lg, pod(f"p{i}", gpu=8)) for i in range(4)]
    assert lg.state.node_groups["gpu"].target_size == 2
    event = scale_up(lg.state)
    assert event == ScaleUpRequested(group="gpu", delta=1, pods=(keys[0],))
    lg.append(event)
    lg.node("gpu-2", group="gpu", initial=False)
    lg.bind(keys[0], "gpu-2")
    assert lg.state.node_groups["gpu"].target_size == 3
    assert scale_up(lg.state) is None  # at max


def test_a_group_at_max_is_skipped_for_another() -> None:
    lg = groups(a=g(gpu=8, max=0), b=g(gpu=8, max=2))
    k = pending(lg, pod("p", gpu=1))
    assert scale_up(lg.state, expander="random") == ScaleUpRequested(group="b", delta=1, pods=(k,))


# ---------------------------------------------------------------- binpacking


def test_binpacking_counts_first_fit_nodes() -> None:
    lg = groups(gpu=g(gpu=8))
    keys = [pending(lg, pod(f"p{i}", gpu=g)) for i, g in enumerate([4, 4, 4, 2, 2])]
    event = scale_up(lg.state)
    assert event == ScaleUpRequested(group="gpu", delta=2, pods=tuple(keys))


def test_binpacking_follows_priority_order() -> None:
    lg = groups(gpu=g(gpu=8, max=1))
    low = pending(lg, pod("low", gpu=6))
    high = pending(lg, pod("high", gpu=4, priority=5))
    also = pending(lg, pod("also", gpu=4))
    event = scale_up(lg.state)
    assert event == ScaleUpRequested(group="gpu", delta=1, pods=(high, also))
    assert low not in event.pods


def test_binpacking_counts_cpu_and_pod_slots() -> None:
    lg = groups(cpu=g(gpu=0, cpu="4", pods=3))
    keys = [pending(lg, pod(f"p{i}", cpu="1")) for i in range(7)]
    event = scale_up(lg.state)
    assert event is not None and event.delta == 3 and event.pods == tuple(keys)


def test_binpack_waste() -> None:
    lg = groups(gpu=g(gpu=8))
    state = lg.state
    pods = [lg.state.pods[pending(lg, pod(f"p{i}", gpu=3))] for i in range(3)]
    count, placed, waste = binpack(pods, state.node_groups["gpu"], 5, Simulation(state, "count", DraPlugin(), {}))
    assert (count, len(placed)) == (2, 3)
    assert waste == pytest.approx(1 - 9 / 16)
    count, placed, _ = binpack(pods, state.node_groups["gpu"], 1, Simulation(state, "count", DraPlugin(), {}))
    assert (count, len(placed)) == (1, 2)


# ---------------------------------------------------------------- template filters


@pytest.mark.parametrize(
    "manifest",
    [
        pod("p", gpu=1, node_selector={"zone": "b"}),
        pod("p", gpu=16),
        pod("p", cpu="200"),
    ],
)
def test_pods_the_template_cannot_take_are_not_helped(manifest: dict[str, Any]) -> None:
    lg = groups(gpu=g(gpu=8, cpu="96", labels={"zone": "a"}))
    pending(lg, manifest)
    assert scale_up(lg.state) is None


def test_untolerated_template_taint_is_not_helped_a_toleration_is() -> None:
    lg = groups(gpu=g(gpu=8, taints=[GPU_TAINT]))
    pending(lg, pod("plain", gpu=1))
    assert scale_up(lg.state) is None
    k = pending(lg, pod("tolerant", gpu=1, tolerations=[GPU_TOLERATION]))
    assert scale_up(lg.state) == ScaleUpRequested(group="gpu", delta=1, pods=(k,))


def test_selector_picks_the_matching_group() -> None:
    lg = groups(a=g(gpu=8, labels={"zone": "a"}), b=g(gpu=8, labels={"zone": "b"}))
    k = pending(lg, pod("p", gpu=1, node_selector={"zone": "b"}))
    for seed in range(10):
        assert scale_up(lg.state, seed, expander="random") == ScaleUpRequested(group="b", delta=1, pods=(k,))


# ---------------------------------------------------------------- expanders


def test_least_waste() -> None:
    lg = groups(big=g(gpu=8), small=g(gpu=2))
    k = pending(lg, pod("p", gpu=2))
    for seed in range(10):
        assert scale_up(lg.state, seed, expander="least-waste") == ScaleUpRequested(group="small", delta=1, pods=(k,))


def test_most_pods() -> None:
    lg = groups(big=g(gpu=8, max=1), small=g(gpu=2, max=1))
    keys = [pending(lg, pod(f"p{i}", gpu=2)) for i in range(4)]
    for seed in range(10):
        event = scale_up(lg.state, seed, expander="most-pods")
        assert event == ScaleUpRequested(group="big", delta=1, pods=tuple(keys))


def test_price_prefers_the_cheaper_cost_per_pod() -> None:
    lg = groups(cheap=g(gpu=2, cost=3.0), dear=g(gpu=2, cost=10.0))
    k = pending(lg, pod("p", gpu=1))
    for seed in range(10):
        assert scale_up(lg.state, seed, expander="price") == ScaleUpRequested(group="cheap", delta=1, pods=(k,))


def test_price_counts_pods_per_node() -> None:
    # a big node at 10/h holds 4 pods (2.5/pod); small nodes at 3/h hold 1 each (3/pod)
    lg = groups(big=g(gpu=8, cost=10.0), small=g(gpu=2, cost=3.0))
    keys = [pending(lg, pod(f"p{i}", gpu=2)) for i in range(4)]
    assert scale_up(lg.state, expander="price") == ScaleUpRequested(group="big", delta=1, pods=tuple(keys))


def test_priority() -> None:
    lg = groups(a=g(gpu=8), b=g(gpu=8), c=g(gpu=8))
    k = pending(lg, pod("p", gpu=1))
    for seed in range(10):
        event = scale_up(lg.state, seed, expander="priority", priorities={"a": 1, "b": 10, "c": 5})
        assert event == ScaleUpRequested(group="b", delta=1, pods=(k,))


def test_priority_ignores_groups_that_cannot_help() -> None:
    lg = groups(a=g(gpu=8), b=g(gpu=1))
    k = pending(lg, pod("p", gpu=4))
    assert scale_up(lg.state, expander="priority", priorities={"b": 100}) == ScaleUpRequested(
        group="a", delta=1, pods=(k,))


@pytest.mark.parametrize("expander", ["random", "priority", "least-waste"])
def test_ties_go_to_the_seeded_rng(expander: str) -> None:
    lg = groups(a=g(gpu=8), b=g(gpu=8), c=g(gpu=8))
    pending(lg, pod("p", gpu=1))
    chosen = set()
    for seed in range(40):
        event = scale_up(lg.state, seed, expander=expander)
        assert event is not None
        assert scale_up(lg.state, seed, expander=expander) == event
        chosen.add(event.group)
    assert chosen == {"a", "b", "c"}


def test_random_expander_chooses_only_among_options() -> None:
    lg = groups(a=g(gpu=8), b=g(gpu=8), none=g(gpu=0))
    pending(lg, pod("p", gpu=1))
    assert {scale_up(lg.state, s, expander="random").group for s in range(30)} == {"a", "b"}  # type: ignore[union-attr]


# ---------------------------------------------------------------- with the scheduler's own view


def test_scale_up_helps_what_the_scheduler_could_not_place() -> None:
    lg = groups(gpu=g(gpu=4))
    lg.node("gpu-0", group="gpu", template=node_template(gpu=4))
    keys = [lg.pod(pod(f"p{i}", gpu=2)) for i in range(4)]
    lg.append(*Scheduler().react(lg.state, NOW, random.Random(0)).events)
    waiting = tuple(k for k in keys if lg.state.pods[k].phase == "Pending")
    assert len(waiting) == 2
    assert scale_up(lg.state) == ScaleUpRequested(group="gpu", delta=1, pods=waiting)


def test_scale_up_applies_and_lifecycle_style_creation_keeps_it_quiet() -> None:
    lg = groups(gpu=g(gpu=8))
    pending(lg, pod("p", gpu=8))
    pending(lg, pod("q", gpu=8))
    event = scale_up(lg.state)
    assert event is not None and event.delta == 2
    lg.append(event)
    for i in range(2):
        lg.append(NodeCreated(name=f"gpu-{i}", group="gpu", node={"metadata": {"name": f"gpu-{i}"},
                                                                   "status": {"allocatable": {GPU: "8"}}}))
    assert lg.state.node_groups["gpu"].outstanding == 0
    assert scale_up(lg.state) is None

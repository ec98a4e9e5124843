"""The autoscaler's view of PodGroups (1.36/1.37), per policy, through the simulator and verify.

`count` and `dra` are cluster-autoscaler 1.37: pod by pod, blind to PodGroups, their minCount and their
topology constraints (kubernetes/autoscaler#8783, #9570), so a group the scheduler rejects whole still looks
like pods that fit existing nodes one at a time. `atomic` scales a PodGroup as one unit: a gang's minCount
(counting its running pods), in one topology domain, or nothing.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from builders import arrival, group, node_template
from test_scheduler_podgroup import events_of, member, podgroup, pods_named, run

from dralab.core.analysis.metrics import compute_metrics
from dralab.core.analysis.run_metrics import RunMetrics
from dralab.core.autoscaler.provisioning.scale_up import podgroup_units
from dralab.core.autoscaler.reactor import Autoscaler
from dralab.core.kube.versions import make_profile, profile_config
from dralab.core.log.events import PodBound, ScaleUpRequested, decode_record
from dralab.replay.simulation.sim import SimResult

BLIND = ("count", "dra")


def simulate_policy(policy: str, arrivals: list[tuple[dict[str, Any], str | None]], podgroups: list[dict[str, Any]],
                    groups: list[dict[str, Any]], nodes: dict[str, int], *, duration: str = "10m",
                    seed: int = 3) -> SimResult:
    """tests/test_scheduler_podgroup.py's `run` (a 1.37 scenario, simulated and verified) under one policy."""
    result: SimResult = run(arrivals, podgroups, groups=groups, nodes=nodes, duration=duration, seed=seed,
                            policy=policy)
    return result


def metrics(result: SimResult, end: str = "10m") -> RunMetrics:
    ms = {"10m": 600_000, "30m": 1_800_000}[end]
    return compute_metrics(((o, decode_record(p, o)) for o, p in result.entries), ms)


def racks(nodes: int = 2, room: int = 1) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Two racks of `nodes` 8-GPU nodes each, each rack its own node group that may grow by `room`."""
    return ([group(f"rack-{r}", min=nodes, max=nodes + room, delay="1m",
                   template=node_template(gpu=8, labels={"rack": r})) for r in ("a", "b")],
            {"rack-a": nodes, "rack-b": nodes})


def wrong_shape(policy: str, seed: int = 3) -> SimResult:
    """Six 4-GPU pods of a gang (minCount 6) that must share a rack; each rack holds four."""
    groups, nodes = racks()
    return simulate_policy(policy, [(arrival(0, member(), count=6, run_for="20m"), "train")],
                           [podgroup(min_count=6, topology="rack")], groups, nodes, seed=seed)


def rack_of(result: SimResult, node: str) -> str:
    return str(result.state.nodes[node].manifest["metadata"]["labels"]["rack"])


@pytest.mark.parametrize("policy", BLIND)
def test_blind_policies_add_nothing_for_a_group_no_rack_can_hold(policy: str) -> None:
    """Each pod fits an existing node on its own (8 free slots for 6 pods), so `count`/`dra` see nothing to
    add; the scheduler rejects the group every time (no rack holds six), and 32 GPUs stay free."""
    result = wrong_shape(policy)
    assert events_of(result, ScaleUpRequested) == []
    assert events_of(result, PodBound) == []
    for p in pods_named(result, "worker"):
        assert p.condition is not None and "no rack domain fits the pod group" in p.condition.message
    m = metrics(result)
    assert m.gpu_hours_used == 0 and m.gpu_hours_paid == pytest.approx(32 * 10 / 60)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_atomic_adds_one_node_in_one_rack_and_the_group_binds_there_in_one_record(seed: int) -> None:
    result = wrong_shape("atomic", seed)
    ups = [e for _, _, e in events_of(result, ScaleUpRequested)]
    assert len(ups) == 1 and ups[0].delta == 1 and ups[0].atomic
    assert len(ups[0].pods) == 6
    bound = events_of(result, PodBound)
    assert len(bound) == 6 and len({offset for offset, _, _ in bound}) == 1
    assert {rack_of(result, e.node) for _, _, e in bound} == {ups[0].group.removeprefix("rack-")}
    added = [n for n in result.state.nodes.values() if n.group == ups[0].group and not n.name.startswith("rack-")]
    assert {e.node for _, _, e in bound} >= {n.name for n in added}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_atomic_picks_the_rack_by_least_waste(seed: int) -> None:
    """Five 4-GPU pods, minCount 5, one node per rack: rack a's has room for one pod (another pod holds
    half of it), rack b's for two. Both racks need two new nodes; in rack a they are filled (four pods),
    in rack b a quarter stays free (three pods on 16 GPUs): least waste picks rack a, whatever the seed.
    (Pod by pod, two pods are left over either way, one new node in either rack: a coin toss.)"""
    groups, nodes = racks(nodes=1, room=2)
    other = member("other", gpu=4)
    other["spec"]["nodeSelector"] = {"rack": "a"}
    result = simulate_policy("atomic", [(arrival(0, other, count=1, run_for="20m"), None),
                                        (arrival("1s", member(), count=5, run_for="20m"), "train")],
                             [podgroup(min_count=5, topology="rack")], groups, nodes, seed=seed)
    ups = [e for _, _, e in events_of(result, ScaleUpRequested)]
    assert [(u.group, u.delta, u.atomic) for u in ups] == [("rack-a", 2, True)]
    bound = [e for _, _, e in events_of(result, PodBound) if "worker" in e.pod]
    assert len(bound) == 5 and {rack_of(result, e.node) for e in bound} == {"a"}


def min_count_story(policy: str) -> SimResult:
    """A gang of six 4-GPU pods, minCount 6, one 8-GPU node, a group that may add one more: each pod fits
    a node of the group, but all six never can (four at most)."""
    groups = [group("gpu", min=1, max=2, delay="1m", template=node_template(gpu=8))]
    return simulate_policy(policy, [(arrival(0, member(), count=6, run_for="20m"), "train")],
                           [podgroup(min_count=6)], groups, {"gpu": 1}, duration="30m")


def test_count_pays_for_a_node_a_gang_short_of_its_min_count_never_uses() -> None:
    result = min_count_story("count")
    ups = [e for _, _, e in events_of(result, ScaleUpRequested)]
    assert ups and ups[0].delta == 1 and not ups[0].atomic
    assert events_of(result, PodBound) == []
    m = metrics(result, "30m")
    assert m.nodes_never_used >= 1 and m.scale_ups_without_pod >= 1


def test_atomic_adds_nothing_when_min_count_is_out_of_reach() -> None:
    result = min_count_story("atomic")
    assert events_of(result, ScaleUpRequested) == []
    assert events_of(result, PodBound) == []


def test_atomic_scales_a_gang_whole_when_its_group_has_room() -> None:
    """The same gang with room for two more nodes: one atomic request for both, and the six bind at once."""
    groups = [group("gpu", min=1, max=3, delay="1m", template=node_template(gpu=8))]
    result = simulate_policy("atomic", [(arrival(0, member(), count=6, run_for="20m"), "train")],
                             [podgroup(min_count=6)], groups, {"gpu": 1})
    ups = [e for _, _, e in events_of(result, ScaleUpRequested)]
    assert [(u.delta, u.atomic) for u in ups] == [(2, True)]
    bound = events_of(result, PodBound)
    assert len(bound) == 6 and len({offset for offset, _, _ in bound}) == 1


def test_a_basic_group_is_scaled_pod_by_pod() -> None:
    """A basic group (no minCount, no topology) binds what fits: `atomic` adds a node for the one pod left,
    not atomically, as for any pod."""
    groups = [group("gpu", min=1, max=3, delay="1m", template=node_template(gpu=8))]
    result = simulate_policy("atomic", [(arrival(0, member(), count=3, run_for="20m"), "train")],
                             [podgroup(min_count=None)], groups, {"gpu": 1})
    bound = events_of(result, PodBound)
    assert len(bound) == 3 and len({offset for offset, _, _ in bound}) == 2
    ups = [e for _, _, e in events_of(result, ScaleUpRequested)]
    assert [(u.delta, u.atomic) for u in ups] == [(1, False)]


def test_running_members_count_towards_min_count_and_fix_the_domain() -> None:
    """minCount 4; four members run in rack a from the start (two nodes full), two more arrive later: the
    group needs no more pods at once (need 1), but they must join rack a, so `atomic` grows rack a only."""
    groups, nodes = racks(nodes=2, room=1)
    result = simulate_policy("atomic", [(arrival(0, member(), count=4, run_for="20m"), "train"),
                                        (arrival("2m", member("late"), count=2, run_for="20m"), "train")],
                             [podgroup(min_count=4, topology="rack")], groups, nodes)
    first = [e for _, _, e in events_of(result, PodBound) if "worker" in e.pod]
    held = {rack_of(result, e.node) for e in first}
    assert len(first) == 4 and len(held) == 1
    ups = [e for _, _, e in events_of(result, ScaleUpRequested)]
    assert [(u.group, u.delta, u.atomic) for u in ups] == [(f"rack-{held.pop()}", 1, False)]
    late = [e for _, _, e in events_of(result, PodBound) if "late" in e.pod]
    assert len(late) == 2 and {rack_of(result, e.node) for e in late} == {rack_of(result, first[0].node)}


def test_with_the_topology_gate_off_atomic_sees_a_gang_that_existing_nodes_hold() -> None:
    """TopologyAwareWorkloadScheduling off (read from the run's profile, as the scheduler reads it): the
    constraint is not enforced, eight free slots hold the six pods, and `atomic` adds nothing; on, it adds
    a node to one rack."""
    view = wrong_shape("count").state  # the group rejected, its pods Unschedulable, nothing added
    def release(topology: bool) -> dict[str, Any] | None:
        gates = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": topology}
        return profile_config(make_profile("1.37", gates, {"scheduling.k8s.io/v1beta1": True}))

    on = Autoscaler(policy="atomic", kubernetes=release(True)).react(view, view.t, random.Random(1))
    assert [(type(e).__name__, e.delta) for e in on.events if isinstance(e, ScaleUpRequested)] == \
        [("ScaleUpRequested", 1)]  # (beside the release's TriggeredScaleUp Events)
    off = Autoscaler(policy="atomic", kubernetes=release(False))
    assert [e for e in off.react(view, view.t, random.Random(1)).events if isinstance(e, ScaleUpRequested)] == []


def test_running_members_are_subtracted_from_min_count() -> None:
    """Four members run (minCount 4), two wait: no gang need. minCount raised to 5 (mutable in 1.37): the
    group needs one more pod at once, atomically, in its running pods' rack."""
    groups, nodes = racks(nodes=2, room=1)
    result = simulate_policy("count", [(arrival(0, member(), count=4, run_for="20m"), "train"),
                                       (arrival("2m", member("late"), count=2, run_for="20m"), "train")],
                             [podgroup(min_count=4, topology="rack")], groups, nodes, duration="3m")
    view = result.state
    waiting = [p for p in view.pending_pods() if p.condition is not None and p.condition.reason == "Unschedulable"]
    assert len(waiting) == 2
    held = {rack_of(result, p.node or "") for p in pods_named(result, "worker")}
    unit = podgroup_units(view, waiting, topology=True)["default/train"]
    assert (unit.need, unit.atomic, unit.held) == (1, False, frozenset(held))
    assert podgroup_units(view, waiting, topology=False) == {}  # at minCount, no constraint: pod by pod
    view.gang.podgroups["default/train"].manifest["spec"]["schedulingPolicy"]["gang"]["minCount"] = 5
    unit = podgroup_units(view, waiting, topology=False)["default/train"]
    assert (unit.need, unit.atomic, unit.topology) == (1, True, None)
    view.gang.podgroups["default/train"].manifest["spec"]["schedulingPolicy"]["gang"]["minCount"] = 7
    assert podgroup_units(view, waiting, topology=False)["default/train"].need == 3


@pytest.mark.parametrize("policy", ["count", "dra", "atomic"])
def test_a_basic_group_with_a_topology_constraint_grows_in_its_own_rack(policy: str) -> None:
    """A basic group of six 4-GPU pods that must share a rack binds the four a rack holds; the two left must
    join them there. `count`/`dra` see them fit the other rack's free nodes and add nothing (they wait for
    ever); `atomic` adds a node to the rack the group is in."""
    groups, nodes = racks()
    result = simulate_policy(policy, [(arrival(0, member(), count=6, run_for="20m"), "train")],
                             [podgroup(min_count=None, topology="rack")], groups, nodes)
    bound = [e for _, _, e in events_of(result, PodBound)]
    home = {rack_of(result, e.node) for e in bound}
    assert len(home) == 1
    ups = [e for _, _, e in events_of(result, ScaleUpRequested)]
    if policy in BLIND:
        assert ups == [] and len(bound) == 4
    else:
        assert [(u.group, u.delta, u.atomic) for u in ups] == [(f"rack-{home.pop()}", 1, False)]
        assert len(bound) == 6


def test_atomic_opens_a_domain_that_has_no_node_yet() -> None:
    """Rack a (two nodes, full size) holds four of the six; rack c has no node, but its group may add three:
    the domain the scheduler will see once they are Ready."""
    groups = [group("rack-a", min=2, max=2, delay="1m", template=node_template(gpu=8, labels={"rack": "a"})),
              group("rack-c", min=0, max=3, delay="1m", template=node_template(gpu=8, labels={"rack": "c"}))]
    result = simulate_policy("atomic", [(arrival(0, member(), count=6, run_for="20m"), "train")],
                             [podgroup(min_count=6, topology="rack")], groups, {"rack-a": 2})
    ups = [e for _, _, e in events_of(result, ScaleUpRequested)]
    assert [(u.group, u.delta, u.atomic) for u in ups] == [("rack-c", 3, True)]
    bound = events_of(result, PodBound)
    assert len(bound) == 6 and {rack_of(result, e.node) for _, _, e in bound} == {"c"}

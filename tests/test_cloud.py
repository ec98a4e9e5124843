"""The cloud reactor: registration timing, zones, quota, stock windows, failure rate, atomic requests.

Through the simulator (every run free of invariant violations and verified byte for byte) and by
calling the reactor on folded states.
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import GPU_TOLERATION, Log, arrival, group, node_template, pod, scenario_doc, simulated

from dralab.core.cluster.nodes import ZONE_LABEL, delete_node
from dralab.core.controllers.cloud import Cloud
from dralab.core.engine.contract import decision_rng
from dralab.core.log.events import (
    NodeCreated,
    NodeDeleted,
    NodeProvisioning,
    NodeReady,
    ScaleUpFailed,
    ScaleUpRequested,
    ScaleUpTimedOut,
    StockWindow,
    decode_record,
)
from dralab.core.scenario.load import ScenarioError, parse_scenario
from dralab.core.state.cluster import ClusterState
from dralab.replay.simulation.sim import SimResult

NOW = 60_000


def run(d: dict[str, Any], seed: int = 3) -> SimResult:
    result: SimResult = simulated(d, seed, "cloud.yaml")
    return result


def events_of(result: SimResult, kind: type) -> list[tuple[int, Any]]:
    out = []
    for offset, payload in result.entries:
        rec = decode_record(payload, offset)
        out += [(rec.t, e) for e in rec.events if isinstance(e, kind)]
    return out


def doc(gpus: int = 8, count: int = 1, nodes: int = 0, duration: str = "30m", **options: Any) -> dict[str, Any]:
    """One GPU group (8 GPUs a node) with the cloud options given, `count` pods of `gpus` GPUs at t=0."""
    g = group("gpu", max=options.pop("max", 10), delay=options.pop("delay", "1m"), template=node_template(gpu=8))
    g.update(options)
    return scenario_doc([g], nodes={"gpu": nodes} if nodes else None, duration=duration,
                        workload=[arrival(0, pod("train", gpu=gpus, tolerations=[GPU_TOLERATION]), count=count)])


def cloud(view: ClusterState, now: int = NOW, seed: int = 0) -> tuple[Any, ...]:
    return Cloud().react(view, now, decision_rng(seed, "cloud", view.offset, now)).events


def log(**group: Any) -> Log:
    lg = Log()
    lg.group("gpu", max=group.pop("max", 20), delay=(1_000, 1_000))
    if group:  # the cloud's options, as NodeGroupDefined carries them
        import msgspec

        first = lg.records[0]
        defined = msgspec.structs.replace(first.events[0], **group)  # type: ignore[type-var]
        lg = Log()
        lg.append(defined)
    return lg


def answer(lg: Log, now: int = NOW, seed: int = 0) -> tuple[Any, ...]:
    events = cloud(lg.state, now, seed)
    if events:
        lg.append(*events, t=now)
    return events


# ---------------------------------------------------------------- registration timing


def test_nodes_register_not_ready_then_turn_ready_at_the_drawn_time() -> None:
    result = run(doc(delay="2m", notReadyFor="30s"))
    [(t_req, request)] = events_of(result, ScaleUpRequested)
    [(t_prov, made)] = events_of(result, NodeProvisioning)
    [(t_created, created)] = events_of(result, NodeCreated)
    [(t_ready, _)] = events_of(result, NodeReady)
    assert t_prov == t_req and made.ready_at == t_req + 120_000 and made.register_at == made.ready_at - 30_000
    assert (t_created, t_ready) == (made.register_at, made.ready_at)
    assert created.node == made.node and created.ready_at == made.ready_at and not created.initial
    node = result.state.nodes[made.name]
    assert (node.created_t, node.ready_t) == (made.register_at, made.ready_at)
    assert result.state.pods_by_phase["Running"]  # the pod runs on it


def test_a_node_registered_in_time_but_ready_late_still_arrives() -> None:
    """It registers at 1m and turns Ready at 20m: the autoscaler gives up on it at 16m
    (max-node-startup-time after registration) but does not delete a registered node; it arrives."""
    d = doc(delay="20m", duration="40m", notReadyFor="19m")
    d["spec"]["autoscaler"] = {"maxNodeProvisionTime": "15m", "scaleDown": {"enabled": False}}
    result = run(d)
    [(t_req, _), *_] = events_of(result, ScaleUpRequested)
    [(t_ready, _), *_] = events_of(result, NodeReady)
    assert t_ready == t_req + 20 * 60_000
    [(t_out, out)] = events_of(result, ScaleUpTimedOut)
    assert out.group == "gpu" and t_out == t_req + 60_000 + 15 * 60_000 and t_out < t_ready  # registered 1 min on


def test_a_vm_that_never_registers_within_max_node_provision_time_is_deleted() -> None:
    d = doc(delay="20m", duration="40m", max=1)
    d["spec"]["autoscaler"] = {"maxNodeProvisionTime": "15m"}
    result = run(d)
    requests = [t for t, _ in events_of(result, ScaleUpRequested)]
    timeouts = [t for t, _ in events_of(result, ScaleUpTimedOut)]
    assert t_req_ok(requests[0], timeouts[0])
    assert events_of(result, NodeReady) == []  # each cancelled before it registered
    # the group backs off 5 min after the first failure, then 10 min (doubling) after the second
    assert requests[1] == timeouts[0] + 5 * 60_000
    assert len(requests) == 2 and timeouts[1] + 10 * 60_000 > 40 * 60_000
    assert result.state.node_groups["gpu"].cancelled == 2


def t_req_ok(t_req: int, t_out: int) -> bool:
    return t_req + 15 * 60_000 <= t_out < t_req + 15 * 60_000 + 10_000


def test_outstanding_and_target_follow_provisioning_and_registration() -> None:
    lg = log()
    lg.scale_up("gpu", 2)
    g = lg.state.node_groups["gpu"]
    assert (g.outstanding, g.target_size, g.unserved_nodes()) == (2, 2, 2)
    answer(lg)
    assert (g.outstanding, g.target_size, g.unserved_nodes(), g.provisioned) == (2, 2, 0, 2)
    assert set(lg.state.provisioning_nodes) == {"gpu-0", "gpu-1"}
    lg.append(*delete_node(lg.state, "gpu-1", "cancelled"))  # a VM deleted before it registered
    assert (g.outstanding, g.target_size, g.cancelled) == (1, 1, 1)
    assert lg.state.anomalies == []


# ---------------------------------------------------------------- zones


def test_zones_are_given_round_robin_over_the_groups_nodes() -> None:
    result = run(doc(count=4, nodes=1, zones=["a", "b"]))
    zones = {n.name: n.labels.get(ZONE_LABEL) for n in result.state.nodes.values()}
    assert zones == {"gpu-0": "a", "gpu-1": "b", "gpu-2": "a", "gpu-3": "b"}


def test_without_zones_no_zone_label() -> None:
    result = run(doc(count=2))
    assert all(ZONE_LABEL not in n.labels for n in result.state.nodes.values())


# ---------------------------------------------------------------- quota


def test_quota_refuses_the_nodes_beyond_it() -> None:
    lg = log(quota=3)
    lg.node("gpu-0", group="gpu")
    lg.scale_up("gpu", 4)
    events = answer(lg)
    assert [type(e) for e in events] == [ScaleUpFailed, NodeProvisioning, NodeProvisioning]
    assert events[0] == ScaleUpFailed(group="gpu", delta=2, reason="quota")
    g = lg.state.node_groups["gpu"]
    assert (g.failed, g.target_size, g.outstanding) == (2, 3, 2)
    assert g.failures == [(NOW, 2, "quota")]
    lg.scale_up("gpu", 1)
    assert answer(lg) == (ScaleUpFailed(group="gpu", delta=1, reason="quota"),)  # provisioning VMs count


def test_quota_in_a_simulation() -> None:
    result = run(doc(count=3, quota=2, duration="5m"))
    assert len(result.state.nodes) == 2
    failed = events_of(result, ScaleUpFailed)
    assert failed and {e.reason for _, e in failed} == {"quota"}
    assert result.state.node_groups["gpu"].failures == [(t, e.delta, e.reason) for t, e in failed]
    assert len(result.state.pods_by_phase["Pending"]) == 1


# ---------------------------------------------------------------- stock


def test_stock_window_limits_deliveries_in_the_window() -> None:
    lg = log(stock=(StockWindow(from_ms=0, until_ms=30 * 60_000, available=2),))
    lg.scale_up("gpu", 3)
    events = answer(lg)
    assert [type(e) for e in events] == [ScaleUpFailed, NodeProvisioning, NodeProvisioning]
    assert events[0] == ScaleUpFailed(group="gpu", delta=1, reason="out-of-stock")
    lg.scale_up("gpu", 1, t=10 * 60_000)
    assert answer(lg, now=10 * 60_000) == (ScaleUpFailed(group="gpu", delta=1, reason="out-of-stock"),)
    lg.scale_up("gpu", 1, t=31 * 60_000)
    [made] = answer(lg, now=31 * 60_000)
    assert isinstance(made, NodeProvisioning) and made.name == "gpu-2"


def test_stock_window_in_a_simulation_then_stock_returns() -> None:
    result = run(doc(count=2, stock=[{"from": "0s", "until": "3m", "available": 1}], duration="10m"))
    failed = events_of(result, ScaleUpFailed)
    assert failed and all(e.reason == "out-of-stock" and t < 180_000 for t, e in failed)
    made = events_of(result, NodeProvisioning)
    assert len(made) == 2 and made[0][0] < 180_000 <= made[1][0]
    assert result.state.pods_by_phase["Pending"] == {}


# ---------------------------------------------------------------- failure rate


def test_failure_rate_fails_each_node_with_the_seed() -> None:
    lg = log(failure_rate=0.5)
    lg.scale_up("gpu", 20)
    events = cloud(lg.state, seed=4)
    assert cloud(lg.state, seed=4) == events
    made = [e for e in events if isinstance(e, NodeProvisioning)]
    [failed] = [e for e in events if isinstance(e, ScaleUpFailed)]
    assert failed.reason == "instance-failed" and 0 < failed.delta < 20 and len(made) + failed.delta == 20
    assert [e.name for e in made] == [f"gpu-{i}" for i in range(len(made))]
    others = {tuple(type(e).__name__ for e in cloud(lg.state, seed=s)) for s in range(10)}
    assert len(others) > 1  # other seeds, other outcomes


def test_failure_rate_one_fails_everything_zero_draws_nothing() -> None:
    lg = log(failure_rate=1.0)
    lg.scale_up("gpu", 3)
    assert answer(lg) == (ScaleUpFailed(group="gpu", delta=3, reason="instance-failed"),)
    g = lg.state.node_groups["gpu"]
    assert (g.outstanding, g.target_size, g.unserved) == (0, 0, [])


def test_failure_rate_in_a_simulation_partial_failures_then_retries() -> None:
    result = run(doc(count=4, failureRate=0.5, duration="20m"), seed=5)
    failed = events_of(result, ScaleUpFailed)
    assert failed and {e.reason for _, e in failed} == {"instance-failed"}
    g = result.state.node_groups["gpu"]
    assert g.requested == g.failed + g.provisioned


# ---------------------------------------------------------------- atomic requests


@pytest.mark.parametrize(("options", "reason"), [
    ({"quota": 3}, "quota"),
    ({"stock": (StockWindow(from_ms=0, until_ms=-1, available=3),)}, "out-of-stock"),
    ({"failure_rate": 0.3}, "instance-failed"),
])
def test_atomic_request_is_all_or_nothing(options: dict[str, Any], reason: str) -> None:
    lg = log(**options)
    lg.append(ScaleUpRequested(group="gpu", delta=4, atomic=True))
    seed = next(s for s in range(50) if reason != "instance-failed" or len(cloud(lg.state, seed=s)) == 1)
    assert answer(lg, seed=seed) == (ScaleUpFailed(group="gpu", delta=4, reason=reason),)
    g = lg.state.node_groups["gpu"]
    assert (g.provisioned, g.failed, g.outstanding, lg.state.provisioning_nodes) == (0, 4, 0, {})


def test_atomic_request_that_fits_is_delivered_whole() -> None:
    lg = log(quota=4, failure_rate=0.3)
    lg.append(ScaleUpRequested(group="gpu", delta=4, atomic=True))
    outcomes = {tuple(type(e) for e in cloud(lg.state, seed=s)) for s in range(30)}
    assert outcomes == {(ScaleUpFailed,), (NodeProvisioning,) * 4}  # never partial


def test_requests_are_answered_oldest_first_and_partial_ones_after_atomic_ones() -> None:
    lg = log(quota=5)
    lg.append(ScaleUpRequested(group="gpu", delta=3, atomic=True), ScaleUpRequested(group="gpu", delta=3))
    events = answer(lg)
    assert [type(e).__name__ for e in events] == ["NodeProvisioning"] * 3 + ["ScaleUpFailed"] + [
        "NodeProvisioning"] * 2
    assert lg.state.node_groups["gpu"].unserved == [] and lg.state.anomalies == []


def test_the_fold_notes_a_failure_of_more_than_was_asked() -> None:
    lg = log()
    lg.append(ScaleUpFailed(group="gpu", delta=1, reason="quota"))
    assert lg.state.anomalies and "more than were requested" in lg.state.anomalies[0]


def test_a_cancelled_node_never_registers() -> None:
    lg = log()
    lg.scale_up("gpu", 1)
    answer(lg)
    lg.append(*delete_node(lg.state, "gpu-0"))
    assert lg.state.provisioning_nodes == {} and isinstance(lg.records[-1].events[-1], NodeDeleted)


# ---------------------------------------------------------------- the scenario's fields


@pytest.mark.parametrize(("field", "value", "path", "message"), [
    ("failureRate", 1.5, "failureRate", "must be a probability between 0 and 1, got 1.5"),
    ("quota", -1, "quota", "must be >= 0, got -1"),
    ("zones", ["a", "a"], "zones[1]", "duplicate zone `a`"),
    ("stock", [{"from": "10m", "until": "5m", "available": 1}], "stock[0].until",
     "must be after from (10m0s), got 5m0s"),
    ("stock", [{"from": "1m"}], "stock[0].available", "missing required field"),
    ("notReadyFor", "-1s", "notReadyFor", "invalid duration `-1s`: must not be negative"),
])
def test_bad_cloud_fields_are_refused_with_their_path(field: str, value: object, path: str, message: str) -> None:
    d = doc(**{field: value})
    with pytest.raises(ScenarioError) as info:
        parse_scenario(d, "s.yaml")
    assert (info.value.path, info.value.message) == (f"spec.nodeGroups[0].{path}", message)


def test_cloud_fields_are_parsed_with_defaults() -> None:
    plain = parse_scenario(doc()).node_groups[0]
    assert (plain.zones, plain.quota, plain.stock, plain.failure_rate, plain.not_ready_ms, plain.drivers) == (
        (), -1, (), 0.0, 0, ())
    full = parse_scenario(doc(zones=["us-a"], quota=4, failureRate=0.25, notReadyFor="20s",
                              stock=[{"until": "1h", "available": 2}])).node_groups[0]
    assert (full.zones, full.quota, full.failure_rate, full.not_ready_ms) == (("us-a",), 4, 0.25, 20_000)
    assert full.stock == (StockWindow(from_ms=0, until_ms=3_600_000, available=2),)

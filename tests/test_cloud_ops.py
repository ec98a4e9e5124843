"""A cloud that misbehaves (issue 22): deletions that fail or take time, nodes that arrive after the autoscaler gave
up on them (autoscaler#9120), nodes never Ready, zone stockouts and quotas, spot preemption, drivers that
republish a changed device set. Each runs the real reactors on a scenario of scenarios/chaos or scenarios/upstream."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.core.kube.errors import ScenarioError
from dralab.core.log.events import Record, decode_record
from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import SimResult, simulate

ROOT = Path(__file__).resolve().parent.parent


def _doc(path: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "scenarios" / path).read_text())


def _run(doc: dict[str, Any]) -> tuple[SimResult, list[Record]]:
    result = simulate(parse_scenario(copy.deepcopy(doc), "test.yaml"), int(doc["spec"].get("seed", 1)))
    assert result.violations == []
    assert result.state.anomalies == []
    return result, [decode_record(payload, offset) for offset, payload in result.entries]


def _events(records: list[Record], kind: str) -> list[tuple[int, Any]]:
    return [(r.t, e) for r in records for e in r.events if type(e).__name__ == kind]


# ---------------------------------------------------------------- deletions


def test_a_failed_deletion_leaves_the_node_and_its_taint_goes() -> None:
    _, records = _run(_doc("chaos/cloud-deletion-failure.yaml"))
    asked = _events(records, "NodeDeletionRequested")
    failed = _events(records, "NodeDeletionFailed")
    deleted = _events(records, "NodeDeleted")
    assert [e.name for _, e in asked] == ["gpu-8x-0", "gpu-8x-1"] * 2
    assert {t for t, _ in failed} == {asked[0][0] + 90_000}  # the cloud answers after deleteDelay
    assert failed[0][0] < 20 * 60_000  # while the fault is in force
    # the autoscaler removes its ToBeDeleted taint after the failure, then asks again only after a fresh
    # scale-down-unneeded-time (upstream's planner drops a node whose deletion is under way)
    untainted = [t for t, e in _events(records, "NodeTaintsChanged") if e.taints == () and t > failed[0][0]]
    assert untainted and untainted[0] <= failed[0][0] + 10_000
    assert asked[2][0] >= failed[0][0] + 10 * 60_000
    assert [(t, e.reason) for t, e in deleted] == [(asked[2][0] + 90_000,
                                                    "cloud: instance deleted (scale-down: unneeded)")] * 2
    bound = {e.node for _, e in _events(records, "PodBound")}
    assert all(t < asked[0][0] for t, e in _events(records, "PodBound") if e.node in bound)


def test_a_slow_deletion_bills_until_the_instance_is_gone_and_legacy_deletes_at_once() -> None:
    doc = _doc("chaos/cloud-deletion-failure.yaml")
    del doc["spec"]["faults"]
    _, records = _run(doc)
    asked = _events(records, "NodeDeletionRequested")
    deleted = _events(records, "NodeDeleted")
    assert len(asked) == 2 and not _events(records, "NodeDeletionFailed")
    assert {t for t, _ in deleted} == {asked[0][0] + 90_000}  # the node, and its bill, stay 90 s
    del doc["spec"]["nodeGroups"][0]["deleteDelay"]
    _, legacy = _run(doc)
    assert not _events(legacy, "NodeDeletionRequested") and not _events(legacy, "NodeGroupCloudDefined")
    assert [e.reason for _, e in _events(legacy, "NodeDeleted")] == ["scale-down: unneeded"] * 2
    assert {t for t, _ in _events(legacy, "NodeDeleted")} == {asked[0][0]}


def test_a_deletion_failure_rate_is_drawn_from_the_seed() -> None:
    doc = _doc("chaos/cloud-deletion-failure.yaml")
    del doc["spec"]["faults"]
    doc["spec"]["nodeGroups"][0]["deleteFailureRate"] = 1.0
    _, records = _run(doc)
    assert len(_events(records, "NodeDeletionFailed")) >= 2 and not _events(records, "NodeDeleted")


def test_an_unregistered_vm_whose_deletion_keeps_failing_comes_anyway() -> None:
    doc = _doc("chaos/cloud-late-vm.yaml")
    _, records = _run(doc)
    [(timed_out_t, _)] = _events(records, "ScaleUpTimedOut")
    asks = [t for t, e in _events(records, "NodeDeletionRequested") if e.name == "spot-slow-0"]
    fails = [t for t, e in _events(records, "NodeDeletionFailed") if e.name == "spot-slow-0"]
    created = {e.name: t for t, e in _events(records, "NodeCreated")}
    assert asks[0] == timed_out_t and asks[1] - asks[0] == 10_000  # asked again each loop (scanInterval)
    # the scale-up at 30 s (cluster-autoscaler waits 30 s for a pod asking a GPU), the VM 18 min later
    assert fails and max(fails) <= created["spot-slow-0"] == 18 * 60_000 + 30_000
    [(gone_t, gone)] = [(t, e) for t, e in _events(records, "NodeDeleted") if e.name == "spot-slow-0"]
    assert gone.reason == "cloud: instance deleted (scale-down: unneeded)"
    assert 10 * 60_000 <= gone_t - created["spot-slow-0"] < 11 * 60_000  # idle, paid, until scale-down
    del doc["spec"]["faults"]
    _, clean = _run(doc)
    assert "spot-slow-0" not in {e.name for _, e in _events(clean, "NodeCreated")}
    assert [(t, e.reason) for t, e in _events(clean, "NodeDeleted")] == [
        (timed_out_t, "unregistered for max-node-provision-time")]


# ---------------------------------------------------------------- autoscaler#9120: a node that comes late


def test_9120_with_the_bug_the_timed_out_node_arrives_late_and_idle() -> None:
    doc = _doc("upstream/scale-up-timeout-target.yaml")  # release 1.35: the bug is on
    result, records = _run(doc)
    pending = _events(records, "InstancePending")
    assert [(e.name, e.until) for _, e in pending] == [("a100-0", 25 * 60_000)]
    timed_out = _events(records, "ScaleUpTimedOut")
    assert [e.nodes for _, e in timed_out] == [("a100-0",)]
    created = {e.name: t for t, e in _events(records, "NodeCreated")}
    assert created["a100-0"] > 25 * 60_000 > timed_out[0][0]  # registers after the autoscaler gave up
    assert [e.node for _, e in _events(records, "PodBound")] == ["h100-0"]  # the pod ran elsewhere
    removed = {e.name: (t, e.reason) for t, e in _events(records, "NodeDeleted")}
    assert removed["a100-0"][1] == "scale-down: unneeded"
    idle_min = (removed["a100-0"][0] - created["a100-0"]) / 60_000
    assert 10 <= idle_min < 11  # paid for, idle, until scale-down


@pytest.mark.parametrize("how", ["switch", "release"])
def test_9120_fixed_the_target_size_is_reverted_at_the_timeout(how: str) -> None:
    doc = _doc("upstream/scale-up-timeout-target.yaml")
    if how == "switch":
        doc["spec"]["kubernetes"]["bugs"] = {"autoscaler#9120": False}
    else:
        doc["spec"]["kubernetes"]["version"] = "1.36"
    _, records = _run(doc)
    timed_out = _events(records, "ScaleUpTimedOut")
    deleted = _events(records, "NodeDeleted")
    assert [(t, e.name, e.reason) for t, e in deleted] == [
        (timed_out[0][0], "a100-0", "scale-up timed out: target size decreased")]
    assert "a100-0" not in {e.name for _, e in _events(records, "NodeCreated")}
    assert [e.node for _, e in _events(records, "PodBound")] == ["h100-0"]


def test_a_stockout_retried_forever_never_registers() -> None:
    doc = _doc("upstream/scale-up-timeout-target.yaml")
    del doc["spec"]["faults"][0]["for"]
    result, records = _run(doc)
    assert [e.until for _, e in _events(records, "InstancePending")] == [-1]
    assert "a100-0" not in result.state.nodes and "a100-0" in result.state.provisioning_nodes


@pytest.mark.parametrize("bug", [True, False])
def test_3490_a_stockout_is_seen_at_the_timeout_with_the_bug_at_once_without(bug: bool) -> None:
    doc = _doc("upstream/aws-stockout-fallback.yaml")
    if not bug:
        doc["spec"]["kubernetes"]["bugs"] = {}  # fixed since cluster-autoscaler 1.24: off unless asked
    _, records = _run(doc)
    [(bound_t, bound)] = [(t, e) for t, e in _events(records, "PodBound")]
    assert bound.node == "ondemand-a100-0"
    waited = bound_t - 60_000
    if bug:
        assert [e.nodes for _, e in _events(records, "ScaleUpTimedOut")] == [("spot-a100-0",)]
        assert not _events(records, "ScaleUpFailed")
        assert 16 * 60_000 <= waited < 17 * 60_000
    else:
        assert [(e.group, e.reason) for _, e in _events(records, "ScaleUpFailed")] == [("spot-a100", "out-of-stock")]
        assert not _events(records, "ScaleUpTimedOut") and not _events(records, "InstancePending")
        assert waited < 2 * 60_000


# ---------------------------------------------------------------- never Ready, zones, spot


def test_a_node_never_ready_registers_and_is_given_up_on() -> None:
    doc = _doc("chaos/cloud-zone-stockout.yaml")
    group = doc["spec"]["nodeGroups"][0]
    group["neverReadyRate"] = 1.0
    del doc["spec"]["faults"], group["zoneQuota"]
    doc["spec"]["workload"] = doc["spec"]["workload"][:1]
    doc["spec"]["workload"][0]["count"] = 1
    result, records = _run(doc)
    created = _events(records, "NodeCreated")
    assert created and not _events(records, "NodeReady")
    assert all(n.ready_t < 0 for n in result.state.nodes.values())
    timed_out = _events(records, "ScaleUpTimedOut")  # max-node-startup-time (15m) after it registered
    assert timed_out and timed_out[0][0] >= created[0][0] + 15 * 60_000


def test_a_zone_stockout_and_a_zone_quota_send_nodes_to_the_other_zones() -> None:
    _, records = _run(_doc("chaos/cloud-zone-stockout.yaml"))
    zones = [(t, e.node["metadata"]["labels"]["topology.kubernetes.io/zone"])
             for t, e in _events(records, "NodeProvisioning")]
    assert len(zones) == 6 and not _events(records, "ScaleUpFailed")
    assert all(z != "us-central1-a" for t, z in zones if t < 10 * 60_000)
    assert sum(z == "us-central1-b" for _, z in zones) == 1
    assert [z for t, z in zones if t > 10 * 60_000] == ["us-central1-a"] * 2


def test_every_zone_closed_fails_the_nodes_with_the_reason() -> None:
    doc = _doc("chaos/cloud-zone-stockout.yaml")
    doc["spec"]["nodeGroups"][0]["zoneQuota"] = {"us-central1-b": 0, "us-central1-c": 1}
    _, records = _run(doc)
    failed = [(e.delta, e.reason) for t, e in _events(records, "ScaleUpFailed") if t < 10 * 60_000]
    assert failed and failed[0] == (3, "out-of-stock")  # one node in c, the others find no zone


def test_spot_preemption_drains_within_the_notice_and_the_node_goes() -> None:
    result, records = _run(_doc("chaos/spot-preemption.yaml"))
    notice = _events(records, "NodePreemptionNotice")
    assert [(t, e.name, e.deadline) for t, e in notice] == [(300_000, "spot-8x-0", 420_000)]
    graces = {e.pod: e.grace_ms for _, e in _events(records, "PodTerminating")}
    assert graces == {"pod/default/train-0": 120_000, "pod/default/serve-1": 30_000}  # min(grace, notice left)
    assert [(t, e.reason) for t, e in _events(records, "NodeDeleted")] == [(420_000, "spot preemption")]
    assert not [e for t, e in _events(records, "PodBound") if t >= 300_000 and e.node == "spot-8x-0"]
    assert "spot-8x-0" not in result.state.nodes and "spot-8x-1" in result.state.nodes
    assert all(result.state.pods[k].finished_t <= 420_000 for k in graces)


def test_a_spot_group_at_a_rate_draws_each_nodes_preemption_from_the_seed() -> None:
    doc = _doc("chaos/spot-preemption.yaml")
    del doc["spec"]["faults"], doc["spec"]["nodes"]
    doc["spec"]["nodeGroups"][0].update(preemptionRate=6, preemptionNotice="30s")  # GCE's notice
    _, records = _run(doc)
    made = [e.name for _, e in _events(records, "NodeProvisioning")]
    drawn = {e.name: (e.notice_at, e.deadline) for _, e in _events(records, "NodePreemptionScheduled")}
    assert made and set(drawn) == set(made)
    assert all(deadline - at == 30_000 for at, deadline in drawn.values())
    notices = {e.name: t for t, e in _events(records, "NodePreemptionNotice")}
    gone = {e.name: t for t, e in _events(records, "NodeDeleted")}
    for name, (at, deadline) in drawn.items():
        if deadline <= 15 * 60_000:
            assert (notices[name], gone[name]) == (at, deadline)
    _, again = _run(doc)
    assert {e.name: e.notice_at for _, e in _events(again, "NodePreemptionScheduled")} == \
        {name: at for name, (at, _) in drawn.items()}


# ---------------------------------------------------------------- a driver republishes a changed pool


def test_a_republished_pool_drops_and_changes_devices_and_claims_stay() -> None:
    result, records = _run(_doc("chaos/driver-republish.yaml"))
    pools = [(t, e.manifest["spec"]["pool"]["generation"],
              {d["name"]: d["attributes"]["memory"]["int"] for d in e.manifest["spec"]["devices"]})
             for t, e in _events(records, "ResourceSlicePublished")]
    assert [g for _, g, _ in pools] == [1, 2, 3]
    assert pools[1] == (180_000, 2, {"gpu-1": 40, "gpu-2": 80, "gpu-3": 80})
    assert pools[2][0] == 480_000 and set(pools[2][2]) == {"gpu-0", "gpu-1", "gpu-2", "gpu-3"}
    allocated = {e.claim: [r["device"] for r in e.allocation["devices"]["results"]]
                 for _, e in _events(records, "ClaimAllocated")}
    big = [devices for claim, devices in allocated.items() if "big-" in claim]
    assert sorted(d for devices in big for d in devices) == ["gpu-2", "gpu-3"]  # never gpu-0, nor 40 GB gpu-1
    infer = [c for c in result.state.dra.claims if "infer-" in c]
    assert all(result.state.dra.claims[c].allocation is not None for c in infer)  # not deallocated
    assert all(result.state.pods[f"pod/default/infer-{i}"].phase == "Running" for i in range(2))


def test_a_removed_device_that_a_fault_wants_tainted_is_not_republished_forever() -> None:
    """Found by `dralab chaos` (seed 17): a device-unhealthy fault on a device a driver-republish removed wanted a
    taint no slice could show, and the drivers republished in a loop."""
    doc = _doc("chaos/driver-republish.yaml")
    doc["spec"]["faults"].append({"at": "4m42s", "kind": "device-unhealthy", "node": "gpu-node-0",
                                  "driver": "gpu.example.com", "device": "gpu-0", "for": "170s"})
    _, records = _run(doc)
    assert len(_events(records, "ResourceSlicePublished")) <= 5


@pytest.mark.parametrize("path", ["chaos/cloud-deletion-failure.yaml", "upstream/scale-up-timeout-target.yaml",
                                  "chaos/spot-preemption.yaml"])
def test_a_snapshot_of_the_cloud_state_then_the_tail_is_the_whole_fold(path: str) -> None:
    """The misbehaving cloud's part of the state (deletions, pending instances, preemptions) survives a
    snapshot (core/state/codec.py): fold a prefix, encode, decode, fold the rest: the same bytes."""
    from dralab.core.state.cluster import ClusterState
    from dralab.core.state.codec import decode_state, encode_state

    _, records = _run(_doc(path))
    whole = ClusterState()
    for offset, record in enumerate(records, start=1):
        whole.apply(offset, record)
    assert whole.cloud_ops.groups or whole.cloud_ops.preempted
    for cut in range(0, len(records) + 1, 3):
        prefix = ClusterState()
        for offset, record in enumerate(records[:cut], start=1):
            prefix.apply(offset, record)
        restored = decode_state(encode_state(prefix))
        for offset, record in enumerate(records[cut:], start=cut + 1):
            restored.apply(offset, record)
        assert encode_state(restored) == encode_state(whole)
        assert restored.cloud_ops == whole.cloud_ops


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(("edit", "path"), [
    (lambda g, f: g.update(zoneQuota={"us-east1-a": 1}), "spec.nodeGroups[0].zoneQuota.us-east1-a"),
    (lambda g, f: g.update(deleteFailureRate=1.5), "spec.nodeGroups[0].deleteFailureRate"),
    (lambda g, f: g.update(retryStockouts="yes"), "spec.nodeGroups[0].retryStockouts"),
    (lambda g, f: f.update(notice="2m"), "spec.faults[0].notice"),
    (lambda g, f: f.update(zone="Not A Zone!"), "spec.faults[0].zone"),
])
def test_bad_settings_are_refused_with_their_path(edit: Any, path: str) -> None:
    doc = _doc("chaos/cloud-zone-stockout.yaml")
    edit(doc["spec"]["nodeGroups"][0], doc["spec"]["faults"][0])
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc, "bad.yaml")
    assert err.value.path == path

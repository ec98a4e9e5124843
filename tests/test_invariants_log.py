"""The invariants over a whole log (core/checks/log_check.py) and `dralab check FILE`.

Each invariant added by issue 7 fires on a log crafted by hand to break it, stays quiet on the same log
with the breach taken out, and stays quiet on healthy simulator runs; the incremental monitor reports
what a full check after every record reports; the CLI's exit codes and JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from builders import Log, key, node_template, pod, record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_properties import cases
from test_sim_properties import run as run_case

from dralab.cli import main
from dralab.core.checks.invariants import INVARIANTS, InvariantMonitor, Violation, check
from dralab.core.checks.log_check import ALL_INVARIANTS, check_records
from dralab.core.log.events import (
    ClaimAllocated,
    ClaimReleased,
    NodeReady,
    PodCreated,
    PodUnschedulable,
    Record,
    ResourceClaimCreated,
    ResourceSlicePublished,
    decode_record,
    encode_record,
)
from dralab.core.scenario.load import Policy, load_scenario
from dralab.core.state.cluster import ClusterState
from dralab.replay.logs.logfile import make_header, write_log
from dralab.replay.simulation.sim import Simulator

DRIVER = "gpu.example.com"
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def numbered(log: Log) -> list[tuple[int, Record]]:
    return list(enumerate(log.records, start=1))


def found(records: list[tuple[int, Record]], **kwargs: Any) -> list[tuple[str, int, str]]:
    return [(v.invariant, v.offset, v.message) for v in check_records(records, **kwargs).violations]


def names(records: list[tuple[int, Record]], **kwargs: Any) -> set[str]:
    return {v.invariant for v in check_records(records, **kwargs).violations}


# ---------------------------------------------------------------- DRA objects


def partitioned_slices(node: str, *, slices: int = 7, generation: int = 1) -> list[dict[str, Any]]:
    """One GPU of 7 compute slices (a counter slice), and its devices: the whole GPU (7) or 1-slice
    partitions (KEP-4815), as a driver publishes them on a node."""
    def consumes(n: int) -> list[dict[str, Any]]:
        return [{"counterSet": "gpu-0-counters", "counters": {"slices": {"value": str(n)}}}]

    def a_slice(name: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{name}"},
                "spec": {"driver": DRIVER, "pool": {"name": node, "generation": generation, "resourceSliceCount": 2},
                         "nodeName": node, **spec}}
    counters = {"slices": {"value": str(slices)}}
    return [a_slice("counters", sharedCounters=[{"name": "gpu-0-counters", "counters": counters}]),
            a_slice("gpu", devices=[{"name": "gpu-0", "consumesCounters": consumes(7)},
                                    {"name": "gpu-0-1g-0", "consumesCounters": consumes(1)},
                                    {"name": "gpu-0-1g-1", "consumesCounters": consumes(1)}])]


def shared_slice(node: str) -> list[dict[str, Any]]:
    """One device that allows multiple allocations, with 10Gi of consumable memory (KEP-5075)."""
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpu"},
            "spec": {"driver": DRIVER, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "nodeName": node,
                     "devices": [{"name": "gpu-0", "allowMultipleAllocations": True,
                                  "capacity": {"memory": {"value": "10Gi"}}}]}}]


def claim(name: str) -> ResourceClaimCreated:
    return ResourceClaimCreated(manifest={
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}})


def allocated(name: str, device: str, pod_name: str, pool: str = "n1", **result: Any) -> ClaimAllocated:
    res = {"request": "gpu", "driver": DRIVER, "pool": pool, "device": device, **result}
    return ClaimAllocated(claim=f"claim/default/{name}", allocation={"devices": {"results": [res]}},
                          pod=key(pod_name))


def dra_log(slices: list[dict[str, Any]], claims: int = 2) -> Log:
    log = Log()
    log.node("n1")
    log.append(*(ResourceSlicePublished(manifest=m) for m in slices))
    log.append(*(claim(f"c{i}") for i in range(claims)))
    return log


# ---------------------------------------------------------------- state invariants


def test_counters_exceeded_when_a_partition_and_its_whole_gpu_are_both_allocated() -> None:
    log = dra_log(partitioned_slices("n1"))
    log.append(allocated("c0", "gpu-0-1g-0", "a"))
    at = log.append(allocated("c1", "gpu-0", "b"))
    assert found(numbered(log), only=["counters-within-capacity"]) == [
        ("counters-within-capacity", at, "pool gpu.example.com/n1: counter gpu-0-counters/slices 8 in use > 7")]
    assert [v.invariant for v in check(log.state)] == ["counters-within-capacity"]


def test_counters_hold_when_the_partition_was_deallocated_first() -> None:
    log = dra_log(partitioned_slices("n1"))
    log.append(allocated("c0", "gpu-0-1g-0", "a"), allocated("c1", "gpu-0-1g-1", "b"))
    log.append(ClaimReleased(claim="claim/default/c0", pod=key("a"), deallocate=True),
               ClaimReleased(claim="claim/default/c1", pod=key("b"), deallocate=True))
    log.append(allocated("c0", "gpu-0", "c"))
    assert check_records(numbered(log)).ok


def test_consumable_capacity_exceeded_by_two_shares() -> None:
    log = dra_log(shared_slice("n1"))
    log.append(allocated("c0", "gpu-0", "a", shareID="s0", consumedCapacity={"memory": "6Gi"}))
    at = log.append(allocated("c1", "gpu-0", "b", shareID="s1", consumedCapacity={"memory": "6Gi"}))
    violations = check_records(numbered(log)).violations
    assert [(v.invariant, v.offset) for v in violations] == [("counters-within-capacity", at)]
    assert violations[0].message == ("device gpu.example.com/n1/gpu-0: consumed memory 12884901888 > "
                                     "capacity 10737418240")


def test_consumable_capacity_holds_when_the_shares_fit() -> None:
    log = dra_log(shared_slice("n1"))
    log.append(allocated("c0", "gpu-0", "a", shareID="s0", consumedCapacity={"memory": "5Gi"}))
    log.append(allocated("c1", "gpu-0", "b", shareID="s1", consumedCapacity={"memory": "5Gi"}))
    assert check_records(numbered(log)).ok


def test_a_share_of_a_device_that_does_not_allow_multiple_allocations() -> None:
    log = dra_log(partitioned_slices("n1"))
    log.append(allocated("c0", "gpu-0-1g-0", "a", shareID="s0"))
    at = log.append(allocated("c1", "gpu-0-1g-0", "b", shareID="s1"))
    assert found(numbered(log)) == [("counters-within-capacity", at - 1, "device gpu.example.com/n1/gpu-0-1g-0: "
                                     "allocated with a shareID but does not allow multiple allocations")]


def test_monitor_equals_a_full_check_after_every_record_on_a_crafted_log() -> None:
    log = dra_log(partitioned_slices("n1"), claims=4)
    log.append(allocated("c0", "gpu-0-1g-0", "a"))
    log.append(allocated("c1", "gpu-0", "b"))
    log.append(ClaimReleased(claim="claim/default/c0", pod=key("a"), deallocate=True))
    log.append(allocated("c2", "gpu-0-1g-1", "c"), allocated("c3", "gpu-0-1g-0", "d"))
    assert_monitor_matches_full_check(numbered(log))


DEVICES = [("n1", "gpu-0"), ("n1", "gpu-0-1g-0"), ("n1", "gpu-0-1g-1"), ("n2", "gpu-0")]
actions = st.lists(st.one_of(
    st.tuples(st.just("allocate"), st.integers(0, 3), st.integers(0, 3), st.booleans(), st.integers(1, 8)),
    st.tuples(st.just("release"), st.integers(0, 3)),
    st.tuples(st.just("republish"), st.integers(5, 8)),
), max_size=14)


@settings(max_examples=60, deadline=None)
@given(steps=actions)
def test_monitor_equals_a_full_check_on_random_allocations(steps: list[tuple[Any, ...]]) -> None:
    """Claims allocated to partitions, whole GPUs and shares of a capacity device, released, slices
    republished with other counters: the monitor reports what a full check after every record reports."""
    log = dra_log(partitioned_slices("n1") + shared_slice("n2"), claims=4)
    generation = 1
    for step in steps:
        if step[0] == "allocate":
            _, c, d, share, gib = step
            pool, device = DEVICES[d]
            extra = {"shareID": f"s{c}", "consumedCapacity": {"memory": f"{gib}Gi"}} if share or pool == "n2" else {}
            log.append(allocated(f"c{c}", device, f"p{c}", pool=pool, **extra))
        elif step[0] == "release":
            log.append(ClaimReleased(claim=f"claim/default/c{step[1]}", pod=key(f"p{step[1]}"), deallocate=True))
        else:
            generation += 1
            log.append(*(ResourceSlicePublished(manifest=m)
                         for m in partitioned_slices("n1", slices=step[1], generation=generation)))
    assert_monitor_matches_full_check(numbered(log))


def assert_monitor_matches_full_check(records: list[tuple[int, Record]]) -> None:
    state, monitor = ClusterState(), InvariantMonitor()
    full_state = ClusterState()
    seen: dict[tuple[str, str], Violation] = {}
    for offset, rec in records:
        state.apply(offset, rec)
        monitor.observe(state)
        full_state.apply(offset, rec)
        for v in check(full_state):
            seen.setdefault((v.invariant, v.message), v)
        assert monitor.violations == list(seen.values()), offset


# ---------------------------------------------------------------- record invariants


def test_claim_allocated_while_still_allocated() -> None:
    log = dra_log(shared_slice("n1"), claims=1)
    log.append(allocated("c0", "gpu-0", "a", shareID="s0", consumedCapacity={"memory": "1Gi"}))
    at = log.append(allocated("c0", "gpu-0", "b", shareID="s1", consumedCapacity={"memory": "1Gi"}))
    result = found(numbered(log), only=["claim-allocated-once"])
    assert result == [("claim-allocated-once", at, "claim claim/default/c0 allocated for pod/default/b while still "
                                                   "allocated (reserved for pod/default/a)")]


def test_claim_allocated_again_after_deallocation_is_fine() -> None:
    log = dra_log(shared_slice("n1"), claims=1)
    log.append(allocated("c0", "gpu-0", "a", shareID="s0", consumedCapacity={"memory": "1Gi"}))
    log.append(ClaimReleased(claim="claim/default/c0", pod=key("a"), deallocate=True))
    log.append(allocated("c0", "gpu-0", "b", shareID="s1", consumedCapacity={"memory": "1Gi"}))
    assert check_records(numbered(log)).ok


def test_claim_allocated_twice_in_one_record() -> None:
    log = dra_log(partitioned_slices("n1"), claims=1)
    at = log.append(allocated("c0", "gpu-0-1g-0", "a"), allocated("c0", "gpu-0-1g-1", "b"))
    assert ("claim-allocated-once", at) in {(v[0], v[1]) for v in found(numbered(log))}


def test_pending_pod_without_a_reason_after_a_scheduler_decision() -> None:
    log = Log()
    log.node("n1", template=node_template(gpu=0))
    waiting = log.pod(pod("waiting", gpu=1))
    other = log.pod(pod("other", cpu="1"))
    at = log.append(log_bind(other), source="scheduler")  # decided on a view with both pods
    assert found(numbered(log), only=["pending-pods-have-reasons"]) == [
        ("pending-pods-have-reasons", at, f"pod {waiting} pending without a reason after the scheduler's decision "
                                          f"on view {at - 1} (created at offset {at - 2})")]


def log_bind(pod_key: str) -> Any:
    from dralab.core.log.events import PodBound
    return PodBound(pod=pod_key, node="n1")


def test_pending_pod_with_a_reason_or_created_after_the_view_is_fine() -> None:
    log = Log()
    log.node("n1", template=node_template(gpu=0))
    waiting = log.pod(pod("waiting", gpu=1))
    log.append(PodUnschedulable(pod=waiting, reason="Unschedulable", message="0/1 nodes are available: "
                                "1 Insufficient nvidia.com/gpu.", cause="capacity"), source="scheduler")
    late = record(NodeReady(name="n1"), source="scheduler", view=1)  # on a view before the next pod
    log.pod(pod("late", gpu=1))
    log.extend([late])
    assert check_records(numbered(log)).ok


def test_offsets_with_a_gap_and_a_repeat() -> None:
    recs = [record(NodeReady(name="x"), t=i) for i in range(4)]
    entries = [(1, recs[0]), (2, recs[1]), (5, recs[2]), (5, recs[3])]
    result = found(entries, only=["no-entry-lost", "no-entry-applied-twice"])
    assert result == [("no-entry-lost", 5, "offset 5 follows 2: 2 entries missing (3..4)"),
                      ("no-entry-applied-twice", 5, "offset 5 after 5: delivered again or out of order "
                                                    "(the fold skips it)")]


def test_idempotency_id_appended_twice() -> None:
    log = Log()
    log.node("n1")
    again = msgspec.structs.replace(log.records[0])
    entries = [(1, log.records[0]), (2, again)]
    result = found(entries, only=["no-entry-applied-twice"])
    assert result == [("no-entry-applied-twice", 2, f"idempotency id {again.id!r} already appended at offset 1")]
    assert check_records(numbered(log)).ok


# ---------------------------------------------------------------- liveness


def forgotten_pod_log(*, bind_at_ms: int | None = None, gpu: int = 1, gated: bool = False) -> Log:
    """A Ready 8-GPU node, a pod asking `gpu` GPUs at t=0, then a record a minute for 15 minutes."""
    log = Log()
    log.node("n1", template=node_template(gpu=8), t=0)
    manifest = pod("forgotten", gpu=gpu)
    if gated:
        manifest["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    forgotten = log.pod(manifest, t=0)
    for minute in range(1, 16):
        t = minute * 60_000
        if bind_at_ms is not None and t == bind_at_ms:
            log.append(log_bind(forgotten), t=t, source="scheduler")
        else:
            log.append(NodeReady(name="n1"), t=t)
    return log


def test_liveness_reports_a_pod_that_fits_for_longer_than_the_bound() -> None:
    result = check_records(numbered(forgotten_pod_log()), only=["liveness"])
    # sampled every 2.5 min of records: t=0 (before the pod), 3m (it fits), ..., 15m (12 min > 10 min)
    assert [(v.invariant, v.offset) for v in result.violations] == [("liveness", 17)]
    assert result.violations[0].message == ("pod pod/default/forgotten could be scheduled since offset 5 (t=180s) "
                                            "and is still pending 720s later (bound 600s)")


@pytest.mark.parametrize("kwargs", [{"bind_at_ms": 300_000}, {"gpu": 16}, {"gated": True}],
                         ids=["bound-in-time", "never-fits", "gated"])
def test_liveness_quiet(kwargs: dict[str, Any]) -> None:
    assert check_records(numbered(forgotten_pod_log(**kwargs)), only=["liveness"]).ok


def test_liveness_bound_is_a_parameter() -> None:
    assert check_records(numbered(forgotten_pod_log()), only=["liveness"], liveness_bound_ms=20 * 60_000).ok
    short = check_records(numbered(forgotten_pod_log()), only=["liveness"], liveness_bound_ms=60_000)
    # every record sampled, and the state through each minute-long gap (longer than a quarter of the bound): the
    # pod fits from t=0 (the state that held until 1m), so it is overdue in the gap after offset 3 (1m to 2m)
    assert [(v.offset, v.t) for v in short.violations] == [(3, 60_000)]


# ---------------------------------------------------------------- healthy runs


@pytest.mark.parametrize("name,policy", [("quickstart.yaml", "count"), ("fractional-sharing.yaml", "dra"),
                                         ("gang-quickstart.yaml", "atomic"), ("kueue-retry.yaml", "dra"),
                                         ("dra-quickstart.yaml", "dra"), ("partial-gang.yaml", "count")])
def test_healthy_simulator_runs_hold_every_invariant(name: str, policy: str) -> None:
    scenario = msgspec.structs.replace(load_scenario(str(SCENARIOS / name)), policy=Policy(autoscaler=policy))
    run = Simulator(scenario, 1).run()
    records = [(o, decode_record(p, o)) for o, p in run.entries]
    result = check_records(records)
    assert result.ok, result.violations
    assert set(result.counts) == set(ALL_INVARIANTS) and result.liveness_samples > 1
    assert run.violations == []


def test_monitor_equals_a_full_check_on_a_simulated_dra_run() -> None:
    scenario = load_scenario(str(SCENARIOS / "fractional-sharing.yaml"))
    run = Simulator(scenario, 0, check_invariants=False).run()
    assert_monitor_matches_full_check([(o, decode_record(p, o)) for o, p in run.entries])


def test_invariant_names_are_stable() -> None:
    assert list(ALL_INVARIANTS[:3]) == ["no-overcommit", "bound-to-ready-nodes", "group-within-max"]
    assert {"no-device-allocated-twice", "claims-reserved-for-running-pods", "gang-never-partially-bound",
            "log-consistent", "counters-within-capacity", "claim-allocated-once", "pending-pods-have-reasons",
            "no-entry-lost", "no-entry-applied-twice", "liveness"} <= set(ALL_INVARIANTS)
    assert set(INVARIANTS) < set(ALL_INVARIANTS)


# ---------------------------------------------------------------- dralab check


def write(path: Path, records: list[tuple[int, Record]]) -> str:
    write_log(path, make_header(scenario="t", seed=0, policy={"autoscaler": "dra"}, mode="sim"),
              [(o, encode_record(r)) for o, r in records])
    return str(path)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_healthy_log_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "ok.dralog", numbered(forgotten_pod_log(bind_at_ms=60_000)))
    code, out, _ = run_cli(capsys, path)
    assert code == 0
    assert "  liveness" in out and "VIOLATED" not in out
    code, out, _ = run_cli(capsys, path, "-o", "json")
    report = json.loads(out)
    assert code == 0 and report["ok"] is True and report["records"] == 17 and report["violations"] == []
    assert set(report["invariants"]) == set(ALL_INVARIANTS)
    assert report["invariants"]["liveness"] == {"held": True, "violations": 0, "first_offset": None}


def test_cli_violation_exits_1_with_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "bad.dralog", numbered(forgotten_pod_log()))
    code, out, _ = run_cli(capsys, path, "--invariant", "liveness", "--invariant", "no-overcommit", "-o", "json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False and report["file"] == path
    assert report["invariants"] == {"no-overcommit": {"held": True, "violations": 0, "first_offset": None},
                                    "liveness": {"held": False, "violations": 1, "first_offset": 17}}
    assert report["violations"][0]["invariant"] == "liveness" and report["violations"][0]["t"] == 900_000
    code, out, _ = run_cli(capsys, path, "--liveness-bound", "20m")
    assert code == 0, out
    code, out, _ = run_cli(capsys, path)
    assert code == 1 and "VIOLATED  1x, first at offset 17" in out and "offset 17  t=900s  liveness: pod" in out


def test_cli_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "ok.dralog", numbered(forgotten_pod_log(bind_at_ms=60_000)))
    code, _, err = run_cli(capsys, path, "--invariant", "no-such-thing")
    assert code == 2 and "unknown no-such-thing" in err and "liveness" in err and "no-overcommit" in err
    code, _, err = run_cli(capsys, path, "--liveness-bound", "soon")
    assert code == 2 and "--liveness-bound" in err
    code, _, err = run_cli(capsys, str(tmp_path / "missing.dralog"))
    assert code == 2 and "missing.dralog: cannot read" in err
    (tmp_path / "junk.dralog").write_bytes(b"not a log")
    code, _, err = run_cli(capsys, str(tmp_path / "junk.dralog"))
    assert code == 2 and "junk.dralog" in err


def test_cli_record_the_checks_cannot_process_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = Log()
    log.node("n1", t=0)
    log.append(PodCreated(pod={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "default"},
                               "spec": {"affinity": "not a map", "containers": []}}), t=0)
    log.append(NodeReady(name="n1"), t=700_000)  # the first liveness sample with the pod pending
    code, _, err = run_cli(capsys, write(tmp_path / "odd.dralog", numbered(log)))
    assert code == 2 and "log entry at offset 3: cannot check: AttributeError" in err


def test_cli_damaged_file_checks_the_intact_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(write(tmp_path / "cut.dralog", numbered(forgotten_pod_log(bind_at_ms=60_000))))
    path.write_bytes(path.read_bytes()[:-7])
    code, out, _ = run_cli(capsys, str(path), "-o", "json")
    report = json.loads(out)
    assert code == 1 and report["damage"] and report["ok"] is False and report["records"] <= 17
    assert all(row["held"] for row in report["invariants"].values())
    code, out, _ = run_cli(capsys, str(path))
    assert code == 1 and "damaged:" in out and "intact prefix" in out



@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), seed=st.integers(0, 2**32))
def test_generated_simulator_runs_hold_every_log_invariant(case: Any, seed: int) -> None:
    """The record-level invariants and liveness stay quiet on the property tests' random healthy runs."""
    result = run_case(case, seed)
    checked = check_records([(o, decode_record(p, o)) for o, p in result.entries], liveness_bound_ms=5 * 60_000)
    assert checked.ok, checked.violations

"""State snapshots (core/state/codec.py): fold(prefix) -> encode -> decode -> fold(tail) is fold(all).

Every scenario under every autoscaler policy is simulated, its log decoded as a restarted actor reads
it, and cut at many offsets. At each cut the decoded state must equal the folded one (encoded bytes
and a deep structural comparison that does not go through the codec), fold the tail to the same state
as the whole log, and give the same decision from every reactor. A simulation restarted from a snapshot
mid-run (fresh reactors, as after a Ray restart) must write the same log byte for byte. Bad input fails
with a SnapshotError (a ValueError) that says what is wrong.
"""

from __future__ import annotations

import dataclasses
import functools
from fractions import Fraction
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dralab.core.engine.contract import decide
from dralab.core.kube.yaml_files import load_yaml_file
from dralab.core.log.events import Record, decode_record, encode_record
from dralab.core.run.config import build_reactors, run_config
from dralab.core.scenario.load import Policy, Scenario, load_scenario, parse_scenario
from dralab.core.state import codec
from dralab.core.state.cluster import ClusterState
from dralab.core.state.codec import (
    SnapshotError,
    SnapshotTooLarge,
    SnapshotVersionError,
    decode_state,
    encode_state,
    read_header,
)
from dralab.replay.simulation.sim import Simulator

ROOT = Path(__file__).resolve().parents[1]
SHARED_NIC = "dra-quickstart.yaml+shared-nic"  # no scenario file shares a device: this one does
SCENARIOS = sorted(p.relative_to(ROOT / "scenarios").as_posix()
                   for p in [*(ROOT / "scenarios").glob("*.yaml"), *(ROOT / "scenarios" / "examples").glob("*.yaml")]
                   ) + [SHARED_NIC]
POLICIES = ("count", "dra", "atomic")
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The caches, named here and not taken from the codec, so that the comparison stays independent of it.
SKIP = frozenset({"touched_nodes", "touched_pods", "touched_allocations", "usage_changes", "_view", "_index",
                  "node_changes", "slice_changes", "allocation_changes"})  # journals: not state


def shared_nic() -> Scenario:
    """dra-quickstart with a multi-allocatable NIC on every node (consumable capacity, KEP-5075) that
    every one-GPU pod takes a 15.5G share of (rounded up to 16G by its policy): shared devices and
    consumed capacity in the allocated state, allocated and released as pods come and go."""
    doc = load_yaml_file(str(ROOT / "scenarios" / "dra-quickstart.yaml"), max_bytes=1 << 20)
    spec = doc["spec"]
    spec["nodeGroups"][0]["resourceSlices"][0]["spec"]["devices"].append(
        {"name": "nic", "allowMultipleAllocations": True, "capacity": {"bandwidth": {
            "value": "100G", "requestPolicy": {"default": "10G", "validRange": {"min": "1G", "step": "1G"}}}}})
    one = next(o for o in spec["objects"] if o["metadata"]["name"] == "one-gpu")
    one["spec"]["spec"]["devices"]["requests"].append({"name": "nic", "exactly": {
        "deviceClassName": "gpu.example.com",
        "selectors": [{"cel": {"expression": '!("nvlinkDomain" in device.attributes["gpu.example.com"])'}}],
        "capacity": {"requests": {"bandwidth": "15.5G"}}}})
    return parse_scenario(doc, SHARED_NIC)


@functools.cache
def scenario(name: str, policy: str) -> Scenario:
    sc = shared_nic() if name == SHARED_NIC else load_scenario(ROOT / "scenarios" / name)
    return msgspec.structs.replace(sc, policy=Policy(autoscaler=policy))  # type: ignore[arg-type]


@functools.cache
def log(name: str, policy: str, seed: int = 1) -> tuple[tuple[int, bytes], ...]:
    return tuple(Simulator(scenario(name, policy), seed, check_invariants=False).run().entries)


@functools.cache
def records(name: str, policy: str, seed: int = 1) -> tuple[tuple[int, Record], ...]:
    """The log as a restarted actor reads it (decoded from its bytes)."""
    return tuple((offset, decode_record(payload, offset)) for offset, payload in log(name, policy, seed))


def fold(entries: tuple[tuple[int, Record], ...], state: ClusterState | None = None) -> ClusterState:
    state = state if state is not None else ClusterState()
    for offset, record in entries:
        state.apply(offset, record)
    return state


def canon(obj: Any) -> Any:
    """A deep structural form, independent of the codec: every field but the caches, dict order kept,
    sets sorted, types named (a list is not a tuple, an int is not a float). Works through the DRA
    model objects, whose `Device`s compare by identity."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return type(obj).__name__, tuple((f.name, canon(getattr(obj, f.name)))
                                         for f in dataclasses.fields(obj) if f.name not in SKIP)
    if isinstance(obj, msgspec.Struct):
        return type(obj).__name__, canon(msgspec.structs.asdict(obj))
    if isinstance(obj, dict):
        return "dict", tuple((canon(k), canon(v)) for k, v in obj.items())
    if isinstance(obj, list | tuple):
        return type(obj).__name__, tuple(canon(v) for v in obj)
    if isinstance(obj, set | frozenset):
        return "set", tuple(sorted((canon(v) for v in obj), key=repr))
    return type(obj).__name__, obj


def cuts(n: int, k: int = 10) -> list[int]:
    """Offsets 0..n: every one for a short log, else k evenly spaced (both ends included)."""
    return list(range(n + 1)) if n <= 1.5 * k else sorted({round(i * n / (k - 1)) for i in range(k)})


def check_cut(entries: tuple[tuple[int, Record], ...], cut: int, whole: ClusterState) -> None:
    prefix = fold(entries[:cut])
    data = encode_state(prefix)
    assert read_header(data) == prefix.offset == cut
    restored = decode_state(data)
    assert encode_state(restored) == data
    assert canon(restored) == canon(prefix)
    fold(entries[cut:], restored)
    assert encode_state(restored) == encode_state(whole)
    assert canon(restored) == canon(whole)


# ------------------------------------------------------------------------------------ (a) every scenario


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", SCENARIOS)
def test_snapshot_then_tail_is_the_whole_fold(name: str, policy: str) -> None:
    entries = records(name, policy)
    assert entries, "the scenario must simulate"
    whole = fold(entries)
    for cut in cuts(len(entries)):
        check_cut(entries, cut, whole)


def test_the_scenarios_exercise_the_dra_parts() -> None:
    """The cuts above go through device classes, slices, claims, allocations and shared devices."""
    seen = {"classes": 0, "slices": 0, "claims": 0, "allocated": 0, "shared": 0, "capacity": 0,
            "workloads": 0}
    for name in SCENARIOS:
        entries = records(name, "dra")
        for cut in cuts(len(entries)):
            dra = fold(entries[:cut]).dra
            seen["classes"] += bool(dra.classes)
            seen["slices"] += bool(dra.slices)
            seen["claims"] += bool(dra.claims)
            seen["allocated"] += bool(dra.allocated.devices)
            seen["shared"] += bool(dra.allocated.shared)
            seen["capacity"] += bool(dra.allocated.capacity)
        seen["workloads"] += bool(fold(entries).gang.workloads)
    assert all(seen.values()), seen


# ------------------------------------------------------------------------------------ (b) property


@SETTINGS
@given(name=st.sampled_from(SCENARIOS), policy=st.sampled_from(POLICIES), seed=st.integers(1, 4),
       where=st.floats(0, 1))
def test_any_cut_of_any_run(name: str, policy: str, seed: int, where: float) -> None:
    entries = records(name, policy, seed)
    check_cut(entries, round(where * len(entries)), fold(entries))


# ------------------------------------------------------------------------------------ (c) decisions


def decisions(name: str, policy: str, state: ClusterState, now: int) -> list[tuple[bytes | None, int | None]]:
    """Every reactor's decision on `state` at `now`, by fresh reactors (as after a restart)."""
    out = []
    for reactor in build_reactors(run_config(scenario(name, policy))):
        record, wake = decide(reactor, state, now, 1)
        out.append((encode_record(record) if record is not None else None, wake))
    return out


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", SCENARIOS)
def test_every_reactor_decides_the_same_on_the_decoded_state(name: str, policy: str) -> None:
    entries = records(name, policy)
    some = 0
    for cut in cuts(len(entries), 5):
        state = fold(entries[:cut])
        restored = decode_state(encode_state(state))
        for now in (state.t, state.t + 1, state.t + 60_000):
            mine = decisions(name, policy, state, now)
            assert decisions(name, policy, restored, now) == mine, (cut, now)
            some += sum(r is not None for r, _ in mine)
    assert some or len(entries) < 2


class RestartingSimulator(Simulator):
    """Replaces its state by the decoded snapshot at `cut` and, with `fresh`, its reactors by new ones:
    what a Ray restart of every actor does, in the middle of a run."""

    def __init__(self, sc: Scenario, seed: int, cut: int, fresh: bool) -> None:
        super().__init__(sc, seed, check_invariants=True)
        self.cut, self.fresh = cut, fresh

    def append(self, record: Record) -> int:
        offset = super().append(record)
        if offset == self.cut:
            self.state = decode_state(encode_state(self.state))
            if self.fresh:
                self.reactors = build_reactors(run_config(self.scenario))
        return offset


@pytest.mark.parametrize("fresh", [False, True], ids=["same-reactors", "fresh-reactors"])
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", SCENARIOS)
def test_a_run_restarted_from_a_snapshot_writes_the_same_log(name: str, policy: str, fresh: bool) -> None:
    whole = Simulator(scenario(name, policy), 1).run()
    n = len(whole.entries)
    for cut in sorted({1, n // 3, 2 * n // 3, n - 1} - {0}):
        run = RestartingSimulator(scenario(name, policy), 1, cut, fresh).run()
        assert run.entries == whole.entries, cut
        assert run.violations == whole.violations


# ------------------------------------------------------------------------------------ DRA details


def test_shared_devices_and_consumed_capacity_round_trip() -> None:
    state = fold(records("dra-quickstart.yaml", "dra"))
    result = {"driver": "gpu.example.com", "pool": "p", "device": "gpu-0", "request": "r", "shareID": "s1",
              "consumedCapacity": {"memory": "1.5Gi", "cores": "3"}}
    state.dra.allocated.add_allocation({"devices": {"results": [result, {**result, "shareID": "s2"},
                                                                {**result, "device": "gpu-1", "shareID": None}]}})
    data = encode_state(state)
    restored = decode_state(data)
    assert canon(restored.dra.allocated) == canon(state.dra.allocated)
    caps = next(iter(restored.dra.allocated.capacity.values()))
    assert caps == {"memory": Fraction(3 * 1024**3), "cores": Fraction(6)}
    assert encode_state(restored) == data


def test_caches_are_dropped_and_rebuilt() -> None:
    state = fold(records("topology-mismatch.yaml", "dra"))
    state.touched_nodes, state.touched_pods = {"x"}, {"y"}
    index = state.dra.slice_index()
    restored = decode_state(encode_state(state))
    assert restored.touched_nodes is None and restored.touched_pods is None and restored.usage_changes == []
    assert restored.dra._index is None
    rebuilt = restored.dra.slice_index()
    assert {k: [(i, s.name) for i, s in v] for k, v in rebuilt.by_node.items()} == \
        {k: [(i, s.name) for i, s in v] for k, v in index.by_node.items()}
    assert set(codec.DROPPED) <= {f.name for f in dataclasses.fields(ClusterState)}


# ------------------------------------------------------------------------------------ (d) bad input


@pytest.fixture(scope="module")
def snapshot() -> bytes:
    return encode_state(fold(records("dra-quickstart.yaml", "dra")))


def test_truncated_snapshot_is_refused(snapshot: bytes) -> None:
    for size in (0, 1, 5, 20, len(snapshot) // 2, len(snapshot) - 1):
        with pytest.raises(SnapshotError, match="truncated|corrupt|not a dralab"):
            decode_state(snapshot[:size])


def test_other_version_or_shape_is_refused(snapshot: bytes) -> None:
    head = msgspec.msgpack.decode(snapshot, type=codec._Snapshot)
    other = msgspec.msgpack.encode([codec.MAGIC, 99, head.offset, head.shape, head.body])
    with pytest.raises(SnapshotVersionError, match="format version 99; this dralab reads only version 1"):
        decode_state(other)
    shape = msgspec.msgpack.encode([codec.MAGIC, codec.FORMAT_VERSION, head.offset, "0" * 16, head.body])
    with pytest.raises(SnapshotVersionError, match="state shape"):
        read_header(shape)
    with pytest.raises(SnapshotError, match="not a dralab state snapshot"):
        decode_state(log("quickstart.yaml", "count")[0][1])  # a log record is no snapshot
    assert issubclass(SnapshotVersionError, ValueError)


def test_oversize_is_refused(snapshot: bytes) -> None:
    with pytest.raises(SnapshotTooLarge, match=f"{len(snapshot)} bytes, over the limit of {len(snapshot) - 1}"):
        decode_state(snapshot, max_bytes=len(snapshot) - 1)
    assert decode_state(snapshot, max_bytes=len(snapshot)).offset > 0
    with pytest.raises(SnapshotTooLarge, match="over the limit of 100"):
        encode_state(decode_state(snapshot), max_bytes=100)
    assert issubclass(SnapshotTooLarge, ValueError)


def test_inconsistent_body_is_refused(snapshot: bytes) -> None:
    state = decode_state(snapshot)
    del state.pods[next(iter(state.pods))]
    with pytest.raises(SnapshotError, match="pods_by_phase"):
        decode_state(encode_state(state))
    state = decode_state(snapshot)
    name = next(iter(state.dra.slices))
    state.dra.slices["other"] = state.dra.slices.pop(name)
    with pytest.raises(SnapshotError, match=f"slice 'other' holds a manifest of '{name}'"):
        decode_state(encode_state(state))
    head = msgspec.msgpack.decode(snapshot, type=codec._Snapshot)
    forged = msgspec.msgpack.encode([codec.MAGIC, codec.FORMAT_VERSION, head.offset, head.shape, [1, 2]])
    with pytest.raises(SnapshotError, match="corrupt body"):
        decode_state(forged)


@SETTINGS
@given(data=st.data())
def test_corrupted_bytes_decode_or_raise_a_snapshot_error(snapshot: bytes, data: st.DataObject) -> None:
    buf = bytearray(snapshot)
    for _ in range(data.draw(st.integers(1, 8))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    try:
        state = decode_state(bytes(buf))
    except SnapshotError:
        return
    assert isinstance(state, ClusterState)

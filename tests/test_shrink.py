"""`dralab shrink` (issue 7): delta debugging of a failing run's external inputs.

The failing run is benchmarks/shrink_bench.py's at a small size (80 nodes, 1 h of background cpu and GPU
pods, the late-resourceslices h100 group with provisioning slower than publishing, two 8-GPU pods half an
hour in): under the count autoscaler it scales up twice for the same pods. Shrinking must keep that
double scale-up with a handful of inputs, deterministically, in a log that verifies."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.cli import main
from dralab.core.log.events import PodCreated, Record, ScaleUpRequested, decode_record, encode_record
from dralab.core.run.inputs import scenario_inputs
from dralab.core.scenario.load import load_scenario, parse_scenario
from dralab.replay.logs.logfile import LogFile, read_log, write_log
from dralab.replay.simulation.outcomes import OUTCOMES, resolve_target, target_names
from dralab.replay.simulation.shrink import Shrinker, final_log, run_trial
from dralab.replay.simulation.shrink_units import InputSet
from dralab.replay.simulation.sim import Simulator
from dralab.replay.simulation.verify import verify

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import shrink_bench  # noqa: E402

NODES, HOURS, TRAIN_AT = 80, 1.0, 0.5
TRAIN_AT_MS = int(TRAIN_AT * 3_600_000)


@pytest.fixture(scope="module")
def failing() -> tuple[list[tuple[int, bytes]], dict[str, Any]]:
    _, entries, header = shrink_bench.failing_run(NODES, HOURS, TRAIN_AT, seed=1)
    return entries, header


@pytest.fixture(scope="module")
def log_file(failing: tuple[list[tuple[int, bytes]], dict[str, Any]], tmp_path_factory: Any) -> Path:
    path = tmp_path_factory.mktemp("shrink") / "big.dralog"
    write_log(path, failing[1], failing[0])
    return path


def scale_ups(entries: list[tuple[int, bytes]]) -> list[tuple[int, int, ScaleUpRequested]]:
    return [(o, decode_record(p, o).t, e) for o, p in entries for e in decode_record(p, o).events
            if isinstance(e, ScaleUpRequested)]


def pods_named_twice(entries: list[tuple[int, bytes]]) -> set[str]:
    seen: set[str] = set()
    twice: set[str] = set()
    for _, _, event in scale_ups(entries):
        twice.update(p for p in event.pods if p in seen)
        seen.update(event.pods)
    return twice


def test_the_failing_run_scales_up_twice_for_the_training_pods_only(failing: Any) -> None:
    entries, _ = failing
    ups = scale_ups(entries)
    assert [(t, e.group, e.delta) for _, t, e in ups] == [(TRAIN_AT_MS + 10_000, "h100", 2),
                                                          (TRAIN_AT_MS + 260_000, "h100", 2)]
    assert pods_named_twice(entries) == {"pod/default/train-0", "pod/default/train-1"}


def test_shrink_keeps_the_double_scale_up_with_a_handful_of_inputs(failing: Any) -> None:
    entries, _ = failing
    records = shrink_bench.scenario_records(entries)
    result = Shrinker(records, resolve_target("double-scale-up")).run()
    assert result.reproduced and result.stopped == "fixpoint"
    assert result.before["nodes"] == NODES and result.before["node_groups"] == 3 and result.before["arrivals"] > 100
    # one arrival (the training pods', under its own id), one of its pods is enough, the h100 group only
    assert result.after == {"arrivals": 1, "pods": 1, "nodes": 0, "node_groups": 1, "objects": 2, "other": 0}
    arrivals = result.inputs[1:]
    train = [r.id for r in records if any(isinstance(e, PodCreated) and e.pod["metadata"]["name"] == "train-0"
                                          for e in r.events)]
    assert [r.id for r in arrivals] == train and len(train) == 1
    assert all(isinstance(e, PodCreated) and e.pod["metadata"]["name"].startswith("train") for e in arrivals[0].events)
    assert result.shift_ms == TRAIN_AT_MS and arrivals[0].t == 0  # dead time dropped
    assert result.duration_after_ms == 260_000 < result.duration_before_ms  # the second scale-up, 4m20s after
    small = final_log(result)
    assert len(pods_named_twice(small.entries)) == 1
    offset, t, _ = scale_ups(small.entries)[1]
    assert (result.where.offset, result.where.t) == (offset, t)
    checked = verify(LogFile("small", {}, small.entries))
    assert checked.ok, checked.divergence and checked.divergence.render()
    assert result.trials < 60


def test_shrinking_is_deterministic(failing: Any) -> None:
    records = shrink_bench.scenario_records(failing[0])
    runs = [Shrinker(records, resolve_target("double-scale-up"), max_trials=12).run() for _ in range(2)]
    assert runs[0].stopped == "max-trials"  # a budget stops it with the best found so far, the same each time
    assert [encode_record(r) for r in runs[0].inputs] == [encode_record(r) for r in runs[1].inputs]
    assert runs[0].trials == runs[1].trials == 12
    assert sum(runs[0].after.values()) < sum(runs[0].before.values())


def test_a_target_the_run_never_shows_is_reported(failing: Any) -> None:
    records = shrink_bench.scenario_records(failing[0])
    result = Shrinker(records, resolve_target("no-overcommit")).run()
    assert not result.reproduced and result.stopped == "not-reproduced" and result.trials == 1
    assert result.after == result.before


def test_all_inputs_rebuild_the_original_records() -> None:
    """Keeping every atom gives back the scenario's input records byte for byte (node units included:
    dra-quickstart starts with a node whose driver published a slice)."""
    scenario = load_scenario(ROOT / "scenarios" / "dra-quickstart.yaml")
    records = scenario_inputs(scenario, 0)
    inputs = InputSet.from_records(records)
    rebuilt = inputs.build(inputs.all_atoms(), scenario.duration_ms)
    assert [encode_record(r) for r in rebuilt] == [encode_record(r) for r in records]
    node = inputs.node_units(inputs.all_atoms())
    assert len(node) == 1
    without = inputs.build(inputs.all_atoms() - {node[0][0]}, scenario.duration_ms)
    kinds = [type(e).__name__ for e in without[0].events]
    assert "NodeCreated" not in kinds and "NodeReady" not in kinds and "ResourceSlicePublished" not in kinds
    assert "NodeGroupDefined" in kinds and "DeviceClassCreated" in kinds  # the group and the DRA objects stay
    objects = inputs.object_units(inputs.all_atoms())
    assert len(objects) == sum(1 for e in records[0].events if type(e).__name__.endswith("Created")
                               and type(e).__name__ != "NodeCreated") == 3
    assert len(inputs.build(frozenset(a for (a,) in objects), 0)[0].events) == 1 + len(objects)  # RunStarted stays
    assert inputs.removable_groups(inputs.all_atoms()) == []  # its group still has its node
    assert inputs.removable_groups(inputs.all_atoms() - {node[0][0]}) == [(("group", "h100-8x"),)]


def test_shrink_to_an_invariant_stops_where_the_monitor_sees_it() -> None:
    """quickstart plus a second copy of its first arrival 5 s later: the pods are created twice, which the fold
    notes as an anomaly (invariant log-consistent). The copy and one pod of each arrival are all it takes."""
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    inputs = scenario_inputs(scenario, 0)
    first = inputs[1]
    assert first.t == 0 and len(first.events) == 2
    copy = Record(id="scenario/arrival/99", source="scenario", view=-1, t=5_000, events=first.events)
    result = Shrinker([*inputs, copy], resolve_target("log-consistent")).run()
    assert result.reproduced and result.where.t == 5_000 == result.duration_after_ms
    assert result.after == {"arrivals": 2, "pods": 2, "nodes": 0, "node_groups": 0, "objects": 0, "other": 0}
    assert [r.id for r in result.inputs[1:]] == [first.id, copy.id]
    pods = [e.pod["metadata"]["name"] for r in result.inputs[1:] for e in r.events if isinstance(e, PodCreated)]
    assert len(pods) == 2 and pods[0] == pods[1]
    small = final_log(result)
    assert any(v.invariant == "log-consistent" for v in Simulator.from_inputs(result.inputs, 0, 5_000).run().violations)
    assert decode_record(small.entries[-1][1], 0).t <= 5_000 and len(small.entries) <= 4  # the scheduler's one try


def test_invariants_of_the_log_checker_are_targets_too() -> None:
    """core/checks/log_check.py's invariants (judged over the finished log): the same record appended twice."""
    pytest.importorskip("dralab.core.checks.log_check")
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    inputs = scenario_inputs(scenario, 0)
    again = Record(id=inputs[1].id, source="scenario", view=-1, t=5_000, events=inputs[1].events)
    result = Shrinker([*inputs, again], resolve_target("no-entry-applied-twice")).run()
    assert result.reproduced and result.where.t == 5_000
    assert result.after["arrivals"] == 2 and result.after["nodes"] == result.after["node_groups"] == 0
    assert 5_000 <= result.duration_after_ms <= 6_000  # bisected to the second


def test_double_scale_up_means_a_pod_named_by_two_scale_ups() -> None:
    def rec(t: int, *events: Any) -> Record:
        return Record(id=f"a/{t}", source="autoscaler", view=0, t=t, events=events)

    watch = OUTCOMES["double-scale-up"].watch()
    state: Any = None
    assert not watch.step(1, rec(1, ScaleUpRequested(group="a", delta=1, pods=("pod/x", "pod/y"))), state, [])
    assert not watch.step(2, rec(2, ScaleUpRequested(group="b", delta=1, pods=("pod/z",))), state, [])
    assert watch.step(3, rec(3, ScaleUpRequested(group="b", delta=1, pods=("pod/y",))), state, [])


def test_end_of_run_outcomes_on_late_resourceslices() -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "late-resourceslices.yaml").read_text())
    doc["spec"]["policy"]["autoscaler"] = "count"
    scenario = parse_scenario(doc, "late.yaml")
    inputs = scenario_inputs(scenario, 3)
    assert run_trial(inputs, 3, scenario.duration_ms, resolve_target("scale-up-without-pod")).holds
    assert run_trial(inputs, 3, 200_000, resolve_target("pod-pending")).holds  # pods bind at 5m10s
    assert not run_trial(inputs, 3, scenario.duration_ms, resolve_target("pod-pending")).holds
    doc["spec"]["policy"]["autoscaler"] = "dra"
    dra = parse_scenario(doc, "late.yaml")
    assert not run_trial(scenario_inputs(dra, 3), 3, dra.duration_ms, resolve_target("scale-up-without-pod")).holds


def test_shrink_to_an_end_of_run_outcome_bisects_the_duration() -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "late-resourceslices.yaml").read_text())
    doc["spec"]["policy"]["autoscaler"] = "count"
    scenario = parse_scenario(doc, "late.yaml")
    assert not Shrinker(scenario_inputs(scenario, 3), resolve_target("pod-pending")).run().reproduced
    result = Shrinker(scenario_inputs(scenario, 3), resolve_target("pod-pending"), duration_ms=200_000).run()
    assert result.reproduced and result.duration_before_ms == 200_000
    assert result.after["pods"] == 1 and result.after["node_groups"] == 0  # no group: the pod never binds
    assert result.duration_after_ms <= 1000


def test_cli_shrinks_a_log_end_to_end(log_file: Path, tmp_path: Path, capsys: Any) -> None:
    small = tmp_path / "small.dralog"
    assert main(["shrink", str(log_file), "--until", "double-scale-up", "--log", str(small), "-o", "json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["reproduced"] and summary["inputs_before"] > 200 and summary["inputs_after"] == 4
    assert summary["units_after"]["pods"] == 1 and summary["removed"]["nodes"] == NODES
    assert summary["where"]["t_ms"] == 260_000 and summary["out"] == str(small)
    assert "shrink: trial" in captured.err  # progress on stderr
    written = read_log(small)
    header = written.header
    assert pods_named_twice(written.entries) and len(written.entries) == summary["records"] == 10
    assert header["shrunk_from"] == "big.dralog" and header["shrink"]["until"] == "double-scale-up"
    assert main(["replay", str(small), "--verify"]) == 0
    assert "no divergence" in capsys.readouterr().out
    assert main(["shrink", str(log_file), "--until", "double-scale-up", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"double-scale-up: {summary['inputs_before']} -> 4 external inputs")


def test_cli_unknown_target_exits_2_listing_the_names(log_file: Path, capsys: Any) -> None:
    assert main(["shrink", str(log_file), "--until", "double-scaleup"]) == 2
    err = capsys.readouterr().err
    assert "'double-scaleup'" in err and all(name in err for name in target_names())


def test_cli_target_not_reproduced_exits_1(log_file: Path, capsys: Any) -> None:
    assert main(["shrink", str(log_file), "--until", "no-overcommit", "--summary", "json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["reproduced"] is False and summary["trials"] == 1


def test_cli_bad_log_exits_2(tmp_path: Path, capsys: Any) -> None:
    bad = tmp_path / "bad.dralog"
    bad.write_bytes(b"not a log")
    assert main(["shrink", str(bad), "--until", "pod-pending"]) == 2
    assert "bad.dralog" in capsys.readouterr().err

"""`dralab chaos`: random fault schedules (valid, reproducible, at the asked rate), one run per seed
judged by the invariants, the same results whatever --jobs, failing logs kept, shrunk, replayable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.cli import main
from dralab.core.checks import invariants
from dralab.core.checks.log_check import check_records
from dralab.core.log.events import decode_record
from dralab.core.scenario.faults import KINDS, check_fault
from dralab.core.scenario.load import load_scenario
from dralab.replay.logs.logfile import read_log
from dralab.replay.simulation import chaos as chaos_mod
from dralab.replay.simulation.chaos import (
    DEFAULT_KINDS,
    REACTORS,
    ChaosError,
    ChaosOptions,
    Targets,
    chaos_schedule,
    run_seed,
    with_faults,
)
from dralab.replay.simulation.sim import SimulationStuck, Simulator
from dralab.replay.simulation.verify import verify

ROOT = Path(__file__).resolve().parents[1]
NODE_FAIL = str(ROOT / "scenarios" / "chaos" / "node-fail.yaml")  # 30 min, 2 starting nodes, group max 4
RACE = str(ROOT / "scenarios" / "scale-down-race.yaml")


def no_faults(tmp_path: Path) -> str:
    """node-fail.yaml without its own fault: the schedule's faults are the only ones."""
    doc = yaml.safe_load(Path(NODE_FAIL).read_text())
    del doc["spec"]["faults"]
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["chaos", *argv, "-o", "json", "--quiet"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_schedule_is_reproducible_valid_and_drawn_from_the_scenario() -> None:
    sc = load_scenario(NODE_FAIL)
    targets = Targets.of(sc)
    assert targets.nodes == ("gpu-8x-0", "gpu-8x-1") and targets.groups == ("gpu-8x",)
    kinds_seen: set[str] = set()
    for seed in range(60):
        faults = chaos_schedule(sc, seed)
        assert faults == chaos_schedule(sc, seed)
        assert [f.at_ms for f in faults] == sorted(f.at_ms for f in faults)
        for f in faults:
            kinds_seen.add(f.kind)
            assert 0 <= f.at_ms <= sc.duration_ms and f.for_ms is not None and 30_000 <= f.for_ms <= 600_000
            spec = KINDS[f.kind]
            allowed = {"node": targets.nodes, "group": targets.groups, "reactor": REACTORS, "": ("",)}
            assert f.target in allowed[spec.target]
            # what a user would write for it passes the scenario's own check and gives the same fault
            item: dict[str, Any] = {"at": f"{f.at_ms}ms", "kind": f.kind, "for": f"{f.for_ms}ms", **f.params}
            if spec.target:
                item[spec.target] = f.target
            for name in ("delay", "skew", "step"):
                if name in item:
                    item[name] = f"{item[name]}ms"
            assert check_fault(item, sc.duration_ms, "x") == f
    assert "redis-restart" not in kinds_seen and kinds_seen == set(DEFAULT_KINDS)
    assert chaos_schedule(sc, 1) != chaos_schedule(sc, 2)


def test_schedule_rate_and_kinds() -> None:
    sc = load_scenario(NODE_FAIL)  # half an hour
    counts = [len(chaos_schedule(sc, seed, rate=20)) for seed in range(400)]
    assert 9.0 < sum(counts) / len(counts) < 11.0  # 20 per hour over 0.5 h
    only = {f.kind for seed in range(50) for f in chaos_schedule(sc, seed, ("node-taint", "quota-cut"), 20)}
    assert only == {"node-taint", "quota-cut"}
    with pytest.raises(ChaosError, match="unknown fault kind 'nope'"):
        chaos_schedule(sc, 1, ("nope",))
    with pytest.raises(ChaosError, match="rate must be > 0"):
        chaos_schedule(sc, 1, rate=0)


def test_same_results_whatever_jobs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    runs = []
    for jobs in ("1", "2"):
        code, s = run_json(capsys, RACE, "--seeds", "1-24", "--rate", "30", "--jobs", jobs, "--no-shrink",
                           "--out", str(tmp_path / jobs))
        runs.append((code, s))
    (code1, s1), (code2, s2) = runs
    assert code1 == code2 and s2["jobs"] == 2 and s1["jobs"] == 1
    assert s1["digests"] == s2["digests"] and len(s1["digests"]) == 24
    same = ("seeds_run", "seeds_failed", "failures_by_invariant", "faults_injected", "faults_by_kind", "cluster_hours")
    assert {k: s1[k] for k in same} == {k: s2[k] for k in same}
    assert [(f["seed"], f["first"], f["message"]) for f in s1["failed"]] == \
        [(f["seed"], f["first"], f["message"]) for f in s2["failed"]]
    assert [Path(f).name for f in s1["files"]] == [Path(f).name for f in s2["files"]]


def test_every_seed_holds_exit_0_and_the_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["chaos", NODE_FAIL, "--seeds", "1-20", "--kinds", "node-taint,reactor-pause", "--rate", "12",
                 "--jobs", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "seeds run                     20" in text and "seeds failed                   0" in text
    assert "simulated cluster-hours     10.0" in text and "every seed held" in text
    assert not out.exists()  # nothing kept, nothing made
    code, s = run_json(capsys, NODE_FAIL, "--seeds", "1-20", "--kinds", "node-taint,reactor-pause",
                       "--rate", "12", "--jobs", "1", "--out", str(out))
    assert code == 0 and s["seeds_run"] == 20 and s["seeds_failed"] == 0 and s["ok"]
    assert s["cluster_hours"] == 10.0 and s["files"] == [] and set(s["faults_by_kind"]) <= {"node-taint",
                                                                                            "reactor-pause"}
    assert s["faults_injected"] == sum(s["faults_by_kind"].values()) > 0


def _fails_while_a_node_fails(state: Any) -> list[str]:
    """A planted invariant: broken while a node-fail fault is in force (to make chosen seeds fail)."""
    return [f"{f.fault} holds {f.target} down" for f in state.faults.values()
            if f.kind == "node-fail" and f.started and not f.ended]


def test_a_failing_seed_is_counted_kept_shrunk_and_replays(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(invariants.INVARIANTS, "group-within-max", _fails_while_a_node_fails)
    out = tmp_path / "out"
    plain = no_faults(tmp_path)
    code, s = run_json(capsys, plain, "--seeds", "1-30", "--kinds", "node-fail,quota-cut", "--rate", "4",
                       "--jobs", "1", "--out", str(out), "--shrink-trials", "60")
    sc = load_scenario(plain)
    expected = [seed for seed in range(1, 31)
                if any(f.kind == "node-fail" for f in chaos_schedule(sc, seed, ("node-fail", "quota-cut"), 4))]
    assert code == 1 and 0 < len(expected) < 30
    assert s["seeds_failed"] == len(expected) and [f["seed"] for f in s["failed"]] == expected
    assert s["failures_by_invariant"]["group-within-max"]["seeds"] == len(expected)
    seed = expected[0]
    big, small = out / f"chaos-node-fail-seed{seed}.dralog", out / f"chaos-node-fail-seed{seed}.small.dralog"
    assert s["failed"][0]["files"] == [str(big), str(small)] and len(s["files"]) == 2 * len(expected)
    logf = read_log(big)
    assert logf.header["chaos"]["seed"] == seed and logf.header["seed"] == 11  # the scenario's own seed
    assert verify(logf).ok
    checked = check_records(logf.records())
    assert checked.counts["group-within-max"] > 0
    small_log = read_log(small)
    assert verify(small_log).ok and check_records(small_log.records()).counts["group-within-max"] > 0
    faults = [r for _, r in small_log.records() if r.id.startswith("scenario/fault/")]
    assert len(faults) == 1 and faults[0].events[0].kind == "node-fail"  # the quota cuts were shrunk away
    assert main(["replay", str(big), "--verify"]) == 0
    capsys.readouterr()


def test_a_livelock_is_a_failure_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Stuck(chaos_mod.Simulator):  # type: ignore[misc,name-defined]
        def run(self, progress: Any = None) -> Any:
            raise SimulationStuck("reactors still busy after 10000 rounds at t=0 ms")

    monkeypatch.setattr(chaos_mod, "Simulator", Stuck)
    r = run_seed(load_scenario(NODE_FAIL), 3, ChaosOptions(out_dir=str(tmp_path)))
    assert not r.ok and r.first == "livelock" and r.failures == {"livelock": 1} and "still busy" in r.message
    assert r.files == [str(tmp_path / "chaos-node-fail-seed3.dralog")] and not r.shrunk


@pytest.mark.parametrize(("argv", "message"), [
    (["--seeds", "5-1"], "--seeds: 5-1 is an empty range"),
    (["--seeds", "1-x"], "--seeds: '1-x' is not a seed"),
    (["--kinds", "node-fail,bogus"], "--kinds: unknown fault kind 'bogus'"),
    (["--rate", "0"], "--rate: must be > 0"),
    (["--rate", "-2"], "--rate: must be > 0"),
    (["--jobs", "-1"], "--jobs: must be >= 1"),
    (["--live", "--speed", "0"], "--speed: must be > 0"),
    (["--live", "--timeout", "-1"], "--timeout: must be > 0"),
])
def test_bad_options_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str],
                            message: str) -> None:
    assert main(["chaos", NODE_FAIL, "--out", str(tmp_path / "o"), *argv]) == 2
    assert message in capsys.readouterr().err


def test_unreadable_scenario_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["chaos", str(tmp_path / "missing.yaml"), "--seeds", "1"]) == 2
    assert "missing.yaml" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("spec: [1, 2\n")
    assert main(["chaos", str(bad), "--seeds", "1"]) == 2
    assert "bad.yaml" in capsys.readouterr().err


def test_liveness_allows_for_the_time_faults_held_the_scheduler_back() -> None:
    from dralab.core.scenario.faults import Fault

    sc = load_scenario(NODE_FAIL)  # its own node-fail needs no allowance
    assert chaos_mod.liveness_bound(sc) == 600_000
    faults = [Fault(at_ms=60_000, kind="reactor-kill", target="scheduler", for_ms=240_000),
              Fault(at_ms=200_000, kind="reactor-pause", target="scheduler", for_ms=200_000),
              Fault(at_ms=500_000, kind="partition", target="autoscaler", for_ms=900_000),
              Fault(at_ms=900_000, kind="swizzle", target="", for_ms=100_000,
                    params={"reactors": ["cloud", "scheduler"], "step": 1000})]
    assert chaos_mod.liveness_bound(chaos_mod.with_faults(sc, faults)) == 600_000 + 340_000
    assert chaos_mod.liveness_bound(chaos_mod.with_faults(sc, faults[2:]), 1000) == 1000 + 100_000


@pytest.mark.parametrize("name", ["stale-autoscaler", "fractional-sharing", "provision-timeout"])
def test_liveness_checked_as_the_simulator_runs_equals_the_check_over_the_finished_log(name: str) -> None:
    """`dralab chaos` checks liveness in the simulator's monitor (RunChecks) rather than by folding the
    finished log again: the same violations, at the same offsets, with the same messages."""
    path = next(p for p in (ROOT / "scenarios").rglob(f"{name}.yaml"))
    scenario = load_scenario(path)
    found = 0
    for seed in range(1, 5):
        run = with_faults(scenario, chaos_schedule(scenario, seed, rate=30))
        result = Simulator(run, 0, liveness_bound_ms=30_000).run()
        live = [(v.offset, v.message) for v in result.violations if v.invariant == "liveness"]
        records = ((o, decode_record(p, o)) for o, p in result.entries)
        over_log = check_records(records, only=["liveness"], liveness_bound_ms=30_000).violations
        assert live == [(v.offset, v.message) for v in over_log]
        found += len(live)
    assert found > 0  # the bound is short enough that some pods break it: the comparison means something

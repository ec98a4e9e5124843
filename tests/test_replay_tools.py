"""`dralab replay`: time travel (--at), a pod's story (--explain), what-if (--with), and --verify catching
a deliberately changed reactor at the right decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dralab.cli import main
from dralab.core.autoscaler.reactor import Autoscaler
from dralab.core.log.events import ScaleUpRequested
from dralab.core.scenario.load import Policy, load_scenario
from dralab.core.scheduler.reactor import Scheduler
from dralab.core.state.cluster import ClusterState
from dralab.replay.logs.logfile import make_header, read_log, write_log
from dralab.replay.simulation.sim import simulate
from dralab.replay.simulation.timetravel import PointError, parse_point
from dralab.replay.simulation.whatif_run import SettingError, apply_settings

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _log(tmp_path: Path, name: str, policy: str | None = None) -> Path:
    scenario = load_scenario(SCENARIOS / f"{name}.yaml")
    if policy is not None:
        scenario = msgspec.structs.replace(scenario, policy=Policy(autoscaler=policy))  # type: ignore[arg-type]
    result = simulate(scenario, scenario.seed or 0)
    path = tmp_path / f"{name}-{policy}.dralog"
    write_log(path, make_header(scenario=name, seed=scenario.seed or 0, policy={"autoscaler": policy or ""},
                                mode="sim"), result.entries)
    return path


@pytest.fixture(scope="module")
def late_count(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _log(tmp_path_factory.mktemp("late"), "late-resourceslices", "count")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out = _run(capsys, *argv, "-o", "json")
    return code, json.loads(out)


def _scale_up_offsets(path: Path) -> list[tuple[int, int]]:
    return [(o, r.t) for o, r in read_log(path).records() for e in r.events if isinstance(e, ScaleUpRequested)]


# -- time travel ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "kind", "value"), [
    ("0", "offset", 0), ("120", "offset", 120), ("90s", "time", 90_000), ("5m", "time", 300_000),
    ("1h2m3s", "time", 3_723_000), ("t=250ms", "time", 250),
])
def test_points_are_offsets_or_times(text: str, kind: str, value: int) -> None:
    point = parse_point(text)
    assert (point.kind, point.value) == (kind, value)


@pytest.mark.parametrize("text", ["", "-3", "five", "5 minutes", "1.5.2s"])
def test_a_bad_point_says_what_is_accepted(text: str) -> None:
    with pytest.raises(PointError, match="neither an offset"):
        parse_point(text)


def test_at_an_offset_is_the_fold_of_the_prefix(late_count: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = list(read_log(late_count).records())
    second = _scale_up_offsets(late_count)[1][0]
    code, out = _json(capsys, "replay", str(late_count), "--at", str(second))
    assert code == 0
    state = ClusterState()
    for offset, record in records[:second]:
        state.apply(offset, record)
    assert out["offset"] == second == state.offset
    assert len(out["nodes"]) == len(state.nodes) == 2  # the first scale-up's nodes, Ready without slices
    assert all(n["ready"] and "devices" not in n for n in out["nodes"])
    pending = [p for p in out["pods"] if p["phase"] == "Pending"]
    assert {p["reason"] for p in pending} == {"capacity"} and len(pending) == 2
    assert all("cannot allocate all claims" in p["message"] for p in pending)
    groups = {g["group"]: g for g in out["node_groups"]}
    assert groups["h100"]["target_size"] == 4 and groups["h100"]["outstanding"] == 2
    # the autoscaler decided the record at `second` on the view just before it
    assert out["reactors"]["autoscaler"] == {"view": second - 1, "t": records[second - 1][1].t,
                                             "decision": second, "behind": 1}


def test_at_a_time_stops_before_the_first_later_record(late_count: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = list(read_log(late_count).records())
    code, out = _json(capsys, "replay", str(late_count), "--at", "5m")
    assert code == 0
    expected = max(o for o, r in records if r.t <= 300_000)
    assert out["offset"] == expected and out["t_s"] <= 300
    code, text = _run(capsys, "replay", str(late_count), "--at", "5m")
    assert code == 0 and "Pending  capacity" in text and "what each reactor had seen" in text


def test_at_beyond_the_end_is_bad_input(late_count: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(late_count), "--at", "100000"]) == 2
    assert "the log ends at offset" in capsys.readouterr().err


def test_at_shows_what_gang_members_waiting_at_permit_hold(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """partial-gang: members wait at Permit on nodes that have no pod bound: `--at` says what they hold (a
    node showing `gpus 0/8` would otherwise look free while it refuses every other pod)."""
    log = _log(tmp_path, "partial-gang")
    code, out = _json(capsys, "replay", str(log), "--at", "3m")
    assert code == 0
    waiting = [p for p in out["pods"] if "waiting_at_permit_on" in p]
    held = {n["name"]: n["held_at_permit"] for n in out["nodes"] if "held_at_permit" in n}
    assert waiting and sum(h["pods"] for h in held.values()) == len(waiting)
    assert all(h["gpus"] == 8 for h in held.values()) and all(
        n["gpus"]["used"] == 0 for n in out["nodes"] if n["name"] in held)
    code, text = _run(capsys, "replay", str(log), "--at", "3m")
    assert code == 0 and "held at Permit: 1 pods, 8 gpus" in text


# -- --explain --------------------------------------------------------------------------------------------

def test_explain_tells_the_double_scale_up(late_count: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _json(capsys, "replay", str(late_count), "--explain", "train-0")
    assert code == 0 and out["found"]
    kinds = [s["event"].split()[0] for s in out["story"]]
    assert kinds[0] == "PodCreated" and kinds.count("ScaleUpRequested") == 3 and "PodBound" in kinds
    assert [s["offset"] for s in out["story"] if s["event"].startswith("ScaleUpRequested")] == \
        [o for o, _ in _scale_up_offsets(late_count)]
    assert all(s["role"] == "named" for s in out["story"] if s["event"].startswith("ScaleUpRequested"))
    assert out["final"]["phase"] == "Running" and out["final"]["attempts"] == 3
    code, text = _run(capsys, "replay", str(late_count), "--explain", "default/train-0")
    assert code == 0 and "autoscaler (view" in text and "cannot allocate all claims" in text


def test_explain_an_unknown_pod(late_count: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _run(capsys, "replay", str(late_count), "--explain", "nope")
    assert code == 1 and "not in" in text


# -- what-if ----------------------------------------------------------------------------------------------

def test_with_dra_policy_removes_the_extra_scale_ups(late_count: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out_log = tmp_path / "whatif.dralog"
    code, out = _json(capsys, "replay", str(late_count), "--with", "autoscaler.policy=dra", "--log", str(out_log))
    assert code == 0 and out["with"] == {"autoscaler.policy": "dra"}
    assert out["baseline_identical"] is True  # a sim log re-simulates to itself
    rows = {r["metric"]: r for r in out["rows"]}
    assert rows["scale-ups"]["recorded"] == 3 and rows["scale-ups"]["whatif"] == 1
    no_pod = rows["scale-ups that brought no pod"]
    assert no_pod["recorded"] == 2 and no_pod["whatif"] == 0
    assert rows["GPU-hours idle"]["whatif"] == 0
    # the what-if run is the scenario simulated with the dra policy, byte for byte
    scenario = load_scenario(SCENARIOS / "late-resourceslices.yaml")
    dra = simulate(msgspec.structs.replace(scenario, policy=Policy(autoscaler="dra")), scenario.seed or 0)
    assert read_log(out_log).entries == dra.entries
    code, text = _run(capsys, "replay", str(late_count), "--with", "autoscaler.policy=dra")
    assert code == 0 and text.splitlines()[0] == "what-if: autoscaler.policy=dra"


def test_with_durations_and_nested_settings() -> None:
    config = {"duration_ms": 60_000, "scheduler": {"score": "most-allocated", "gang_timeout_ms": 1,
                                                   "feature_gates": {}},
              "autoscaler": {"policy": "count", "scan_interval_ms": 10_000, "scale_down": {"enabled": True}}}
    new, changes = apply_settings(config, ["autoscaler.scan_interval_ms=5s", "autoscaler.scale_down.enabled=false",
                                           "scheduler.feature_gates.NominatedNodeNameForExpectation=true"])
    assert changes == {"autoscaler.scan_interval_ms": 5000, "autoscaler.scale_down.enabled": False,
                       "scheduler.feature_gates.NominatedNodeNameForExpectation": True}
    assert config["autoscaler"]["scan_interval_ms"] == 10_000  # the original is untouched
    assert new["autoscaler"]["scale_down"] == {"enabled": False}


@pytest.mark.parametrize(("setting", "message"), [
    ("autoscaler.nope=1", "no such setting"),
    ("autoscaler.policy=foo", "unknown autoscaler policy"),
    # a default-profile log records the scheduler configuration (scheduler.config), not a score policy
    ("scheduler.config.args.NodeResourcesFit.scoringStrategy.type=3", "expected str"),
    ("autoscaler.scale_down=1", "a section"),
    ("autoscaler.scan_interval_ms=soon", "scan_interval_ms=soon"),
    ("policy", "expected key=value"),
])
def test_bad_settings_are_bad_input(late_count: Path, capsys: pytest.CaptureFixture[str], setting: str,
                                    message: str) -> None:
    assert main(["replay", str(late_count), "--with", setting]) == 2
    err = capsys.readouterr().err
    assert message in err and str(late_count) in err


def test_apply_settings_refuses_what_the_reactors_refuse() -> None:
    with pytest.raises(SettingError, match="expander"):
        apply_settings({"autoscaler": {"policy": "count", "expander": "least-waste"}},
                       ["autoscaler.expander=cheapest-please"])


def test_one_action_at_a_time(late_count: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(late_count)]) == 2
    assert main(["replay", str(late_count), "--verify", "--at", "3"]) == 2
    assert main(["replay", str(late_count), "--log", "x.dralog", "--at", "3"]) == 2


# -- verify catches an injected change at the right decision ---------------------------------------------

def test_verify_catches_a_changed_autoscaler_at_its_first_changed_decision(
        late_count: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The change: from 2 minutes on, the autoscaler asks one node more. The recorded decisions before
    that verify; the first scale-up after it is the divergence, with both versions shown."""
    original = Autoscaler.react

    def greedier(self: Autoscaler, view: Any, now: int, rng: Any) -> Any:
        decision = original(self, view, now, rng)
        if now < 120_000:
            return decision
        events = tuple(msgspec.structs.replace(e, delta=e.delta + 1) if isinstance(e, ScaleUpRequested) else e
                       for e in decision.events)
        return type(decision)(events=events, wake_at=decision.wake_at)

    monkeypatch.setattr(Autoscaler, "react", greedier)
    code, out = _json(capsys, "replay", str(late_count), "--verify")
    expected = next(o for o, t in _scale_up_offsets(late_count) if t >= 120_000)
    assert code == 1 and out["ok"] is False
    div = out["divergence"]
    assert div["offset"] == expected and div["source"] == "autoscaler" and div["view"] == expected - 1
    recorded = [e for e in div["recorded"]["events"] if e["type"] == "ScaleUpRequested"]
    recomputed = [e for e in div["recomputed"]["events"] if e["type"] == "ScaleUpRequested"]
    assert recorded[0]["delta"] == 2 and recomputed[0]["delta"] == 3
    assert out["decisions_checked"] == sum(1 for o, r in read_log(late_count).records()
                                           if r.source != "scenario" and o < expected)
    monkeypatch.undo()
    code, text = _run(capsys, "replay", str(late_count), "--verify")
    assert code == 0 and "no divergence" in text


def test_verify_catches_a_changed_scheduler_score(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheduler that binds to the last feasible node instead of the best-scored one diverges at the
    first binding whose node it changes, and nowhere before."""
    path = _log(tmp_path, "topology-mismatch", "dra")
    records = list(read_log(path).records())
    original = Scheduler.react

    def contrary(self: Scheduler, view: Any, now: int, rng: Any) -> Any:
        decision = original(self, view, now, rng)
        nodes = sorted(view.nodes)
        events = tuple(msgspec.structs.replace(e, node=nodes[-1]) if type(e).__name__ == "PodBound"
                       and e.node != nodes[-1] else e for e in decision.events)
        return type(decision)(events=events, wake_at=decision.wake_at)

    monkeypatch.setattr(Scheduler, "react", contrary)
    code, out = _json(capsys, "replay", str(path), "--verify")
    state = ClusterState()
    expected = None
    for offset, record in records:
        if record.source == "scheduler" and any(type(e).__name__ == "PodBound" and e.node != sorted(state.nodes)[-1]
                                                for e in record.events):
            expected = offset
            break
        state.apply(offset, record)
    assert expected is not None, "the scenario binds a pod to a node other than the last one"
    assert code == 1 and out["divergence"]["offset"] == expected and out["divergence"]["source"] == "scheduler"


def test_verify_output_is_byte_identical_twice(late_count: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = _run(capsys, "replay", str(late_count), "--verify", "-o", "json")
    second = _run(capsys, "replay", str(late_count), "--verify", "-o", "json")
    assert first == second and first[0] == 0

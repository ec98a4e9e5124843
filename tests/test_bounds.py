"""Bounds on what sizes a run (issue 18, item 7): seeds, cluster time, node and pod counts, Redis URLs.

Each is refused before any work with exit 2 and the field or option named (core/kube/limits.py, cli/bounds.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from dralab import chaos_cmd
from dralab.cli import main
from dralab.core.kube.limits import MAX_CLUSTER_TIME_MS, MAX_NODE_COUNT, MAX_POD_COUNT, MAX_SEED
from dralab.core.scenario.load import ScenarioError, parse_scenario
from tests.test_scenario import G0, QUICKSTART, W0, Keys, edit, scenario

TOO_BIG_SEED = "999999999999999999999999999"


def refused(keys: Keys, value: object, *more: tuple[Keys, object]) -> ScenarioError:
    data = scenario()
    for k, v in ((keys, value), *more):
        edit(data, k, v)
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "s.yaml")
    return info.value


# --- seeds ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["sim", "run"])
@pytest.mark.parametrize("seed", [TOO_BIG_SEED, str(MAX_SEED + 1), "-1"])
def test_a_seed_out_of_range_is_refused_before_any_work(command: str, seed: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # Before: the 27-digit seed ran the whole simulation, then msgspec raised OverflowError (a traceback).
    with pytest.raises(SystemExit) as info:
        main([command, str(QUICKSTART), "--seed", seed])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --seed:" in err and "Traceback" not in err


def test_the_largest_seed_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", str(QUICKSTART), "--seed", str(MAX_SEED), "-o", "json"]) == 0
    assert f'"seed": {MAX_SEED}' in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["whatif", "--seed", TOO_BIG_SEED],
    ["trace", "openb", "--seed", TOO_BIG_SEED],
])
def test_other_seed_options_are_bounded(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "argument --seed: must be < 2^63" in capsys.readouterr().err


def test_seed_ranges_are_bounded() -> None:
    with pytest.raises(chaos_cmd.InputError, match=r"--seeds: .*seeds must be < 2\^63"):
        chaos_cmd.parse_seeds(f"{MAX_SEED}-{MAX_SEED + 1}")
    assert chaos_cmd.parse_seeds(f"{MAX_SEED}") == [MAX_SEED]


@pytest.mark.parametrize("rate", ["inf", "1e9", "nan", "0"])
def test_the_chaos_rate_is_bounded(rate: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: `--rate inf` was a ZeroDivisionError traceback, `--rate 1e9` drew 100,000 faults a seed.
    assert main(["chaos", str(QUICKSTART), "--seeds", "1", "--rate", rate, "--quiet"]) == 2
    assert "--rate: must be > 0 and at most 3600" in capsys.readouterr().err


def test_the_scenario_seed_is_bounded() -> None:
    error = refused(("spec", "seed"), MAX_SEED + 1)
    assert error.path == "spec.seed" and f"must be <= {MAX_SEED}" in error.message
    assert parse_scenario({**scenario(), "spec": {**scenario()["spec"], "seed": MAX_SEED}}).seed == MAX_SEED


# --- cluster time ---------------------------------------------------------------------------------------


def test_a_century_long_scenario_is_refused() -> None:
    # Before: `duration: 876000h` was taken and the simulation ran silently for hours.
    error = refused(("spec", "duration"), "876000h")
    assert str(error) == ("s.yaml: spec.duration: must be <= 720h0m0s (30 days, dralab's limit on cluster time), "
                          "got 876000h0m0s")


def test_thirty_days_is_the_limit() -> None:
    assert parse_scenario({**scenario(), "spec": {**scenario()["spec"], "duration": "720h"}}).duration_ms == \
        MAX_CLUSTER_TIME_MS
    refused(("spec", "duration"), "720h0m0.001s")


@pytest.mark.parametrize(("keys", "value", "path"), [
    (("spec", "scheduler"), {"gangTimeout": "1000h"}, "spec.scheduler.gangTimeout"),
    (("spec", "autoscaler"), {"scanInterval": "1000h"}, "spec.autoscaler.scanInterval"),
    (("spec", "autoscaler"), {"scaleDown": {"unneededTime": "1000h"}}, "spec.autoscaler.scaleDown.unneededTime"),
    ((*G0, "provisionDelay"), {"min": "1s", "max": "1000h"}, "spec.nodeGroups[0].provisionDelay.max"),
    ((*G0, "notReadyFor"), "1000h", "spec.nodeGroups[0].notReadyFor"),
    ((*W0, "runFor"), "1000h", "spec.workload[0].runFor"),
    (("spec", "faults"), [{"at": "1m", "kind": "node-fail", "node": "n", "for": "1000h"}], "spec.faults[0].for"),
])
def test_every_duration_field_is_bounded(keys: Keys, value: object, path: str) -> None:
    error = refused(keys, value)
    assert error.path == path and "must be <= 720h0m0s" in error.message


# --- counts ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("keys", "value", "path"), [
    ((*G0, "max"), MAX_NODE_COUNT + 1, "spec.nodeGroups[0].max"),
    ((*G0, "min"), MAX_NODE_COUNT + 1, "spec.nodeGroups[0].min"),
    ((*G0, "quota"), MAX_NODE_COUNT + 1, "spec.nodeGroups[0].quota"),
    ((*G0, "stock"), [{"available": MAX_NODE_COUNT + 1}], "spec.nodeGroups[0].stock[0].available"),
    ((*W0, "count"), MAX_POD_COUNT + 1, "spec.workload[0].count"),
    (("spec", "faults"), [{"at": "1m", "kind": "quota-cut", "group": "g", "quota": MAX_NODE_COUNT + 1}],
     "spec.faults[0].quota"),
])
def test_counts_are_bounded(keys: Keys, value: object, path: str) -> None:
    error = refused(keys, value)
    assert error.path == path and "must be <=" in error.message


def test_starting_nodes_are_bounded_in_all() -> None:
    groups = [{"name": f"g{i}", "max": MAX_NODE_COUNT, "template": scenario()["spec"]["nodeGroups"][0]["template"]}
              for i in range(2)]
    nodes = [{"group": "g0", "count": MAX_NODE_COUNT}, {"group": "g1", "count": 1}]
    error = refused(("spec", "nodeGroups"), groups, (("spec", "nodes"), nodes))
    assert error.path == "spec.nodes[1].count" and f"at most {MAX_NODE_COUNT} starting nodes" in error.message


def test_pods_are_bounded_in_all() -> None:
    pod: dict[str, Any] = scenario()["spec"]["workload"][0]["pod"]
    workload = [{"at": "0s", "count": MAX_POD_COUNT, "pod": {**pod, "metadata": {"name": f"p{i}"}}}
                for i in range(2)]
    error = refused(("spec", "workload"), workload)
    assert error.path == "spec.workload[1].count" and f"at most {MAX_POD_COUNT} pods" in error.message


# --- Redis URLs -----------------------------------------------------------------------------------------

BAD_URLS = ["notaurl", "http://x", "redis://localhost:99999", "redis://:secret@host:notaport/0",
            "redis://localhost/abc"]


@pytest.mark.parametrize("url", BAD_URLS)
def test_run_refuses_a_malformed_redis_url_with_exit_2(url: str, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # Before: `run` probed the URL and said exit 3 ("unreachable"), `record` exit 2.
    import dralab.actors.live as live

    def no_run(*_: Any, **__: Any) -> Any:
        raise AssertionError("the run started")

    monkeypatch.setattr(live, "run_live", no_run)
    assert main(["run", str(QUICKSTART), "--redis", url]) == 2
    err = capsys.readouterr().err
    assert "--redis: bad Redis URL" in err and "secret" not in err


@pytest.mark.parametrize("url", BAD_URLS)
def test_record_refuses_a_malformed_redis_url_before_connecting(url: str, tmp_path: Any,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    import dralab.actors.recorder as recorder

    def no_record(*_: Any, **__: Any) -> Any:
        raise AssertionError("record connected")

    monkeypatch.setattr(recorder, "record", no_record)
    assert main(["record", "--redis", url, "--stream", "s", "-o", str(tmp_path / "x.dralog")]) == 2
    err = capsys.readouterr().err
    assert "--redis: bad Redis URL" in err and "secret" not in err


def test_a_well_formed_url_is_left_to_the_connection() -> None:
    from dralab.bounds import check_redis_url

    for url in ("redis://127.0.0.1:1", "redis://h:6379/0", "rediss://u:p@h", "unix:///tmp/r.sock", None, ""):
        check_redis_url(url)

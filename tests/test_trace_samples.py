"""The trace importers (replay/traces/openb.py, philly.py, pollux.py and the `dralab trace` commands) on real rows on
every machine: the samples of tests/fixtures/traces/ (cut from the real traces by cut_samples.py there; each
folder's README says from where, under what licence and how). The full traces' own tests
(tests/test_trace_*.py, test_fgd_go.py) skip when the traces are absent; these do not. When the real traces
are there, one more test checks that the samples are exactly what cut_samples.py cuts from them."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest
from traces_path import SAMPLES, absent, needs, real_trace

from dralab.cli import main
from dralab.replay.traces.fgd import PyDraws, arrival_order, run_seed, typical_pods
from dralab.replay.traces.openb import read_pod_times
from dralab.replay.traces.philly import load_philly, pods_of
from dralab.replay.traces.pollux import draw_durations, load_workload, matched_counts
from dralab.trace_cmd import load_trace

OPENB = SAMPLES / "openb"
NODES = OPENB / "openb_node_list_gpu_node.csv"
DEFAULT = OPENB / "openb_pod_list_default.csv"
POD_LISTS = (DEFAULT, OPENB / "openb_pod_list_gpuspec33.csv", OPENB / "openb_pod_list_multigpu50.csv")
CACHE = OPENB / "fgd_expected_results"
PHILLY = SAMPLES / "philly_pollux" / "philly.csv"
WORKLOAD = SAMPLES / "philly_pollux" / "workloads" / "workload-5.csv"
MODELS = ("A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32")  # every GPU model of the trace


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_the_samples_stay_small() -> None:
    files = [p for p in SAMPLES.rglob("*") if p.is_file() and p.suffix == ".csv"]
    assert len(files) == 9 and sum(p.stat().st_size for p in files) < 100_000


@pytest.mark.parametrize("pods", POD_LISTS, ids=lambda p: p.stem)
def test_every_pod_list_layout_imports(pods: Path) -> None:
    """The 11-column lists and the 5-column multigpu ones, through the importer, a checked scenario and the
    protocol's arrays; GPU models as the CEL selectors say."""
    cluster, workload, order = load_trace(str(NODES), str(pods))
    assert workload == pods.stem and sorted(order) == list(range(50))
    assert sorted(cluster.models) == sorted(MODELS) and len(cluster.nodes) == 50
    assert cluster.total_gpus == sum(int(r["gpu"]) for r in rows(NODES))
    by_name = dict(zip(cluster.pod_names, cluster.pods, strict=True))
    for row in rows(pods):
        shape = by_name[row["name"]]
        assert (shape.cpu, shape.mem, shape.num) == (int(row["cpu_milli"]), int(row["memory_mib"]),
                                                     int(row["num_gpu"]))
        spec = row.get("gpu_spec") or ""
        assert shape.spec == spec
        if spec:
            assert shape.models == frozenset(cluster.models.index(m) for m in spec.split("|")), row
    assert len(by_name) == len(rows(pods))


def test_the_fgd_protocol_on_the_sample() -> None:
    cluster, _, sources = load_trace(str(NODES), str(DEFAULT))
    typical = typical_pods(cluster.pods)
    assert abs(sum(f for f, *_ in typical) - 1) < 1e-9
    order = arrival_order(cluster, PyDraws(42))  # inflated to 1.3x the sample's GPUs, originals first
    assert sorted(order[:len(cluster.pods)]) == list(range(len(cluster.pods))) and len(order) > len(cluster.pods)
    target = 1.3 * cluster.total_gpus * 1000
    assert target - 1000 < sum(cluster.pods[i].num * cluster.pods[i].milli for i in order) <= target + 7000
    for policy in ("bestfit", "fgd", "packing"):
        assert run_seed(cluster, policy, 42) == run_seed(cluster, policy, 42)
        go = run_seed(cluster, policy, 42, compat="fgd-go", sources=sources)
        assert go == run_seed(cluster, policy, 42, compat="fgd-go", sources=sources)


def test_the_cli_writes_the_cached_layout_and_compares(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The sample is not the trace the FGD authors ran, so `--compare` against their (sampled) rows finds
    every row different: exit 1, and the report says which."""
    argv = ["trace", "openb", "--nodes", str(NODES), "--pods", str(DEFAULT), "--policy", "bestfit", "--seeds", "42",
            "--compat", "fgd-go", "--quiet", "-o", "json", "--csv-dir", str(tmp_path)]
    assert main([*argv, "--compare", str(CACHE)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["trace"] == "openb_pod_list_default" and report["compat"] == "fgd-go"
    assert report["compare"]["rows"] == 3 and report["compare"]["matched"] == 0
    assert {d["file"] for d in report["compare"]["differing"]} == {
        "analysis_allo_discrete.csv", "analysis_frag_discrete.csv", "analysis_frag_ratio_discrete.csv"}
    for name in ("analysis_allo_discrete.csv", "analysis_frag_discrete.csv", "analysis_frag_ratio_discrete.csv"):
        ours = list(csv.reader((tmp_path / name).open()))
        cached = list(csv.reader((CACHE / name).open()))
        assert ours[0] == cached[0] and len(ours) == 2
        assert ours[1][:4] == cached[1][:4] == ["openb_pod_list_default", "05-BestFit", "1.3", "42"]
    assert main([*argv, "--compare", str(tmp_path / "nowhere")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_time_aware_day_of_the_sample(capsys: pytest.CaptureFixture[str]) -> None:
    times = read_pod_times(str(DEFAULT))
    assert len(times) == len(rows(DEFAULT)) and all(c is not None for c, _ in times.values())
    assert main(["trace", "openb", "--time-aware", "--nodes", str(NODES), "--pods", str(DEFAULT), "--start", "3528",
                 "--hours", "24", "--autoscaler", "count,atomic", "-o", "json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["window"]["arriving"], report["window"]["carried_in"], report["window"]["nodes_max"]) == (15, 1, 50)
    for r in report["policies"]:
        assert r["pods"] == 16 and r["pods_never_scheduled"] == 0 and r["invariant_violations"] == 0
        assert r["nodes_added"] >= 1


def test_a_philly_day_as_docs_traces_measures_it(capsys: pytest.CaptureFixture[str]) -> None:
    """The sample holds every job of b436b2's 2017-11-22, so the run is the one docs/traces.md measured on
    the whole trace ("two days of two virtual clusters"), figure for figure."""
    jobs = load_philly(PHILLY)
    day = [j for j in jobs if j.cluster == "b436b2" and j.submitted.date().isoformat() == "2017-11-22"]
    assert len(jobs) == 428 and len(day) == 24 and sum(len(pods_of(j, 8)) > 1 for j in day) == 8
    assert main(["trace", "philly", "--job-list", str(PHILLY), "--cluster", "b436b2", "--start", "2017-11-22",
                 "--hours", "24", "--max-nodes", "4", "-o", "json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    got = {r["policy"]: (r["pods"], round(r["gpu_hours_idle"], 1), round(r["gpu_hours_paid"], 1),
                         r["pods_never_scheduled"], r["nodes_added"], r["scale_ups"]) for r in report["policies"]}
    assert got == {"count": (33, 172.4, 224.0, 0, 18, 11), "dra": (33, 172.4, 224.0, 0, 18, 11),
                   "atomic": (33, 167.5, 219.1, 0, 16, 9)}


def test_a_pollux_workload_every_job_matched_in_the_sample(capsys: pytest.CaptureFixture[str]) -> None:
    """The sample's Philly rows hold every candidate of workload-5's jobs: each is matched at its second, as
    on the whole trace (77 with one candidate, 83 with several)."""
    jobs = load_workload(WORKLOAD)
    assert len(jobs) == 160
    assert matched_counts(draw_durations(jobs, load_philly(PHILLY), 0)) == {
        "unique": 77, "ambiguous": 83, "application": 0}
    assert main(["trace", "pollux", "--workload", str(WORKLOAD), "--job-list", str(PHILLY), "--hours", "0.5",
                 "--max-nodes", "4", "-o", "json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    window = report["window"]
    assert report["scenario"] == "pollux-workload-5" and window["jobs"] > 5
    assert window["durations_matched"]["application"] == 0
    assert all(r["invariant_violations"] == 0 and r["pods"] == window["pods"] for r in report["policies"])


def _cutter() -> Any:
    spec = importlib.util.spec_from_file_location("cut_samples", SAMPLES / "cut_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs(real_trace("openb", "openb_node_list_gpu_node.csv"), real_trace("openb", "openb_pod_list_default.csv"),
       real_trace("openb", "openb_pod_list_gpuspec33.csv"), real_trace("openb", "openb_pod_list_multigpu50.csv"),
       real_trace("openb", "fgd_expected_results"), real_trace("philly_pollux", "philly.csv"),
       real_trace("philly_pollux", "workloads", "workload-5.csv"))
def test_the_samples_are_what_cut_samples_cuts(tmp_path: Path) -> None:
    """The READMEs' command, run again on the real traces, gives the committed samples byte for byte; and
    the Pollux durations drawn from the sample are the ones drawn from the whole Philly trace."""
    written = _cutter().cut(real_trace(), tmp_path)
    assert sorted(p.relative_to(tmp_path) for p in written) == sorted(
        p.relative_to(SAMPLES) for p in SAMPLES.rglob("*.csv"))
    for p in written:
        assert p.read_bytes() == (SAMPLES / p.relative_to(tmp_path)).read_bytes(), p
    jobs, whole = load_workload(WORKLOAD), load_philly(real_trace("philly_pollux", "philly.csv"))
    sample = load_philly(PHILLY)
    for seed in range(3):
        assert [d.duration_s for d in draw_durations(jobs, sample, seed)] == \
            [d.duration_s for d in draw_durations(jobs, whole, seed)]


def test_the_traces_are_found_beside_the_repository_or_where_the_variable_says(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    monkeypatch.delenv("DRALAB_TRACES", raising=False)
    assert real_trace("openb") == root.parent / "shared" / "traces" / "openb"
    monkeypatch.setenv("DRALAB_TRACES", str(tmp_path / "none"))
    assert real_trace() == tmp_path / "none"
    assert absent(real_trace("openb", "x.csv")) == f"the real traces are not at {tmp_path / 'none'}: set DRALAB_TRACES"
    monkeypatch.setenv("DRALAB_TRACES", str(tmp_path))
    assert absent(real_trace("openb", "x.csv")) == f"the real traces are not at {tmp_path / 'openb'}: set DRALAB_TRACES"
    (tmp_path / "openb").mkdir()
    assert absent(real_trace("openb", "x.csv")) == \
        f"the real traces are not at {tmp_path / 'openb' / 'x.csv'}: set DRALAB_TRACES"
    assert absent(tmp_path) == ""


def test_no_file_names_one_machines_traces() -> None:
    """Tests, benchmarks, docs and code find the traces through tests/traces_path.py, never at an absolute
    path of one machine (the one they were once hard-coded to)."""
    root = Path(__file__).resolve().parents[1]
    needle = "/".join(("", "work", "shared", "traces")).encode()  # not written whole: this file would hold it
    skip = {".git", ".venv", "venv", "build", "dist", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache",
            ".hypothesis"}
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip and not d.endswith(".egg-info")]
        for name in files:
            path = Path(folder) / name
            if path.stat().st_size <= 1 << 20 and needle in path.read_bytes():
                found.append(str(path.relative_to(root)))
    assert found == [], found

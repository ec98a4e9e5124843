"""The Pollux workloads as a scenario (replay/traces/pollux.py, `dralab trace pollux`): jobs arrive at `time` asking
for `num_replicas` GPUs, multi-node jobs become gangs of ceil(num_replicas / 8) pods, through the Philly
importer's scenario builder; durations are drawn (seeded) from the Philly jobs the workload generator could
have sampled each job from (same second of the day + 2 h, GPU-time in the application's range). Bad rows
say file, line and column. One end-to-end run on a real workload when the traces are on the machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from traces_path import needs, real_trace

from dralab.cli import main
from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import Simulator
from dralab.replay.traces.philly import load_philly
from dralab.replay.traces.pollux import PolluxError, draw_durations, load_workload, matched_counts, pollux_scenario

TRACES = real_trace("philly_pollux")
HEADER = "name,time,application,num_replicas,batch_size\n"
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"
# Philly jobs: submitted at 02:00:10 (a workload's time 10), 02:01:40 (time 100), other seconds.
PHILLY = PHILLY_HEADER + "".join([
    "2017-10-09 02:00:10,600.0,1,600.0,vc1\n",  # time 10, cifar10/ncf range (< 1 GPU-hour)
    "2017-11-20 02:00:10,900.0,2,1800.0,vc2\n",  # time 10, same range, another day
    "2017-10-10 02:00:10,7200.0,4,28800.0,vc1\n",  # time 10, but deepspeech2/bert range
    "2017-10-11 02:00:10,30.0,1,30.0,vc1\n",  # time 10, too short: the generator left it out
    "2017-10-09 02:01:40,5000.0,8,40000.0,vc1\n",  # time 100, yolov3 range
    "2017-10-12 05:00:00,4000.0,2,8000.0,vc3\n",  # deepspeech2/bert range, at no workload's second
    "2017-10-12 06:00:00,3000.0,4,500000.0,vc3\n\n",  # imagenet range (6 h of wall time is not needed)
])
WORKLOAD = HEADER + "".join([
    "cifar10-0,10,cifar10,1,128\n",
    "yolov3-1,100,yolov3,16,512\n",  # a 16-GPU job: a gang of 2 pods
    "bert-2,200,bert,12,96\n",  # no Philly job at 02:03:20: drawn from the bert range
    "ncf-3,10,ncf,6,32768\n",
])


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.fixture
def small(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path, "workload-1.csv", WORKLOAD), write(tmp_path, "philly.csv", PHILLY)


def test_jobs_become_pods_and_gangs_with_their_application(small: tuple[Path, Path]) -> None:
    wl, ph = small
    jobs = load_workload(wl)
    assert [(j.name, j.time_s, j.replicas) for j in jobs] == [
        ("cifar10-0", 10, 1), ("ncf-3", 10, 6), ("yolov3-1", 100, 16), ("bert-2", 200, 12)]  # arrival order
    drawn = draw_durations(jobs, load_philly(ph), seed=0)
    doc = pollux_scenario(jobs, drawn, hours=2, max_nodes=6)
    sc = parse_scenario(doc, "pollux")  # the same checks as a hand-written scenario
    assert [(a.at_ms, a.count, a.pod["metadata"]["name"]) for a in sc.workload] == [
        (10_000, 1, "cifar10-0"), (10_000, 1, "ncf-3"), (100_000, 2, "yolov3-1-8g"), (200_000, 1, "bert-2-8g"),
        (200_000, 1, "bert-2-4g")]
    gangs = {o["metadata"]["name"]: o["spec"]["podGroups"][0]["policy"]["gang"]["minCount"]
             for o in doc["spec"]["objects"] if o["kind"] == "Workload"}
    assert gangs == {"yolov3-1": 2, "bert-2": 2}
    gang = sc.workload[2].pod
    assert gang["spec"]["workloadRef"] == {"name": "yolov3-1", "podGroup": "workers"}
    assert gang["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert gang["metadata"]["labels"]["dralab.io/pollux-application"] == "yolov3"
    assert gang["metadata"]["annotations"]["dralab.io/pollux-batch-size"] == "512"
    assert gang["metadata"]["annotations"]["dralab.io/philly-line"] == "6"  # its one candidate
    assert sc.workload[2].run_for_ms == 5_000_000
    result = Simulator(sc, 0).run()
    assert result.violations == []
    bound = {key.rsplit("/", 1)[1]: p.bound_t for key, p in result.state.pods.items()}
    assert len(bound) == 6 and all(t >= 0 for t in bound.values())
    assert bound["yolov3-1-8g-0"] == bound["yolov3-1-8g-1"]  # the gang placed whole, at one instant


def test_durations_come_from_the_candidates_and_are_a_function_of_the_seed(small: tuple[Path, Path]) -> None:
    wl, ph = small
    jobs, philly = load_workload(wl), load_philly(ph)
    runs = {seed: draw_durations(jobs, philly, seed) for seed in range(20)}
    assert draw_durations(jobs, philly, 3) == runs[3]  # pure
    by_name = {seed: {j.name: d for j, d in zip(jobs, drawn, strict=True)} for seed, drawn in runs.items()}
    # cifar10-0 at time 10: the two jobs of 02:00:10 under 1 GPU-hour (not the 30 s one, not the 8 GPU-hour one)
    assert {by_name[s]["cifar10-0"].duration_s for s in runs} == {600.0, 900.0}
    assert {(d.candidates, d.matched) for s in runs for d in [by_name[s]["cifar10-0"]]} == {(2, "time")}
    assert {by_name[s]["yolov3-1"].duration_s for s in runs} == {5000.0}  # one candidate
    # bert-2: nobody at 02:03:20, so the bert range anywhere: 7200 s (02:00:10) or 4000 s (05:00:00)
    assert {by_name[s]["bert-2"].duration_s for s in runs} == {7200.0, 4000.0}
    assert {by_name[s]["bert-2"].matched for s in runs} == {"application"}
    assert matched_counts(runs[0]) == {"unique": 1, "ambiguous": 2, "application": 1}


@pytest.mark.parametrize(("rows", "where"), [
    ("a-0,10,cifar10,1,128,9\n", "workload.csv:2: 6 columns"),
    ("A_0,10,cifar10,1,128\n", "workload.csv:2: column name"),
    ("a-0,ten,cifar10,1,128\n", "workload.csv:2: column time"),
    ("a-0,-1,cifar10,1,128\n", "workload.csv:2: column time"),
    ("a-0,10,resnet,1,128\n", "workload.csv:2: column application"),
    ("a-0,10,cifar10,0,128\n", "workload.csv:2: column num_replicas"),
    ("a-0,10,cifar10,1,1.5\n", "workload.csv:2: column batch_size"),
    ("a-0,10,cifar10,1,128\na-0,20,ncf,1,128\n", "workload.csv:3: column name: 'a-0' is already"),
])
def test_bad_rows_name_file_line_and_column(tmp_path: Path, rows: str, where: str) -> None:
    with pytest.raises(PolluxError, match=where):
        load_workload(write(tmp_path, "workload.csv", HEADER + rows))


def test_bad_input_exits_2_with_the_place(tmp_path: Path, small: tuple[Path, Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    wl, ph = small
    assert main(["trace", "pollux", "--job-list", str(ph), "--quiet"]) == 2
    assert "--workload" in capsys.readouterr().err
    assert main(["trace", "pollux", "--workload", str(wl), "--quiet"]) == 2
    assert "--job-list" in capsys.readouterr().err
    bad = write(tmp_path, "w.csv", "name,time\n")
    assert main(["trace", "pollux", "--workload", str(bad), "--job-list", str(ph), "--quiet"]) == 2
    assert "w.csv:1: expected the header" in capsys.readouterr().err
    assert main(["trace", "pollux", "--workload", str(wl), "--job-list", str(ph), "--cluster", "vc1"]) == 2
    assert "--cluster" in capsys.readouterr().err
    assert main(["trace", "pollux", "--workload", str(wl), "--job-list", str(ph), "--start", "5"]) == 2
    assert "no job arrives in the window" in capsys.readouterr().err


def test_the_cli_compares_the_policies_on_a_small_workload(small: tuple[Path, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    wl, ph = small
    assert main(["trace", "pollux", "--workload", str(wl), "--job-list", str(ph), "--hours", "3",
                 "--max-nodes", "4", "-o", "json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["scenario"] == "pollux-workload-1"
    assert [r["policy"] for r in report["policies"]] == ["count", "dra", "atomic"]
    assert report["window"]["jobs"] == 4 and report["window"]["gangs"] == 2 and report["window"]["pods"] == 6
    assert all(r["invariant_violations"] == 0 and r["pods"] == 6 for r in report["policies"])


@needs(TRACES / "philly.csv", *(TRACES / "workloads" / f"workload-{n}.csv" for n in range(1, 9)))
def test_a_real_workload_every_job_matched_and_run_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    workload = TRACES / "workloads" / "workload-6.csv"
    philly = load_philly(TRACES / "philly.csv")
    for n in range(1, 9):  # every job of the 8 workloads has a Philly job at its second (+2 h) in its range
        jobs = load_workload(TRACES / "workloads" / f"workload-{n}.csv")
        assert len(jobs) == 160
        assert matched_counts(draw_durations(jobs, philly, 0))["application"] == 0
    assert main(["trace", "pollux", "--workload", str(workload), "--job-list", str(TRACES / "philly.csv"),
                 "--hours", "0.5", "--max-nodes", "4", "-o", "json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    window = report["window"]
    assert window["jobs"] > 5 and window["durations_matched"]["application"] == 0
    assert all(r["invariant_violations"] == 0 and r["pods"] == window["pods"] for r in report["policies"])

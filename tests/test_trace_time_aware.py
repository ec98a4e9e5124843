"""Time-aware trace runs (issue 9, "beyond the paper"): the openb trace with pods arriving at `creation_time`
and leaving at `deletion_time`, node groups grown by the autoscaler, the three autoscaler policies compared
(replay/traces/trace_runs.py, `dralab trace openb --time-aware`), and `dralab trace philly`. Small hand-made CSVs;
one optional check on a 2-hour window of the real openb trace."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from traces_path import needs, real_trace

from dralab.cli import main
from dralab.core.log.events import PodFinished, decode_record
from dralab.core.scenario.load import parse_scenario
from dralab.replay.traces.openb import read_nodes, read_pod_times, read_pods, timed_scenario
from dralab.replay.traces.trace_runs import ROW_KEYS, run_policy

TRACES = real_trace()
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
              "scheduled_time\n")
NODES = NODE_HEADER + "n-0,32000,131072,4,V100\nn-1,32000,131072,4,V100\nn-2,16000,65536,2,T4\n"
PODS = POD_HEADER + "".join([
    "p-0,4000,8192,1,1000,,LS,Running,1000,1600,1000\n",  # the first creation: the trace's origin
    "p-1,2000,4096,1,500,,LS,Running,1100,1400,1100\n",  # shares a GPU (500 thousandths)
    "p-2,2000,4096,1,500,V100,LS,Running,1200,2300,1200\n",
    "p-3,8000,16384,0,0,,LS,Running,1300,1900,1300\n",  # CPU only
    "p-4,2000,4096,1,1000,,BE,Pending,1500,1500,\n",  # deleted as it was created: left out
    "p-5,2000,4096,2,1000,,LS,Running,1700,,1700\n",  # no deletion: runs to the end
    "p-6,2000,4096,1,1000,,LS,Running,,,\n",  # no creation time: left out
    "p-7,2000,4096,1,1000,,LS,Running,900000,900600,900000\n",  # far after the window
])
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.fixture
def small(tmp_path: Path) -> tuple[str, str]:
    return write(tmp_path, "nodes.csv", NODES), write(tmp_path, "pods.csv", PODS)


def finish_times(entries: list[tuple[int, bytes]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for offset, raw in entries:
        rec = decode_record(raw, offset)
        for e in rec.events:
            if isinstance(e, PodFinished):
                out[e.pod.rsplit("/", 1)[1]] = rec.t
    return out


def test_the_time_aware_scenario_parses_and_says_what_it_left_out(small: tuple[str, str]) -> None:
    nodes_csv, pods_csv = small
    doc, window = timed_scenario(read_nodes(nodes_csv), read_pods(pods_csv), read_pod_times(pods_csv), hours=1,
                                 start_fraction=0.5)
    sc = parse_scenario(doc, "timed")
    assert [(a.pod["metadata"]["name"], a.at_ms, a.run_for_ms) for a in sc.workload] == [
        ("p-0", 0, 600_000), ("p-1", 100_000, 300_000), ("p-2", 200_000, 1_100_000), ("p-3", 300_000, 600_000),
        ("p-5", 700_000, None)]
    assert (window.arriving, window.carried_in, window.no_time, window.zero_length, window.open_ended) == \
        (5, 0, 1, 1, 1)
    groups = {g.name: g for g in sc.node_groups}
    assert {(g.min, g.max) for g in groups.values()} == {(0, 2), (0, 1)}
    assert {n.group: n.count for n in sc.nodes} == {"v100-4gpu-32000m-131072mi": 1}  # round(0.5 * 1) = 0 for T4
    assert all(g.provision_delay_ms == (120_000, 240_000) for g in groups.values())
    # a later window: pods running at its start arrive at 0 with what they had left, or are left out
    doc, window = timed_scenario(read_nodes(nodes_csv), read_pods(pods_csv), read_pod_times(pods_csv),
                                 start_s=350, hours=1)
    assert [(w["pod"]["metadata"]["name"], w["at"], w.get("runFor")) for w in doc["spec"]["workload"]] == [
        ("p-0", "0s", "250s"), ("p-1", "0s", "50s"), ("p-2", "0s", "950s"), ("p-3", "0s", "550s"),
        ("p-5", "350s", None)]
    assert window.carried_in == 4
    doc, _ = timed_scenario(read_nodes(nodes_csv), read_pods(pods_csv), read_pod_times(pods_csv), start_s=350,
                            hours=1, carry_in=False)
    assert [w["pod"]["metadata"]["name"] for w in doc["spec"]["workload"]] == ["p-5"]


def test_pods_leave_at_their_deletion_times(small: tuple[str, str]) -> None:
    nodes_csv, pods_csv = small
    doc, _ = timed_scenario(read_nodes(nodes_csv), read_pods(pods_csv), read_pod_times(pods_csv), hours=1,
                            start_fraction=1.0)  # every node there at t=0: nobody waits
    run = run_policy(doc, "dra")
    assert run.row["invariant_violations"] == 0 and run.row["pods_never_scheduled"] == 0
    assert finish_times(run.entries) == {"p-0": 600_000, "p-1": 400_000, "p-2": 1_300_000, "p-3": 900_000}
    assert run.row["time_to_schedule_p99_s"] == 0.0
    assert run.row["nodes_added"] == 0  # the starting nodes were enough


def test_the_autoscaler_adds_nodes_and_the_three_policies_report(small: tuple[str, str], tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    nodes_csv, pods_csv = small
    logs = tmp_path / "logs"
    argv = ["trace", "openb", "--time-aware", "--nodes", nodes_csv, "--pods", pods_csv, "--hours", "1",
            "--log-dir", str(logs), "-o", "json", "--quiet"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["window"]["arriving"] == 5 and report["window"]["nodes_at_start"] == 0
    rows = report["policies"]
    assert [r["policy"] for r in rows] == ["count", "dra", "atomic"]
    for r in rows:
        assert set(ROW_KEYS) <= r.keys()
        assert r["nodes_added"] >= 1 and r["scale_ups"] >= 1 and r["gpu_hours_paid"] > 0
        assert r["pods_never_scheduled"] == 0 and r["invariant_violations"] == 0
        assert r["time_to_schedule_p50_s"] >= 120  # a node takes 2-4 min to come up
        assert Path(r["log"]).exists()
    assert sorted(os.listdir(logs)) == ["openb-pods-atomic.dralog", "openb-pods-count.dralog",
                                        "openb-pods-dra.dralog"]
    assert main(["trace", "openb", "--time-aware", "--nodes", nodes_csv, "--pods", pods_csv, "--hours", "1",
                 "--autoscaler", "dra", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "idle GPU-h" in out and out.count("\ndra ") == 1
    report_html = tmp_path / "r.html"  # two runs side by side
    assert main(["report", str(logs / "openb-pods-count.dralog"), str(logs / "openb-pods-dra.dralog"),
                 "-o", str(report_html)]) == 0
    assert report_html.stat().st_size > 0


def test_philly_gangs_are_placed_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = "".join(f"2017-10-09 07:{m:02d}:00,{600 + 60 * m}.0,{g},0,vc1\n" for m, g in enumerate([1, 16, 2, 24, 4]))
    jobs = write(tmp_path, "philly.csv", PHILLY_HEADER + rows + "2017-10-09 07:00:00,60.0,1,60,vc2\n\n")
    logs = tmp_path / "logs"
    assert main(["trace", "philly", "--job-list", jobs, "--cluster", "vc1", "--hours", "2", "--max-nodes", "8",
                 "--log-dir", str(logs), "-o", "json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["window"]["jobs"] == 5 and report["window"]["gangs"] == 2 and report["window"]["pods"] == 8
    for r in report["policies"]:
        assert r["pods"] == 8 and r["pods_never_scheduled"] == 0 and r["invariant_violations"] == 0
    from dralab.core.log.events import PodBound

    bound: dict[str, int] = {}
    for offset, raw in _log_entries(logs / "philly-vc1-atomic.dralog"):
        rec = decode_record(raw, offset)
        for e in rec.events:
            if isinstance(e, PodBound):
                bound[e.pod.rsplit("/", 1)[1]] = rec.t
    gangs: dict[str, set[int]] = {}
    for pod, t in bound.items():
        if pod.startswith(("job-1-", "job-3-")):  # the 16- and 24-GPU jobs: 2 and 3 pods of 8 GPUs
            gangs.setdefault(pod[:5], set()).add(t)
    assert sorted(gangs) == ["job-1", "job-3"] and all(len(ts) == 1 for ts in gangs.values())


def _log_entries(path: Path) -> list[tuple[int, bytes]]:
    from dralab.replay.logs.logfile import read_log

    return list(read_log(str(path)).entries)


@pytest.mark.parametrize(("args", "message"), [
    (["--autoscaler", "count,fast"], "--autoscaler: expected a comma list"),
    (["--hours", "0"], "--hours: must be in"),
    (["--start", "soon"], "--start: expected hours"),
    (["--provision-delay", "5m-1m"], "--provision-delay"),
    (["--start-fraction", "2"], "--start-fraction"),
    (["--start", "300", "--no-carry-in"], "no pod runs in the window"),
    (["--policy", "fgd"], "--policy: a score policy"),
])
def test_time_aware_exit_2(small: tuple[str, str], capsys: pytest.CaptureFixture[str], args: list[str],
                           message: str) -> None:
    nodes_csv, pods_csv = small
    assert main(["trace", "openb", "--time-aware", "--nodes", nodes_csv, "--pods", pods_csv, "--quiet",
                 *args]) == 2
    assert message in capsys.readouterr().err


def test_bad_files_exit_2_naming_file_line_column(tmp_path: Path, small: tuple[str, str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    nodes_csv, _ = small
    bad = write(tmp_path, "bad.csv", POD_HEADER + "p-0,4000,8192,1,1000,,LS,Running,soon,1600,1000\n")
    assert main(["trace", "openb", "--time-aware", "--nodes", nodes_csv, "--pods", bad, "--quiet"]) == 2
    assert f"{bad}:2: column `creation_time`" in capsys.readouterr().err
    no_times = write(tmp_path, "multigpu.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np-0,1,1,1,1000\n")
    assert main(["trace", "openb", "--time-aware", "--nodes", nodes_csv, "--pods", no_times, "--quiet"]) == 2
    assert "column `creation_time`" in capsys.readouterr().err
    assert main(["trace", "philly", "--job-list", str(tmp_path / "none.csv"), "--quiet"]) == 2
    assert "none.csv: cannot read" in capsys.readouterr().err
    philly = write(tmp_path, "philly.csv", PHILLY_HEADER + "2017-10-09 07:00:00,abc,1,1,vc\n")
    assert main(["trace", "philly", "--job-list", philly, "--quiet"]) == 2
    assert "philly.csv:2: column duration" in capsys.readouterr().err
    assert main(["trace", "philly", "--quiet"]) == 2
    assert "--job-list" in capsys.readouterr().err
    assert main(["trace", "philly", "--job-list", philly, "--start", "yesterday", "--quiet"]) == 2
    assert "--start: expected YYYY-MM-DD" in capsys.readouterr().err
    assert main(["trace", "openb", "--nodes", nodes_csv, "--pods", bad, "--quiet"]) == 2  # FGD: --policy needed
    assert "--policy: required" in capsys.readouterr().err


@needs(TRACES / "openb" / "openb_node_list_gpu_node.csv", TRACES / "openb" / "openb_pod_list_default.csv")
def test_a_two_hour_window_of_the_real_trace(capsys: pytest.CaptureFixture[str]) -> None:
    d = TRACES / "openb"
    assert main(["trace", "openb", "--time-aware", "--nodes", str(d / "openb_node_list_gpu_node.csv"),
                 "--pods", str(d / "openb_pod_list_default.csv"), "--start", "3530", "--hours", "2",
                 "--autoscaler", "count,dra", "-o", "json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["window"]["nodes_max"] == 1213 and report["window"]["carried_in"] > 0
    for r in report["policies"]:
        assert r["invariant_violations"] == 0 and r["nodes_added"] > 0 and r["pods_never_scheduled"] == 0

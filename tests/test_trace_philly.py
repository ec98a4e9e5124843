"""The Philly job trace as a scenario (replay/traces/philly.py): jobs become arrivals at their submission time
running for their duration; multi-node jobs become gangs (a Workload with a gang pod group of
ceil(num_gpus / 8) pods); the document is checked by parse_scenario and simulates with every gang
placed whole. Bad rows say file, line and column."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from traces_path import needs, real_trace

from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import Simulator
from dralab.replay.traces.philly import PhillyError, load_philly, philly_scenario, pods_of, select

TRACE = real_trace("philly_pollux", "philly.csv")
HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def write(tmp_path: Path, rows: str) -> Path:
    p = tmp_path / "philly.csv"
    p.write_text(HEADER + rows)
    return p


def test_jobs_become_pods_and_gangs_at_their_times(tmp_path: Path) -> None:
    jobs = load_philly(write(tmp_path, "2017-10-09 07:00:30,600.0,16,9600.0,vc1\n"
                                       "2017-10-09 07:00:00,60.0,2,120.0,vc1\n"
                                       "2017-10-09 07:01:00,120.0,12,1440.0,vc2\n\n"))
    assert [j.gpus for j in jobs] == [2, 16, 12]  # sorted by submission
    assert [pods_of(j, 8) for j in jobs] == [[2], [8, 8], [8, 4]]
    doc = philly_scenario(jobs, hours=1, max_nodes=8)
    sc = parse_scenario(doc, "philly")
    assert [(a.at_ms, a.count, a.run_for_ms) for a in sc.workload] == [
        (0, 1, 60_000), (30_000, 2, 600_000), (60_000, 1, 120_000), (60_000, 1, 120_000)]
    workloads = [o for o in doc["spec"]["objects"] if o["kind"] == "Workload"]
    assert [w["spec"]["podGroups"][0]["policy"]["gang"]["minCount"] for w in workloads] == [2, 2]


def test_a_window_of_a_virtual_cluster_simulates_with_every_gang_whole(tmp_path: Path) -> None:
    rows = "".join(f"2017-10-09 07:{m:02d}:00,{300 + 60 * m}.0,{g},0,vc1\n"
                   for m, g in enumerate([1, 4, 16, 2, 8, 24, 1, 1]))
    jobs = select(load_philly(write(tmp_path, rows)), hours=2, cluster="vc1")
    sc = parse_scenario(philly_scenario(jobs, hours=2, max_nodes=6, start_nodes=2), "philly")
    result = Simulator(sc, 0).run()
    assert result.violations == []
    by_job: dict[str, list[int | None]] = {}
    for pod in result.state.pods.values():
        job = pod.manifest["metadata"]["labels"]["dralab.io/philly-job"]
        by_job.setdefault(job, []).append(pod.bound_t if pod.node is not None else None)
    assert sorted(len(v) for v in by_job.values()) == sorted(len(pods_of(j, 8)) for j in jobs)
    gangs = [f"job-{i}" for i, j in enumerate(jobs) if j.gpus > 8]
    assert len(gangs) == 2
    for g in gangs:  # a gang is placed whole, its members bound at one instant, or not at all
        assert len(set(by_job[g])) == 1, (g, by_job[g])
    assert any(t is not None for g in gangs for t in by_job[g])
    assert all(t is not None for v in by_job.values() for t in v)  # 6 nodes are enough for this stream


@pytest.mark.parametrize(("rows", "where"), [
    ("2017-10-09,1.0,1,1,vc\n", "philly.csv:2: column timestamp"),
    ("2017-10-09 07:00:00,abc,1,1,vc\n", "philly.csv:2: column duration"),
    ("2017-10-09 07:00:00,1.0,1,1,vc\n2017-10-09 07:00:00,1.0,0,1,vc\n", "philly.csv:3: column num_gpus"),
    ("2017-10-09 07:00:00,1.0\n", "philly.csv:2: 2 columns"),
])
def test_bad_rows_name_file_line_and_column(tmp_path: Path, rows: str, where: str) -> None:
    with pytest.raises(PhillyError, match=where):
        load_philly(write(tmp_path, rows))


def test_wrong_header_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "x.csv"
    p.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(PhillyError, match="x.csv:1: expected the header"):
        load_philly(p)


@needs(TRACE)
def test_the_real_trace_loads_whole() -> None:
    jobs = load_philly(TRACE)
    assert len(jobs) == 82_247
    sizes = Counter(j.gpus for j in jobs)
    assert sizes[1] == 76_627 and sizes[16] == 199 and sizes[128] == 3  # the README's counts
    day = select(jobs, hours=6, cluster="11cb48")
    sc = parse_scenario(philly_scenario(day, hours=6, max_nodes=64), "philly-11cb48")
    assert len(sc.workload) >= len(day)

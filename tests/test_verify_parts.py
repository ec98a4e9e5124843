"""`dralab replay --verify --jobs N`: the log split at its snapshots, the parts checked in parallel, the report
byte-identical to the one-pass check's, on a real recorded log with and without a divergence."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest

from dralab.cli import main
from dralab.core.log.events import PodBound, decode_record, encode_record
from dralab.core.scenario.load import parse_scenario
from dralab.replay.logs.logfile import LogStream, make_header, read_log, write_log
from dralab.replay.simulation.sim import Simulator
from dralab.replay.simulation.verify_parts import plan, survey, verify_parallel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import day_bench  # noqa: E402  (the benchmark's day: every reactor, a few hundred decisions)

SNAPSHOT_EVERY = 50


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list[tuple[int, bytes]]]:
    result = Simulator(parse_scenario(day_bench.scenario(1, 30, 1), "day"), 1, check_invariants=False).run()
    return make_header(scenario="day", seed=1, policy={}, mode="sim"), result.entries


def _write(path: Path, day: tuple[dict, list[tuple[int, bytes]]], entries: list[tuple[int, bytes]] | None = None,
           every: int = SNAPSHOT_EVERY) -> Path:
    write_log(path, day[0], entries if entries is not None else day[1], snapshot_every=every)
    return path


def _both(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> tuple[tuple[int, str], tuple[int, str]]:
    one = main(["replay", str(path), "--verify", "-o", "json"]), capsys.readouterr().out
    two = main(["replay", str(path), "--verify", "--jobs", "2", *extra, "-o", "json"]), capsys.readouterr().out
    return one, two


def _edit_binding(entries: list[tuple[int, bytes]], nth: int) -> tuple[list[tuple[int, bytes]], int]:
    """The nth binding moved to another node that exists: the scheduler's recomputation differs there."""
    nodes = sorted({e.node for o, p in entries for e in decode_record(p, o).events if isinstance(e, PodBound)})
    out, seen, edited = [], 0, -1
    for offset, payload in entries:
        record = decode_record(payload, offset)
        bound = next((e for e in record.events if isinstance(e, PodBound)), None)
        if record.source == "scheduler" and bound is not None:
            if seen == nth:
                other = next(n for n in nodes if n != bound.node)
                events = tuple(msgspec.structs.replace(e, node=other) if e is bound else e for e in record.events)
                payload, edited = encode_record(msgspec.structs.replace(record, events=events)), offset
            seen += 1
        out.append((offset, payload))
    assert edited > 0
    return out, edited


def test_the_log_splits_into_parts_with_as_many_decisions(tmp_path: Path, day: tuple) -> None:
    path = _write(tmp_path / "a.dralog", day)
    found = survey(LogStream(path))
    cuts = plan(found.views, 3)  # two parts per job
    assert cuts[0] == 0 and len(cuts) == 6 and plan(found.views, 1) == [0] and found.unsafe is None and found.lag >= 1
    sizes = [sum(1 for v in found.views if lo <= v < hi) for lo, hi in zip(cuts, [*cuts[1:], 10**9], strict=True)]
    assert max(sizes) - min(sizes) <= max(sizes) // 3, sizes
    result, why = verify_parallel(str(path), 2)
    assert why is None and result.ok and result.records == len(day[1])


def test_parallel_report_is_the_sequential_one(tmp_path: Path, day: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    one, two = _both(capsys, _write(tmp_path / "a.dralog", day))
    assert one == two and one[0] == 0 and '"ok": true' in one[1]
    _, many = _both(capsys, tmp_path / "a.dralog")
    assert main(["replay", str(tmp_path / "a.dralog"), "--verify", "--jobs", "7", "-o", "json"]) == 0
    assert capsys.readouterr().out == one[1] == many[1]


@pytest.mark.parametrize("nth", [0, 40, -1])
def test_a_divergence_is_reported_as_the_sequential_check_does(tmp_path: Path, day: tuple, nth: int,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """An edited binding early (first part), in the middle, and in the last part: the same divergence, the same
    count of decisions checked before it, the same state's invariants."""
    bindings = sum(1 for o, p in day[1] if decode_record(p, o).source == "scheduler"
                   and any(isinstance(e, PodBound) for e in decode_record(p, o).events))
    entries, edited = _edit_binding(day[1], nth % bindings)
    path = _write(tmp_path / "e.dralog", day, entries)
    assert verify_parallel(str(path), 2)[1] is None  # split, not the one-pass fallback
    one, two = _both(capsys, path)
    assert one[0] == 1 and f'"offset": {edited}' in one[1]
    assert one == two


def test_a_log_without_snapshots_splits_too(tmp_path: Path, day: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    """Each worker folds from the start up to its part: the same report."""
    entries, _ = _edit_binding(day[1], 40)
    path = _write(tmp_path / "n.dralog", day, entries, every=0)
    assert verify_parallel(str(path), 2)[1] is None
    one, two = _both(capsys, path)
    assert one == two and one[0] == 1


def test_a_damaged_log_is_checked_in_one_pass_with_the_same_report(tmp_path: Path, day: tuple,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "d.dralog", day)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    assert verify_parallel(str(path), 2)[1].startswith("damaged")
    one, two = _both(capsys, path)
    assert one == two and one[0] == 1 and '"damage": null' not in one[1]
    assert len(read_log(path).entries) < len(day[1])


def test_jobs_must_be_positive_and_go_with_verify(tmp_path: Path, day: tuple) -> None:
    path = _write(tmp_path / "a.dralog", day)
    assert main(["replay", str(path), "--verify", "--jobs", "0"]) == 2
    assert main(["replay", str(path), "--at", "3", "--jobs", "2"]) == 2


@pytest.mark.live
def test_parts_as_ray_tasks_give_the_same_report(tmp_path: Path, day: tuple,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`--ray local`: a Ray started on loopback for the check, the parts its tasks; a divergence in the middle."""
    entries, _ = _edit_binding(day[1], 40)
    path = _write(tmp_path / "e.dralog", day, entries)
    one, _ = _both(capsys, path)
    code = main(["replay", str(path), "--verify", "--jobs", "2", "--ray", "local", "-o", "json"])
    assert (code, capsys.readouterr().out) == one and code == 1

"""Must-show of the walking skeleton, in the simulator: byte-identical logs, verify, tamper detection."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec

from dralab.core.log.events import PodBound, decode_record, encode_record
from dralab.replay.logs.logfile import read_log, write_log

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = str(ROOT / "scenarios" / "quickstart.yaml")


def dralab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dralab", *args], capture_output=True, text=True, timeout=120)


def test_same_seed_same_log_byte_for_byte(tmp_path: Path) -> None:
    a, b = tmp_path / "a.dralog", tmp_path / "b.dralog"
    for path in (a, b):
        proc = dralab("sim", QUICKSTART, "--seed", "7", "--log", str(path), "-o", "json")
        assert proc.returncode == 0, proc.stderr
    assert a.read_bytes() == b.read_bytes()
    summary = json.loads(proc.stdout)
    assert summary["seed"] == 7
    assert summary["pods"]["pending"] == 0 and summary["pods"]["scheduled"] == summary["pods"]["total"] > 0
    assert sum(summary["nodes_added"].values()) >= 1, "the quickstart must make the autoscaler work"
    assert summary["invariant_violations"] == []
    assert set(summary) >= {"scenario", "seed", "policy", "pods", "nodes_added", "time_to_schedule_s", "events",
                            "invariant_violations"}
    assert summary["policy"] == {"autoscaler": "count"}


def test_other_seed_other_log(tmp_path: Path) -> None:
    a, b = tmp_path / "a.dralog", tmp_path / "b.dralog"
    assert dralab("sim", QUICKSTART, "--seed", "7", "--log", str(a)).returncode == 0
    assert dralab("sim", QUICKSTART, "--seed", "8", "--log", str(b)).returncode == 0
    assert a.read_bytes() != b.read_bytes()


def test_verify_passes_then_catches_an_edited_decision(tmp_path: Path) -> None:
    path = tmp_path / "a.dralog"
    assert dralab("sim", QUICKSTART, "--seed", "7", "--log", str(path)).returncode == 0
    ok = dralab("replay", str(path), "--verify", "-o", "json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    report = json.loads(ok.stdout)
    assert report["ok"] and report["decisions_checked"] > 0
    assert set(report["by_source"]) == {"scheduler", "autoscaler", "cloud", "lifecycle"}

    # Edit one decision: move the first binding to another node, keeping the file well-formed.
    log = read_log(path)
    nodes = sorted({e.node for _, r in log.records() for e in r.events if isinstance(e, PodBound)}
                   | {"elsewhere"})
    entries = []
    edited = None
    for offset, payload in log.entries:
        record = decode_record(payload, offset)
        if edited is None and record.source == "scheduler" and isinstance(record.events[0], PodBound):
            bound = record.events[0]
            other = next(n for n in nodes if n != bound.node)
            record = msgspec.structs.replace(
                record, events=(msgspec.structs.replace(bound, node=other), *record.events[1:]))
            payload, edited = encode_record(record), offset
        entries.append((offset, payload))
    assert edited is not None
    write_log(path, log.header, entries)

    bad = dralab("replay", str(path), "--verify")
    assert bad.returncode == 1
    assert f"divergence at offset {edited}: decision of scheduler" in bad.stdout
    assert "recorded:" in bad.stdout and "recomputed:" in bad.stdout


def test_truncated_log_still_opens_its_prefix(tmp_path: Path) -> None:
    path = tmp_path / "a.dralog"
    assert dralab("sim", QUICKSTART, "--seed", "7", "--log", str(path)).returncode == 0
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 5])
    log = read_log(path)
    assert log.damage and "truncated" in log.damage
    assert len(log.entries) > 1


def test_not_a_log_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "x.dralog"
    path.write_bytes(b"hello")
    proc = dralab("replay", str(path), "--verify")
    assert proc.returncode == 2
    assert "not a dralab log" in proc.stderr


def test_bad_scenario_is_exit_2_with_field_path(tmp_path: Path) -> None:
    text = Path(QUICKSTART).read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("max: 3", "max: three", 1))
    assert "max: three" in bad.read_text()
    proc = dralab("sim", str(bad))
    assert proc.returncode == 2
    assert str(bad) in proc.stderr and "spec.nodeGroups[0].max" in proc.stderr

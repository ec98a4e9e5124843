"""`dralab export FILE` (cli/export_cmd.py): a `.dralog` as JSON lines. A scenario's log round-trips (every record,
every event, every field: the JSON decodes back to the very bytes of the log), `--events` flattens it, a damaged
tail gives its intact prefix and says so, an old log exports in today's shapes, memory stays a block, and a
reader that stops early is not an error. Checks are Python's json; the documented jq lines run when jq exists."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dralab.cli import main
from dralab.core.log.events import PodFinished, Record, decode_record, encode_record
from dralab.core.run.config import policies, run_config
from dralab.core.scenario.load import load_scenario
from dralab.export_cmd import EXPORT_SCHEMA, export
from dralab.replay.logs.logfile import make_header, read_log, write_log
from dralab.replay.simulation.sim import Simulator

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "dra-quickstart.yaml"
OLD = ROOT / "tests" / "fixtures" / "logs" / "quickstart-dralab-0.1.0-1b8f298.dralog"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def run_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    scenario = load_scenario(SCENARIO)
    result = Simulator(scenario, 3).run()
    path = tmp_path_factory.mktemp("export") / "dra.dralog"
    header = make_header(scenario=scenario.name, seed=3, policy=policies(run_config(scenario)), mode="sim")
    write_log(path, header, result.entries, block_records=8)  # several blocks, so a cut leaves a prefix
    return path


def lines(path: Path, *flags: str) -> tuple[int, list[dict[str, Any]], str]:
    proc = subprocess.run([sys.executable, "-m", "dralab", "export", str(path), *flags], capture_output=True,
                          text=True, timeout=120)
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def test_a_scenario_log_round_trips_through_json_lines(run_log: Path) -> None:
    code, out, err = lines(run_log)
    assert code == 0 and err == ""
    logf = read_log(run_log)
    head, records, end = out[0], out[1:-1], out[-1]
    assert head == {"kind": "header", "schema": EXPORT_SCHEMA, "file": str(run_log), "header": logf.header}
    assert end == {"kind": "end", "records": len(logf.entries), "damage": None,
                   "events": sum(len(decode_record(p, o).events) for o, p in logf.entries)}
    assert [r["offset"] for r in records] == [o for o, _ in logf.entries] == list(range(1, len(records) + 1))
    for line, (offset, payload) in zip(records, logf.entries, strict=True):
        record = decode_record(payload, offset)
        assert list(line) == ["kind", "offset", "t", "source", "view", "id", "v", "events"]
        assert (line["t"], line["source"], line["view"], line["id"], line["v"]) == \
            (record.t, record.source, record.view, record.id, record.v)
        assert all(list(e)[0] == "type" for e in line["events"])  # the tag first, then the fields in order
        # every field is there, defaults included: the JSON converts back to the record, byte for byte
        back = msgspec.convert({k: line[k] for k in ("id", "source", "view", "t", "events", "v")}, Record)
        assert encode_record(back) == payload
    kinds = {e["type"] for r in records for e in r["events"]}
    assert {"RunStarted", "PodCreated", "ClaimAllocated", "PodBound", "ResourceSlicePublished"} <= kinds
    decisions = [r for r in records if r["source"] != "scenario"]
    assert decisions and all(0 < r["view"] < r["offset"] for r in decisions)  # decided on an earlier view
    assert all(r["view"] == -1 for r in records if r["source"] == "scenario")


def test_one_line_per_event(run_log: Path) -> None:
    code, out, _ = lines(run_log, "--events")
    _, records, _ = lines(run_log)
    events = out[1:-1]
    assert code == 0 and out[-1]["events"] == len(events) == sum(len(r["events"]) for r in records[1:-1])
    by_record = {r["offset"]: r for r in records[1:-1]}
    for line in events:
        record = by_record[line["offset"]]
        assert line["kind"] == "event" and line["event"] == record["events"][line["index"]]
        assert line["type"] == line["event"]["type"]
        assert (line["t"], line["source"], line["view"], line["id"]) == \
            (record["t"], record["source"], record["view"], record["id"])


def test_a_damaged_tail_gives_the_intact_prefix_and_exit_1(run_log: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.dralog"
    cut.write_bytes(run_log.read_bytes()[: run_log.stat().st_size // 2])
    code, out, err = lines(cut)
    intact = read_log(cut)
    assert code == 1 and intact.damage and out[-1]["damage"] == intact.damage
    assert out[-1]["records"] == len(out) - 2 == len(intact.entries) > 0
    assert f"damaged log, exported its intact prefix ({len(intact.entries)} records)" in err
    nothing = tmp_path / "nothing.dralog"
    nothing.write_bytes(run_log.read_bytes()[:200])
    code, out, err = lines(nothing)
    assert code == 2 and "nothing to export: damaged log, nothing intact" in err
    code, _, err = lines(tmp_path / "absent.dralog")
    assert code == 2 and "absent.dralog" in err


def test_a_record_that_does_not_decode_ends_the_export_there(tmp_path: Path) -> None:
    good = [(n, encode_record(Record(f"scenario/x/{n}", "scenario", -1, n, (PodFinished(pod="pod/d/p"),))))
            for n in (1, 2)]
    path = tmp_path / "bad.dralog"
    write_log(path, make_header(scenario="t", seed=0, policy={}, mode="sim"), [*good, (3, b"\xc1")])
    code, out, err = lines(path)
    assert code == 1 and [r["offset"] for r in out[1:-1]] == [1, 2]
    assert out[-1]["damage"].startswith("log entry at offset 3: malformed payload")


def test_an_old_log_exports_in_todays_shapes() -> None:
    code, out, _ = lines(OLD)
    assert code == 0 and out[0]["header"]["format"] == 1 and out[-1]["records"] == 22
    started = out[1]["events"][0]
    assert started["type"] == "RunStarted" and "epoch" in started  # a field added since, at its default


def long_log(path: Path, records: int) -> Path:
    """`records` records of about 100 KB each (decodable: a PodFinished with a long phase)."""
    payloads = ((n, encode_record(Record(f"scenario/x/{n}", "scenario", -1, n,
                                         (PodFinished(pod="pod/d/p", phase=str(n) * 100_000),))))
                for n in range(1, records + 1))
    write_log(path, make_header(scenario="t", seed=0, policy={}, mode="sim"), payloads, snapshot_every=0)
    return path


def test_memory_is_a_block_not_the_log(tmp_path: Path) -> None:
    path = long_log(tmp_path / "long.dralog", 240)

    class Count(io.RawIOBase):
        written = 0

        def write(self, b: Any) -> int:
            self.written += len(b)
            return len(b)

    sink = Count()
    tracemalloc.start()
    try:
        end = export(str(path), sink)  # type: ignore[arg-type]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end["records"] == 240 and sink.written > 40 * MIB
    assert peak < 8 * MIB, peak


def test_a_reader_that_stops_early_is_not_an_error(tmp_path: Path) -> None:
    path = long_log(tmp_path / "long.dralog", 40)  # 4 MB of JSON: more than a pipe holds
    proc = subprocess.Popen([sys.executable, "-m", "dralab", "export", str(path), "--events"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    json.loads(proc.stdout.readline())
    proc.stdout.close()
    assert proc.wait(timeout=120) == 0 and proc.stderr.read() == b""


def test_in_process_and_bad_options(run_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(run_log), "-o", "jsonl"]) == 0
    with pytest.raises(SystemExit) as exc:
        main(["export", str(run_log), "-o", "csv"])
    assert exc.value.code == 2


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_the_documented_jq_lines(run_log: Path) -> None:
    """docs/log-format.md#json-lines: the jq examples do what the text says."""
    def jq(program: str, *flags: str) -> list[str]:
        export_ = subprocess.run([sys.executable, "-m", "dralab", "export", str(run_log), *flags],
                                 capture_output=True, timeout=120, check=True)
        out = subprocess.run(["jq", "-c", program], input=export_.stdout, capture_output=True, timeout=60, check=True)
        return out.stdout.decode().splitlines()

    bound = jq('select(.kind == "record") | .events[] | select(.type == "PodBound") | [.pod, .node]')
    assert bound and all(json.loads(b)[0].startswith("pod/") for b in bound)
    lag = jq('select(.kind == "record" and .view >= 0) | .offset - .view')
    assert lag and all(int(n) >= 1 for n in lag)
    per = jq('select(.kind == "event") | .type', "--events")
    assert '"RunStarted"' in per


def test_the_documented_pandas_lines(run_log: Path, tmp_path: Path) -> None:
    """docs/log-format.md#json-lines: the pandas example reads what the text says."""
    pd = pytest.importorskip("pandas")
    per_event, per_record = tmp_path / "d.jsonl", tmp_path / "r.jsonl"
    for path, flags in ((per_event, ["--events"]), (per_record, [])):
        with path.open("wb") as out:
            subprocess.run([sys.executable, "-m", "dralab", "export", str(run_log), *flags], stdout=out, timeout=120,
                           check=True)
    df = pd.read_json(per_event, lines=True)
    events = df[df.kind == "event"]
    assert events.groupby(["source", "type"]).size()[("scheduler", "PodBound")] > 0
    bound = pd.json_normalize(events[events.type == "PodBound"]["event"].tolist())
    assert list(bound.columns) == ["type", "pod", "node"]
    records = [r for r in map(json.loads, per_record.read_text().splitlines()) if r["kind"] == "record"]
    flat = pd.json_normalize(records, record_path="events", meta=["offset", "t", "source", "view"])
    assert len(flat) == len(events) and set(flat["type"]) == set(events["type"])

"""Reading a `.dralog` a stranger wrote (issue 18): the whole-file decompression budget, readers that
stream (memory bounded by a block, not by the file), verify on a first record without events, `check`
on a log with nothing to check, and fuzzing of every reader with arbitrary and mutated files.

Bomb files are written here with the format's own block writer (logfile_blocks.block_bytes)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dralab.cli import main
from dralab.core.log.events import PodFinished, Record, encode_record
from dralab.replay.logs import logfile_blocks as fmt
from dralab.replay.logs.logfile import LogFileError, LogStream, make_header, read_log, write_log
from dralab.replay.logs.logfile_reader import open_log

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
SOURCE = read_log(FIXTURES / "late-resourceslices-count.format1.dralog")  # 23 records of a real run
HEADER = make_header(scenario="t", seed=0, policy={"autoscaler": "dra"}, mode="sim")
MIB = 1024 * 1024


def big_record(n: int, size: int) -> bytes:
    """A record that decodes and folds, `size` bytes of one repeated letter: it compresses to almost nothing."""
    event = PodFinished(pod="default/p", phase="a" * size)
    return encode_record(Record(f"scenario/x/{n}", "scenario", -1, n, (event,)))


def bomb(path: Path, blocks: int = 4, size: int = 30 * MIB) -> list[int]:
    """A file of `blocks` entries blocks of one `size`-byte record each (a few KB on disk), closed with an index
    and footer as the writer closes a file; the byte positions of its blocks."""
    data = bytearray(fmt.header_frame({**HEADER, "compression": "zstd", "snapshot_every": 0}))
    infos = []
    payload = big_record(1, size)
    for n in range(1, blocks + 1):
        raw = fmt.entries_body([n], [payload])
        infos.append(fmt.BlockInfo(len(data), fmt.KIND_ENTRIES, 0, n, n, 1, 0, 0, n, n, 0))
        data += fmt.block_bytes(fmt.KIND_ENTRIES, "zstd", n, n, 1, n, n, raw)
    index_pos = len(data)
    data += fmt.block_bytes(fmt.KIND_INDEX, "zstd", 0, 0, len(infos), 0, 0, fmt.index_body(infos))
    data += fmt.footer_bytes(index_pos)
    path.write_bytes(bytes(data))
    return [b.pos for b in infos]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- the budget


def test_a_decompression_bomb_is_refused_by_every_reader(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bomb.dralog"
    positions = bomb(path)
    assert path.stat().st_size < 20_000  # 120 MiB of records in a few KB
    over = f"at byte {positions[2]}"  # 3 x 30 MiB passes the 64 MiB floor of a file this small
    for argv in (["check", str(path)], ["check", str(path), "-o", "json"], ["replay", str(path), "--verify"],
                 ["replay", str(path), "--explain", "p"], ["replay", str(path), "--at", "4"],
                 ["report", str(path), "-o", str(tmp_path / "r.html")],
                 ["shrink", str(path), "--until", "pod-pending"]):
        code, out, err = cli(capsys, *argv)
        assert code == 2, (argv, err)
        assert str(path) in err and over in err and "budget" in err and "Traceback" not in err, (argv, err)
        assert out == "", argv  # refused before any work: nothing on stdout
    with pytest.raises(LogFileError, match=f"{over}.*budget"):
        read_log(path)
    with pytest.raises(LogFileError, match=f"{over}.*budget"):
        LogStream(path)
    with open_log(path) as reader, pytest.raises(LogFileError, match=f"{over}.*budget"):
        list(reader.entries_from(0))


def test_the_budget_counts_a_block_once_and_names_where_it_ran_out() -> None:
    budget = fmt.Budget(1000)
    assert budget.limit == fmt.BUDGET_FLOOR
    info = fmt.BlockInfo(77, fmt.KIND_ENTRIES, 2, 1, 1, 1, 40 * MIB, 100, 0, 0, 0)
    budget.charge(info)
    budget.charge(info)  # read again (a lazy reader): not charged twice
    assert budget.used == 40 * MIB
    with pytest.raises(fmt.BudgetError, match="entries block at byte 99 .*over its budget of 67108864"):
        budget.charge(fmt.BlockInfo(99, fmt.KIND_ENTRIES, 2, 2, 2, 1, 40 * MIB, 100, 0, 0, 0))
    assert fmt.Budget(10 * MIB).limit == fmt.BUDGET_RATIO * 10 * MIB


def test_a_log_under_the_floor_reads(tmp_path: Path) -> None:
    """Blocks that compress as well as a bomb's but stay under the floor are a log, read whole."""
    path = tmp_path / "ok.dralog"
    bomb(path, blocks=2, size=30 * MIB)
    log = read_log(path)
    assert log.damage is None and [o for o, _ in log.entries] == [1, 2]


# ---------------------------------------------------------------- streaming


def test_a_stream_holds_a_block_not_the_file(tmp_path: Path) -> None:
    path = tmp_path / "long.dralog"
    payload = bytes(random.Random(1).randbytes(64 * 1024))  # incompressible: 64 KiB a record on disk too
    count = write_log(path, HEADER, ((n, payload) for n in range(1, 321)), snapshot_every=0)  # 20 MiB, 20 blocks
    assert count == 320
    stream = LogStream(path)
    tracemalloc.start()
    try:
        seen = sum(1 for _ in stream)
        _, streamed = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        whole = read_log(path)
        _, held = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == stream.count == len(whole.entries) == 320 and stream.damage is None
    assert streamed < 4 * MIB < 20 * MIB < held, (streamed, held)


def test_a_stream_is_read_log_pass_after_pass(tmp_path: Path) -> None:
    path = tmp_path / "a.dralog"
    write_log(path, SOURCE.header, SOURCE.entries, block_records=4, snapshot_every=5)
    stream = LogStream(path)
    assert list(stream) == list(stream.entries) == SOURCE.entries and stream.count == 23
    cut = tmp_path / "cut.dralog"
    cut.write_bytes(path.read_bytes()[:-30])
    stream, whole = LogStream(cut), read_log(cut)
    assert list(stream) == whole.entries and stream.damage == whole.damage and stream.damage
    old = LogStream(FIXTURES / "late-resourceslices-count.format1.dralog")  # format 1 streams too
    assert list(old) == SOURCE.entries and old.damage is None and old.header == SOURCE.header


def test_verify_on_a_stream_equals_verify_on_the_whole_file(tmp_path: Path) -> None:
    from dralab.replay.simulation.verify import verify

    path = tmp_path / "a.dralog"
    write_log(path, SOURCE.header, SOURCE.entries, block_records=3)
    streamed, whole = verify(LogStream(path)), verify(read_log(path))
    assert streamed.ok and whole.ok and streamed.checked == whole.checked > 0 and streamed.sources == whole.sources


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    """Opening a FIFO waits for a writer (and read_bytes of one never ends): refused before the open."""
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    for argv in (["check", str(fifo)], ["replay", str(fifo), "--verify"], ["replay", str(fifo), "--at", "1"]):
        done = subprocess.run([sys.executable, "-m", "dralab", *argv], capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 2 and f"{fifo}: not a regular file" in done.stderr, (argv, done.stderr)
    with pytest.raises(LogFileError, match="not a regular file"):
        read_log(fifo)


# ---------------------------------------------------------------- defects of issue 18, item 7


def test_verify_on_a_first_record_without_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty-first.dralog"
    write_log(path, HEADER, [(1, encode_record(Record("scenario/setup", "scenario", -1, 0, ())))])
    code, out, err = cli(capsys, "replay", str(path), "--verify")
    assert code == 1 and "does not start with RunStarted" in out and "Traceback" not in err


def test_check_says_when_it_checked_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.dralog"
    write_log(empty, HEADER, [])
    code, out, err = cli(capsys, "check", str(empty))
    assert code == 2 and "nothing checked: the log holds no records" in out and "held" not in out
    assert "nothing checked" in err
    code, out, _ = cli(capsys, "check", str(empty), "-o", "json")
    report = json.loads(out)
    assert code == 2 and report["checked"] == 0 and report["ok"] is False
    assert all(row["held"] is None for row in report["invariants"].values())
    damaged = tmp_path / "damaged.dralog"
    write_log(damaged, SOURCE.header, SOURCE.entries)
    data = bytearray(damaged.read_bytes())
    _, start = fmt.parse_header(bytes(data), "x")
    data[start + fmt.BLOCK_HEAD + 5] ^= 0xFF  # inside the first (only) entries block
    damaged.write_bytes(bytes(data))
    code, out, err = cli(capsys, "check", str(damaged), "-o", "json")
    report = json.loads(out)
    assert code == 2 and report["checked"] == 0 and "checksum mismatch" in report["damage"]
    assert "nothing checked: damaged log, nothing intact" in err
    ok = tmp_path / "ok.dralog"
    write_log(ok, SOURCE.header, SOURCE.entries)
    code, out, _ = cli(capsys, "check", str(ok), "-o", "json")
    assert json.loads(out)["checked"] == 23


# ---------------------------------------------------------------- fuzzing


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("fuzz") / "valid.dralog"
    write_log(path, SOURCE.header, SOURCE.entries, block_records=4, snapshot_every=5)
    return path.read_bytes()


def _read_every_way(path: Path, capsys: pytest.CaptureFixture[str]) -> list[tuple[int, bytes]] | None:
    """Every reader on `path`, and `dralab check`: a clean LogFileError (None; exit 2), or the entries read,
    which all readers agree on up to the damage they report. Anything else raised fails the property."""
    code, _, err = cli(capsys, "check", str(path))  # the checks on whatever the file holds: never a traceback
    assert code in (0, 1, 2) and "Traceback" not in err
    try:
        whole = read_log(path)
    except LogFileError:
        with pytest.raises(LogFileError):
            LogStream(path)
        return None
    stream = LogStream(path)
    tracemalloc.start()
    try:
        assert list(stream) == whole.entries and stream.damage == whole.damage
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * MIB
    try:
        reader = open_log(path)
    except LogFileError:
        return whole.entries
    with reader:
        lazy = list(reader.entries_from(0))
        assert lazy[:len(whole.entries)] == whole.entries or whole.entries[:len(lazy)] == lazy
        reader.state_at(reader.last_offset)  # a snapshot it cannot use is passed over, never raised
    return whole.entries


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2048), magic=st.sampled_from([b"", fmt.MAGIC2, b"DRALOG1\n"]))
@example(data=b"", magic=fmt.MAGIC2)
def test_arbitrary_bytes_are_a_clean_error_or_a_damaged_log(tmp_path: Path, data: bytes, magic: bytes,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fuzz.dralog"
    path.write_bytes(magic + data)
    _read_every_way(path, capsys)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 10**6), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=3))
def test_truncated_or_flipped_logs_give_a_prefix(tmp_path: Path, valid: bytes, cut: int,
                                                 flips: list[tuple[int, int]],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    data = bytearray(valid[:cut % (len(valid) + 1)])
    for at, mask in flips:
        if data:
            data[at % len(data)] ^= mask
    path = tmp_path / "mutated.dralog"
    path.write_bytes(bytes(data))
    entries = _read_every_way(path, capsys)
    if entries is not None:  # every block is checksummed: what is read is what was written
        assert entries == SOURCE.entries[:len(entries)]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.lists(st.integers(0, 50), max_size=12))
def test_spliced_blocks_are_a_clean_error_or_a_damaged_log(tmp_path: Path, valid: bytes, order: list[int],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    _, start = fmt.parse_header(valid, "x")
    blocks, _ = fmt.scan(_Bytes(valid), len(valid), start)
    pieces = [valid[b.pos:b.end] for b in blocks]
    path = tmp_path / "spliced.dralog"
    path.write_bytes(valid[:start] + b"".join(pieces[i % len(pieces)] for i in order) + valid[-fmt.FOOTER.size:])
    _read_every_way(path, capsys)


class _Bytes:
    """A file over bytes, for fmt.scan."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def seek(self, pos: int) -> None:
        self.pos = pos

    def read(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += len(out)
        return out

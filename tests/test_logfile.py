"""The `.dralog` file: format 2 (blocks, codecs, checksums, snapshots, index), damage, old logs, upcasting.

The logs used are the committed fixtures (tests/fixtures/logs/README.md says how each was made): one
written by today's sim in format 1, one written by dralab at commit 1b8f298 (issue 2/3).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import msgspec
import pytest

from dralab.core.log import events
from dralab.core.log.events import LogDecodeError, PodFinished, decode_record
from dralab.core.state import codec as snapshot_codec
from dralab.core.state.cluster import ClusterState
from dralab.core.state.codec import encode_state
from dralab.replay.logs import logfile_blocks as fmt
from dralab.replay.logs.logfile import LogFileError, LogWriter, make_header, read_log, record_time, write_log
from dralab.replay.logs.logfile_reader import open_log
from dralab.replay.simulation.verify import verify

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
TODAY_V1 = FIXTURES / "late-resourceslices-count.format1.dralog"
OLD = FIXTURES / "quickstart-dralab-0.1.0-1b8f298.dralog"
SMALL = {"block_records": 4, "snapshot_every": 5}  # many blocks and snapshots out of a 23-record log


@pytest.fixture(scope="module")
def source() -> tuple[dict, list[tuple[int, bytes]]]:
    log = read_log(TODAY_V1)
    assert log.damage is None and len(log.entries) == 23
    return log.header, log.entries


def fold(entries: list[tuple[int, bytes]], upto: int) -> ClusterState:
    state = ClusterState()
    for offset, payload in entries:
        if offset > upto:
            break
        state.apply(offset, decode_record(payload, offset))
    return state


def written(tmp_path: Path, source: tuple[dict, list], name: str = "a.dralog", **options: object) -> Path:
    path = tmp_path / name
    write_log(path, source[0], source[1], **{**SMALL, **options})
    return path


def blocks_of(data: bytes) -> list[fmt.BlockInfo]:
    _, pos = fmt.parse_header(data, "x")
    out = []
    while pos < len(data) - fmt.FOOTER.size:
        info = fmt.parse_block_head(data[pos:pos + fmt.BLOCK_HEAD], pos, len(data))
        out.append(info)
        pos = info.end
    return out


@pytest.mark.parametrize("codec", ["none", "zlib", "zstd"])
def test_round_trip_for_every_codec(tmp_path: Path, source: tuple[dict, list], codec: str) -> None:
    path = written(tmp_path, source, compression=codec)
    log = read_log(path)
    assert log.damage is None
    assert log.entries == source[1]
    assert log.header["format"] == 2 and log.header["compression"] == codec and log.header["snapshot_every"] == 5
    assert log.header["scenario"] == "late-resourceslices"
    kinds = [b.kind for b in blocks_of(path.read_bytes())]
    assert kinds.count(fmt.KIND_SNAPSHOT) == 4 and kinds[-1] == fmt.KIND_INDEX
    assert {b.codec for b in blocks_of(path.read_bytes())} == {fmt.CODECS[codec]}
    with open_log(path) as reader:
        assert reader.damage is None and reader.last_offset == 23
        assert list(reader.entries_from(0)) == source[1]
        assert list(reader.entries_from(10)) == source[1][9:]


def test_the_same_input_gives_the_same_bytes(tmp_path: Path, source: tuple[dict, list]) -> None:
    a, b = written(tmp_path, source, "a.dralog"), written(tmp_path, source, "b.dralog")
    assert a.read_bytes() == b.read_bytes()
    assert written(tmp_path, source, "c.dralog", compression="zlib").read_bytes() != a.read_bytes()


def test_the_writer_takes_decoded_records_and_gives_the_same_file(tmp_path: Path, source: tuple[dict, list]) -> None:
    path = tmp_path / "r.dralog"
    with LogWriter(path, source[0], **SMALL) as writer:
        for offset, payload in source[1]:
            writer.write(offset, payload, decode_record(payload, offset))
    assert writer.snapshots == 4 and writer.snapshot_error is None
    assert path.read_bytes() == written(tmp_path, source).read_bytes()


def test_no_fold_without_snapshots(tmp_path: Path, source: tuple[dict, list]) -> None:
    with LogWriter(tmp_path / "n.dralog", source[0], snapshot_every=0) as writer:
        for offset, payload in source[1]:
            writer.write(offset, payload)
        assert writer._state is None and writer._since == []
    with LogWriter(tmp_path / "s.dralog", source[0]) as writer:  # default interval: a short log is never folded
        for offset, payload in source[1]:
            writer.write(offset, payload)
        assert writer._state is None and writer.snapshots == 0


def test_format1_fixture_reads_and_verifies(source: tuple[dict, list]) -> None:
    log = read_log(TODAY_V1)
    assert log.header["format"] == 1
    result = verify(log)
    assert result.ok and result.divergence is None and result.checked > 10
    assert result.state.anomalies == []
    with open_log(TODAY_V1) as reader:
        assert reader.last_offset == 23 and list(reader.entries_from(0)) == log.entries
        assert encode_state(reader.state_at(15)) == encode_state(fold(log.entries, 15))


def test_log_of_an_older_dralab_reads_and_folds(tmp_path: Path) -> None:
    log = read_log(OLD)
    assert log.header == {"format": 1, "dralab": "0.1.0", "scenario": "quickstart", "seed": 7,
                          "policy": {"autoscaler": "count"}, "mode": "sim"}
    assert log.damage is None and len(log.entries) == 22
    state = fold(log.entries, 10**9)
    assert state.offset == 22 and state.anomalies == []
    assert sum(p.phase == "Succeeded" or p.node is not None for p in state.pods.values()) == 10
    path = tmp_path / "old2.dralog"  # carried over to format 2, the bytes of every record unchanged
    write_log(path, log.header, log.entries, snapshot_every=7)
    assert read_log(path).entries == log.entries
    with open_log(path) as reader:
        assert encode_state(reader.state_at(22)) == encode_state(state)


def test_state_at_equals_a_full_fold(tmp_path: Path, source: tuple[dict, list]) -> None:
    path = written(tmp_path, source)
    with open_log(path) as reader:
        assert [b.first for b in reader.snapshot_blocks] == [5, 10, 15, 20]
        for offset in (1, 4, 5, 6, 9, 10, 11, 14, 15, 16, 19, 20, 21, 23):
            assert encode_state(reader.state_at(offset)) == encode_state(fold(source[1], offset)), offset
        snap = reader.nearest_snapshot(14)
        assert snap is not None and snap[0] == 10
        assert reader.nearest_snapshot(4) is None
        assert reader.state_at(10**6).offset == 23


def test_state_at_passes_over_a_snapshot_of_another_shape(tmp_path: Path, source: tuple[dict, list],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path = written(tmp_path, source)
    monkeypatch.setattr(snapshot_codec, "SHAPE", "0" * 16)  # as if written by a dralab with another state
    with open_log(path) as reader:
        state = reader.state_at(17)
        assert reader.snapshot_problem and "shape" in reader.snapshot_problem
    monkeypatch.undo()
    assert encode_state(state) == encode_state(fold(source[1], 17))


def test_offset_at_time(tmp_path: Path, source: tuple[dict, list]) -> None:
    path = written(tmp_path, source)
    times = [(o, record_time(p)) for o, p in source[1]]
    assert len({t for _, t in times}) > 5
    with open_log(path) as reader, open_log(TODAY_V1) as old:
        for t in sorted({t for _, t in times} | {t + 1 for _, t in times} | {-1, 0, 10**9}):
            expected = max((o for o, tt in times if tt <= t), default=None)
            assert reader.offset_at_time(t) == expected, t
            assert old.offset_at_time(t) == expected, t


def test_truncation_anywhere_keeps_the_intact_prefix(tmp_path: Path, source: tuple[dict, list]) -> None:
    data = written(tmp_path, source).read_bytes()
    _, header_end = fmt.parse_header(data, "x")
    cut_path = tmp_path / "cut.dralog"
    blocks = blocks_of(data)
    for cut in [*range(header_end, len(data), 23), *(b.end for b in blocks), len(data) - 1]:
        cut_path.write_bytes(data[:cut])
        log = read_log(cut_path)
        assert log.damage and "byte" in log.damage, cut
        whole = sum(b.count for b in blocks if b.kind == fmt.KIND_ENTRIES and b.end <= cut)  # blocks not cut
        assert log.entries == source[1][:whole], cut
        with open_log(cut_path) as reader:
            got = list(reader.entries_from(0))
            assert reader.damage and got == log.entries, cut
    full_blocks = [b for b in blocks_of(data) if b.kind == fmt.KIND_ENTRIES]
    cut_path.write_bytes(data[:full_blocks[2].end + 10])  # inside the block after the third entries block
    log = read_log(cut_path)
    assert len(log.entries) == full_blocks[2].last == 9 and f"at byte {full_blocks[2].end}" in (log.damage or "")
    for cut in (0, 5, header_end - 1):
        cut_path.write_bytes(data[:cut])
        with pytest.raises(LogFileError):
            read_log(cut_path)
        with pytest.raises(LogFileError):
            open_log(cut_path)


def test_a_flipped_byte_in_a_block_ends_the_prefix_there(tmp_path: Path, source: tuple[dict, list]) -> None:
    data = written(tmp_path, source).read_bytes()
    second = [b for b in blocks_of(data) if b.kind == fmt.KIND_ENTRIES][1]
    bad = tmp_path / "bad.dralog"
    body = bytearray(data)
    body[second.pos + fmt.BLOCK_HEAD + second.stored // 2] ^= 0x20
    bad.write_bytes(bytes(body))
    log = read_log(bad)
    assert log.entries == source[1][:4]
    assert log.damage == f"checksum mismatch in entries block at byte {second.pos} (first offset 5)"
    with open_log(bad) as reader:  # the footer is sound: the damage shows when the block is read
        assert reader.damage is None
        assert list(reader.entries_from(0)) == source[1][:4]
        assert reader.damage == log.damage
    head = bytearray(data)
    head[second.pos + 12] ^= 0x01  # the block's first offset: its header no longer checks
    bad.write_bytes(bytes(head))
    assert read_log(bad).damage == f"block header checksum mismatch at byte {second.pos}"


def test_header_and_footer_damage(tmp_path: Path, source: tuple[dict, list]) -> None:
    data = written(tmp_path, source).read_bytes()
    bad = tmp_path / "bad.dralog"
    bad.write_bytes(data[:20] + bytes([data[20] ^ 1]) + data[21:])  # inside the header map
    with pytest.raises(LogFileError, match="header frame checksum mismatch"):
        read_log(bad)
    with pytest.raises(LogFileError, match="header frame checksum mismatch"):
        open_log(bad)
    bad.write_bytes(data[:-3] + b"XYZ")  # the footer's magic
    log = read_log(bad)
    assert log.entries == source[1] and log.damage and "bad footer at byte" in log.damage
    with open_log(bad) as reader:  # no footer to trust: a scan finds every block
        assert reader.damage and "index" in reader.damage
        assert list(reader.entries_from(0)) == source[1]
        assert encode_state(reader.state_at(12)) == encode_state(fold(source[1], 12))
    bad.write_bytes(b"DRALOG3\n" + data[8:])
    with pytest.raises(LogFileError, match="not a dralab log"):
        read_log(bad)
    frame = fmt.header_frame({"format": 9})
    bad.write_bytes(frame)
    with pytest.raises(LogFileError, match="unsupported log format 9"):
        read_log(bad)


def test_oversize_announcements_are_refused(tmp_path: Path, source: tuple[dict, list]) -> None:
    data = written(tmp_path, source).read_bytes()
    bad = tmp_path / "big.dralog"
    bad.write_bytes(fmt.MAGIC2 + fmt.HEADER_FRAME.pack(fmt.MAX_HEADER + 1, 0) + b"\x80" * 64)
    with pytest.raises(LogFileError, match="over the limit"):
        read_log(bad)
    with pytest.raises(LogFileError, match="over the limit"):
        open_log(bad)
    first = blocks_of(data)[0]
    head = fmt.BLOCK.pack(fmt.SYNC, fmt.KIND_ENTRIES, 0, 0, 1, 4, 4, fmt.MAX_ENTRIES_BLOCK + 1, 10, 0, 0, 0)
    forged = head + fmt.BLOCK_CRC.pack(zlib.crc32(head))
    bad.write_bytes(data[:first.pos] + forged + data[first.pos + fmt.BLOCK_HEAD:])
    log = read_log(bad)
    assert log.entries == [] and log.damage and "over the limit" in log.damage and f"byte {first.pos}" in log.damage
    head = fmt.BLOCK.pack(fmt.SYNC, fmt.KIND_ENTRIES, 0, 0, 1, 4, 10**6, 100, 100, 0, 0, 0)  # count vs body
    raw = b"\x00" * 100
    head = fmt.BLOCK.pack(fmt.SYNC, fmt.KIND_ENTRIES, 0, 0, 1, 4, 10**6, 100, 100, 0, 0, zlib.crc32(raw))
    bad.write_bytes(data[:first.pos] + head + fmt.BLOCK_CRC.pack(zlib.crc32(head)) + raw)
    assert "records announced" in (read_log(bad).damage or "")


def test_a_live_recording_is_readable_after_each_flush(tmp_path: Path, source: tuple[dict, list]) -> None:
    path = tmp_path / "live.dralog"
    part = tmp_path / "live.dralog.part"
    writer = LogWriter(path, source[0], block_records=1000, snapshot_every=0)
    for offset, payload in source[1][:7]:
        writer.write(offset, payload)
    writer.flush()
    log = read_log(part)
    assert log.entries == source[1][:7] and "without an index" in (log.damage or "")
    for offset, payload in source[1][7:]:
        writer.write(offset, payload)
    assert read_log(part).entries == source[1][:7]  # not flushed yet: still the first block only
    writer.flush()
    with open_log(part) as reader:
        assert list(reader.entries_from(0)) == source[1] and reader.last_offset == 23
    writer.close()
    assert not part.exists() and read_log(path).damage is None


def test_make_header_says_format_2() -> None:
    header = make_header(scenario="s", seed=1, policy={"autoscaler": "dra"}, mode="sim")
    assert header["format"] == 2 and "time" not in header


# ---------------------------------------------------------------------------------------------- upcasting


def _old_record(tag: str) -> bytes:
    return msgspec.msgpack.encode({"id": "x", "source": "scenario", "view": -1, "t": 5,
                                   "events": [{"type": tag, "pod": "pod/default/a"}], "v": 1})


def test_upcasters_take_old_records_to_the_current_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def rename(raw: dict) -> dict:  # version 2 renamed the (test-only) PodDone event to PodFinished
        calls.append(raw["v"])
        evs = [{**e, "type": "PodFinished"} if e["type"] == "PodDone" else e for e in raw["events"]]
        return {**raw, "events": evs, "v": 2}

    with pytest.raises(LogDecodeError, match="offset 4: invalid record"):  # version 1 today: no upcasting
        decode_record(_old_record("PodDone"), 4)
    monkeypatch.setattr(events, "SCHEMA_VERSION", 2)
    with pytest.raises(LogDecodeError, match="offset 4: schema version 1 is older than 2 and no upcaster"):
        decode_record(_old_record("PodDone"), 4)
    monkeypatch.setitem(events.UPCASTERS, 1, rename)
    record = decode_record(_old_record("PodDone"), 4)
    assert record.v == 2 and record.events == (PodFinished(pod="pod/default/a"),) and calls == [1]
    assert decode_record(_old_record("PodFinished"), 5).v == 2  # valid but old: upcast too
    assert calls == [1, 1]
    current = msgspec.msgpack.encode({"id": "x", "source": "scenario", "view": -1, "t": 5,
                                      "events": [{"type": "PodFinished", "pod": "pod/default/a"}], "v": 2})
    assert decode_record(current, 6).v == 2 and calls == [1, 1]  # the fast path: no upcaster called
    newer = current.replace(b"\xa1v\x02", b"\xa1v\x03")
    with pytest.raises(LogDecodeError, match="schema version 3 is newer"):
        decode_record(newer, 7)


def test_a_failing_upcaster_names_the_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(events.UPCASTERS, 1, lambda raw: raw)  # forgets to bump v
    with pytest.raises(LogDecodeError, match="offset 9: the upcaster from schema version 1 did not give version 2"):
        decode_record(_old_record("PodFinished"), 9)
    monkeypatch.setitem(events.UPCASTERS, 1, lambda raw: raw["missing"])
    with pytest.raises(LogDecodeError, match="offset 9: upcasting from schema version 1 failed"):
        decode_record(_old_record("PodFinished"), 9)


def test_block_header_layout_is_fixed() -> None:
    assert fmt.BLOCK_HEAD == 60 and fmt.FOOTER.size == 20
    assert struct.calcsize(">II") == fmt.HEADER_FRAME.size


def test_a_record_that_does_not_decode_stops_the_snapshots_not_the_writing(tmp_path: Path,
                                                                         source: tuple[dict, list]) -> None:
    entries = list(source[1])
    entries[6] = (7, b"\xc1 not msgpack")
    path = tmp_path / "bad-record.dralog"
    with LogWriter(path, source[0], **SMALL) as writer:
        for offset, payload in entries:
            writer.write(offset, payload)
    assert writer.snapshots == 1 and writer.snapshot_error and "offset 7" in writer.snapshot_error
    log = read_log(path)
    assert log.damage is None and log.entries == entries
    with open_log(path) as reader:
        assert [b.first for b in reader.snapshot_blocks] == [5]
        assert reader.offset_at_time(10**9) == 23


def test_a_damaged_snapshot_is_passed_over_for_the_one_before(tmp_path: Path, source: tuple[dict, list]) -> None:
    path = written(tmp_path, source)
    data = bytearray(path.read_bytes())
    snap = [b for b in blocks_of(bytes(data)) if b.kind == fmt.KIND_SNAPSHOT][2]  # taken at offset 15
    assert snap.first == 15
    data[snap.pos + fmt.BLOCK_HEAD + 3] ^= 0xFF
    path.write_bytes(bytes(data))
    with open_log(path) as reader:
        found = reader.nearest_snapshot(17)
        assert found is not None and found[0] == 10
        assert reader.snapshot_problem == f"checksum mismatch in snapshot block at byte {snap.pos} (first offset 15)"
        assert encode_state(reader.state_at(17)) == encode_state(fold(source[1], 17))
    assert read_log(path).damage == reader.snapshot_problem  # read whole, the file ends its prefix there

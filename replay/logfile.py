"""The log file (`.dralog`): a self-describing header, then the log's entries in checksummed blocks.

Format 2 (written): the magic `DRALOG2\n`, a header frame, then blocks of records (optionally
compressed, each with a CRC), state snapshots every `snapshot_every` records, an index and a footer,
so that a reader jumps to any offset without reading the whole file (`open_log`, time travel) and a
truncated or corrupted file still opens its intact prefix (`damage` says where and why). Format 1
(`DRALOG1\n`, one CRC'd frame per record, dralab up to issue 6) is still read. Payloads are the event
records exactly as they were on the stream, so a file is the stream, byte for byte. The header holds no
wall-clock time, so the same seed gives the same file. Byte layout: logfile_blocks.py; the lazy
reader: logfile_reader.py; docs/log-format.md describes both formats.
"""

from __future__ import annotations

import gc
import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import msgspec

from dralab import __version__
from dralab.core.events import LogDecodeError, Record, decode_record
from dralab.core.snapshot_codec import SnapshotError, encode_state
from dralab.core.state import ClusterState

from . import logfile_blocks as fmt
from .output_files import commit_part, discard_part, open_part

if TYPE_CHECKING:
    from .logfile_reader import LogReader

MAGIC = fmt.MAGIC2
MAGIC1 = b"DRALOG1\n"
FORMAT_VERSION = 2
READABLE_FORMATS = (1, 2)
_FRAME = struct.Struct(">IQI")
MAX_FRAME = 64 * 1024 * 1024
# Records between two snapshots. A time travel decodes one snapshot and folds at most this many records;
# measured with benchmarks/timetravel_bench.py (docs/log-format.md). Logs shorter than this are never folded.
DEFAULT_SNAPSHOT_EVERY = 5_000
BLOCK_RECORDS = 4096
BLOCK_BYTES = 1024 * 1024


class LogFileError(Exception):
    """A file that is not a dralog at all (wrong magic, unreadable header)."""


@dataclass
class LogFile:
    path: str
    header: dict[str, Any]
    entries: list[tuple[int, bytes]] = field(default_factory=list)
    damage: str | None = None  # set when the file ends in a truncated or corrupted frame or block

    def records(self) -> Iterator[tuple[int, Record]]:
        """Decoded records; a bad one raises LogDecodeError naming its offset."""
        for offset, payload in self.entries:
            yield offset, decode_record(payload, offset)


def make_header(*, scenario: str, seed: int, policy: dict[str, str], mode: str, **extra: Any) -> dict[str, Any]:
    return {
        "format": FORMAT_VERSION,
        "dralab": __version__,
        "scenario": scenario,
        "seed": seed,
        "policy": policy,
        "mode": mode,
        **extra,
    }


class _T(msgspec.Struct):
    t: int = 0


_t_decoder = msgspec.msgpack.Decoder(_T)


def record_time(payload: bytes, default: int = 0) -> int:
    """A record's `t` without decoding its events (`default` for a payload that does not decode)."""
    try:
        return _t_decoder.decode(payload).t
    except (msgspec.DecodeError, msgspec.ValidationError):
        return default


class LogWriter:
    """Writes a log file as entries arrive (a live recording), to `FILE.part` renamed to `FILE` at close,
    so a reader never sees a half-written file under the final name (replay/output_files.py: the `.part`
    is never opened through a link, and the target is replaced only while it is a regular file; `abort`
    removes it, as leaving a `with` block by an exception does). Records go into blocks; a block is
    written when full (`block_records` or `block_bytes`) or on `flush()`, after which a reader of the
    `.part` file gets it. Every `snapshot_every` records (0: never) the writer folds the records it holds
    and writes a snapshot of the state; pass the decoded record to `write` when there is one."""

    def __init__(self, path: str | os.PathLike[str], header: dict[str, Any], *, compression: str | None = None,
                 snapshot_every: int | None = None, block_records: int = BLOCK_RECORDS,
                 block_bytes: int = BLOCK_BYTES, option: str = "--log") -> None:
        codec = compression or header.get("compression") or fmt.DEFAULT_CODEC
        if codec not in fmt.CODECS or (codec == "zstd" and not fmt.HAVE_ZSTD):
            raise ValueError(f"compression: {codec!r} is not available (none, zlib or zstd)")
        every = snapshot_every if snapshot_every is not None else header.get("snapshot_every", DEFAULT_SNAPSHOT_EVERY)
        if not isinstance(every, int) or every < 0:
            raise ValueError(f"snapshot_every: must be an integer >= 0, got {every!r}")
        if block_records < 1 or block_bytes < 1:
            raise ValueError("block_records and block_bytes must be >= 1")
        self.header = {**header, "format": FORMAT_VERSION, "compression": codec, "snapshot_every": every}
        self.path = Path(path)
        self.codec, self.snapshot_every = codec, every
        self.block_records, self.block_bytes = block_records, block_bytes
        self.option = option
        self._fh: BinaryIO
        self._fh, self._tmp = open_part(self.path, option)  # type: ignore[assignment]
        first = fmt.header_frame(self.header)
        try:
            self._fh.write(first)
        except BaseException:
            discard_part(self._fh, self._tmp)
            raise
        self._pos = len(first)
        self._blocks: list[fmt.BlockInfo] = []
        self._offsets: list[int] = []
        self._payloads: list[bytes] = []
        self._raw = 0
        self._tmin = self._tmax = self._last_t = 0
        self._since: list[tuple[int, bytes, Record | None]] = []  # records not folded yet (snapshots on)
        self._state: ClusterState | None = None
        self.snapshot_error: str | None = None  # why snapshots stopped (a record that does not decode, say)
        self.snapshots = 0
        self.count = 0
        self._closed = False

    def write(self, offset: int, payload: bytes, record: Record | None = None) -> None:
        if len(payload) > fmt.MAX_RECORD:
            raise ValueError(f"record at offset {offset}: {len(payload)} bytes, over the limit of {fmt.MAX_RECORD}")
        t = record.t if record is not None else record_time(payload, self._last_t)
        if not self._offsets:
            self._tmin = self._tmax = t
        elif t < self._tmin:
            self._tmin = t
        elif t > self._tmax:
            self._tmax = t
        self._last_t = t
        self._offsets.append(offset)
        self._payloads.append(payload)
        self._raw += 12 + len(payload)
        self.count += 1
        if self.snapshot_every:
            self._since.append((offset, payload, record))
            if len(self._since) >= self.snapshot_every:
                self._snapshot()
        if len(self._offsets) >= self.block_records or self._raw >= self.block_bytes:
            self._flush_block()

    def _put(self, kind: int, first: int, last: int, count: int, tmin: int, tmax: int, raw: bytes) -> None:
        data = fmt.block_bytes(kind, self.codec, first, last, count, tmin, tmax, raw)
        self._blocks.append(fmt.BlockInfo(self._pos, kind, 0, first, last, count, 0, 0, tmin, tmax, 0))
        self._fh.write(data)
        self._pos += len(data)

    def _flush_block(self) -> None:
        if self._offsets:
            self._put(fmt.KIND_ENTRIES, self._offsets[0], self._offsets[-1], len(self._offsets), self._tmin,
                      self._tmax, fmt.entries_body(self._offsets, self._payloads))
            self._offsets, self._payloads, self._raw = [], [], 0

    def _snapshot(self) -> None:
        """Fold the records held since the last snapshot and write the state after the last of them."""
        self._flush_block()
        state = self._state if self._state is not None else ClusterState()
        collecting = gc.isenabled()
        gc.disable()  # bounded work (snapshot_every records) making objects that live on: no collector passes
        try:
            for offset, payload, record in self._since:
                state.apply(offset, record if record is not None else decode_record(payload, offset))
            data = encode_state(state, max_bytes=fmt.MAX_SNAPSHOT)
        except (LogDecodeError, SnapshotError) as exc:
            self.snapshot_error, self.snapshot_every, self._state = str(exc), 0, None
            self._since = []
            return
        finally:
            if collecting:
                gc.enable()
        self._since = []
        self._state = state
        self._put(fmt.KIND_SNAPSHOT, state.offset, state.offset, 0, state.t, state.t, data)
        self.snapshots += 1

    def flush(self) -> None:
        """Write the records held as a block and hand them to the OS: a reader of the `.part` file sees them."""
        self._flush_block()
        self._fh.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._state = None
        try:
            self._flush_block()
            index_pos = self._pos
            self._put(fmt.KIND_INDEX, 0, 0, len(self._blocks), 0, 0, fmt.index_body(self._blocks))
            self._fh.write(fmt.footer_bytes(index_pos))
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
        except BaseException:  # a full disk, say: no half-written file is left behind
            discard_part(self._fh, self._tmp)
            raise
        commit_part(self._tmp, self.path, self.option)

    def abort(self) -> None:
        """Give up the file: the temporary file is removed and the target left as it was."""
        if not self._closed:
            self._closed = True
            self._state = None
            discard_part(self._fh, self._tmp)

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:  # an error while writing: nothing half-written is left under either name
            self.abort()


def write_log(path: str | os.PathLike[str], header: dict[str, Any], entries: Iterable[tuple[int, bytes]],
              **options: Any) -> int:
    """Write a whole log (options: those of LogWriter); returns the number of records."""
    with LogWriter(path, header, **options) as writer:
        for offset, payload in entries:
            writer.write(offset, payload)
        return writer.count


def read_log(path: str | os.PathLike[str]) -> LogFile:
    """Open a log file whole; stops at the first damaged frame or block and says where (the prefix stays
    usable). Format 1 and 2."""
    data = Path(path).read_bytes()
    if data.startswith(MAGIC1):
        return _read_v1(path, data)
    if not data.startswith(MAGIC):
        raise LogFileError(f"{path}: not a dralab log (bad magic at byte 0)")
    try:
        header, pos = fmt.parse_header(data, str(path))
    except fmt.BlockError as exc:
        raise LogFileError(str(exc)) from None
    _check_format(path, header, 2)
    entries: list[tuple[int, bytes]] = []
    damage = None
    size = len(data)
    while True:
        if pos >= size:
            damage = f"file ends at byte {pos} without an index (not closed: a recording cut short?)"
            break
        try:
            info = fmt.parse_block_head(data[pos:pos + fmt.BLOCK_HEAD], pos, size)
            # a snapshot's body is checked, not decompressed: read_log has no use for it
            raw = fmt.check_body(info, data[pos + fmt.BLOCK_HEAD:info.end], raw=info.kind != fmt.KIND_SNAPSHOT)
            if info.kind == fmt.KIND_ENTRIES:
                entries.extend(fmt.parse_entries(info, raw))
            elif info.kind == fmt.KIND_INDEX:
                fmt.parse_index(raw)
                damage = _footer_damage(data[info.end:], info)
                break
        except fmt.BlockError as exc:
            damage = str(exc)
            break
        pos = info.end
    return LogFile(str(path), header, entries, damage)


def _footer_damage(tail: bytes, index: fmt.BlockInfo) -> str | None:
    if len(tail) < fmt.FOOTER.size:
        return f"truncated footer at byte {index.end}"
    if len(tail) > fmt.FOOTER.size or fmt.parse_footer(tail) != index.pos:
        return f"bad footer at byte {index.end} (after the index at byte {index.pos})"
    return None


def _check_format(path: str | os.PathLike[str], header: dict[str, Any], expected: int) -> None:
    found = header.get("format")
    if found != expected:
        raise LogFileError(f"{path}: unsupported log format {found!r} in a format-{expected} file "
                           f"(this dralab reads formats {', '.join(map(str, READABLE_FORMATS))})")


def _read_v1(path: str | os.PathLike[str], data: bytes) -> LogFile:
    """Format 1: the magic, then `length u32 | offset u64 | crc32 u32 | payload` frames, the first the header."""
    pos = len(MAGIC1)
    frames: list[tuple[int, bytes]] = []
    damage = None
    while pos < len(data):
        if pos + _FRAME.size > len(data):
            damage = f"truncated frame header at byte {pos}"
            break
        length, offset, crc = _FRAME.unpack_from(data, pos)
        start = pos + _FRAME.size
        if length > MAX_FRAME or start + length > len(data):
            damage = f"truncated frame at byte {pos} (offset {offset}, {length} bytes announced)"
            break
        payload = data[start : start + length]
        if zlib.crc32(payload, zlib.crc32(offset.to_bytes(8, "big"))) != crc:
            damage = f"checksum mismatch at byte {pos} (offset {offset})"
            break
        frames.append((offset, payload))
        pos = start + length
    if not frames:
        raise LogFileError(f"{path}: header frame missing or damaged ({damage})")
    try:
        header = msgspec.msgpack.decode(frames[0][1])
    except msgspec.DecodeError as exc:
        raise LogFileError(f"{path}: unreadable header: {exc}") from None
    if not isinstance(header, dict):
        raise LogFileError(f"{path}: header is not a map")
    _check_format(path, header, 1)
    return LogFile(str(path), header, frames[1:], damage)


def open_log(path: str | os.PathLike[str]) -> LogReader:
    """A lazy, indexed reader (time travel, big files); see logfile_reader.LogReader."""
    from .logfile_reader import open_log as _open

    return _open(path)

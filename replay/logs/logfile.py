"""The log file (`.dralog`): a self-describing header, then the log's entries in checksummed blocks.

Format 2 (written): the magic `DRALOG2\n`, a header frame, then blocks of records (optionally
compressed, each with a CRC), state snapshots every `snapshot_every` records, an index and a footer,
so that a reader jumps to any offset without reading the whole file (`open_log`, time travel) and a
truncated or corrupted file still opens its intact prefix (`damage` says where and why). Format 1
(`DRALOG1\n`, one CRC'd frame per record, dralab up to issue 6) is still read. Payloads are the event
records exactly as they were on the stream, so a file is the stream, byte for byte. The header holds no
wall-clock time, so the same seed gives the same file. `LogStream` reads a file from its start a block
at a time (what reads a whole log: check, verify, report); `read_log` keeps such a pass as a list. Byte
layout and the decompression budget: logfile_blocks.py; the lazy reader: logfile_reader.py;
docs/log-format.md describes both formats.
"""

from __future__ import annotations

import gc
import os
import stat
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from dralab import __version__
from dralab.core.log.events import LogDecodeError, Record, decode_record
from dralab.core.state.cluster import ClusterState
from dralab.core.state.codec import SnapshotError, encode_state

from . import logfile_blocks as fmt
from .output_files import commit_part, discard_part, open_part

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
    so a reader never sees a half-written file under the final name (replay/logs/output_files.py: the `.part`
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
    """Open a log file whole (entries as a list: what needs them more than once, e.g. a what-if run); stops
    at the first damaged frame or block and says where (the prefix stays usable). Format 1 and 2. What
    reads a log once takes `LogStream` instead: its memory is a block, not the file."""
    stream = LogStream(path)
    entries = list(stream)
    return LogFile(str(path), stream.header, entries, stream.damage)


class LogStream:
    """A log file read as a stream from its start, one block (format 1: one frame) at a time, so a reader's
    memory is bounded by a block, not by the file. Made: the header is read and the file refused
    (LogFileError) when it is not a dralog or would decompress past its budget (a header walk that reads
    no body: before any work). Iterated: (offset, payload) pairs, read anew from the file at each
    iteration, stopping at the first damaged frame or block; `damage` and `count` (records read) describe
    the last pass that ran to its end, as `read_log`'s. `entries` is the stream itself, so code written for
    a LogFile's list iterates it the same way (but cannot take its len)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self.damage: str | None = None
        self.count = 0
        with open_file(path) as fh:
            self.header, start, self.format = read_head(fh, self.path)
            if self.format == 2:
                size = os.fstat(fh.fileno()).st_size
                budget = fmt.Budget(size)
                try:
                    for info in fmt.scan(fh, size, start)[0]:
                        if info.kind != fmt.KIND_SNAPSHOT:  # a stream checks a snapshot's CRC, never inflates it
                            budget.charge(info)
                except fmt.BudgetError as exc:
                    raise LogFileError(f"{self.path}: {exc}") from None

    @property
    def entries(self) -> LogStream:
        return self

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        ended: list[str | None] = [None]  # why the pass stopped (damage), set by the format's reader
        count = 0
        with open_file(self.path) as fh:
            _, pos, form = read_head(fh, self.path)
            size = os.fstat(fh.fileno()).st_size
            for pair in (self._v1(fh, pos, size, ended) if form == 1 else self._v2(fh, pos, size, ended)):
                count += 1
                yield pair
        self.damage, self.count = ended[0], count  # a pass left before its end (a consumer stopped) says nothing

    def records(self) -> Iterator[tuple[int, Record]]:
        """Decoded records; a bad one raises LogDecodeError naming its offset."""
        for offset, payload in self:
            yield offset, decode_record(payload, offset)

    def _v2(self, fh: BinaryIO, pos: int, size: int, ended: list[str | None]) -> Iterator[tuple[int, bytes]]:
        budget = fmt.Budget(size)
        while True:
            if pos >= size:
                ended[0] = f"file ends at byte {pos} without an index (not closed: a recording cut short?)"
                return
            try:
                info = fmt.parse_block_head(fh.read(fmt.BLOCK_HEAD), pos, size)
                if info.kind == fmt.KIND_SNAPSHOT:  # checked, not decompressed: a stream has no use for it
                    fmt.skip_body(fh, info)
                    pos = info.end
                    continue
                raw = fmt.check_body(info, fh.read(info.stored), budget=budget)
                if info.kind == fmt.KIND_INDEX:
                    fmt.parse_index(raw)
                    ended[0] = _footer_damage(fh.read(fmt.FOOTER.size + 1), info)
                    return
                entries = fmt.parse_entries(info, raw)
            except fmt.BlockError as exc:
                ended[0] = str(exc)
                return
            except fmt.BudgetError as exc:  # the header walk saw less than is there now: a file still growing
                raise LogFileError(f"{self.path}: {exc}") from None
            del raw
            yield from entries
            pos = info.end

    def _v1(self, fh: BinaryIO, pos: int, size: int, ended: list[str | None]) -> Iterator[tuple[int, bytes]]:
        while True:
            frame = _v1_frame(fh, pos, size)
            if not isinstance(frame, tuple):
                ended[0] = frame
                return
            pos += _FRAME.size + len(frame[1])
            yield frame


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


def open_file(path: str | os.PathLike[str]) -> BinaryIO:
    """The file opened for reading; LogFileError for a FIFO, a socket or a device: a log is read by seeking
    and more than once, and opening a FIFO would wait for a writer (a directory fails in `open`, OSError)."""
    mode = os.stat(path).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise LogFileError(f"{path}: not a regular file (a FIFO, a socket or a device): a log is read from a file")
    return open(path, "rb")  # noqa: SIM115 - the caller closes it


def read_head(fh: BinaryIO, path: str) -> tuple[dict[str, Any], int, int]:
    """The header of the file open at its start, the position of its first block (format 1: frame) and its
    format (1 or 2); LogFileError for what is not a readable dralog. Reads the header frame alone."""
    magic = fh.read(len(MAGIC))
    if magic == MAGIC1:
        frame = _v1_frame(fh, len(MAGIC1), os.fstat(fh.fileno()).st_size)
        if not isinstance(frame, tuple):
            raise LogFileError(f"{path}: header frame missing or damaged ({frame})")
        try:
            header = msgspec.msgpack.decode(frame[1])
        except msgspec.DecodeError as exc:
            raise LogFileError(f"{path}: unreadable header: {exc}") from None
        if not isinstance(header, dict):
            raise LogFileError(f"{path}: header is not a map")
        _check_format(path, header, 1)
        return header, len(MAGIC1) + _FRAME.size + len(frame[1]), 1
    if magic != MAGIC:
        raise LogFileError(f"{path}: not a dralab log (bad magic at byte 0)")
    head = magic + fh.read(fmt.HEADER_FRAME.size)
    if len(head) == len(MAGIC) + fmt.HEADER_FRAME.size:
        length = min(fmt.HEADER_FRAME.unpack_from(head, len(MAGIC))[0], fmt.MAX_HEADER + 1)
        head += fh.read(length)
    try:
        header, start = fmt.parse_header(head, path)
    except fmt.BlockError as exc:
        raise LogFileError(str(exc)) from None
    _check_format(path, header, 2)
    return header, start, 2


def _v1_frame(fh: BinaryIO, pos: int, size: int) -> tuple[int, bytes] | str | None:
    """Format 1: the `length u32 | offset u64 | crc32 u32 | payload` frame at `pos` (the file is there), as
    (offset, payload); else what is wrong with it, or None at the end of the file."""
    if pos >= size:
        return None
    if pos + _FRAME.size > size:
        return f"truncated frame header at byte {pos}"
    length, offset, crc = _FRAME.unpack(fh.read(_FRAME.size))
    if length > MAX_FRAME or pos + _FRAME.size + length > size:
        return f"truncated frame at byte {pos} (offset {offset}, {length} bytes announced)"
    payload = fh.read(length)
    if len(payload) != length:
        return f"truncated frame at byte {pos} (offset {offset}, {length} bytes announced)"
    if zlib.crc32(payload, zlib.crc32(offset.to_bytes(8, "big"))) != crc:
        return f"checksum mismatch at byte {pos} (offset {offset})"
    return offset, payload

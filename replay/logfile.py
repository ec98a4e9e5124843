"""The log file (`.dralog`): a self-describing header, then the log's entries, each checksummed.

Layout: the magic line `DRALOG1\n`, a header frame, then one frame per entry. A frame is
`length u32 | offset u64 | crc32 u32 | payload`, big-endian, the CRC covering offset and payload.
A truncated or corrupted file is detected at the first bad frame and the intact prefix still opens
(`LogFile.damage` says where and why). Payloads are the event records exactly as they were on the
stream, so a file is the stream, byte for byte. The header holds no wall-clock time, so the same
seed gives the same file.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from dralab import __version__
from dralab.core.events import Record, decode_record

MAGIC = b"DRALOG1\n"
FORMAT_VERSION = 1
_FRAME = struct.Struct(">IQI")
MAX_FRAME = 64 * 1024 * 1024


class LogFileError(Exception):
    """A file that is not a dralog at all (wrong magic, unreadable header)."""


@dataclass
class LogFile:
    path: str
    header: dict[str, Any]
    entries: list[tuple[int, bytes]] = field(default_factory=list)
    damage: str | None = None  # set when the file ends in a truncated or corrupted frame

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


def _frame(offset: int, payload: bytes) -> bytes:
    crc = zlib.crc32(payload, zlib.crc32(offset.to_bytes(8, "big")))
    return _FRAME.pack(len(payload), offset, crc) + payload


class LogWriter:
    """Writes a log file as entries arrive (a live recording), to a temporary name renamed at close,
    so a reader never sees a half-written file under the final name."""

    def __init__(self, path: str | os.PathLike[str], header: dict[str, Any]) -> None:
        self.path = Path(path)
        self._tmp = self.path.with_name(self.path.name + ".part")
        self._fh: BinaryIO = open(self._tmp, "wb")  # noqa: SIM115
        self._fh.write(MAGIC)
        self._fh.write(_frame(0, msgspec.msgpack.encode(header)))
        self.count = 0

    def write(self, offset: int, payload: bytes) -> None:
        self._fh.write(_frame(offset, payload))
        self.count += 1

    def close(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        os.replace(self._tmp, self.path)

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_log(path: str | os.PathLike[str], header: dict[str, Any], entries: Iterable[tuple[int, bytes]]) -> int:
    with LogWriter(path, header) as writer:
        for offset, payload in entries:
            writer.write(offset, payload)
        return writer.count


def read_log(path: str | os.PathLike[str]) -> LogFile:
    """Open a log file; stops at the first damaged frame and says where (the prefix stays usable)."""
    data = Path(path).read_bytes()
    if not data.startswith(MAGIC):
        raise LogFileError(f"{path}: not a dralab log (bad magic at byte 0)")
    pos = len(MAGIC)
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
    if not isinstance(header, dict) or header.get("format") != FORMAT_VERSION:
        found = header.get("format") if isinstance(header, dict) else "?"
        raise LogFileError(f"{path}: unsupported log format {found} (this dralab reads {FORMAT_VERSION})")
    return LogFile(str(path), header, frames[1:], damage)

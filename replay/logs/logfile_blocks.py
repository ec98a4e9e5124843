"""Format 2 of the `.dralog` file, the byte level: the header frame, blocks, the index and the footer.

A file is written as a stream (a live recording appends blocks as they fill) and read either as a stream
from its start (`LogStream`, `read_log`) or by seeking (`open_log`: footer -> index -> the one block
wanted). Every block carries a fixed header with its own CRC, so a reader trusts no length it has not
checked, and a CRC of its stored body; bodies may be compressed. Nothing here is unpickled, every size
announced is bounded before any allocation, and what a whole file may decompress to is bounded too
(`Budget`). Layout and limits are described in docs/log-format.md ("The .dralog file").
"""

from __future__ import annotations

import importlib
import struct
import zlib
from dataclasses import dataclass
from typing import Any, BinaryIO

import msgspec

MAGIC2 = b"DRALOG2\n"
FOOTER_MAGIC = b"DRA2END\n"
HEADER_FRAME = struct.Struct(">II")  # length, crc32 of the msgpack header
# sync, kind, codec, reserved, first offset, last offset, count, raw length, stored length, min t, max t,
# crc32 of the stored body; then a crc32 of those 56 bytes.
BLOCK = struct.Struct(">4sBBHQQIIIqqI")
BLOCK_CRC = struct.Struct(">I")
BLOCK_HEAD = BLOCK.size + BLOCK_CRC.size
SYNC = b"DBLK"
FOOTER = struct.Struct(">QI8s")  # index block position, crc32 of those 8 bytes, magic

KIND_ENTRIES, KIND_SNAPSHOT, KIND_INDEX = 1, 2, 3
KINDS = {KIND_ENTRIES: "entries", KIND_SNAPSHOT: "snapshot", KIND_INDEX: "index"}
CODECS = {"none": 0, "zlib": 1, "zstd": 2}
CODEC_NAMES = {v: k for k, v in CODECS.items()}

MAX_HEADER = 1024 * 1024
MAX_ENTRIES_BLOCK = 80 * 1024 * 1024  # raw: one record may be up to 64 MiB, as in format 1
MAX_SNAPSHOT = 512 * 1024 * 1024  # the snapshot codec's default limit
MAX_INDEX = 256 * 1024 * 1024
MAX_RECORD = 64 * 1024 * 1024
LIMITS = {KIND_ENTRIES: MAX_ENTRIES_BLOCK, KIND_SNAPSHOT: MAX_SNAPSHOT, KIND_INDEX: MAX_INDEX}
# The whole-file decompression budget (Budget): a file may decompress to BUDGET_RATIO times its size, and
# always to BUDGET_FLOOR. The 24 h day log of benchmarks/day_bench.py decompresses to 3.9x its size read
# as a stream (entries and index) and 22x with every snapshot decoded (its most compressible block: 38x);
# a 26 KB file of zero-filled blocks decompressed to 937 MB (36,000x) before the budget.
BUDGET_RATIO = 200
BUDGET_FLOOR = 64 * 1024 * 1024

zstandard: Any
try:  # zstd when the zstandard package is there (a dependency); zlib otherwise, and to read zlib files
    zstandard = importlib.import_module("zstandard")
except ImportError:  # pragma: no cover - zstandard is a declared dependency
    zstandard = None
HAVE_ZSTD = zstandard is not None

DEFAULT_CODEC = "zstd" if HAVE_ZSTD else "zlib"
ZSTD_LEVEL = 3
ZLIB_LEVEL = 1


class BlockError(Exception):
    """A block that cannot be used: the message says what is wrong (the caller adds where)."""


class BudgetError(Exception):
    """A file that would decompress to more than its budget: refused whole (a bomb, not damage)."""


@dataclass(frozen=True, slots=True)
class BlockInfo:
    pos: int  # byte position of the block header in the file
    kind: int
    codec: int
    first: int  # first offset (a snapshot: the offset it was taken at)
    last: int
    count: int
    raw: int
    stored: int
    tmin: int
    tmax: int
    crc: int

    @property
    def end(self) -> int:
        return self.pos + BLOCK_HEAD + self.stored

    def describe(self) -> str:
        return f"{KINDS.get(self.kind, '?')} block at byte {self.pos} (first offset {self.first})"


class Budget:
    """The raw bytes one reading of a file may decompress: each block is capped by LIMITS, the file by this,
    so a small file of highly compressible blocks cannot make a reader allocate or churn through gigabytes.
    A block is charged (its announced raw length, which decompression never exceeds) before it is
    decompressed, once however often it is read (a lazy reader reads some blocks twice)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.limit = max(BUDGET_FLOOR, BUDGET_RATIO * size)
        self.used = 0
        self._charged: set[int] = set()

    def charge(self, info: BlockInfo) -> None:
        """Count `info`'s raw bytes; BudgetError naming the block when they would pass the limit."""
        if info.pos in self._charged:
            return
        if self.used + info.raw > self.limit:
            raise BudgetError(
                f"refused: the {info.describe()} would decompress the file to {self.used + info.raw} bytes, over "
                f"its budget of {self.limit} ({BUDGET_RATIO}x its {self.size} bytes, at least {BUDGET_FLOOR}): "
                "a decompression bomb, not a log dralab wrote")
        self._charged.add(info.pos)
        self.used += info.raw


def compress(codec: str, raw: bytes) -> bytes:
    if codec == "zstd":
        if zstandard is None:
            raise ValueError("compression zstd needs the zstandard package")
        out: bytes = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(raw)
        return out
    if codec == "zlib":
        return zlib.compress(raw, ZLIB_LEVEL)
    if codec == "none":
        return raw
    raise ValueError(f"unknown compression {codec!r} (none, zlib or zstd)")


def decompress(info: BlockInfo, stored: bytes) -> bytes:
    """The raw body, never more than the announced raw length (bounded before the header was trusted)."""
    if info.codec == 0:
        raw = stored
    elif info.codec == 1:
        d = zlib.decompressobj()
        try:
            raw = d.decompress(stored, info.raw)
        except zlib.error as exc:
            raise BlockError(f"zlib body does not decompress: {exc}") from None
        if d.unconsumed_tail or not d.eof:
            raise BlockError("zlib body larger than announced or incomplete")
    elif info.codec == 2:
        if zstandard is None:
            raise BlockError("the block is zstd-compressed and the zstandard package is not installed")
        try:
            raw = zstandard.ZstdDecompressor().decompress(stored, max_output_size=info.raw)
        except zstandard.ZstdError as exc:
            raise BlockError(f"zstd body does not decompress: {exc}") from None
    else:
        raise BlockError(f"unknown codec {info.codec}")
    if len(raw) != info.raw:
        raise BlockError(f"body is {len(raw)} bytes, {info.raw} announced")
    return raw


def header_frame(header: dict[str, Any]) -> bytes:
    body = msgspec.msgpack.encode(header)
    if len(body) > MAX_HEADER:
        raise ValueError(f"log header is {len(body)} bytes, over the limit of {MAX_HEADER}")
    return MAGIC2 + HEADER_FRAME.pack(len(body), zlib.crc32(body)) + body


def parse_header(data: bytes, where: str) -> tuple[dict[str, Any], int]:
    """The header map and the position after it; `data` starts with the magic. Raises BlockError."""
    start = len(MAGIC2) + HEADER_FRAME.size
    if len(data) < start:
        raise BlockError(f"{where}: header frame truncated (file is {len(data)} bytes)")
    length, crc = HEADER_FRAME.unpack_from(data, len(MAGIC2))
    if length > MAX_HEADER:
        raise BlockError(f"{where}: header frame announces {length} bytes, over the limit of {MAX_HEADER}")
    body = data[start:start + length]
    if len(body) < length:
        raise BlockError(f"{where}: header frame truncated ({len(body)} of {length} bytes)")
    if zlib.crc32(body) != crc:
        raise BlockError(f"{where}: header frame checksum mismatch at byte {len(MAGIC2)}")
    try:
        header = msgspec.msgpack.decode(body)
    except msgspec.DecodeError as exc:
        raise BlockError(f"{where}: unreadable header: {exc}") from None
    if not isinstance(header, dict):
        raise BlockError(f"{where}: header is not a map")
    return header, start + length


def block_bytes(kind: int, codec: str, first: int, last: int, count: int, tmin: int, tmax: int,
                raw: bytes) -> bytes:
    stored = compress(codec, raw)
    head = BLOCK.pack(SYNC, kind, CODECS[codec], 0, first, last, count, len(raw), len(stored), tmin, tmax,
                      zlib.crc32(stored))
    return head + BLOCK_CRC.pack(zlib.crc32(head)) + stored


def parse_block_head(head: bytes, pos: int, file_size: int) -> BlockInfo:
    """Check a block header read at `pos` (its CRC, sync, kind, codec, sizes against limits and the file)."""
    if len(head) < BLOCK_HEAD:
        raise BlockError(f"truncated block header at byte {pos}")
    (crc_head,) = BLOCK_CRC.unpack_from(head, BLOCK.size)
    if zlib.crc32(head[:BLOCK.size]) != crc_head:
        raise BlockError(f"block header checksum mismatch at byte {pos}")
    sync, kind, codec, _, first, last, count, raw, stored, tmin, tmax, crc = BLOCK.unpack_from(head)
    info = BlockInfo(pos, kind, codec, first, last, count, raw, stored, tmin, tmax, crc)
    if sync != SYNC or kind not in KINDS or codec not in CODEC_NAMES:
        raise BlockError(f"bad block header at byte {pos} (sync {sync!r}, kind {kind}, codec {codec})")
    limit = LIMITS[kind]
    if raw > limit or stored > limit + 1024:
        raise BlockError(f"{info.describe()} announces {raw} raw / {stored} stored bytes, over the limit of {limit}")
    if info.end > file_size:
        raise BlockError(f"truncated {info.describe()}: {stored} bytes announced, "
                         f"{max(0, file_size - pos - BLOCK_HEAD)} present")
    return info


def check_body(info: BlockInfo, stored: bytes, *, raw: bool = True, budget: Budget | None = None) -> bytes:
    """The raw body of a block whose stored bytes were read (`raw=False`: only check its CRC and give the
    stored bytes back); BlockError naming the block otherwise, BudgetError when `budget` has no room for it."""
    if len(stored) != info.stored:
        raise BlockError(f"truncated {info.describe()}")
    if zlib.crc32(stored) != info.crc:
        raise BlockError(f"checksum mismatch in {info.describe()}")
    if not raw:
        return stored
    if budget is not None:
        budget.charge(info)
    try:
        return decompress(info, stored)
    except BlockError as exc:
        raise BlockError(f"{info.describe()}: {exc}") from None


def skip_body(fh: BinaryIO, info: BlockInfo, chunk: int = 1024 * 1024) -> None:
    """Check the CRC of the body at the file position (just after `info`'s header) without holding it
    (a snapshot read as a stream: up to 512 MiB stored); BlockError as check_body's."""
    crc, left = 0, info.stored
    while left:
        part = fh.read(min(chunk, left))
        if not part:
            raise BlockError(f"truncated {info.describe()}")
        crc = zlib.crc32(part, crc)
        left -= len(part)
    if crc != info.crc:
        raise BlockError(f"checksum mismatch in {info.describe()}")


def scan(fh: BinaryIO, size: int, pos: int) -> tuple[list[BlockInfo], str]:
    """Walk the block headers from `pos` (no index to trust): the blocks before the index, and why the walk
    ended (the first bad header ends the prefix; reaching the index is reported too, the caller decides)."""
    blocks: list[BlockInfo] = []
    while True:
        if pos >= size:
            return blocks, f"file ends at byte {pos} without an index (not closed: a recording cut short?)"
        fh.seek(pos)
        try:
            info = parse_block_head(fh.read(BLOCK_HEAD), pos, size)
        except BlockError as exc:
            return blocks, str(exc)
        if info.kind == KIND_INDEX:
            return blocks, f"bad footer or index at byte {pos} (blocks read by a scan)"
        blocks.append(info)
        pos = info.end


def entries_body(offsets: list[int], payloads: list[bytes]) -> bytes:
    n = len(offsets)
    return (struct.pack(f"<{n}Q", *offsets) + struct.pack(f"<{n}I", *map(len, payloads))
            + b"".join(payloads))


def parse_entries(info: BlockInfo, raw: bytes) -> list[tuple[int, bytes]]:
    """The (offset, payload) pairs of an entries block's raw body, checked against its header."""
    n = info.count
    if 12 * n > len(raw):
        raise BlockError(f"{info.describe()}: {n} records announced in {len(raw)} bytes")
    offsets = struct.unpack_from(f"<{n}Q", raw)
    lengths = struct.unpack_from(f"<{n}I", raw, 8 * n)
    pos = 12 * n
    if pos + sum(lengths) != len(raw):
        raise BlockError(f"{info.describe()}: record lengths do not add up to the body")
    out = []
    for offset, length in zip(offsets, lengths, strict=True):
        out.append((offset, raw[pos:pos + length]))
        pos += length
    if n and (offsets[0] != info.first or offsets[-1] != info.last):
        raise BlockError(f"{info.describe()}: offsets {offsets[0]}..{offsets[-1]} differ from the header's "
                         f"{info.first}..{info.last}")
    return out


_INDEX_ROW = msgspec.msgpack.Decoder(list[tuple[int, int, int, int, int, int, int]])


def index_body(blocks: list[BlockInfo]) -> bytes:
    return msgspec.msgpack.encode([(b.pos, b.kind, b.first, b.last, b.count, b.tmin, b.tmax) for b in blocks])


def parse_index(raw: bytes) -> list[tuple[int, int, int, int, int, int, int]]:
    try:
        return _INDEX_ROW.decode(raw)
    except msgspec.DecodeError as exc:
        raise BlockError(f"unreadable index: {exc}") from None


def footer_bytes(index_pos: int) -> bytes:
    pos = index_pos.to_bytes(8, "big")
    return FOOTER.pack(index_pos, zlib.crc32(pos), FOOTER_MAGIC)


def parse_footer(tail: bytes) -> int | None:
    """The index position a footer names, None if `tail` is not a valid footer."""
    if len(tail) != FOOTER.size:
        return None
    index_pos, crc, magic = FOOTER.unpack(tail)
    if magic != FOOTER_MAGIC or zlib.crc32(index_pos.to_bytes(8, "big")) != crc:
        return None
    return int(index_pos)

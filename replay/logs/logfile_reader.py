"""The lazy, indexed reader of a `.dralog` file: time travel without reading the whole file.

`open_log` reads the header and the footer, then the index the footer points to (a few bytes per
block), and reads a block only when asked for it: `state_at(offset)` decodes the nearest snapshot at
or before `offset` and folds the records after it, so its cost is bounded by the snapshot interval,
not by the length of the log. A file without a valid footer (truncated, still being written, footer
damaged) is walked block header by block header from the start; the first bad header ends the intact
prefix (`damage`). Block bodies are checked (CRC, size) when they are read: a bad one ends iteration
there and sets `damage`, as `read_log` would have. Every body decompressed is charged to the file's
budget (logfile_blocks.Budget): a file that would decompress past it is refused (LogFileError), not
treated as damage. Format-1 files are read whole and served the same way.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from itertools import pairwise
from typing import Any, BinaryIO

from dralab.core.log.events import decode_record
from dralab.core.state.cluster import ClusterState
from dralab.core.state.codec import SnapshotError, decode_state
from dralab.replay.logs.gc_policy import collector_paused

from . import logfile_blocks as fmt
from .logfile import LogFileError, open_file, read_head, read_log, record_time


class LogReader:
    """Blocks of one log file, read on demand. Use as a context manager (it holds the file open)."""

    def __init__(self, path: str, header: dict[str, Any], blocks: list[fmt.BlockInfo], damage: str | None,
                 fh: BinaryIO | None = None, memory: list[tuple[int, bytes]] | None = None,
                 budget: fmt.Budget | None = None) -> None:
        self.path, self.header, self.damage = path, header, damage
        self._fh, self._memory = fh, memory
        self._budget = budget  # every block body decompressed through this reader is charged to it
        self.entry_blocks = [b for b in blocks if b.kind == fmt.KIND_ENTRIES]
        self.snapshot_blocks = [b for b in blocks if b.kind == fmt.KIND_SNAPSHOT]
        self._lasts = [b.last for b in self.entry_blocks]
        self._snap_offsets = [b.first for b in self.snapshot_blocks]
        self.snapshot_problem: str | None = None  # why state_at could not use a snapshot (last time)

    @property
    def last_offset(self) -> int:
        """The last offset of the (intact, as far as headers tell) log; 0 for an empty one."""
        return self.entry_blocks[-1].last if self.entry_blocks else 0

    @property
    def count(self) -> int:
        return sum(b.count for b in self.entry_blocks)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ blocks

    def _body(self, nav: fmt.BlockInfo) -> bytes:
        """The raw body of the block an index row or a scan found (its header read again and checked)."""
        if self._fh is None:
            raise LogFileError(f"{self.path}: the reader is closed")
        size = os.fstat(self._fh.fileno()).st_size
        self._fh.seek(nav.pos)
        info = fmt.parse_block_head(self._fh.read(fmt.BLOCK_HEAD), nav.pos, size)
        if (info.kind, info.first, info.last, info.count) != (nav.kind, nav.first, nav.last, nav.count):
            raise fmt.BlockError(f"{info.describe()} differs from what the index says of it")
        try:
            return fmt.check_body(info, self._fh.read(info.stored), budget=self._budget)
        except fmt.BudgetError as exc:
            raise LogFileError(f"{self.path}: {exc}") from None

    def _entries(self, nav: fmt.BlockInfo) -> list[tuple[int, bytes]]:
        if self._memory is not None:
            return self._memory
        raw = self._body(nav)
        return fmt.parse_entries(nav, raw)

    def entries_from(self, offset: int) -> Iterator[tuple[int, bytes]]:
        """(offset, payload) of every record at or after `offset`, in log order; stops at a damaged block
        (and sets `damage`)."""
        start = bisect.bisect_left(self._lasts, offset)
        for nav in self.entry_blocks[start:]:
            try:
                entries = self._entries(nav)
            except fmt.BlockError as exc:
                self.damage = self.damage or str(exc)
                return
            for pair in entries:
                if pair[0] >= offset:
                    yield pair

    def nearest_snapshot(self, offset: int) -> tuple[int, bytes] | None:
        """The last snapshot taken at or before `offset`, as (its offset, encode_state bytes); a damaged
        snapshot is skipped for the one before it. None: no snapshot that early."""
        i = bisect.bisect_right(self._snap_offsets, offset)
        while i > 0:
            i -= 1
            nav = self.snapshot_blocks[i]
            try:
                return nav.first, self._body(nav)
            except fmt.BlockError as exc:
                self.snapshot_problem = str(exc)
        return None

    def state_at(self, offset: int) -> ClusterState:
        """The fold of every record up to `offset` included: the nearest snapshot, then the tail. A snapshot
        this dralab cannot use (written by a version whose state has another shape) is passed over and the
        log is folded from its start. `state.offset` is below `offset` when the log ends (or is damaged)
        before it."""
        state = None
        snap = self.nearest_snapshot(offset)
        # decoding and the fold make objects that live on, no garbage cycles: the collector's passes would
        # cost 40% of the fold and triple the decoding (replay/logs/gc_policy.py)
        with collector_paused():
            if snap is not None:
                try:
                    state = decode_state(snap[1], max_bytes=fmt.MAX_SNAPSHOT)
                except SnapshotError as exc:
                    self.snapshot_problem = f"snapshot at offset {snap[0]}: {exc}"
            if state is None:
                state = ClusterState()
            for at, payload in self.entries_from(state.offset + 1):
                if at > offset:
                    break
                state.apply(at, decode_record(payload, at))
        return state

    def offset_at_time(self, t_ms: int) -> int | None:
        """The offset of the last record (in log order) with `t <= t_ms`; None if every record is later.
        Only the last block whose earliest record is at or before `t_ms` is read."""
        for nav in reversed(self.entry_blocks):
            if nav.tmin <= t_ms:
                try:
                    entries = self._entries(nav)
                except fmt.BlockError as exc:
                    raise LogFileError(f"{self.path}: {exc}") from None
                for at, payload in reversed(entries):
                    if record_time(payload, t_ms + 1) <= t_ms:
                        return at
        return None


def open_log(path: str | os.PathLike[str]) -> LogReader:
    """Open a log file for random access; LogFileError for what is not a readable dralog."""
    fh = open_file(path)  # the reader holds it, closed by LogReader.close
    try:
        header, start, form = read_head(fh, str(path))
        if form == 1:
            fh.close()
            return _from_v1(path)
        size = os.fstat(fh.fileno()).st_size
        budget = fmt.Budget(size)
        try:
            found = _from_footer(fh, size, start, budget)
        except fmt.BudgetError as exc:
            raise LogFileError(f"{path}: {exc}") from None
        blocks, damage = found if found is not None else fmt.scan(fh, size, start)
        return LogReader(str(path), header, blocks, damage, fh=fh, budget=budget)
    except BaseException:
        if not fh.closed:
            fh.close()
        raise


def _from_footer(fh: BinaryIO, size: int, start: int,
                 budget: fmt.Budget) -> tuple[list[fmt.BlockInfo], None] | None:
    """The blocks the index lists, when the footer and the index are sound; None sends the caller to a scan."""
    if size < start + fmt.BLOCK_HEAD + fmt.FOOTER.size:
        return None
    fh.seek(size - fmt.FOOTER.size)
    index_pos = fmt.parse_footer(fh.read(fmt.FOOTER.size))
    if index_pos is None or index_pos < start:
        return None
    fh.seek(index_pos)
    try:
        info = fmt.parse_block_head(fh.read(fmt.BLOCK_HEAD), index_pos, size)
        if info.kind != fmt.KIND_INDEX or info.end != size - fmt.FOOTER.size:
            return None
        rows = fmt.parse_index(fmt.check_body(info, fh.read(info.stored), budget=budget))
    except fmt.BlockError:
        return None
    blocks = [fmt.BlockInfo(pos, kind, -1, first, last, count, 0, 0, tmin, tmax, 0)
              for pos, kind, first, last, count, tmin, tmax in rows]
    if len(blocks) != info.count or any(b.kind == fmt.KIND_INDEX or not start <= b.pos < index_pos for b in blocks):
        return None
    ordered = all(a.pos < b.pos for a, b in pairwise(blocks)) and all(
        a.last <= b.first for kind in (fmt.KIND_ENTRIES, fmt.KIND_SNAPSHOT)
        for a, b in pairwise(x for x in blocks if x.kind == kind))
    if not ordered:
        return None  # positions and offsets must grow (bisect relies on it): an index not to be trusted
    return blocks, None


def _from_v1(path: str | os.PathLike[str]) -> LogReader:
    log = read_log(path)
    entries = log.entries
    blocks = []
    if entries:
        times = [record_time(p) for _, p in entries]
        blocks.append(fmt.BlockInfo(-1, fmt.KIND_ENTRIES, -1, entries[0][0], entries[-1][0], len(entries), 0, 0,
                                    min(times), max(times), 0))
    return LogReader(str(path), log.header, blocks, log.damage, memory=entries)

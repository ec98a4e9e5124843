"""Where a live run's records go as the driver records them: the `.dralog` of `dralab run --log FILE`.

Why as they are recorded, not at the end: a run that fails (an exception, a timeout, Ctrl-C, a bus lost
for good) used to lose its whole log, written only when the run returned normally. The driver hands each
record it folds to a ``RecordSink``; the sink writes it to the file at once (a block at a time), flushes
every ``flush_every_s`` so a reader of ``FILE.part`` (or a crash) sees all but the last second, and is
closed on every ending, so the file is a valid, closed `.dralog` up to the last record held
(``kept()`` says up to which offset). The writer is whatever ``open_writer`` the caller hands in (the CLI
passes replay/logs/logfile.py's LogWriter: actors/ never imports replay/), the same protocol
`dralab record`'s recorder writes to (actors/recorder.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .recorder import Writer

__all__ = ["RecordSink", "SinkError"]


class SinkError(Exception):
    """The log file could not be opened or written; the message names the file."""


class RecordSink:
    """A run's log file, opened before the run starts, written record by record, closed once."""

    def __init__(self, open_writer: Callable[[], Writer], path: str, flush_every_s: float = 1.0) -> None:
        self.path, self.flush_every_s = path, flush_every_s
        self._open_writer = open_writer
        self._writer: Writer | None = None
        self._closed = False
        self._next_flush = 0.0
        self.records = 0
        self.last_offset = 0
        self.error: str | None = None  # why writing stopped (a full disk, say); what was written stays
        self.aborted = False  # closed with nothing recorded: no file made

    @property
    def opened(self) -> bool:
        return self._writer is not None

    def open(self) -> None:
        """Create the file (``FILE.part`` until closed); ``SinkError`` if it cannot be."""
        try:
            self._writer = self._open_writer()
        except OSError as exc:
            raise SinkError(self._cannot("cannot write", exc)) from None
        except Exception as exc:  # the writer's own refusal (a path that became a link, say) names the path
            raise SinkError(str(exc)) from None
        self._next_flush = time.monotonic() + self.flush_every_s

    def write(self, offset: int, payload: bytes) -> None:
        """One record, in offset order. A write that fails stops the run (``SinkError``): a run whose
        log cannot be kept is not worth going on with, and what was written before is kept."""
        if self._writer is None or self._closed:
            return
        try:
            self._writer.write(offset, payload)
        except OSError as exc:
            self.error = self._cannot("cannot write", exc)
            raise SinkError(self.error) from None
        self.records += 1
        self.last_offset = offset

    def maybe_flush(self) -> None:
        """Hand what was written to the OS if ``flush_every_s`` has passed (a block per flush, so not
        more often: a ten-minute run at one flush a second is 600 small blocks at most)."""
        if self._writer is None or self._closed or time.monotonic() < self._next_flush:
            return
        self._next_flush = time.monotonic() + self.flush_every_s
        flush = getattr(self._writer, "flush", None)
        if callable(flush):
            try:
                flush()
            except OSError as exc:
                self.error = f"--log: {self.path}: cannot write: {exc.strerror or exc}"
                raise SinkError(self.error) from None

    def close(self) -> None:
        """Close the file (it gets its index and its final name); safe to call more than once. A run
        that recorded nothing (it failed before its first record) leaves no file: the target stays as
        it was (where the writer can ``abort``). Never raises: a failure is kept in ``error`` and said by
        whoever reports the run's end."""
        if self._writer is None or self._closed:
            return
        self._closed = True
        abort = getattr(self._writer, "abort", None)
        try:
            if self.records == 0 and callable(abort):
                abort()
                self.aborted = True
            else:
                self._writer.close()
        except OSError as exc:
            self.error = self._cannot("cannot finish the file", exc)
        except Exception as exc:  # the writer's own refusal (the target became a link meanwhile, say)
            self.error = str(exc)

    def _cannot(self, what: str, exc: OSError) -> str:
        return f"--log: {self.path}: {what}: {exc.strerror or exc}"

    def kept(self) -> str:
        """What a failed run left, for its message."""
        if self._writer is None or self.aborted:
            return f"no log was written to {self.path} (nothing was recorded)"
        if self.error and not self._closed:
            return f"{self.error}; records up to offset {self.last_offset} were written"
        if self.error:
            return f"{self.error}; log up to offset {self.last_offset} may be incomplete"
        return f"log kept up to offset {self.last_offset} in {self.path}"

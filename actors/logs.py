"""structlog set-up: readable console lines by default, one JSON object per line with --log-format json.

Logs always go to stderr, so `-o json` leaves stdout to the one summary object. A process may show a
status line at the bottom of a terminal (``show_status``: the progress of `dralab run`, overwritten in
place with ``\\r``); a log line printed meanwhile clears it, prints itself, and draws it again.
Context bound with ``structlog.contextvars`` (the reactor actors bind ``actor``) is in every line.
While Ray is up in `dralab run`, ``stdout_to_stderr`` sends whatever Ray prints on the driver to stderr.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import structlog

_lock = threading.Lock()
_status = ""  # the status line shown on the terminal, "" if none
_CLEAR = "\r\x1b[K"


class StderrLogger:
    """structlog's PrintLogger, on whatever sys.stderr is at each call, aware of the status line."""

    def msg(self, message: str, *_: Any, **__: Any) -> None:
        with _lock:
            out = sys.stderr
            out.write(f"{_CLEAR if _status else ''}{message}\n{_status}")
            out.flush()

    log = debug = info = warn = warning = err = error = critical = exception = failure = fatal = msg


def _logger_factory(*_: Any) -> StderrLogger:
    return StderrLogger()


def show_status(text: str) -> None:
    """Show ``text`` as the terminal's status line, replacing the previous one (stderr, no newline)."""
    global _status
    with _lock:
        _status = text
        sys.stderr.write(f"{_CLEAR}{text}")
        sys.stderr.flush()


def clear_status(keep: bool = True) -> None:
    """End the status line: leave it on screen (``keep``: a newline after it) or erase it."""
    global _status
    with _lock:
        if _status:
            sys.stderr.write("\n" if keep else _CLEAR)
            sys.stderr.flush()
        _status = ""


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything written to stdout to stderr meanwhile: Python's ``sys.stdout`` (Ray's driver prints
    actors' lines and ``(raylet) A worker died ...`` there, looked up at each print) and file descriptor 1
    (native code, child processes started meanwhile). stdout then holds only what the command prints
    after, its summary: ``dralab run -o json | jq`` gets one object."""
    sys.stdout.flush()
    try:
        saved: int | None = os.dup(1)
    except OSError:  # no descriptor 1 at all: nothing to protect at that level
        saved = None
    if saved is not None:
        os.dup2(2, 1)
    python_stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = python_stdout
        if saved is not None:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 1)
            os.close(saved)


def configure(fmt: str = "console", level: str = "info") -> None:
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=_logger_factory,
        cache_logger_on_first_use=False,
    )
    # The CEL library logs a warning whenever a Python function it calls raises (a bad quantity()
    # in a selector, say); dralab reports those itself, as SelectorErrors naming the selector.
    logging.getLogger("cel").setLevel(logging.ERROR)

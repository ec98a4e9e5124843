"""structlog set-up: readable console lines by default, one JSON object per line with --log-format json.

Logs always go to stderr, so `-o json` leaves stdout to the one summary object.
"""

from __future__ import annotations

import logging
import sys

import structlog


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
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    # The CEL library logs a warning whenever a Python function it calls raises (a bad quantity()
    # in a selector, say); dralab reports those itself, as SelectorErrors naming the selector.
    logging.getLogger("cel").setLevel(logging.ERROR)

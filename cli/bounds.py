"""Checks of option values that need no file and no service: seeds and Redis URLs.

They run while the options are read, before any work starts, so a value no run could use is refused
with exit 2 and the option named (a 27-digit seed used to reach msgspec and fail with an OverflowError
traceback after the simulation; a malformed Redis URL was exit 3, "unreachable", from `run`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import cast
from urllib.parse import unquote, urlsplit

from dralab.core.kube.limits import seed_error

from .inputs import InputError

__all__ = ["check_redis_url", "seed_arg"]


def seed_arg(text: str) -> int:
    """An argparse ``type`` for a seed: a whole number from 0 to 2^63-1 (argparse says which option)."""
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    error = seed_error(seed)
    if error is not None:
        raise argparse.ArgumentTypeError(error)
    return seed


def check_redis_url(url: str | None, option: str = "--redis") -> None:
    """Refuse a Redis URL redis-py cannot use (scheme, port, database) without connecting; a well-formed
    URL that cannot be reached is found later and exits 3. The message never shows a password."""
    from redis import connection

    from dralab.actors.redis_bus import redact_url

    if not url:
        return
    try:
        cast(Callable[[str], object], connection.parse_url)(url)  # redis-py's own reading, untyped
        path = urlsplit(url)
        if path.scheme in ("redis", "rediss") and path.path not in ("", "/"):
            db = unquote(path.path).lstrip("/")
            if not db.isdigit():  # redis-py ignores such a path and uses database 0
                raise ValueError(f"the database after the host must be a number, got {db!r}")
    except ValueError as exc:
        raise InputError(f"{option}: bad Redis URL {redact_url(url)}: {exc}") from None

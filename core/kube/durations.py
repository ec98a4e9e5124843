"""Durations in whole milliseconds, written as Go's ``time.ParseDuration`` reads them or as seconds.

Accepted: ``"30s"``, ``"10m"``, ``"1h30m"``, ``"500ms"``, ``"1.5h"``, ``"0"``, units ``ns us µs ms s m h``
(as Go), and a plain number of seconds (``30``, ``0.25``, ``"90"``). Refused with :class:`DurationError`:
negative values, garbage, values that are not a whole number of milliseconds (dralab's time resolution,
e.g. ``"2000us"`` is fine but ``"1500us"`` is not), and values beyond Go's limit (2^63-1 ns, about 292 years).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = ["DurationError", "MAX_DURATION_MS", "format_duration", "parse_duration"]

# Go durations are int64 nanoseconds.
MAX_DURATION_MS = ((1 << 63) - 1) // 1_000_000
_MAX_LENGTH = 128

# Unit -> length in nanoseconds.
_UNITS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # µs, MICRO SIGN
    "\u03bcs": 1_000,  # μs, GREEK SMALL LETTER MU
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_TERM_RE = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_BAD_UNIT_RE = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)([^0-9.]*)$")
_SECONDS_RE = re.compile(r"[+]?([0-9]*)(?:\.([0-9]*))?")
_HINT = "expected a number of seconds or a Go duration such as `30s`, `10m`, `1h30m`, `500ms`"


class DurationError(ValueError):
    """A value that is not a dralab duration. ``text`` is the offending input, ``reason`` why."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"invalid duration `{text}`: {reason}")
        self.text = text
        self.reason = reason


def parse_duration(value: str | int | float) -> int:
    """Return ``value`` in whole milliseconds (see the module doc for the accepted forms)."""
    if isinstance(value, bool):
        raise DurationError(str(value).lower(), f"{_HINT}, got bool")
    if isinstance(value, int):
        return _check(str(value), Fraction(value) * 1000)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise DurationError(repr(value), "not a finite number")
        return _check(repr(value), Fraction(repr(value)) * 1000)
    if not isinstance(value, str):
        kind = "null" if value is None else type(value).__name__
        raise DurationError(repr(value), f"{_HINT}, got {kind}")
    text = value
    if len(text) > _MAX_LENGTH:
        raise DurationError(text[:40] + "...", f"longer than {_MAX_LENGTH} characters")
    if text.startswith("-"):
        raise DurationError(text, "must not be negative")
    seconds = _SECONDS_RE.fullmatch(text)
    if seconds is not None and (seconds.group(1) or seconds.group(2)):
        return _check(text, _decimal(seconds.group(1), seconds.group(2)) * 1000)
    return _check(text, _parse_go(text) / 1_000_000)


def _decimal(int_part: str | None, frac_part: str | None) -> Fraction:
    digits = (int_part or "") + (frac_part or "")
    return Fraction(int(digits or "0"), 10 ** len(frac_part or ""))


def _parse_go(text: str) -> Fraction:
    """Go's time.ParseDuration on a non-negative string; the result in nanoseconds."""
    rest = text[1:] if text.startswith("+") else text
    if rest == "0":
        return Fraction(0)
    if not rest:
        raise DurationError(text, _HINT)
    total = Fraction(0)
    pos = 0
    while pos < len(rest):
        m = _TERM_RE.match(rest, pos)
        if m is None or not (m.group(1) or m.group(2)):
            bad = _BAD_UNIT_RE.match(rest, pos)
            if bad is not None and bad.group(1):
                unit = bad.group(2)
                reason = f"unknown unit `{unit}`" if unit else "missing unit"
                raise DurationError(text, f"{reason}; {_HINT}")
            raise DurationError(text, _HINT)
        total += _decimal(m.group(1), m.group(2)) * _UNITS[m.group(3)]
        pos = m.end()
    return total


def _check(text: str, ms: Fraction) -> int:
    if ms < 0:
        raise DurationError(text, "must not be negative")
    if ms.denominator != 1:
        raise DurationError(text, "not a whole number of milliseconds (dralab's time resolution)")
    if ms > MAX_DURATION_MS:
        raise DurationError(text, "too long (the limit is 2^63-1 nanoseconds, about 292 years)")
    return int(ms)


def format_duration(ms: int) -> str:
    """Format whole milliseconds as Go's ``Duration.String`` does: ``1h30m0s``, ``1.5s``, ``500ms``."""
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{sign}{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    text = f"{seconds}.{millis:03d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    if minutes:
        return f"{sign}{minutes}m{text}"
    return sign + text

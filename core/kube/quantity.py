"""Kubernetes resource quantities, parsed as ``k8s.io/apimachinery/pkg/api/resource`` does.

Grammar (upstream)::

    <quantity>        ::= <signedNumber><suffix>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <signedNumber>    ::= <number> | <sign><number>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>

Values are exact (``fractions.Fraction``). As upstream, a value finer than 1n is rounded away from zero
to the next nano (``0.9n`` -> ``1n``) and a binary-suffixed value is capped, silently, at 2^63-1 in
magnitude (``8Ei`` -> 2^63-1).

Deliberate differences, all of which only refuse input upstream would read:

* a number without any digit (``Gi``, ``.``, ``-``, ``m``) is refused; upstream reads it as 0;
* text longer than 256 characters and decimal exponents beyond +-1000 are refused (upstream accepts
  them; no resource amount is that large or that precise, and refusing bounds the work).

The scheduler compares cpu in milli-units (``MilliValue``) and every other resource in whole units
(``Value``); both round up, away from zero. :func:`resource_amount` applies that rule.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

__all__ = [
    "MAX_INT64",
    "QuantityError",
    "parse_quantity",
    "resource_amount",
    "to_int",
    "to_milli",
]

MAX_INT64 = (1 << 63) - 1
MAX_QUANTITY_LENGTH = 256
MAX_EXPONENT = 1000

# Upstream's error texts (ErrFormatWrong, ErrNumeric, ErrSuffix).
_SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT_WRONG = f"quantities must match the regular expression '{_SPLIT_RE}'"
ERR_SUFFIX = "unable to parse quantity's suffix"

_NANO = Fraction(1, 10**9)

_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}

# The same scan as upstream's parseQuantityString: sign, digits, optional fraction, then a run of
# suffix letters, an optional sign and digits up to the end. Only ASCII digits (no re.ASCII-less \d).
_QUANTITY_RE = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?(?P<suffix>[eEinumkKMGTP]*[+-]?[0-9]*)"
)
_EXPONENT_RE = re.compile(r"[eE](?P<exp>[+-]?[0-9]+)")


class QuantityError(ValueError):
    """A text that is not a Kubernetes quantity. ``text`` is the offending input, ``reason`` why."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"invalid quantity `{text}`: {reason}")
        self.text = text
        self.reason = reason


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity (``"100m"``, ``"1Gi"``, ``"1e3"``, ``8``, ``0.5``) into its exact value.

    A YAML/JSON number is read as upstream's ``UnmarshalJSON`` reads it: its decimal text is parsed.
    """
    if isinstance(value, bool):
        raise QuantityError(str(value).lower(), "expected a string or a number, got bool")
    if isinstance(value, int):
        return _parse_text(str(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(repr(value), "not a finite number")
        return _parse_text(repr(value))
    if isinstance(value, str):
        return _parse_text(value)
    raise QuantityError(repr(value), f"expected a string or a number, got {type(value).__name__}")


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    if not text:
        raise QuantityError(text, ERR_FORMAT_WRONG)
    if len(text) > MAX_QUANTITY_LENGTH:
        raise QuantityError(text[:40] + "...", f"longer than {MAX_QUANTITY_LENGTH} characters")
    m = _QUANTITY_RE.fullmatch(text)
    if m is None:
        raise QuantityError(text, ERR_FORMAT_WRONG)
    int_part = m.group("int")
    frac_part = m.group("frac") or ""
    suffix = m.group("suffix")
    if not int_part and not frac_part:
        raise QuantityError(text, "the number has no digits")

    binary = False
    if suffix in _DECIMAL_SUFFIXES:
        exponent = _DECIMAL_SUFFIXES[suffix]
    elif suffix in _BINARY_SUFFIXES:
        exponent = _BINARY_SUFFIXES[suffix]
        binary = True
    else:
        e = _EXPONENT_RE.fullmatch(suffix)
        if e is None:
            raise QuantityError(text, ERR_SUFFIX)
        exponent = int(e.group("exp"))
        if abs(exponent) > MAX_EXPONENT:
            raise QuantityError(text, f"exponent out of range (at most +-{MAX_EXPONENT})")

    mantissa = Fraction(int((int_part or "0") + frac_part), 10 ** len(frac_part))
    amount = mantissa * (2**exponent) if binary else mantissa * Fraction(10) ** exponent

    # Round a finer-than-nano value away from zero to the next nano, as upstream does.
    if amount.denominator != 1 and (amount / _NANO).denominator != 1:
        amount = math.ceil(amount / _NANO) * _NANO
    if binary and amount > MAX_INT64:
        amount = Fraction(MAX_INT64)
    return -amount if m.group("sign") == "-" else amount


def _round_away(value: Fraction) -> int:
    return math.ceil(value) if value >= 0 else math.floor(value)


def to_milli(q: Fraction) -> int:
    """Upstream ``MilliValue()``: ``q`` in thousandths, rounded up (away from zero)."""
    return _round_away(q * 1000)


def to_int(q: Fraction) -> int:
    """Upstream ``Value()``: ``q`` in whole units, rounded up (away from zero)."""
    return _round_away(q)


def resource_amount(name: str, quantity: str | int | float | Fraction) -> int:
    """The amount the scheduler compares: milli-cpu for ``cpu``, whole units for everything else
    (memory and storage in bytes, ``pods``, extended resources such as ``nvidia.com/gpu``)."""
    q = quantity if isinstance(quantity, Fraction) else parse_quantity(quantity)
    return to_milli(q) if name == "cpu" else to_int(q)


# The other way: an exact value as a canonical quantity string (for results and messages).

_DECIMAL = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"), (0, ""), (-3, "m"), (-6, "u"), (-9, "n"))
_BINARY = ((60, "Ei"), (50, "Pi"), (40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki"))


def _decimal(value: Fraction) -> str:
    if value == 0:
        return "0"
    for exp, suffix in _DECIMAL:
        mantissa = value / Fraction(10) ** exp
        if mantissa.denominator == 1:
            return f"{mantissa.numerator}{suffix}"
    return f"{round(value * 10**9)}n"


def format_quantity(value: Fraction) -> str:
    """A canonical quantity string. The model keeps exact values, not the format they were written in,
    so the shorter of the decimal-SI and binary-SI canonical forms is used ("40Gi", "10G", "4")."""
    decimal = _decimal(value)
    if value.denominator != 1 or abs(value) < 1024:
        return decimal
    for exp, suffix in _BINARY:
        mantissa = value / 2**exp
        if mantissa.denominator == 1:
            binary = f"{mantissa.numerator}{suffix}"
            return binary if len(binary) <= len(decimal) else decimal
    return decimal

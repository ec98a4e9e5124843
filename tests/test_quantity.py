"""Quantities as k8s.io/apimachinery/pkg/api/resource parses them, and the scheduler's units."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dralab.core.kube.quantity import (
    ERR_FORMAT_WRONG,
    ERR_SUFFIX,
    MAX_INT64,
    QuantityError,
    parse_quantity,
    resource_amount,
    to_int,
    to_milli,
)

F = Fraction
KI, MI, GI, TI, PI, EI = (1 << 10), (1 << 20), (1 << 30), (1 << 40), (1 << 50), (1 << 60)
NANO = F(1, 10**9)

# (text, exact value) from upstream's TestQuantityParse and the brief.
VALID = [
    ("0", F(0)),
    ("0n", F(0)),
    ("0m", F(0)),
    ("0Ki", F(0)),
    ("0T", F(0)),
    ("-0", F(0)),
    ("1", F(1)),
    ("100m", F(1, 10)),
    ("1Ki", F(KI)),
    ("8Ki", F(8 * KI)),
    ("7Mi", F(7 * MI)),
    ("1Gi", F(GI)),
    ("6Gi", F(6 * GI)),
    ("5Ti", F(5 * TI)),
    ("4Pi", F(4 * PI)),
    ("3Ei", F(3 * EI)),
    ("100Ti", F(100 * TI)),
    ("5n", F(5, 10**9)),
    ("4u", F(4, 10**6)),
    ("3m", F(3, 1000)),
    ("8k", F(8000)),
    ("50k", F(50000)),
    ("7M", F(7 * 10**6)),
    ("6G", F(6 * 10**9)),
    ("5T", F(5 * 10**12)),
    ("2P", F(2 * 10**15)),
    ("1E", F(10**18)),
    ("12E", F(12 * 10**18)),
    ("1E-3", F(1, 1000)),
    ("1e3", F(1000)),
    ("1E3", F(1000)),
    ("1e+3", F(1000)),
    ("1E6", F(10**6)),
    ("1e18", F(10**18)),
    ("100.035k", F(100035)),
    ("0.001", F(1, 1000)),
    ("0.0005k", F(1, 2)),
    ("0.5", F(1, 2)),
    ("0.50000", F(1, 2)),
    ("0.5e0", F(1, 2)),
    ("0.5e-2", F(5, 1000)),
    ("10.035M", F(10035000)),
    ("1.2e3", F(1200)),
    ("1.3E+6", F(1300000)),
    ("1.53E12", F(153 * 10**10)),
    ("9.01", F(901, 100)),
    ("6.987654321G", F(6987654321)),
    ("1.01E", F(101 * 10**16)),
    ("1.5Gi", F(3 * GI, 2)),
    ("100.035Ki", F(10243584, 100)),
    ("0.5Mi", F(MI // 2)),
    ("0.05Gi", F(536870912, 10)),
    ("0.025Ti", F(274877906944, 10)),
    ("-1", F(-1)),
    ("-100m", F(-1, 10)),
    ("+1Gi", F(GI)),
    (".001", F(1, 1000)),
    (".0001k", F(1, 10)),
    ("1.", F(1)),
    ("1.G", F(10**9)),
    ("007", F(7)),
    # Finer than a nano: rounded away from zero to the next nano, as upstream.
    ("3.001n", 4 * NANO),
    ("1.1E-9", 2 * NANO),
    ("0.0000000001", NANO),
    ("0.5e-9", NANO),
    ("0.9n", NANO),
    ("0.00000012345", 124 * NANO),
    ("0.000000000001Ki", 2 * NANO),
    ("-0.9n", -NANO),
    # Binary values are capped at 2^63-1, silently, as upstream.
    ("9Ei", F(MAX_INT64)),
    ("8Ei", F(MAX_INT64)),
    ("9223372036854775807Ki", F(MAX_INT64)),
    ("-9Ei", F(-MAX_INT64)),
    # Decimal values are not capped.
    ("18446744073709551616", F(1 << 64)),
]


@pytest.mark.parametrize(("text", "value"), VALID)
def test_valid_quantities(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


# (text, reason) for refused texts: upstream's invalid list, and a number without digits.
INVALID = [
    ("", ERR_FORMAT_WRONG),
    ("1.5.5", ERR_FORMAT_WRONG),
    ("1.1.M", ERR_FORMAT_WRONG),
    ("1+1.0M", ERR_FORMAT_WRONG),
    ("0.1am", ERR_FORMAT_WRONG),
    ("aoeu", ERR_FORMAT_WRONG),
    (" 1", ERR_FORMAT_WRONG),
    ("1 ", ERR_FORMAT_WRONG),
    ("1e3.5", ERR_FORMAT_WRONG),
    ("\u0661", ERR_FORMAT_WRONG),  # ARABIC-INDIC DIGIT ONE: only ASCII digits
    ("0.1mi", ERR_SUFFIX),
    (".5i", ERR_SUFFIX),
    ("1i", ERR_SUFFIX),
    ("-3.01i", ERR_SUFFIX),
    ("-3.01e-", ERR_SUFFIX),
    ("1e", ERR_SUFFIX),
    ("1Ki3", ERR_SUFFIX),
    ("1m-3", ERR_SUFFIX),
    ("1KiB", ERR_FORMAT_WRONG),
    ("1gi", ERR_FORMAT_WRONG),  # `g` is no suffix letter
    # Upstream reads these as 0; dralab refuses them.
    ("Gi", "the number has no digits"),
    (".", "the number has no digits"),
    ("-", "the number has no digits"),
    ("+m", "the number has no digits"),
    ("e3", "the number has no digits"),
    ("1e1001", "exponent out of range (at most +-1000)"),
]


@pytest.mark.parametrize(("text", "reason"), INVALID)
def test_invalid_quantities(text: str, reason: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert info.value.text == text
    assert info.value.reason == reason
    assert str(info.value) == f"invalid quantity `{text}`: {reason}"


def test_too_long_text_is_refused() -> None:
    with pytest.raises(QuantityError, match="longer than 256 characters"):
        parse_quantity("1" * 257)


def test_numbers_parse_as_their_decimal_text() -> None:
    assert parse_quantity(8) == 8
    assert parse_quantity(-3) == -3
    assert parse_quantity(0.5) == F(1, 2)
    assert parse_quantity(0.1) == F(1, 10)
    assert parse_quantity(1e-05) == F(1, 100000)
    assert parse_quantity(2.5e20) == F(25 * 10**19)


@pytest.mark.parametrize("bad", [True, None, float("nan"), float("inf"), [1], {"a": 1}])
def test_non_quantities_are_refused(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(cast(Any, bad))


@pytest.mark.parametrize(
    ("text", "milli", "units"),
    [
        ("100m", 100, 1),
        ("1", 1000, 1),
        ("1.5", 1500, 2),
        ("0.0001", 1, 1),
        ("1n", 1, 1),
        ("0", 0, 0),
        ("2Ki", 2048000, 2048),
        ("-1.5", -1500, -2),  # away from zero, as upstream's int64 path
        ("-0.0001", -1, -1),
    ],
)
def test_milli_and_whole_units_round_up(text: str, milli: int, units: int) -> None:
    q = parse_quantity(text)
    assert to_milli(q) == milli
    assert to_int(q) == units


def test_resource_amount_units() -> None:
    assert resource_amount("cpu", "100m") == 100
    assert resource_amount("cpu", "2") == 2000
    assert resource_amount("cpu", 0.5) == 500
    assert resource_amount("memory", "1Gi") == GI
    assert resource_amount("memory", "1.5Gi") == 3 * GI // 2
    assert resource_amount("memory", "100m") == 1  # 0.1 byte rounds up
    assert resource_amount("pods", "110") == 110
    assert resource_amount("nvidia.com/gpu", "8") == 8
    assert resource_amount("nvidia.com/gpu", 2) == 2
    assert resource_amount("ephemeral-storage", "10G") == 10 * 10**9
    assert resource_amount("cpu", F(1, 3)) == 334


DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


@given(st.integers(min_value=-(10**15), max_value=10**15), st.sampled_from(sorted(DECIMAL)))
def test_integer_with_decimal_suffix(n: int, suffix: str) -> None:
    assert parse_quantity(f"{n}{suffix}") == n * F(10) ** DECIMAL[suffix]


@given(st.integers(min_value=-(1 << 50), max_value=1 << 50), st.sampled_from(sorted(BINARY)))
def test_integer_with_binary_suffix(n: int, suffix: str) -> None:
    value = n * (1 << BINARY[suffix])
    capped = max(-MAX_INT64, min(MAX_INT64, value))
    assert parse_quantity(f"{n}{suffix}") == capped


@given(st.integers(min_value=-(10**12), max_value=10**12), st.integers(min_value=-30, max_value=30))
def test_integer_with_exponent(n: int, exp: int) -> None:
    for e in ("e", "E"):
        value = n * F(10) ** exp
        if value.denominator != 1 and (value / NANO).denominator != 1:
            continue  # finer than a nano: rounded, covered above
        assert parse_quantity(f"{n}{e}{exp}") == value


@given(st.integers(min_value=0, max_value=10**12), st.integers(min_value=0, max_value=999_999))
def test_decimal_fraction_round_trip(whole: int, frac: int) -> None:
    text = f"{whole}.{frac:06d}"
    assert parse_quantity(text) == whole + F(frac, 10**6)
    assert to_milli(parse_quantity(text)) == -((-(whole * 10**6 + frac)) // 1000)


@given(st.integers(min_value=0, max_value=MAX_INT64 // 1000))
def test_milli_round_trip(milli: int) -> None:
    assert resource_amount("cpu", f"{milli}m") == milli
    assert resource_amount("cpu", milli) == milli * 1000

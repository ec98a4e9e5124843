"""The Kubernetes CEL libraries DRA selectors use, as Python functions for the cel-rust runtime.

cel-rust cannot carry custom Python types, so Quantity and Semver values travel as one-entry maps:

* a Quantity is ``{"@quantity": "<n>/<d>"}``, its exact value as a reduced fraction (``"1073741824"``,
  ``"1/2"``): two quantities are ``==`` exactly when their values are equal, as upstream;
* a Semver is ``{"@semver": "<major>.<minor>.<patch>[-<prerelease>]"}`` without build metadata: two
  versions are ``==`` exactly when they have the same precedence, as upstream (blang ``EQ``).

Maps are not ordered and cannot be added, so ``<`` or ``+`` on these values is a runtime "no such
overload", as upstream (where it is a compile error when the checker can see the types).

Every function checks its arguments and raises ``TypeError("no such overload")`` on a mismatch, like
cel-go's ``MaybeNoSuchOverloadErr``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from ..kube.quantity import MAX_INT64, QuantityError, parse_quantity
from . import semver as semverlib
from .cel_regex import Regexes

__all__ = ["QUANTITY_KEY", "SEMVER_KEY", "Library", "encode_quantity", "encode_semver", "type_name"]

QUANTITY_KEY = "@quantity"
SEMVER_KEY = "@semver"
_MIN_INT64 = -(1 << 63)

CelFunction = Callable[..., Any]


def encode_quantity(value: Fraction) -> dict[str, str]:
    return {QUANTITY_KEY: str(value)}


def encode_semver(value: semverlib.Semver) -> dict[str, str]:
    return {SEMVER_KEY: value.canonical()}


def _overload_error(function: str, *args: Any) -> TypeError:
    kinds = ", ".join(type_name(a) for a in args)
    return TypeError(f"no such overload: {function}({kinds})")


def type_name(value: Any) -> str:
    """The CEL type name of a value as cel-rust hands it to Python (Quantity and Semver decoded)."""
    if isinstance(value, dict) and len(value) == 1:
        if QUANTITY_KEY in value:
            return "Quantity"
        if SEMVER_KEY in value:
            return "Semver"
    if isinstance(value, bool):
        return "bool"
    return {int: "int", float: "double", str: "string", bytes: "bytes", list: "list", dict: "map",
            type(None): "null_type"}.get(type(value), type(value).__name__)


class Library:
    """The functions, bound to caches of decoded values (per matcher, so nothing is global)."""

    def __init__(self) -> None:
        self._fractions: dict[str, Fraction] = {}
        self._versions: dict[str, semverlib.Semver] = {}
        self._regexes = Regexes()

    # -- decoding ----------------------------------------------------------------------------------

    def _quantity(self, value: Any) -> Fraction | None:
        if type(value) is dict and len(value) == 1:
            text = value.get(QUANTITY_KEY)
            if type(text) is str:
                q = self._fractions.get(text)
                if q is None:
                    q = self._fractions[text] = Fraction(text)
                return q
        return None

    def _semver(self, value: Any) -> semverlib.Semver | None:
        if type(value) is dict and len(value) == 1:
            text = value.get(SEMVER_KEY)
            if type(text) is str:
                v = self._versions.get(text)
                if v is None:
                    v = self._versions[text] = semverlib.parse(text)
                return v
        return None

    def _pair(self, function: str, a: Any, b: Any) -> int:
        """compareTo for two Quantities or two Semvers."""
        qa = self._quantity(a)
        if qa is not None:
            qb = self._quantity(b)
            if qb is None:
                raise _overload_error(function, a, b)
            return (qa > qb) - (qa < qb)
        va = self._semver(a)
        vb = self._semver(b)
        if va is None or vb is None:
            raise _overload_error(function, a, b)
        return va.compare(vb)

    def _arith(self, function: str, a: Any, b: Any) -> Fraction:
        qa = self._quantity(a)
        if qa is None:
            raise _overload_error(function, a, b)
        if type(b) is int:
            return qa + b if function == "add" else qa - b
        qb = self._quantity(b)
        if qb is None:
            raise _overload_error(function, a, b)
        return qa + qb if function == "add" else qa - qb

    def _one_quantity(self, function: str, a: Any) -> Fraction:
        q = self._quantity(a)
        if q is None:
            raise _overload_error(function, a)
        return q

    def _one_semver(self, function: str, a: Any) -> semverlib.Semver:
        v = self._semver(a)
        if v is None:
            raise _overload_error(function, a)
        return v

    # -- the Quantity library ----------------------------------------------------------------------

    def quantity(self, text: Any) -> dict[str, str]:
        if type(text) is not str:
            raise _overload_error("quantity", text)
        try:
            return encode_quantity(parse_quantity(text))
        except QuantityError as exc:
            raise ValueError(str(exc)) from None

    def is_quantity(self, text: Any) -> bool:
        if type(text) is not str:
            raise _overload_error("isQuantity", text)
        try:
            parse_quantity(text)
        except QuantityError:
            return False
        return True

    def sign(self, q: Any) -> int:
        value = self._one_quantity("sign", q)
        return (value > 0) - (value < 0)

    def add(self, a: Any, b: Any) -> dict[str, str]:
        return encode_quantity(self._arith("add", a, b))

    def sub(self, a: Any, b: Any) -> dict[str, str]:
        return encode_quantity(self._arith("sub", a, b))

    def is_integer(self, q: Any) -> bool:
        value = self._one_quantity("isInteger", q)
        return value.denominator == 1 and _MIN_INT64 <= value <= MAX_INT64

    def as_integer(self, q: Any) -> int:
        if not self.is_integer(q):
            raise ValueError("cannot convert value to integer")
        return int(self._one_quantity("asInteger", q))

    def as_approximate_float(self, q: Any) -> float:
        value = self._one_quantity("asApproximateFloat", q)
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf

    # -- shared by Quantity and Semver -------------------------------------------------------------

    def compare_to(self, a: Any, b: Any) -> int:
        return self._pair("compareTo", a, b)

    def is_greater_than(self, a: Any, b: Any) -> bool:
        return self._pair("isGreaterThan", a, b) == 1

    def is_less_than(self, a: Any, b: Any) -> bool:
        return self._pair("isLessThan", a, b) == -1

    # -- the Semver library ------------------------------------------------------------------------

    def semver(self, text: Any, normalize: Any = False) -> dict[str, str]:
        if type(text) is not str or type(normalize) is not bool:
            raise _overload_error("semver", text, normalize)
        parsed = semverlib.parse_normalized(text) if normalize else semverlib.parse(text)
        return encode_semver(parsed)

    def is_semver(self, text: Any, normalize: Any = False) -> bool:
        if type(text) is not str or type(normalize) is not bool:
            raise _overload_error("isSemver", text, normalize)
        try:
            if normalize:
                semverlib.parse_normalized(text)
            else:
                semverlib.parse(text)
        except semverlib.SemverError:
            return False
        return True

    def major(self, v: Any) -> int:
        return _int64(self._one_semver("major", v).major)

    def minor(self, v: Any) -> int:
        return _int64(self._one_semver("minor", v).minor)

    def patch(self, v: Any) -> int:
        return _int64(self._one_semver("patch", v).patch)

    # -- Kubernetes list and regex libraries (what cel-rust and cel.stdlib lack) --------------------

    @staticmethod
    def is_sorted(items: Any) -> bool:
        if type(items) is not list:
            raise _overload_error("isSorted", items)
        return all(a <= b for a, b in zip(items, items[1:], strict=False))

    def matches(self, text: Any, pattern: Any) -> bool:
        """cel-go ``matches`` on RE2 (cel-rust's own uses Rust's regex crate: :mod:`.cel_regex`)."""
        if type(text) is not str or type(pattern) is not str:
            raise _overload_error("matches", text, pattern)
        return self._regexes.matches(text, pattern)

    def find(self, text: Any, pattern: Any) -> str:
        if type(text) is not str or type(pattern) is not str:
            raise _overload_error("find", text, pattern)
        return self._regexes.find(text, pattern)

    def find_all(self, text: Any, pattern: Any, limit: Any = -1) -> list[str]:
        if type(text) is not str or type(pattern) is not str or type(limit) is not int:
            raise _overload_error("findAll", text, pattern)
        if limit == 0:
            return []
        return self._regexes.find_all(text, pattern, limit)

    def functions(self) -> dict[str, CelFunction]:
        """Name -> callable, for every function this library registers."""
        return {
            "quantity": self.quantity,
            "isQuantity": self.is_quantity,
            "sign": self.sign,
            "add": self.add,
            "sub": self.sub,
            "isInteger": self.is_integer,
            "asInteger": self.as_integer,
            "asApproximateFloat": self.as_approximate_float,
            "compareTo": self.compare_to,
            "isGreaterThan": self.is_greater_than,
            "isLessThan": self.is_less_than,
            "semver": self.semver,
            "isSemver": self.is_semver,
            "major": self.major,
            "minor": self.minor,
            "patch": self.patch,
            "isSorted": self.is_sorted,
            "matches": self.matches,
            "find": self.find,
            "findAll": self.find_all,
        }


def _int64(value: int) -> int:
    """Go's int64(uint64) conversion (a major version above 2^63-1 wraps, as upstream)."""
    return value - (1 << 64) if value > MAX_INT64 else value


def list_aware(string_function: CelFunction, for_lists: Callable[[list[Any], Any], int]) -> CelFunction:
    """``indexOf``/``lastIndexOf``: the string version from cel.stdlib, the list version of Kubernetes'
    list library."""

    def function(container: Any, *args: Any) -> Any:
        if type(container) is list:
            if len(args) != 1:
                raise _overload_error("indexOf", container, *args)
            return for_lists(container, args[0])
        return string_function(container, *args)

    return function


def list_index_of(items: list[Any], item: Any) -> int:
    for i, x in enumerate(items):
        if x == item and type(x) is type(item):
            return i
    return -1


def list_last_index_of(items: list[Any], item: Any) -> int:
    for i in range(len(items) - 1, -1, -1):
        if items[i] == item and type(items[i]) is type(item):
            return i
    return -1

"""The AST validators of Kubernetes' base CEL environment, run after type-checking as cel-go does.

Why: since Kubernetes 1.29 the base environment (apiserver/pkg/cel/environment/base.go) adds
``cel.ASTValidators(ValidateDurationLiterals, ValidateTimestampLiterals, ValidateRegexLiterals,
ValidateHomogeneousAggregateLiterals)`` (cel-go cel/validator.go). Their findings are compile errors, so the
API server refuses such a selector when the object is created, never at allocation:

* a constant ``matches`` pattern that RE2 refuses: "invalid matches argument";
* a constant ``duration``/``timestamp`` argument that does not convert: "invalid duration argument" (resp.
  timestamp);
* a list or map literal whose elements (keys, values) have different types:
  "expected type 'int' but found 'string'".

Only statically known scalar types are compared (dralab's checker is not cel-go's full type checker), so a
mixed literal of computed values may pass here where upstream refuses it; never the other way round.
"""

from __future__ import annotations

import re

from .cel_ast import Call, CelSyntaxError, Lit, Node
from .cel_regex import regex_error

__all__ = ["check_homogeneous", "decode_string", "validate_literals"]

_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", "?": "?",
    '"': '"', "'": "'", "`": "`",
}
_ESCAPE_RE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-3][0-7]{2})|(.))", re.DOTALL)
_SCALARS = frozenset(("int", "uint", "double", "string", "bytes", "bool", "null_type"))
_GO_DURATION = re.compile(r"[-+]?(?:0|(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)")
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def decode_string(lit: Lit) -> str | None:
    """The value of a CEL string literal (raw, triple-quoted and escaped forms), None for bytes or a bad
    escape (which the parser has already refused)."""
    if lit.kind != "string":
        return None
    text = lit.text
    raw = text[0] in "rR"
    if raw:
        text = text[1:]
    quote = text[:3] if text[:3] in ('"""', "'''") else text[0]
    body = text[len(quote):-len(quote)]
    if raw:
        return body

    def replace(m: re.Match[str]) -> str:
        hex2, hex4, hex8, octal, simple = m.groups()
        if simple is not None:
            if simple not in _SIMPLE_ESCAPES:
                raise ValueError(simple)
            return _SIMPLE_ESCAPES[simple]
        return chr(int(hex2 or hex4 or hex8 or "0", 16) if octal is None else int(octal, 8))

    try:
        return _ESCAPE_RE.sub(replace, body)
    except ValueError:
        return None


def _walk(node: Node) -> list[Node]:
    out: list[Node] = []
    stack: list[Node] = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        for value in vars(current).values():
            if isinstance(value, tuple):
                for item in value:
                    if isinstance(item, tuple):
                        stack.extend(x for x in item if not isinstance(x, (str, bool)))
                    elif not isinstance(item, (str, bool)):
                        stack.append(item)
            elif value is not None and not isinstance(value, (str, bool, int)):
                stack.append(value)
    return out


def _valid_duration(text: str) -> bool:
    """Go's time.ParseDuration syntax (what cel-go's string-to-duration conversion calls)."""
    return _GO_DURATION.fullmatch(text) is not None


def _valid_timestamp(text: str) -> bool:
    """RFC 3339 with a real date and time (Go's time.Parse(time.RFC3339, ...), what cel-go's string-to-timestamp
    conversion calls), years 0001-9999."""
    m = _RFC3339.fullmatch(text)
    if m is None:
        return False
    year, month, day = int(text[0:4]), int(text[5:7]), int(text[8:10])
    hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    if not (year >= 1 and 1 <= month <= 12 and 1 <= day <= days[month - 1]):
        return False
    if hour > 23 or minute > 59 or second > 59:
        return False
    zone = m.group(2)
    return zone in ("Z", "z") or (int(zone[1:3]) <= 23 and int(zone[4:6]) <= 59)


def validate_literals(tree: Node) -> None:
    """cel-go's ValidateRegexLiterals / ValidateDurationLiterals / ValidateTimestampLiterals: the first
    argument of a ``matches``, ``duration`` or ``timestamp`` call (receiver excluded), when it is a string
    literal, must compile / convert."""
    for node in _walk(tree):
        if not isinstance(node, Call) or not node.args or not isinstance(node.args[0], Lit):
            continue
        name = node.function.lstrip(".")
        if name not in ("matches", "duration", "timestamp"):
            continue
        value = decode_string(node.args[0])
        if value is None:
            continue
        ok = {
            "matches": lambda v: regex_error(v) is None,
            "duration": _valid_duration,
            "timestamp": _valid_timestamp,
        }[name](value)
        if not ok:
            pos = node.args[0].pos
            raise CelSyntaxError(f"invalid {name} argument", pos if pos >= 0 else None)


def check_homogeneous(types: list[tuple[str | None, int]]) -> None:
    """cel-go's ValidateHomogeneousAggregateLiterals for the elements (or keys, or values) of one literal,
    given as (type, position): the first statically known scalar type sets the type the others must have."""
    first: str | None = None
    for typ, pos in types:
        if typ not in _SCALARS:
            continue
        if first is None:
            first = typ
        elif typ != first:
            raise CelSyntaxError(f"expected type '{first}' but found '{typ}'", pos if pos >= 0 else None)

"""The syntax tree of the CEL front end (:mod:`.cel_syntax`) and its one error type.

Why apart: the lexer/parser (:mod:`.cel_parse`) builds these nodes and the checker (:mod:`.cel_syntax`)
walks and rewrites them; both depend on this module and on nothing else of each other's internals.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = [
    "Binary", "Call", "CelCostError", "CelResultTypeError", "CelSyntaxError", "Cond", "Ident", "Index", "ListExpr",
    "Lit", "MapExpr", "Node", "Select", "Unary",
]


class CelSyntaxError(ValueError):
    """The expression does not parse or does not check. ``reason`` says why, ``position`` is a character
    offset when known."""

    def __init__(self, reason: str, position: int | None = None) -> None:
        super().__init__(reason if position is None else f"{reason} (at character {position})")
        self.reason = reason
        self.position = position


class CelResultTypeError(CelSyntaxError):
    """The expression checks, but its result is statically not bool (upstream: "must evaluate to bool or the
    unknown type, not int", reported without cel-go's "compilation failed: " prefix)."""


class CelCostError(CelSyntaxError):
    """The estimated worst-case cost exceeds the limit (upstream validation: "Forbidden: too complex, exceeds
    cost limit")."""


# --------------------------------------------------------------------------------------------------
# Syntax tree
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lit:
    kind: str  # int | uint | double | string | bytes | bool | null
    text: str  # verbatim source text
    pos: int = dataclasses.field(default=-1, compare=False, repr=False)  # offset in the source, -1 unknown


@dataclass(frozen=True)
class Ident:
    name: str
    leading_dot: bool = False
    pos: int = dataclasses.field(default=-1, compare=False, repr=False)  # offset in the source, -1 unknown


@dataclass(frozen=True)
class Select:
    operand: Node
    field: str
    optional: bool = False
    pos: int = dataclasses.field(default=-1, compare=False, repr=False)  # offset in the source, -1 unknown


@dataclass(frozen=True)
class Index:
    operand: Node
    index: Node
    optional: bool = False
    pos: int = dataclasses.field(default=-1, compare=False, repr=False)  # offset in the source, -1 unknown


@dataclass(frozen=True)
class Call:
    function: str
    args: tuple[Node, ...]
    target: Node | None = None
    pos: int = dataclasses.field(default=-1, compare=False, repr=False)  # offset in the source, -1 unknown


@dataclass(frozen=True)
class ListExpr:
    elements: tuple[Node, ...] = ()
    optional: tuple[bool, ...] = ()
    pos: int = dataclasses.field(default=-1, compare=False, repr=False)  # offset in the source, -1 unknown


@dataclass(frozen=True)
class MapExpr:
    entries: tuple[tuple[Node, Node], ...] = ()
    optional: tuple[bool, ...] = ()
    pos: int = dataclasses.field(default=-1, compare=False, repr=False)  # offset in the source, -1 unknown


@dataclass(frozen=True)
class Unary:
    op: str  # ! or -
    operand: Node
    pos: int = dataclasses.field(default=-1, compare=False, repr=False)  # offset in the source, -1 unknown


@dataclass(frozen=True)
class Binary:
    op: str
    left: Node
    right: Node
    pos: int = dataclasses.field(default=-1, compare=False, repr=False)  # offset in the source, -1 unknown


@dataclass(frozen=True)
class Cond:
    cond: Node
    then: Node
    otherwise: Node
    pos: int = dataclasses.field(default=-1, compare=False, repr=False)  # offset in the source, -1 unknown


Node = Lit | Ident | Select | Index | Call | ListExpr | MapExpr | Unary | Binary | Cond

"""The worst-case cost of a DRA selector, estimated as the API server does before it accepts the object.

Why: validation refuses a selector whose estimated worst-case cost exceeds
resource.CELSelectorExpressionMaxCost (1,000,000) with "too complex, exceeds cost limit"
(pkg/apis/resource/validation). The estimate is cel-go's static estimator (checker/cost.go) with Kubernetes'
library estimator (apiserver/pkg/cel/library/cost.go) and the DRA environment's sizes
(k8s.io/dynamic-resource-allocation/cel compile.go ``sizeEstimator``: a driver name at most 63 characters, at
most 32 attribute or capacity domains and names per device, an attribute value at most 64 elements). This
module restates those rules on dralab's syntax tree; tests/test_cel_cost.py checks them against every
``expectCost`` of upstream's compile_test.go that applies to 1.35.

The rules, in short: a literal costs 0, an identifier 1, a field selection on a map or object 1, a call 1
plus its arguments, except the functions priced by size (equality and string comparisons: the smaller
operand's size / 10; ``in`` on a list: the list's size; ``matches``/``find``: string size / 10 times pattern
length / 4; ``split``, ``replace``, ``lowerAscii``...: string size / 10 or / 5); ``&&``/``||``/``?:`` add no
cost of their own; a list literal costs 10, a map literal 30; a comprehension costs its range, its init and
result plus the range's size times (loop condition + step). Sizes saturate at 2^64-1 ("unknown").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .cel_ast import Binary, Call, Cond, Ident, Index, ListExpr, Lit, MapExpr, Node, Select, Unary
from .cel_validators import decode_string

__all__ = ["MAX_COST", "estimate"]

MAX_COST = 1_000_000  # resource.k8s.io CELSelectorExpressionMaxCost
_U = (1 << 64) - 1  # math.MaxUint64: an unknown size, a saturated cost
_STRING_FACTOR = 0.1  # common.StringTraversalCostFactor
_REGEX_FACTOR = 0.25  # common.RegexStringLengthCostFactor
_LIST_BASE, _MAP_BASE = 10, 30  # createListBaseCost, createMapBaseCost


def _add(a: int, b: int) -> int:
    return min(a + b, _U)


def _mul(a: int, b: int) -> int:
    return min(a * b, _U)


def _factor(n: int, f: float) -> int:
    """MultiplyByCostFactor: ceil(n * f), saturating."""
    return _U if n >= _U else min(math.ceil(n * f), _U)


@dataclass(frozen=True)
class _T:
    """A declared type of the DRA environment with its maximum number of elements (apiserver DeclType)."""

    max: int
    key: _T | None = None
    elem: _T | None = None
    fields: dict[str, _T] = field(default_factory=dict)


_ATTRIBUTE = _T(64)  # DeviceAttributeMaxValueLength
_QUANTITY = _T(0)
_INNER_ATTRIBUTES = _T(32, key=_T(32), elem=_ATTRIBUTE)  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
_INNER_CAPACITY = _T(32, key=_T(32), elem=_QUANTITY)  # id names at most DeviceMaxIDLength
_DEVICE = _T(0, fields={
    "driver": _T(63),  # DriverNameMaxLength
    "attributes": _T(32, key=_T(63), elem=_INNER_ATTRIBUTES),  # domains at most DeviceMaxDomainLength
    "capacity": _T(32, key=_T(63), elem=_INNER_CAPACITY),
})  # allowMultipleAllocations is not in the estimator's device type: a bool, size 1 (compile_test.go)


def _path_size(path: tuple[str, ...] | None) -> int | None:
    """The DRA sizeEstimator: the maximum size of what a path from `device` reaches, None if unknown."""
    if not path or path[0] != "device":
        return None
    node = _DEVICE
    for name in path[1:]:
        if name in ("@items", "@values"):
            following = node.elem
        elif name == "@keys":
            following = node.key
        elif name in node.fields:
            following = node.fields[name]
        elif node.elem is _ATTRIBUTE:
            following = _ATTRIBUTE
        else:
            return None
        if following is None:
            return None
        node = following
    return node.max


@dataclass(frozen=True)
class _Info:
    """What the estimator knows of a subexpression: its cost (min, max), its size if known, the path from
    `device`, and its kind: struct, map, list, string, bytes, scalar (int, uint, double, bool, ...), opaque
    (Quantity, Semver, optional, type) or dyn."""

    lo: int
    hi: int
    kind: str = "dyn"
    size: tuple[int, int] | None = None
    path: tuple[str, ...] | None = None

    def sized(self) -> tuple[int, int]:
        """sizeOrUnknown: the computed size, else the path's, else 1 for a scalar, else unknown."""
        if self.size is not None:
            return self.size
        by_path = _path_size(self.path)
        if by_path is not None:
            return (0, by_path)
        return (1, 1) if self.kind == "scalar" else (0, _U)


_DEVICE_KINDS = {"driver": "string", "attributes": "map", "capacity": "map", "allowMultipleAllocations": "scalar"}
_RESULT_KINDS = {
    "int": "scalar", "uint": "scalar", "double": "scalar", "bool": "scalar", "string": "string", "bytes": "bytes",
    "list(dyn)": "list", "google.protobuf.Duration": "scalar", "google.protobuf.Timestamp": "scalar",
}
_LIT_KINDS = {"int": "scalar", "uint": "scalar", "double": "scalar", "bool": "scalar", "string": "string",
              "bytes": "bytes", "null": "null"}
_STRING_RELATIONS = frozenset(("<", "<=", ">", ">="))
_SIZE_PRICED = frozenset(("lowerAscii", "upperAscii", "substring", "trim"))
_LIST_SCANS = frozenset(("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"))
_SETS = {"sets.contains": 1, "sets.intersects": 1, "sets.equivalent": 2}  # equivalence: two m*n passes


class _Estimator:
    def __init__(self, return_types: dict[str, str | None]) -> None:
        self.return_types = return_types

    def kind_of_call(self, name: str) -> str:
        typ = self.return_types.get(name)
        if typ is None:
            return "dyn"
        return _RESULT_KINDS.get(typ, "opaque")

    def visit(self, node: Node, scope: dict[str, _Info]) -> _Info:
        if isinstance(node, Lit):
            kind = _LIT_KINDS[node.kind]
            size = None
            if node.kind == "string":
                text = decode_string(node)
                size = None if text is None else (len(text), len(text))
            return _Info(0, 0, kind, size)
        if isinstance(node, Ident):
            if not node.leading_dot and node.name in scope:
                v = scope[node.name]
                return _Info(1, 1, v.kind, v.size, v.path)
            if node.name == "device":
                return _Info(1, 1, "struct", None, ("device",))
            return _Info(1, 1, "opaque")  # a type name
        if isinstance(node, Select):
            return self.select(node, scope)
        if isinstance(node, Index):
            return self.index(node, scope)
        if isinstance(node, ListExpr):
            items = [self.visit(e, scope) for e in node.elements]
            return _Info(_LIST_BASE + sum(i.lo for i in items), _add(_LIST_BASE, _sum(i.hi for i in items)), "list",
                         (len(items), len(items)))
        if isinstance(node, MapExpr):
            parts = [self.visit(x, scope) for entry in node.entries for x in entry]
            return _Info(_MAP_BASE + sum(i.lo for i in parts), _add(_MAP_BASE, _sum(i.hi for i in parts)), "map",
                         (len(node.entries), len(node.entries)))
        if isinstance(node, Unary):
            inner = self.visit(node.operand, scope)
            return _Info(1 + inner.lo, _add(1, inner.hi), "scalar" if node.op == "!" else inner.kind)
        if isinstance(node, Binary):
            return self.binary(node, scope)
        if isinstance(node, Cond):
            c, t, f = (self.visit(x, scope) for x in (node.cond, node.then, node.otherwise))
            ts, fs = t.sized(), f.sized()
            kind = t.kind if t.kind == f.kind else "dyn"
            return _Info(c.lo + min(t.lo, f.lo), _add(c.hi, max(t.hi, f.hi)), kind,
                         (min(ts[0], fs[0]), max(ts[1], fs[1])))
        return self.call(node, scope)

    def select(self, node: Select, scope: dict[str, _Info], test_only: bool = False) -> _Info:
        operand = self.visit(node.operand, scope)
        if test_only:  # has(): PresenceTestHasCost(false) in Kubernetes' base environment
            return _Info(operand.lo, operand.hi, "scalar")
        extra = 1 if operand.kind in ("struct", "map") and not node.optional else 0
        if node.optional:  # a.?f is the call _?._ (O(1))
            return _Info(operand.lo + 1, _add(operand.hi, 1), "opaque")
        path = None if operand.path is None else (*operand.path, node.field)
        if operand.path == ("device",):
            kind = _DEVICE_KINDS.get(node.field, "dyn")
            if node.field == "allowMultipleAllocations":
                return _Info(operand.lo + extra, _add(operand.hi, extra), kind, (1, 1), None)
        else:
            kind = self.element_kind(operand)
        return _Info(operand.lo + extra, _add(operand.hi, extra), kind, None, path)

    @staticmethod
    def element_kind(container: _Info) -> str:
        """The kind of a value in a device map: the inner attribute/capacity maps, then dyn or Quantity."""
        path = container.path or ()
        if path[:2] in (("device", "attributes"), ("device", "capacity")) and len(path) == 2:
            return "map"
        if path[:2] == ("device", "capacity") and len(path) == 3:
            return "opaque"
        return "dyn"

    def index(self, node: Index, scope: dict[str, _Info]) -> _Info:
        operand = self.visit(node.operand, scope)
        key = self.visit(node.index, scope)
        lo, hi = 1 + operand.lo + key.lo, _add(1, _add(operand.hi, key.hi))
        if node.optional:
            return _Info(lo, hi, "opaque")
        step = "@items" if operand.kind == "list" else "@values"
        path = None if operand.path is None else (*operand.path, step)
        kind = "map" if path is not None and len(path) == 3 and path[1] in ("attributes", "capacity") else "dyn"
        if path is not None and len(path) == 4 and path[1] == "capacity":
            kind = "opaque"
        return _Info(lo, hi, kind, None, path)

    def binary(self, node: Binary, scope: dict[str, _Info]) -> _Info:
        left, right = self.visit(node.left, scope), self.visit(node.right, scope)
        args_lo, args_hi = left.lo + right.lo, _add(left.hi, right.hi)
        op = node.op
        if op in ("&&", "||"):
            return _Info(left.lo, args_hi, "scalar")
        if op in ("==", "!=") or (op in _STRING_RELATIONS and _maybe_text(left, right)):
            fn = _compare(left, right)
            if op in _STRING_RELATIONS and not _is_text(left) and not _is_text(right):
                fn = (min(fn[0], 1), max(fn[1], 1))  # dyn operands: the numeric overloads too
            return _Info(args_lo + fn[0], _add(args_hi, fn[1]), "scalar")
        if op == "in":
            fn_lo, fn_hi = 1, 1
            if right.kind in ("list", "dyn"):  # in_list is the container's size; in_map is O(1)
                size = right.sized()
                fn_lo, fn_hi = (size[0], size[1]) if right.kind == "list" else (min(1, size[0]), max(1, size[1]))
            return _Info(args_lo + fn_lo, _add(args_hi, fn_hi), "scalar")
        if op == "+" and (_is_text(left) or _is_text(right) or left.kind == right.kind == "dyn"):
            ls, rs = left.sized(), right.sized()
            size = (_add(ls[0], rs[0]), _add(ls[1], rs[1]))
            fn = (_factor(size[0], _STRING_FACTOR), _factor(size[1], _STRING_FACTOR))
            if left.kind == right.kind == "dyn":
                fn = (min(fn[0], 1), max(fn[1], 1))
            kind = left.kind if _is_text(left) else right.kind
            return _Info(args_lo + fn[0], _add(args_hi, fn[1]), kind, size)
        if op == "+" and "list" in (left.kind, right.kind):
            ls, rs = left.sized(), right.sized()
            return _Info(args_lo + 1, _add(args_hi, 1), "list", (_add(ls[0], rs[0]), _add(ls[1], rs[1])))
        kind = "scalar" if op in _STRING_RELATIONS or left.kind == right.kind == "scalar" else "dyn"
        return _Info(args_lo + 1, _add(args_hi, 1), kind)

    def call(self, node: Call, scope: dict[str, _Info]) -> _Info:
        name = node.function.lstrip(".")
        namespace = _namespace(node.target)
        if namespace is not None and namespace.split(".")[0] not in scope:  # cel.bind, sets.contains, ...
            node = Call(f"{namespace}.{name}", node.args, None, pos=node.pos)
            name = node.function
        if node.target is not None and name in ("all", "exists", "exists_one", "existsOne", "map", "filter"):
            return self.comprehension(node, scope)
        if node.target is None and name == "has" and len(node.args) == 1 and isinstance(node.args[0], Select):
            return self.select(node.args[0], scope, test_only=True)
        if node.target is None and name == "cel.bind" and len(node.args) == 3 and isinstance(node.args[0], Ident):
            init = self.visit(node.args[1], scope)
            result = self.visit(node.args[2], {**scope, node.args[0].name: init})
            return _Info(_LIST_BASE + init.lo + result.lo, _add(_LIST_BASE, _add(init.hi, result.hi)), result.kind,
                         result.size, result.path)
        target = None if node.target is None else self.visit(node.target, scope)
        args = [self.visit(a, scope) for a in node.args]
        args_lo, args_hi = sum(a.lo for a in args), _sum(a.hi for a in args)
        fn, size = self.function(name, target, args, node)
        lo = args_lo + fn[0] + (target.lo if target is not None else 0)
        hi = _add(_add(args_hi, fn[1]), target.hi if target is not None else 0)
        kind = "scalar" if name in ("matches", "startsWith", "endsWith", "contains") else self.kind_of_call(name)
        if name == "dyn" and args:
            return _Info(lo, hi, args[0].kind, args[0].size, args[0].path)
        return _Info(lo, hi, kind, size)

    def function(self, name: str, target: _Info | None, args: list[_Info],
                 node: Call) -> tuple[tuple[int, int], tuple[int, int] | None]:
        """The call's own cost (without its arguments) and the size of its result, if known."""
        one = (1, 1)
        if name in _SETS and len(args) == 2:  # cel-go ext/sets.go estimateSetsCost: |a| * |b| * factor + 1
            a, b = args[0].sized(), args[1].sized()
            f = _SETS[name]
            return (_add(_mul(_mul(a[0], b[0]), f), 1), _add(_mul(_mul(a[1], b[1]), f), 1)), None
        if target is None:
            return one, None
        t = target.sized()
        if name in ("startsWith", "endsWith") and len(args) == 1:
            a = args[0].sized()
            return (_factor(a[0], _STRING_FACTOR), _factor(a[1], _STRING_FACTOR)), None
        if name == "contains" and len(args) == 1 and target.kind != "list":
            a = args[0].sized()
            return (_mul(_factor(t[0], _STRING_FACTOR), _factor(a[0], _STRING_FACTOR)),
                    _mul(_factor(t[1], _STRING_FACTOR), _factor(a[1], _STRING_FACTOR))), None
        if name in ("matches", "find", "findAll") and args:
            a = args[0].sized()
            cost = (_mul(_factor(_add(t[0], 1), _STRING_FACTOR), _factor(a[0], _REGEX_FACTOR)),
                    _mul(_factor(_add(t[1], 1), _STRING_FACTOR), _factor(a[1], _REGEX_FACTOR)))
            return cost, (None if name == "matches" else (0, t[1]))
        if name in _LIST_SCANS:
            if target.kind == "list":
                return (t[0], t[1]), None  # 1 per element (elements of unknown type: no string traversal)
            return (_factor(t[0], _STRING_FACTOR), _factor(t[1], _STRING_FACTOR)), None
        if name in _SIZE_PRICED:
            return (_factor(t[0], _STRING_FACTOR), _factor(t[1], _STRING_FACTOR)), t
        if name == "split":
            limit = t[1]
            if len(node.args) > 1 and isinstance(node.args[1], Lit) and node.args[1].kind in ("int", "uint"):
                limit = int(node.args[1].text.rstrip("uU"), 0) % (1 << 64)  # ConvertToType(UintType)
            return (_factor(t[0], 2 * _STRING_FACTOR), _factor(t[1], 2 * _STRING_FACTOR)), (0, limit)
        if name == "replace" and len(args) >= 2:
            return (_factor(t[0], 2 * _STRING_FACTOR), _factor(t[1], 2 * _STRING_FACTOR)), _replaced(
                t, args[0].sized(), args[1].sized())
        if name == "join":
            return (0, 0), None  # element sizes of a computed list are unknown: cost 0 (upstream: empty sz)
        return one, None

    def comprehension(self, node: Call, scope: dict[str, _Info]) -> _Info:
        """The expansions of cel-go's macros (parser/macro.go), priced by costComprehension."""
        name = node.function
        assert node.target is not None
        rng = self.visit(node.target, scope)
        var = node.args[0].name if node.args and isinstance(node.args[0], Ident) else "_"
        step_path = None if rng.path is None else (*rng.path, "@items" if rng.kind == "list" else "@keys")
        elem_kind = "string" if rng.kind == "map" and step_path is not None else "dyn"
        inner = {**scope, var: _Info(1, 1, elem_kind, None, step_path)}
        bodies = [self.visit(a, inner) for a in node.args[1:]]
        body_lo, body_hi = sum(b.lo for b in bodies), _sum(b.hi for b in bodies)
        # (accu init, loop condition, step without the body, result) of each macro's expansion
        if name == "all" or name == "exists":
            init, cond, step, result = (0, 2 if name == "all" else 3, 1, 1)  # @not_strictly_false(accu / !accu)
        elif name in ("exists_one", "existsOne"):
            init, cond, step, result = (0, 0, 2, 2)  # p ? accu + 1 : accu; accu == 1
        elif name == "filter":
            init, cond, step, result = (_LIST_BASE, 0, 13, 1)  # p ? accu + [x] : accu
        elif len(bodies) == 2:  # map(x, p, f): p ? accu + [f] : accu
            init, cond, step, result = (_LIST_BASE, 0, 12, 1)
        else:  # map(x, f): accu + [f]
            init, cond, step, result = (_LIST_BASE, 0, 12, 1)
        size = rng.sized()
        per_lo, per_hi = cond + step + body_lo, _add(cond + step, body_hi)
        lo = rng.lo + init + result + _mul(size[0], per_lo)
        hi = _add(_add(rng.hi, init + result), _mul(size[1], per_hi))
        kind = "list" if name in ("map", "filter") else "scalar"
        return _Info(lo, hi, kind, size if kind == "list" else None)


_NAMESPACES = frozenset(("optional", "sets", "strings", "lists", "cel", "math", "base64"))


def _namespace(target: Node | None) -> str | None:
    """``cel`` in ``cel.bind(...)``: a call's target that is a namespace, not a value."""
    parts: list[str] = []
    while isinstance(target, Select) and not target.optional:
        parts.append(target.field)
        target = target.operand
    if isinstance(target, Ident) and not target.leading_dot and target.name in _NAMESPACES:
        return ".".join([target.name, *reversed(parts)])
    return None


def _sum(values: object) -> int:
    total = 0
    for v in values:  # type: ignore[attr-defined]
        total = _add(total, v)
    return total


def _is_text(info: _Info) -> bool:
    return info.kind in ("string", "bytes")


def _maybe_text(a: _Info, b: _Info) -> bool:
    """Whether a string/bytes overload of a relation can apply (no operand is known to be something else)."""
    return all(x.kind in ("string", "bytes", "dyn") for x in (a, b))


def _compare(a: _Info, b: _Info) -> tuple[int, int]:
    """Equality or a string comparison: (1 if the smaller maximum is > 0, smaller maximum) / 10.

    A deliberate difference: when neither operand's size is known (``capacity.memory == quantity("80Gi")``,
    ``semver("1.0") == semver("1.0.0")``: a Quantity or Semver has no size and a named capacity is not on
    the size estimator's paths), cel-go's formula gives 2^64/10 and, by its code, the API server would refuse
    the selector as too complex. Not confirmed against a running API server, dralab prices it 1 (an O(1)
    comparison) and accepts it rather than refuse a plausible selector (docs/allocator.md)."""
    smallest = min(a.sized()[1], b.sized()[1])
    if smallest >= _U:
        return (1, 1)
    return (_factor(1 if smallest > 0 else 0, _STRING_FACTOR), _factor(smallest, _STRING_FACTOR))


def _replaced(sz: tuple[int, int], old: tuple[int, int], new: tuple[int, int]) -> tuple[int, int]:
    """The result size of replace (library/cost.go)."""
    if old[0] == 0:
        count_hi, kept_hi = (sz[1] + 1 if sz[1] < _U else sz[1]), sz[1]
    elif new[1] <= old[0]:
        count_hi, kept_hi = 0, sz[1]
    else:
        count_hi, kept_hi = math.ceil(sz[1] / old[0]), 0
    if old[1] == 0:
        count_lo, kept_lo = (sz[0] + 1 if sz[0] < _U else sz[0]), sz[0]
    elif old[1] <= new[0]:
        count_lo, kept_lo = 0, sz[0]
    else:
        count_lo, kept_lo = math.ceil(sz[0] / old[1]), 0
    return (_add(_mul(count_lo, new[0]), kept_lo), _add(_mul(count_hi, new[1]), kept_hi))


def estimate(tree: Node, return_types: dict[str, str | None]) -> tuple[int, int]:
    """(min, max) worst-case cost of a checked selector; validation compares max with :data:`MAX_COST`."""
    info = _Estimator(return_types).visit(tree, {})
    return info.lo, info.hi

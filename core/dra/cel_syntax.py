"""A CEL front end for DRA selectors: parse, check like Kubernetes' compiler does, and rewrite into what
the Rust-backed ``common-expression-language`` runtime (cel-rust) evaluates with the same results.

Why a front end of our own: cel-rust has no type checker and no custom types, and its parser lacks some
syntax the Kubernetes environment has. So, before handing an expression to cel-rust, this module

* refuses at compile time what Kubernetes' checker refuses: undeclared variables and functions
  (``undeclared reference to 'x'``), unknown fields of ``device`` (``undefined field 'x'``), results
  that are statically not bool (``must evaluate to bool or the unknown type, not int``), ordering or
  arithmetic operators on Quantity/Semver values (``found no matching overload``), and the parts of
  the Kubernetes library dralab does not implement (URL, IP, CIDR, format, two-variable
  comprehensions, message construction);
* rewrites what cel-rust cannot express directly:

  - ``device.attributes[D]`` / ``device.capacity[D]`` (also ``.D`` and through a ``cel.bind``
    alias) become ``(D in M ? M[D] : {})``: upstream returns an empty map for an unknown domain,
    so ``has(device.attributes["d"].x)`` is false and ``device.attributes["d"].x`` is the runtime
    error "no such key: x";
  - ``cel.bind(v, init, body)`` becomes ``[init].map(v, body)[0]``;
  - optional field/index selection ``a.?f`` / ``a[?k]`` becomes
    ``(has(a.f) ? optional.of(a.f) : optional.none())`` (resp. a bounds/key test).

The output is emitted fully parenthesised from the syntax tree (literals verbatim), so precedence is
never re-interpreted.

The syntax tree is in :mod:`.cel_ast`, the lexer, parser and emitter in :mod:`.cel_parse`; this module
holds the checker and the rewriter; the cost estimate is :mod:`.cel_cost`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .cel_ast import (
    Binary,
    Call,
    CelCostError,
    CelResultTypeError,
    CelSyntaxError,
    Cond,
    Ident,
    Index,
    ListExpr,
    Lit,
    MapExpr,
    Node,
    Select,
    Unary,
)
from .cel_cost import MAX_COST, estimate
from .cel_parse import _RELATIONS, emit, parse
from .cel_validators import check_homogeneous, validate_literals

__all__ = [
    "CheckedExpression",
    "check",
]



# --------------------------------------------------------------------------------------------------
# Checker and rewriter
# --------------------------------------------------------------------------------------------------

DEVICE_FIELDS: dict[str, str] = {
    "driver": "string",
    "attributes": "map(string, map(string, dyn))",
    "capacity": "map(string, map(string, kubernetes.Quantity))",
    "allowMultipleAllocations": "bool",
}

QUANTITY = "kubernetes.Quantity"  # the CEL type names of apiserver/pkg/cel (library/quantity.go, semver.go)
SEMVER = "kubernetes.Semver"
OPTIONAL = "optional_type(dyn)"
_LIST = "list(dyn)"
_MAP = "map(dyn, dyn)"
_INT = "int"
_BOOL = "bool"
_STRING = "string"
_DOUBLE = "double"

# Functions cel-rust provides without registration (global call form / member call form).
NATIVE_GLOBAL = frozenset(
    [
        "size", "int", "uint", "double", "string", "bytes", "type", "dyn", "duration", "timestamp", "optional.of",
        "optional.none", "optional.ofNonZeroValue",
    ]
)
NATIVE_MEMBER = frozenset(
    [
        "size", "contains", "startsWith", "endsWith", "matches", "getDate", "getDayOfMonth", "getDayOfWeek",
        "getDayOfYear", "getFullYear", "getHours", "getMilliseconds", "getMinutes", "getMonth", "getSeconds",
        "hasValue", "value", "or", "orValue",
    ]
)
_MACROS = frozenset(("all", "exists", "exists_one", "existsOne", "map", "filter"))
_TYPE_NAMES = frozenset(("int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"))
_NAMESPACES = frozenset(("optional", "sets", "strings", "lists", "cel", "math", "base64"))

# Kubernetes CEL library functions dralab does not implement (clear error instead of "undeclared").
UNSUPPORTED = frozenset(
    (
        "url", "isURL", "getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery", "ip",
        "isIP", "cidr", "isCIDR", "containsIP", "containsCIDR", "family", "isUnspecified", "isLoopback",
        "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast", "prefixLength", "masked", "format",
        "transformList", "transformMap", "transformMapEntry", "sortBy", "mul", "div", "divInt",
    )
)

# Return types of the functions the checker knows, for the "must evaluate to bool" check.
RETURN_TYPES: dict[str, str | None] = {
    "quantity": QUANTITY, "isQuantity": _BOOL, "semver": SEMVER, "isSemver": _BOOL,
    "compareTo": _INT, "isGreaterThan": _BOOL, "isLessThan": _BOOL, "add": QUANTITY, "sub": QUANTITY,
    "sign": _INT, "isInteger": _BOOL, "asInteger": _INT, "asApproximateFloat": _DOUBLE,
    "major": _INT, "minor": _INT, "patch": _INT,
    "size": _INT, "int": _INT, "uint": "uint", "double": _DOUBLE, "string": _STRING, "bytes": "bytes",
    "bool": _BOOL, "type": "type", "dyn": None, "duration": "google.protobuf.Duration",
    "timestamp": "google.protobuf.Timestamp", "contains": _BOOL, "startsWith": _BOOL, "endsWith": _BOOL,
    "matches": _BOOL, "hasValue": _BOOL, "value": None, "orValue": None, "or": OPTIONAL,
    "optional.of": OPTIONAL, "optional.none": OPTIONAL, "optional.ofNonZeroValue": OPTIONAL,
    "charAt": _STRING, "indexOf": _INT, "lastIndexOf": _INT, "lowerAscii": _STRING, "upperAscii": _STRING,
    "replace": _STRING, "split": _LIST, "join": _STRING, "substring": _STRING, "trim": _STRING,
    "strings.quote": _STRING, "reverse": None, "sets.contains": _BOOL, "sets.equivalent": _BOOL,
    "sets.intersects": _BOOL, "distinct": _LIST, "flatten": _LIST, "slice": _LIST, "sort": _LIST,
    "first": OPTIONAL, "last": OPTIONAL, "lists.range": _LIST, "min": None, "max": None, "sum": None,
    "isSorted": _BOOL, "find": _STRING, "findAll": _LIST,
    "getDate": _INT, "getDayOfMonth": _INT, "getDayOfWeek": _INT, "getDayOfYear": _INT, "getFullYear": _INT,
    "getHours": _INT, "getMilliseconds": _INT, "getMinutes": _INT, "getMonth": _INT, "getSeconds": _INT,
}

_LIT_TYPES = {"int": _INT, "uint": "uint", "double": _DOUBLE, "string": _STRING, "bytes": "bytes",
              "bool": _BOOL, "null": "null_type"}
_OPAQUE = frozenset((QUANTITY, SEMVER))


@dataclass(frozen=True)
class CheckedExpression:
    source: str  # what the user wrote
    rewritten: str  # what cel-rust compiles
    functions: frozenset[str]  # every function called (global names qualified, e.g. "sets.contains")


@dataclass
class _Scope:
    """Variable name -> what it aliases: "device", "attributes", "capacity", "capacity-domain" or None."""

    names: dict[str, str | None] = field(default_factory=lambda: {"device": "device"})

    def bind(self, name: str, alias: str | None) -> _Scope:
        return _Scope({**self.names, name: alias})


def _string_value(node: Node) -> str | None:
    """The value of a plain string literal without escapes, else None."""
    if isinstance(node, Lit) and node.kind == "string" and "\\" not in node.text and node.text[0] in "'\"":
        quote = node.text[:3] if node.text[:3] in ('"""', "'''") else node.text[0]
        return node.text[len(quote):-len(quote)]
    return None


def _qualified_name(node: Node) -> str | None:
    parts: list[str] = []
    while isinstance(node, Select) and not node.optional:
        parts.append(node.field)
        node = node.operand
    if isinstance(node, Ident) and not node.leading_dot:
        parts.append(node.name)
        return ".".join(reversed(parts))
    return None


class _Checker:
    def __init__(self, known: frozenset[str], device_fields: dict[str, str] | None = None) -> None:
        self.known = known | NATIVE_GLOBAL | NATIVE_MEMBER
        self.functions: set[str] = set()
        self.device_fields = DEVICE_FIELDS if device_fields is None else device_fields

    # -- aliases -----------------------------------------------------------------------------------

    def alias(self, node: Node, scope: _Scope) -> str | None:
        if isinstance(node, Ident):
            if node.leading_dot:
                return "device" if node.name == "device" else None
            return scope.names.get(node.name)
        if isinstance(node, Select) and not node.optional:
            base = self.alias(node.operand, scope)
            if base == "device" and node.field in ("attributes", "capacity"):
                return node.field
            if base == "capacity":
                return "capacity-domain"
        if isinstance(node, Index) and not node.optional:
            base = self.alias(node.operand, scope)
            key = _string_value(node.index)
            if base == "device" and key in ("attributes", "capacity"):
                return key
            if base == "capacity":
                return "capacity-domain"
        return None

    # -- visiting ----------------------------------------------------------------------------------

    def visit(self, node: Node, scope: _Scope) -> tuple[Node, str | None]:
        """Check and rewrite ``node``; an error gets the position of the innermost node that raised it (cel-go
        reports an error at the expression it is about: the identifier, the operator, the call's '(')."""
        try:
            return self._visit(node, scope)
        except CelSyntaxError as exc:
            if exc.position is None and node.pos >= 0:
                raise type(exc)(exc.reason, node.pos) from None
            raise

    def _visit(self, node: Node, scope: _Scope) -> tuple[Node, str | None]:
        if isinstance(node, Lit):
            return node, _LIT_TYPES[node.kind]
        if isinstance(node, Ident):
            return self.visit_ident(node, scope)
        if isinstance(node, Select):
            return self.visit_select(node, scope, in_has=False)
        if isinstance(node, Index):
            return self.visit_index(node, scope)
        if isinstance(node, Call):
            return self.visit_call(node, scope)
        if isinstance(node, ListExpr):
            if any(node.optional):
                raise CelSyntaxError("optional list elements ([?x]) are not supported")
            visited = [self.visit(e, scope) for e in node.elements]
            check_homogeneous([(t, e.pos) for (_, t), e in zip(visited, node.elements, strict=True)])
            return ListExpr(tuple(v for v, _ in visited), node.optional), _LIST
        if isinstance(node, MapExpr):
            if any(node.optional):
                raise CelSyntaxError("optional map entries ({?k: v}) are not supported")
            pairs = [(self.visit(k, scope), self.visit(v, scope)) for k, v in node.entries]
            check_homogeneous([(k[1], e[0].pos) for (k, _), e in zip(pairs, node.entries, strict=True)])
            check_homogeneous([(v[1], e[1].pos) for (_, v), e in zip(pairs, node.entries, strict=True)])
            entries = tuple((k[0], v[0]) for k, v in pairs)
            return MapExpr(entries, node.optional), _MAP
        if isinstance(node, Unary):
            inner, typ = self.visit(node.operand, scope)
            if typ in _OPAQUE:
                raise CelSyntaxError(f"found no matching overload for '{node.op}_' applied to '({typ})'")
            return Unary(node.op, inner), (_BOOL if node.op == "!" else typ)
        if isinstance(node, Binary):
            return self.visit_binary(node, scope)
        cond, _ = self.visit(node.cond, scope)
        then, t1 = self.visit(node.then, scope)
        other, t2 = self.visit(node.otherwise, scope)
        return Cond(cond, then, other), (t1 if t1 == t2 else None)

    def visit_ident(self, node: Ident, scope: _Scope) -> tuple[Node, str | None]:
        if node.leading_dot:
            if node.name != "device":
                raise CelSyntaxError(f"undeclared reference to '{node.name}' (in container '')")
            if scope.names.get("device") != "device":
                raise CelSyntaxError("'.device' inside a scope that redefines 'device' is not supported")
            return Ident("device"), "kubernetes.DRADevice"
        if node.name in scope.names:
            alias = scope.names[node.name]
            typ = {"device": "kubernetes.DRADevice", "attributes": DEVICE_FIELDS["attributes"],
                   "capacity": DEVICE_FIELDS["capacity"]}.get(alias or "")
            return node, typ
        if node.name in _TYPE_NAMES:
            return node, "type"
        raise CelSyntaxError(f"undeclared reference to '{node.name}' (in container '')")

    def default_map(self, operand: Node, key: Node, access: Node) -> Node:
        """``(key in operand ? access : {})``: an unknown domain reads as an empty map."""
        return Cond(Binary("in", key, operand), access, MapExpr())

    def visit_select(self, node: Select, scope: _Scope, in_has: bool) -> tuple[Node, str | None]:
        base_alias = self.alias(node.operand, scope)
        operand, _ = self.visit(node.operand, scope)
        if node.optional:
            plain = Select(operand, node.field)
            self.functions.update(("optional.of", "optional.none"))
            return Cond(Call("has", (plain,)), Call("optional.of", (plain,)), Call("optional.none", ())), OPTIONAL
        if base_alias == "device":
            if node.field not in self.device_fields:
                raise CelSyntaxError(f"undefined field '{node.field}'")
            return Select(operand, node.field), self.device_fields[node.field]
        plain = Select(operand, node.field)
        if base_alias in ("attributes", "capacity"):
            if in_has:
                return plain, _BOOL
            return self.default_map(operand, Lit("string", f'"{node.field}"'), plain), _MAP
        if base_alias == "capacity-domain":
            return plain, QUANTITY
        return plain, None

    def visit_index(self, node: Index, scope: _Scope) -> tuple[Node, str | None]:
        base_alias = self.alias(node.operand, scope)
        operand, _ = self.visit(node.operand, scope)
        index, _ = self.visit(node.index, scope)
        if node.optional:
            plain = Index(operand, index)
            in_range = Binary("&&", Binary(">=", index, Lit("int", "0")),
                              Binary("<", index, Call("size", (operand,))))
            present = Cond(Binary("==", Call("type", (operand,)), Ident("list")), in_range,
                           Binary("in", index, operand))
            self.functions.update(("optional.of", "optional.none", "type", "size"))
            return Cond(present, Call("optional.of", (plain,)), Call("optional.none", ())), OPTIONAL
        plain = Index(operand, index)
        if base_alias == "device":
            key = _string_value(node.index)
            if key is not None and key not in self.device_fields:
                raise CelSyntaxError(f"undefined field '{key}'")
            return plain, self.device_fields.get(key or "")
        if base_alias in ("attributes", "capacity"):
            return self.default_map(operand, index, plain), _MAP
        if base_alias == "capacity-domain":
            return plain, QUANTITY
        return plain, None

    def visit_binary(self, node: Binary, scope: _Scope) -> tuple[Node, str | None]:
        left, lt = self.visit(node.left, scope)
        right, rt = self.visit(node.right, scope)
        if node.op in ("&&", "||"):
            return Binary(node.op, left, right), _BOOL
        if node.op not in ("==", "!=", "in") and (lt in _OPAQUE or rt in _OPAQUE):
            # upstream's words (cel-go checker); the Quantity and Semver libraries compare with compareTo,
            # isGreaterThan and isLessThan instead (docs/allocator.md says so)
            raise CelSyntaxError(
                f"found no matching overload for '_{node.op}_' applied to '({lt or 'dyn'}, {rt or 'dyn'})'"
            )
        if node.op in _RELATIONS:
            return Binary(node.op, left, right), _BOOL
        return Binary(node.op, left, right), (lt if lt == rt else None)

    def check_function(self, name: str) -> None:
        if name in self.known:
            self.functions.add(name)
            return
        if name in UNSUPPORTED:
            raise CelSyntaxError(f"function '{name}' of the Kubernetes CEL library is not supported by dralab")
        raise CelSyntaxError(f"undeclared reference to '{name}' (in container '')")

    def visit_call(self, node: Call, scope: _Scope) -> tuple[Node, str | None]:
        target = node.target
        name = node.function
        if target is not None:
            qualified = _qualified_name(target)
            root = qualified.split(".")[0] if qualified else None
            if qualified and root not in scope.names and root in _NAMESPACES:
                target = None
                name = f"{qualified}.{name}"
        if target is None:
            if name.startswith("."):
                name = name[1:]
            if name == "has":
                if len(node.args) != 1 or not isinstance(node.args[0], Select) or node.args[0].optional:
                    raise CelSyntaxError("invalid argument to has() macro")
                arg, _ = self.visit_select(node.args[0], scope, in_has=True)
                return Call("has", (arg,)), _BOOL
            if name == "cel.bind":
                return self.visit_bind(node, scope)
            self.check_function(name)
            args = tuple(self.visit(a, scope)[0] for a in node.args)
            return Call(name, args), RETURN_TYPES.get(name)
        if name in _MACROS:
            return self.visit_macro(node, target, scope)
        self.check_function(name)
        new_target, target_type = self.visit(target, scope)
        args = tuple(self.visit(a, scope)[0] for a in node.args)
        if name == "matches":  # the registered RE2 matches (cel-rust's member form is Rust's regex: .cel_regex)
            return Call(name, (new_target, *args)), _BOOL
        typ = RETURN_TYPES.get(name)
        if name in ("add", "sub") and target_type not in (QUANTITY, None):
            typ = None
        return Call(name, args, new_target), typ

    def visit_bind(self, node: Call, scope: _Scope) -> tuple[Node, str | None]:
        if len(node.args) != 3 or not isinstance(node.args[0], Ident) or node.args[0].leading_dot:
            raise CelSyntaxError("cel.bind() takes a variable name, an initializer and an expression")
        var = node.args[0].name
        init, _ = self.visit(node.args[1], scope)
        body, typ = self.visit(node.args[2], scope.bind(var, self.alias(node.args[1], scope)))
        return Index(Call("map", (Ident(var), body), ListExpr((init,), (False,))), Lit("int", "0")), typ

    def visit_macro(self, node: Call, target: Node, scope: _Scope) -> tuple[Node, str | None]:
        name = node.function
        args = node.args
        if name in ("all", "exists", "exists_one", "existsOne") and len(args) == 3:
            raise CelSyntaxError(f"two-variable comprehensions ({name}(i, v, ...)) are not supported")
        arity = (2, 3) if name == "map" else (2,)
        if len(args) not in arity:
            raise CelSyntaxError(f"{name}() takes {' or '.join(map(str, arity))} arguments, got {len(args)}")
        if not isinstance(args[0], Ident) or args[0].leading_dot:
            raise CelSyntaxError(f"argument 1 of {name}() must be a simple name")
        new_target, _ = self.visit(target, scope)
        inner = scope.bind(args[0].name, None)
        rest = tuple(self.visit(a, inner)[0] for a in args[1:])
        typ = _LIST if name in ("map", "filter") else _BOOL
        return Call(name, (args[0], *rest), new_target), typ


def check(source: str, known_functions: frozenset[str],
          device_fields: dict[str, str] | None = None) -> CheckedExpression:
    """Parse, check and rewrite a DRA selector; raise :class:`CelSyntaxError` if Kubernetes would refuse
    it at compile time (or if it uses what dralab does not support). ``known_functions`` are the
    registered (non-native) functions; ``device_fields`` the fields of ``device`` (default: all of
    :data:`DEVICE_FIELDS`; a release's environment for new objects may have fewer, :mod:`.cel_env`)."""
    try:
        tree = parse(source)
    except CelSyntaxError as exc:
        raise CelSyntaxError(f"Syntax error: {exc.reason}", exc.position) from None
    checker = _Checker(known_functions, device_fields)
    rewritten, typ = checker.visit(tree, _Scope())
    validate_literals(tree)
    if typ is not None and typ != _BOOL:
        raise CelResultTypeError(f"must evaluate to bool or the unknown type, not {typ}")
    _, cost = estimate(tree, RETURN_TYPES)  # cel-go's estimator with Kubernetes' sizes (.cel_cost)
    if cost > MAX_COST:
        raise CelCostError(f"estimated worst-case cost {cost} exceeds the limit of {MAX_COST}")
    return CheckedExpression(source, emit(rewritten), frozenset(checker.functions))

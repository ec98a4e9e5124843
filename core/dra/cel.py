"""CEL device selectors with the Kubernetes DRA environment (resource.k8s.io/v1, 1.35), evaluated by the
Rust-backed ``common-expression-language`` package (cel-rust).

Environment (upstream ``k8s.io/dynamic-resource-allocation/cel``):

* ``device.driver`` (string), ``device.allowMultipleAllocations`` (bool);
* ``device.attributes[domain].<id>``: int, bool, string, or a Semver for version attributes;
* ``device.capacity[domain].<id>``: a Quantity;
* attribute and capacity names are grouped by domain (a bare name belongs to the driver's domain: the
  manifest loader has already qualified it); an unknown domain reads as an empty map, a missing id is
  the runtime error "no such key";
* the Kubernetes base library: standard functions and macros, ``quantity()``/``isQuantity()`` and the
  Quantity methods, ``semver()``/``isSemver()`` and the Semver methods, ``cel.bind``, optional
  selection, extended strings, sets, lists and regex ``find``/``findAll``; ``matches``, ``find`` and
  ``findAll`` run on RE2 with Go's semantics (:mod:`.cel_regex`), as upstream's cel-go.

How it is mapped onto cel-rust (no type checker, no custom types) is in :mod:`.cel_syntax` (checks and
rewrites) and :mod:`.cel_library` (functions, value encodings). What is not supported: URL, IP, CIDR,
``format``, two-variable comprehensions, optional list/map literal entries, the runtime cost limit
(the estimated worst-case cost is checked at compile time instead, as the API server's validation does:
:mod:`.cel_cost`).

Validation at load: :meth:`CelMatcher.validation_error` / :func:`selector_problem` say what the API server's
validation says of a selector (the loaders call it through :func:`.checks.check_cel_expression`), so a
selector that does not compile is refused with exit 2 before any work, never at allocation.

Speed: each expression is checked and compiled once; each device's activation (its CEL variables) is
built once; each (expression, device) pair is evaluated at most once: devices are immutable and
compared by identity, so a cached answer can never be stale. The caches are per :class:`CelMatcher`
and release a device's entries when the device is garbage.
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cel  # type: ignore[import-untyped,unused-ignore]
from cel import stdlib as cel_stdlib  # type: ignore[import-untyped,unused-ignore]

from . import semver
from .cel_ast import CelCostError, CelSyntaxError
from .cel_errors import detail
from .cel_library import (
    Library,
    encode_quantity,
    encode_semver,
    list_aware,
    list_index_of,
    list_last_index_of,
    type_name,
)
from .cel_syntax import check
from .model import Device

__all__ = ["MAX_EXPRESSION_BYTES", "CelMatcher", "SelectorError", "selector_problem"]

MAX_EXPRESSION_BYTES = 10 * 1024  # resource.k8s.io CELSelectorExpressionMaxLength
_MESSAGE_EXPRESSION_CHARS = 200

# cel.stdlib groups that belong to the Kubernetes base environment (ext.Strings, ext.Sets, ext.Lists,
# the Kubernetes list library's min/max/sum, bool()). Not math or base64, which Kubernetes lacks, and
# not the list `contains` shim (cel-go has no list.contains; `in` is the way).
_STDLIB_GROUPS = ("core", "strings", "sets", "lists")
_STDLIB_EXCLUDED = frozenset(("contains",))

_PYTHON_FAILURE_RE = re.compile(
    r"^Function '(?P<function>[^']+)' error: Python function call failed: (?:\w+): (?P<message>.*?)"
    r"(?:\. Check function arguments and their types\.)?$",
    re.DOTALL,
)
_UNDEFINED_RE = re.compile(r"^Undefined variable or function: '([^']+)'")
_HINT_RE = re.compile(r"\. (?:Check that|CEL does not coerce|Convert explicitly).*$", re.DOTALL)


class SelectorError(Exception):
    """A selector that does not compile, fails at runtime, or does not return a bool.

    ``origin`` names where the selector comes from ("DeviceClass gpu.example.com", "ResourceClaim
    ns/c request gpus"), ``expression`` is the selector, ``reason`` what went wrong (the CEL library's
    words), ``kind`` is "compile" or "runtime".
    """

    def __init__(self, origin: str, expression: str, reason: str, kind: str = "runtime") -> None:
        shown = expression
        if len(shown) > _MESSAGE_EXPRESSION_CHARS:
            shown = shown[:_MESSAGE_EXPRESSION_CHARS] + "..."
        what = "does not compile" if kind == "compile" else "failed"
        super().__init__(f"{origin}: CEL selector {shown!r} {what}: {reason}")
        self.origin = origin
        self.expression = expression
        self.reason = reason
        self.kind = kind


@dataclass
class _Compiled:
    program: Any | None  # cel.Program
    error: str | None = None
    rewritten: str = ""
    # what the API server's validation makes of the error (validateCELSelector): "invalid" (Invalid value),
    # "forbidden" (the cost limit: Forbidden), "too-long" (Too long)
    verdict: str = "invalid"
    detail: str = ""  # upstream's words for the error (cel.Error.Detail), see :func:`.cel_errors.detail`


@dataclass
class _Activation:
    context: Any | None  # cel.Context; None when the device cannot be converted (error says why)
    error: str | None = None
    registered: int = 0  # how many of the matcher's needed functions the context has
    results: dict[str, bool | str] = field(default_factory=dict)  # expression -> bool, or error reason


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0] if exc.args else ''}"
    text = str(exc)
    m = _PYTHON_FAILURE_RE.match(text)
    if m:
        return f"{m.group('function')}: {m.group('message')}"
    m = _UNDEFINED_RE.match(text)
    if m:
        # The checker has declared every name, so cel-rust found no overload for these arguments
        # (e.g. "startsWith" called on an int).
        return f"no such overload: {m.group(1)} is not defined for these argument types"
    return _HINT_RE.sub("", text)


class CelMatcher:
    """Compiles and evaluates DRA device selectors, caching everything that can be cached."""

    def __init__(self) -> None:
        self._library = Library()
        available: dict[str, Callable[..., Any]] = {}
        for group in _STDLIB_GROUPS:
            for name, function in cel_stdlib.EXTENSIONS[group].items():
                if name not in _STDLIB_EXCLUDED:
                    available[name] = function
        available["indexOf"] = list_aware(available["indexOf"], list_index_of)
        available["lastIndexOf"] = list_aware(available["lastIndexOf"], list_last_index_of)
        available.update(self._library.functions())
        self._available = available
        self._known = frozenset(available)
        self._compiled: dict[str, _Compiled] = {}
        self._needed: list[str] = []  # registered functions some compiled expression uses, in order
        self._needed_set: set[str] = set()
        self._devices: weakref.WeakKeyDictionary[Device, _Activation] = weakref.WeakKeyDictionary()
        self.stats: dict[str, int] = {"compilations": 0, "evaluations": 0, "cache_hits": 0, "activations": 0}

    @property
    def known_functions(self) -> frozenset[str]:
        """The registered (non-native) functions the checker accepts."""
        return self._known

    # -- compiling ---------------------------------------------------------------------------------

    def compile(self, expression: str, origin: str) -> None:
        """Raise :class:`SelectorError` if ``expression`` is not a valid DRA selector."""
        self._program(expression, origin)

    def validation_error(self, expression: str) -> tuple[str, str] | None:
        """What the API server's validation says of ``expression`` (validateCELSelector in
        pkg/apis/resource/validation): None if it compiles within the limits, else (verdict, detail) with
        verdict "invalid", "forbidden" or "too-long" and detail upstream's message."""
        compiled = self._compiled.get(expression)
        if compiled is None:
            compiled = self._compiled[expression] = self._compile(expression)
        if compiled.error is None:
            return None
        return compiled.verdict, compiled.detail

    def rewritten(self, expression: str, origin: str) -> str:
        """The expression as handed to cel-rust (for debugging and the docs)."""
        return self._program(expression, origin).rewritten

    def _program(self, expression: str, origin: str) -> _Compiled:
        compiled = self._compiled.get(expression)
        if compiled is None:
            compiled = self._compiled[expression] = self._compile(expression)
        if compiled.error is not None:
            raise SelectorError(origin, expression, compiled.error, "compile")
        return compiled

    def _compile(self, expression: str) -> _Compiled:
        self.stats["compilations"] += 1
        size = len(expression.encode("utf-8"))
        if size > MAX_EXPRESSION_BYTES:
            return _Compiled(None, f"too long: {size} bytes, may not be more than {MAX_EXPRESSION_BYTES} bytes",
                             verdict="too-long", detail=f"may not be more than {MAX_EXPRESSION_BYTES} bytes")
        try:
            checked = check(expression, self._known)
        except CelSyntaxError as exc:
            verdict = "forbidden" if isinstance(exc, CelCostError) else "invalid"
            return _Compiled(None, f"compilation failed: {exc}", verdict=verdict, detail=detail(expression, exc))
        try:
            program = cel.compile(checked.rewritten)
        except Exception as exc:  # the library's parser refused what ours accepted
            failure: BaseException = exc
            try:
                cel.compile(expression)  # prefer the message about what the user wrote
            except Exception as original:
                failure = original
            reason = _reason(failure)
            return _Compiled(None, f"compilation failed: {reason}", detail=detail(expression, CelSyntaxError(reason)))
        for name in sorted(checked.functions & self._known):
            if name not in self._needed_set:
                self._needed_set.add(name)
                self._needed.append(name)
        return _Compiled(program, None, checked.rewritten)

    # -- evaluating --------------------------------------------------------------------------------

    def matches(self, expression: str, device: Device, origin: str) -> bool:
        """Whether ``device`` satisfies the selector. Raises :class:`SelectorError` if the selector does
        not compile, fails at runtime (e.g. "no such key"), or does not return a bool."""
        activation = self._devices.get(device)
        result = None if activation is None else activation.results.get(expression)
        if result is not None:
            self.stats["cache_hits"] += 1
        else:
            compiled = self._program(expression, origin)  # compile errors are raised here, cached per expression
            if activation is None:
                activation = self._devices[device] = self._activate(device)
            result = activation.results[expression] = self._evaluate(compiled, activation)
        if result is True or result is False:
            return result
        raise SelectorError(origin, expression, result)

    def _evaluate(self, compiled: _Compiled, activation: _Activation) -> bool | str:
        """True/False, or the reason of a runtime error."""
        if activation.context is None:
            return activation.error or "the device cannot be represented in CEL"
        if activation.registered < len(self._needed):
            for name in self._needed[activation.registered:]:
                activation.context.add_function(name, self._available[name])
            activation.registered = len(self._needed)
        self.stats["evaluations"] += 1
        try:
            value = compiled.program.execute(activation.context)  # type: ignore[union-attr]
        except Exception as exc:  # every failure inside the CEL library is the selector's runtime error
            return _reason(exc)
        if value is True or value is False:
            return bool(value)
        return f"must evaluate to bool, got {type_name(value)}"

    def _activate(self, device: Device) -> _Activation:
        """The CEL variables of ``device``, as upstream's DeviceMatches builds them."""
        self.stats["activations"] += 1
        driver = device.id.driver
        attributes: dict[str, dict[str, Any]] = {}
        try:
            for name, attribute in device.attributes.items():
                domain, ident = _split(name, driver)
                value: Any = attribute.value
                if attribute.kind == "version":
                    value = encode_semver(semver.parse(str(value)))
                attributes.setdefault(domain, {})[ident] = value
        except semver.SemverError as exc:
            return _Activation(None, f"attribute {name}: parse semantic version: {exc}")
        capacity: dict[str, dict[str, Any]] = {}
        for name, cap in device.capacity.items():
            domain, ident = _split(name, driver)
            capacity.setdefault(domain, {})[ident] = encode_quantity(cap.value)
        variables = {
            "device": {
                "driver": driver,
                "attributes": attributes,
                "capacity": capacity,
                "allowMultipleAllocations": device.allow_multiple_allocations,
            }
        }
        functions = {name: self._available[name] for name in self._needed}
        try:
            context = cel.Context(variables, functions)
        except Exception as exc:  # e.g. an int attribute beyond int64
            return _Activation(None, f"device {device.id}: {_reason(exc)}")
        return _Activation(context, None, len(self._needed))


def _split(name: str, driver: str) -> tuple[str, str]:
    """(domain, id) of a qualified name; a bare name belongs to the driver's domain (upstream
    parseQualifiedName)."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


@functools.lru_cache(maxsize=4096)
def selector_problem(expression: str) -> tuple[str, str] | None:
    """What the API server's validation says of a selector (:meth:`CelMatcher.validation_error`), for the
    loaders: the same expression in many claims is compiled once (the answer depends on the expression
    alone, so the cache can never be stale)."""
    return CelMatcher().validation_error(expression)

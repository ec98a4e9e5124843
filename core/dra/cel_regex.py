"""Regular expressions of DRA CEL selectors with RE2's semantics, as the API server and the scheduler use them.

Why: upstream's CEL (cel-go) runs ``matches`` and the Kubernetes regex library (``find``, ``findAll``,
apiserver/pkg/cel/library/regex.go) on Go's ``regexp`` package, which is RE2: no backreferences, no
lookaround, no possessive quantifiers, linear time; ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII-only.
cel-rust's own ``matches`` uses Rust's ``regex`` crate (Unicode ``\\d``/``\\w``/``\\b``) and Python's ``re``
has backreferences and lookaround, so both would give other answers. dralab uses Google's RE2 through
the ``google-re2`` binding instead, for all three functions.

Compile time: since Kubernetes 1.29 the base CEL environment (apiserver/pkg/cel/environment/base.go) has
``cel.ValidateRegexLiterals()``, so a constant pattern of ``matches`` that RE2 refuses is a compile error
("invalid matches argument", cel-go cel/validator.go), refused when the object is created; a pattern
computed at run time fails at evaluation. ``find``/``findAll`` patterns are not validated at compile time
upstream (only ``matches`` is), so a bad constant one fails at evaluation, as here.

What remains different from Go's ``regexp`` (documented in docs/allocator.md, tested in
tests/test_cel_regex.py): C++ RE2 accepts ``\\C`` (any byte), which Go refuses; both are RE2 syntax
otherwise. Patterns are cached per :class:`Regexes` (one per CEL library instance), never globally.
"""

from __future__ import annotations

from typing import Any

import re2  # type: ignore[import-untyped,unused-ignore]

__all__ = ["RegexError", "Regexes", "regex_error"]


def _options() -> Any:
    """RE2's defaults (Perl-like syntax, UTF-8, case-sensitive: Go's ``regexp.Compile``), without RE2's own
    logging of parse errors to stderr (the error is reported to the user instead)."""
    options = re2.Options()
    options.log_errors = False
    return options


def _message(exc: BaseException) -> str:
    arg = exc.args[0] if exc.args else ""
    text = arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)
    return text or "invalid regular expression"


class RegexError(ValueError):
    """A pattern RE2 refuses (the message is RE2's)."""


def regex_error(pattern: str) -> str | None:
    """Why RE2 refuses ``pattern``, or None if it compiles (Go's regexp.Compile accepts the same syntax)."""
    if "\\C" in pattern.replace("\\\\", ""):
        return "invalid escape sequence: \\C"  # Go's regexp refuses \C; C++ RE2 would accept it
    try:
        re2.compile(pattern, _options())
    except re2.error as exc:
        return _message(exc)
    return None


class Regexes:
    """Compiled RE2 patterns and the three regex functions of upstream's CEL, with Go's semantics."""

    def __init__(self) -> None:
        self._compiled: dict[str, Any] = {}
        self._options = _options()

    def compile(self, pattern: str) -> Any:
        compiled = self._compiled.get(pattern)
        if compiled is None:
            error = regex_error(pattern)
            if error is not None:
                raise RegexError(f"error parsing regexp: {error}")
            compiled = self._compiled[pattern] = re2.compile(pattern, self._options)
        return compiled

    def matches(self, text: str, pattern: str) -> bool:
        """cel-go ``matches``: Go's ``MatchString``, an unanchored search."""
        return self.compile(pattern).search(text) is not None

    def find(self, text: str, pattern: str) -> str:
        """Kubernetes ``find``: Go's ``FindString`` (leftmost-first; "" when nothing matches)."""
        m = self.compile(pattern).search(text)
        return m.group(0) if m is not None else ""

    def find_all(self, text: str, pattern: str, limit: int) -> list[str]:
        """Kubernetes ``findAll``: Go's ``FindAllString(text, limit)`` (limit < 0: all). Successive
        non-overlapping matches; an empty match right after a previous match is skipped (Go's rule, which
        differs from Python's ``finditer``)."""
        compiled = self.compile(pattern)
        found: list[str] = []
        pos, previous_end = 0, -1
        while (limit < 0 or len(found) < limit) and pos <= len(text):
            m = compiled.search(text, pos)
            if m is None:
                break
            start, end = m.span()
            accept = True
            if end == pos:  # an empty match at pos
                if start == previous_end:
                    accept = False
                pos += 1
            else:
                pos = end
            previous_end = end
            if accept:
                found.append(text[start:end])
        return found

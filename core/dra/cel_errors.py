"""CEL compile errors in the API server's words, for validation at load (:mod:`.checks`).

Why apart: the matcher (:mod:`.cel`) reports errors for a person reading an allocation failure; the API
server's validation (pkg/apis/resource/validation ``validateCELSelector`` over
k8s.io/dynamic-resource-allocation/cel ``CompileCELExpression``) has its own shapes, and a dump or scenario
that the API server would refuse is refused at load with the same words:

* a parse or check error: ``compilation failed: ERROR: <input>:L:C: <message>`` followed by cel-go's
  snippet (the source line and a caret under column C), as ``cel.Issues.String()`` prints it;
* a result that is statically not bool: ``must evaluate to bool or the unknown type, not int``;
* a worst-case cost above resource.CELSelectorExpressionMaxCost: ``too complex, exceeds cost limit``.

The messages of dralab's parser are its own (cel-go's come from ANTLR: "mismatched input ..."); the
position, the prefix and the snippet are upstream's.
"""

from __future__ import annotations

from .cel_ast import CelCostError, CelResultTypeError, CelSyntaxError

__all__ = ["detail", "issue"]


def issue(source: str, reason: str, position: int | None) -> str:
    """One cel-go issue: ``ERROR: <input>:line:column: reason`` and, when the position is known, the line
    with a caret (cel-go common/errors.go ``ToDisplayString``: columns count from 1, the caret line is dots)."""
    if position is None or position < 0:
        return f"ERROR: <input>: {reason}"
    before = source[:position]
    line = before.count("\n") + 1
    start = before.rfind("\n") + 1
    column = position - start
    end = source.find("\n", start)
    text = source[start:] if end < 0 else source[start:end]
    return f"ERROR: <input>:{line}:{column + 1}: {reason}\n | {text}\n | {'.' * column}^"


def detail(source: str, exc: CelSyntaxError) -> str:
    """The API server's detail for a selector that does not compile (cel.Error.Detail)."""
    if isinstance(exc, CelCostError):
        return "too complex, exceeds cost limit"
    if isinstance(exc, CelResultTypeError):
        return exc.reason
    return "compilation failed: " + issue(source, exc.reason, exc.position)

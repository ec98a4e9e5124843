"""Reading YAML files as Kubernetes does, safely.

The loader is ``yaml.safe_load``'s (libyaml's parser when present) with three changes: a key given twice in
one mapping is refused (as ``kubectl`` refuses it), timestamps stay strings, and ``1:30`` stays a string
instead of YAML 1.1's base-60 number 90 (both as Kubernetes' YAML reads them).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import yaml

__all__ = ["YamlError", "load_yaml", "load_yaml_file"]


T = TypeVar("T")


class YamlError(ValueError):
    """A file that is not readable YAML; ``line`` and ``column`` (1-based) when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message if line is None else f"{line}:{column}: {message}")
        self.message = message
        self.line = line
        self.column = column


_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_DROPPED = ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value")
# YAML 1.1 as PyYAML resolves it, minus base-60 numbers (``1:30`` stays a string, as in Kubernetes' YAML).
# Also unlike PyYAML, a binary, hex or leading-dot number needs a digit: PyYAML resolves `0x_`, `0b_` and `._`
# as numbers and then fails to convert them (a ValueError, not a YAML error); here they stay strings.
_INT_RE = (r"^(?:[-+]?0b[0-1_]*[0-1][0-1_]*|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)"
           r"|[-+]?0x[0-9a-fA-F_]*[0-9a-fA-F][0-9a-fA-F_]*)$")
_FLOAT_RE = (
    r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]*[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc]
    """yaml.safe_load's loader (libyaml when present) that refuses duplicate keys, keeps timestamps as
    strings (as Kubernetes does) and does not read ``1:30`` as a base-60 number."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:
                    continue  # unhashable: the base class reports it
                if first is not key_node:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key `{key}` (first at line {first.start_mark.line + 1})",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


_REPLACED = {_INT: re.compile(_INT_RE), _FLOAT: re.compile(_FLOAT_RE)}
_Loader.yaml_implicit_resolvers = {
    first: [(tag, _REPLACED.get(tag, rx)) for tag, rx in resolvers if tag not in _DROPPED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml(raw: bytes | str) -> Any:
    """Parse one YAML document; raise :class:`YamlError` with its position if it is not valid."""
    return _parse(lambda: yaml.load(raw, Loader=_Loader))  # a SafeLoader subclass: safe


def load_yaml_all(raw: bytes | str) -> list[Any]:
    """Parse every document of a multi-document stream; errors as :func:`load_yaml`."""
    return _parse(lambda: list(yaml.load_all(raw, Loader=_Loader)))  # a SafeLoader subclass: safe


def _parse(parse: Callable[[], T]) -> T:
    """Run a parse, turning PyYAML's errors into YamlError with line and column."""
    try:
        return parse()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        message = ": ".join(str(p) for p in (e.context, e.problem) if p) or "invalid YAML"
        if mark is None:
            raise YamlError(message) from None
        raise YamlError(message, mark.line + 1, mark.column + 1) from None
    except yaml.YAMLError as e:
        raise YamlError(f"invalid YAML: {e}") from None
    except RecursionError:
        raise YamlError("invalid YAML: nested too deeply") from None


def load_yaml_file(path: str, *, max_bytes: int) -> Any:
    """Read and parse the file at ``path``, refusing one larger than ``max_bytes``."""
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise YamlError(f"cannot read the file: {e.strerror or e}") from None
    if len(raw) > max_bytes:
        size = f"{max_bytes // (1024 * 1024)} MiB" if max_bytes % (1024 * 1024) == 0 else f"{max_bytes} bytes"
        raise YamlError(f"the file is larger than {size}")
    return load_yaml(raw)

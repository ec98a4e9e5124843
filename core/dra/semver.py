"""Semantic versions as Kubernetes reads them (``github.com/blang/semver/v4``), for DRA version attributes
and the CEL ``semver()`` library.

* :func:`parse` is blang's strict ``Parse``: ``MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]``, no leading
  zeros in numeric parts, numbers up to 2^64-1, identifiers of ``[0-9A-Za-z-]``.
* :func:`parse_normalized` is apiserver's ``normalizeAndParse`` (``semver("v1.2", true)``): drop one
  leading ``v``, strip leading zeros from each dot-separated part, fill a missing minor/patch with 0.
* :meth:`Semver.compare` is semver 2.0.0 precedence (blang ``Compare``): build metadata is ignored,
  a version with a prerelease is lower than the same version without one, numeric prerelease
  identifiers are compared as numbers and are lower than alphanumeric ones, a longer prerelease wins
  when all shared identifiers are equal.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Semver", "SemverError", "parse", "parse_normalized"]

_MAX_UINT64 = (1 << 64) - 1
_DIGITS = frozenset("0123456789")
_ALPHANUM = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")


class SemverError(ValueError):
    """Not a semantic version; the message is blang's."""


@dataclass(frozen=True)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()  # numeric identifiers as int, the others as str
    build: tuple[str, ...] = ()

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 by semver precedence (build metadata ignored)."""
        a = (self.major, self.minor, self.patch)
        b = (other.major, other.minor, other.patch)
        if a != b:
            return -1 if a < b else 1
        if not self.pre or not other.pre:
            # No prerelease sorts after any prerelease of the same version.
            return (not self.pre) - (not other.pre)
        for x, y in zip(self.pre, other.pre, strict=False):
            if x == y:
                continue
            if isinstance(x, int) != isinstance(y, int):
                return -1 if isinstance(x, int) else 1  # numeric identifiers sort first
            return -1 if x < y else 1  # type: ignore[operator]  # same type, checked above
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def canonical(self) -> str:
        """The version without build metadata: equal precedence <=> equal canonical text."""
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        return text

    def __str__(self) -> str:
        return self.canonical() + ("+" + ".".join(self.build) if self.build else "")


def _number(text: str, what: str) -> int:
    if not text or not set(text) <= _DIGITS:
        raise SemverError(f"Invalid character(s) found in {what} number {text!r}")
    if len(text) > 1 and text[0] == "0":
        raise SemverError(f"{what.capitalize()} number must not contain leading zeroes {text!r}")
    value = int(text)
    if value > _MAX_UINT64:
        raise SemverError(f"{what} number {text!r} is out of range")
    return value


def parse(text: str) -> Semver:
    """blang/semver v4 ``Parse`` (strict)."""
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major")
    minor = _number(parts[1], "minor")
    patch_text = parts[2]
    build: tuple[str, ...] = ()
    pre_texts: list[str] = []
    if "+" in patch_text:
        patch_text, _, build_text = patch_text.partition("+")
        build = tuple(build_text.split("."))
    if "-" in patch_text:
        patch_text, _, pre_text = patch_text.partition("-")
        pre_texts = pre_text.split(".")
    patch = _number(patch_text, "patch")
    pre: list[int | str] = []
    for ident in pre_texts:
        if not ident:
            raise SemverError("Prerelease is empty")
        if set(ident) <= _DIGITS:
            if len(ident) > 1 and ident[0] == "0":
                raise SemverError(f"Numeric PreRelease version must not contain leading zeroes {ident!r}")
            value = int(ident)
            if value > _MAX_UINT64:
                raise SemverError(f"PreRelease number {ident!r} is out of range")
            pre.append(value)
        elif set(ident) <= _ALPHANUM:
            pre.append(ident)
        else:
            raise SemverError(f"Invalid character(s) found in prerelease {ident!r}")
    for ident in build:
        if not ident:
            raise SemverError("Build meta data is empty")
        if not set(ident) <= _ALPHANUM:
            raise SemverError(f"Invalid character(s) found in build meta data {ident!r}")
    return Semver(major, minor, patch, tuple(pre), build)


def parse_normalized(text: str) -> Semver:
    """apiserver's ``normalizeAndParse``: ``v1.2`` -> 1.2.0, ``01.01.01`` -> 1.1.1."""
    if text.startswith("v"):
        text = text[1:]
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or part[0] not in _DIGITS:
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))

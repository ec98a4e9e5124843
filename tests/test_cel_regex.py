"""CEL regexes with RE2's semantics (core/dra/cel_regex.py), as upstream's cel-go (Go's regexp) runs them.

Each row states a fact of Go's regexp (RE2 syntax, ASCII Perl classes, leftmost-first matching,
FindAllString's rule for empty matches) and checks it through a real DRA selector evaluated by the matcher.
Where cel-rust's own `matches` (Rust's regex crate) or Python's `re` would answer otherwise, the test shows
that too: that difference is why dralab does not use them.
"""

from __future__ import annotations

import logging
import re

import cel
import pytest

from dralab.core.dra.cel import CelMatcher, SelectorError
from dralab.core.dra.cel_regex import Regexes, regex_error
from dralab.core.dra.model import Attribute, Device, DeviceID

DRIVER = "gpu.nvidia.com"


@pytest.fixture(autouse=True)
def _quiet_cel_logger() -> None:
    logging.getLogger("cel").setLevel(logging.ERROR)


def gpu(product: str) -> Device:
    return Device(DeviceID(DRIVER, "pool", "gpu-0"), "slice", {f"{DRIVER}/productName": Attribute("string", product)},
                  {})


def selects(expression: str, product: str) -> bool:
    return CelMatcher().matches(expression, gpu(product), "test")


P = "device.attributes['gpu.nvidia.com'].productName"


@pytest.mark.parametrize(
    ("expression", "product", "expected"),
    [
        (f"{P}.matches('H100')", "NVIDIA H100 80GB HBM3", True),  # unanchored, as Go's MatchString
        (f"{P}.matches('^H100')", "NVIDIA H100 80GB HBM3", False),
        (f"{P}.matches('(?i)nvidia h100')", "NVIDIA H100 80GB HBM3", True),
        (f"matches({P}, 'A100|H100')", "NVIDIA A100-SXM4-40GB", True),  # the global form
        # Perl classes are ASCII-only in RE2 (Unicode in Rust's regex crate, which cel-rust's matches uses)
        (f"{P}.matches('^GPU\\\\d$')", "GPU\u0663", False),
        (f"{P}.matches('^\\\\w+$')", "r\u00e9seau", False),
        (f"{P}.matches('^\\\\pL+$')", "r\u00e9seau", True),  # Unicode classes are spelled out
        (f"{P}.find('[0-9]+GB') == '80GB'", "NVIDIA H100 80GB HBM3", True),
        (f"{P}.findAll('[0-9]+') == ['100', '80', '3']", "NVIDIA H100 80GB HBM3", True),
        (f"{P}.findAll('[0-9]+', 2) == ['100', '80']", "NVIDIA H100 80GB HBM3", True),
    ],
)
def test_re2_semantics(expression: str, product: str, expected: bool) -> None:
    assert selects(expression, product) is expected


def test_cel_rusts_own_matches_would_differ() -> None:
    """Why dralab routes `matches` to RE2: cel-rust's native member `matches` treats \\d as Unicode."""
    assert cel.evaluate("'GPU\u0663'.matches('^GPU\\\\d$')") is True
    assert Regexes().matches("GPU\u0663", r"^GPU\d$") is False


def test_find_all_skips_an_empty_match_right_after_a_match_as_go_does() -> None:
    """Go: regexp.MustCompile(`a|`).FindAllString("baa", -1) is ["", "a", "a"]; Python's finditer adds a 4th."""
    assert Regexes().find_all("baa", "a|", -1) == ["", "a", "a"]
    assert [m.group(0) for m in re.finditer("a|", "baa")] == ["", "a", "a", ""]
    assert Regexes().find_all("abc", "x*", -1) == ["", "", "", ""]


def test_a_pattern_computed_at_run_time_fails_at_evaluation() -> None:
    """Only constant `matches` patterns are validated at compile time (cel.ValidateRegexLiterals); a computed
    one that RE2 refuses is a runtime error, as Go's regexp.Compile returns it inside cel-go."""
    with pytest.raises(SelectorError) as info:
        selects(f"{P}.matches('(a)' + '\\\\1')", "x")
    assert info.value.kind == "runtime" and "error parsing regexp: invalid escape sequence" in info.value.reason
    with pytest.raises(SelectorError) as info:  # find/findAll patterns are not validated at compile time upstream
        selects(f"{P}.find('(?=a)') == ''", "x")
    assert info.value.kind == "runtime" and "invalid perl operator" in info.value.reason


@pytest.mark.parametrize(
    ("pattern", "error"),
    [
        ("(?=a)", "invalid perl operator: (?="),
        ("(?<!a)b", "invalid perl operator: (?<!"),
        (r"(a)\1", "invalid escape sequence: \\1"),
        ("a++", "bad repetition operator: ++"),
        ("a{1001}", "invalid repetition size: {1001}"),  # Go's limit is 1000 too
        (r"\C", "invalid escape sequence: \\C"),  # C++ RE2 accepts \C (any byte); Go refuses it, so do we
        ("[a-z", "missing ]: [a-z"),
    ],
)
def test_what_re2_refuses(pattern: str, error: str) -> None:
    assert regex_error(pattern) == error


@pytest.mark.parametrize("pattern", ["a{1000}", r"\Qa.b\E", "(?P<n>x)", "(?U)a+", r"\pN", "[[:alpha:]]"])
def test_what_re2_accepts(pattern: str) -> None:
    assert regex_error(pattern) is None

"""The allocator's depth-first search needs no room on Python's call stack (issue 19): its steps run on a
list, so a search thousands of slots deep works under a tight recursion limit, which it never changes
(pure code leaves process-wide switches alone)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from test_dra_allocator import claim, dev, req, run, sl

from dralab.core.dra import search


@pytest.fixture
def tight_stack() -> Iterator[int]:
    """A recursion limit 150 frames above the test's own depth (the search used to need ~1,100 more)."""
    saved = sys.getrecursionlimit()
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    sys.setrecursionlimit(depth + 150)
    try:
        yield depth + 150
    finally:
        sys.setrecursionlimit(saved)


def test_a_search_deeper_than_the_stack_allows(tight_stack: int, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    drive = search._drive

    def spy(root: search.Step) -> int:
        calls.append(sys.getrecursionlimit())
        return drive(root)

    monkeypatch.setattr(search, "_drive", spy)
    slices = [sl(f"s{j}", *[dev(f"d{128 * j + i}") for i in range(128)], pool=f"p{j}") for j in range(9)]
    out = run(slices, [claim(f"c{i}", req("r", count=30)) for i in range(34)])  # 1020 slots deep
    assert out.outcome == "allocated" and out.stats["backtracks"] == 0
    assert calls and set(calls) == {tight_stack}  # never raised for the search
    assert sys.getrecursionlimit() == tight_stack


def test_an_error_in_a_step_reaches_the_caller_as_in_recursion() -> None:
    def failing() -> search.Step:
        raise KeyError("deep")
        yield failing()  # a generator

    def caller() -> search.Step:
        try:
            return (yield failing())
        except KeyError:
            return (yield ok())

    def ok() -> search.Step:
        return search.OK
        yield ok()

    assert search._drive(caller()) == search.OK
    with pytest.raises(KeyError, match="deep"):
        search._drive(failing())

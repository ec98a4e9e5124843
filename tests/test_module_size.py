"""No module over 500 lines in the package (issue 19): a module a newcomer reads in one sitting has one job.

A module that grows past the limit is split by concern (as the CEL front end is: cel_ast, cel_parse,
cel_syntax), not squeezed. An exception must be listed in EXCEPTIONS with the reason it cannot be split;
the list is checked both ways, so an entry that is no longer needed has to go.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("core", "actors", "replay", "cli")
MAX_LINES = 500

# path relative to the repository -> why it may be longer (none today)
EXCEPTIONS: dict[str, str] = {}


def module_sizes(root: Path) -> dict[str, int]:
    """Lines of every Python module under the package folders of the repository at `root`."""
    return {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for folder in FOLDERS
        for path in sorted((root / folder).rglob("*.py"))
    }


def oversized(sizes: dict[str, int]) -> dict[str, int]:
    return {path: n for path, n in sizes.items() if n > MAX_LINES and path not in EXCEPTIONS}


def test_no_module_over_the_limit() -> None:
    sizes = module_sizes(ROOT)
    assert len(sizes) > 100, "the package's modules were not found"
    too_big = oversized(sizes)
    assert not too_big, (
        f"modules over {MAX_LINES} lines (split them by concern, or list a justified exception in "
        f"tests/test_module_size.py): " + ", ".join(f"{p} ({n})" for p, n in sorted(too_big.items())))


def test_exceptions_are_still_needed() -> None:
    sizes = module_sizes(ROOT)
    stale = sorted(p for p in EXCEPTIONS if sizes.get(p, 0) <= MAX_LINES)
    assert not stale, f"no longer over {MAX_LINES} lines (or gone), drop from EXCEPTIONS: {stale}"


def test_the_check_sees_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "core" / "dra").mkdir(parents=True)
    (tmp_path / "core" / "dra" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "core" / "dra" / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert oversized(module_sizes(tmp_path)) == {"core/dra/long.py": MAX_LINES + 1}

"""Where tests and benchmarks find the real traces (openb, Philly/Pollux): the folder `DRALAB_TRACES` names
if it is set, else `../shared/traces` beside the repository (CI runs a fresh clone with a copy of shared/
next to it, and .ci/run sets DRALAB_TRACES to that place). Never a path of one machine: the traces are too
large and not ours to ship, so a test that needs them says where it looked when they are not there, and the
importers are tested on the small samples of tests/fixtures/traces/ on every machine.

Imported as `traces_path` by tests (tests/ is on pytest's path) and by benchmarks (which put tests/ on theirs);
pytest is imported only by `needs`, so a benchmark run does not need it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "tests" / "fixtures" / "traces"  # the samples: the same layout as the real folder


def traces_dir() -> Path:
    """The real traces' folder: $DRALAB_TRACES, or ../shared/traces beside the repository."""
    env = os.environ.get("DRALAB_TRACES", "")
    return Path(env) if env else ROOT.parent / "shared" / "traces"


def real_trace(*parts: str) -> Path:
    """A path inside the real traces' folder (which may not exist: `absent` says)."""
    return traces_dir().joinpath(*parts)


def absent(*paths: Path) -> str:
    """Why a test of the real traces skips: "" when every path exists, else a plain reason naming where
    they were looked for (the first missing path, or the highest missing folder on its way from the
    traces' folder: `.../traces` when there is none, `.../traces/openb` when that one is missing)."""
    top = traces_dir()
    for path in paths:
        if not path.exists():
            where = path
            while where != top and where.parent != where and not where.parent.exists():
                where = where.parent
            return f"the real traces are not at {where}: set DRALAB_TRACES"
    return ""


def needs(*paths: Path) -> pytest.MarkDecorator:
    """A mark that skips a test of the real traces (with `absent`'s reason) unless every path exists."""
    import pytest

    reason = absent(*paths)
    return pytest.mark.skipif(bool(reason), reason=reason or "the real traces are there")

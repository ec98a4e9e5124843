"""`dralab run --redis URL` with a URL that cannot be parsed is invalid input (exit 2, as `dralab record`
says it), before anything starts, and the message never holds the password (issue 18, defect 7: it was
exit 3 from `run`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

QUICKSTART = str(Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml")


@pytest.mark.parametrize("url", ["redis://:s3cret@127.0.0.1:notaport/0", "http://s3cret@example.invalid"])
def test_a_malformed_redis_url_is_exit_2_without_its_password(url: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "dralab", "run", QUICKSTART, "--redis", url],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("dralab: error: --redis: bad Redis URL") and "s3cret" not in proc.stderr
    assert proc.stdout == ""

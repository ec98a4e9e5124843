"""`dralab trace openb --compat fgd-go`: the FGD authors' runs reproduced decision for decision, checked
against their cached rows column for column (allocation, fragment of GPUs, fragment of idle GPUs), including
the runs the traces README lists as drifting without Go's float order; `--compare` exit codes; and the
metric arithmetic (numpy means and rounding, neighbour pooling) on small inputs.

The whole check (17 traces x BestFit/FGD/Packing/DotProd/Clustering x seeds 42-51) is
benchmarks/fgd_matrix.py --compat fgd-go (docs/traces.md); these are its hardest cases."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from traces_path import needs, real_trace

from dralab.cli import main
from dralab.replay.traces.fgd import run_seed
from dralab.replay.traces.fgd_cache import compare, read_cached
from dralab.replay.traces.fgd_metrics import ClusterFragment, Rows
from dralab.trace_cmd import load_trace

TRACES = real_trace("openb")
NODES_CSV = TRACES / "openb_node_list_gpu_node.csv"
CACHE = TRACES / "fgd_expected_results"
# the trace tests' mark (the arithmetic tests below need no trace); each test's pod lists are added to it
real = functools.partial(needs, NODES_CSV, CACHE)


def pods_csv(trace: str) -> str:
    return str(TRACES / f"openb_pod_list_{trace}.csv")


@functools.cache
def trace(name: str) -> tuple[Any, str, tuple[int, ...]]:
    """A trace imported once for the module (a few seconds each)."""
    return load_trace(str(NODES_CSV), pods_csv(name))


@real(*(TRACES / f"openb_pod_list_{t}.csv" for t in ("default", "gpuspec33", "cpu250", "multigpu50")))
@pytest.mark.parametrize(("name", "policy", "seed"), [
    ("default", "bestfit", 42),
    ("gpuspec33", "fgd", 44),  # README: drifts unless the fragment is summed in Go's order
    ("cpu250", "fgd", 43),
    ("multigpu50", "packing", 42),  # a single-bucket 0.01 difference without numpy's pairwise mean
    ("default", "dotprod", 45),
])
def test_compat_run_matches_every_cached_column(name: str, policy: str, seed: int) -> None:
    cluster, workload, sources = trace(name)
    result = run_seed(cluster, policy, seed, compat="fgd-go", sources=sources)
    verdict = compare(read_cached(str(CACHE), workload, policy), [result])
    assert verdict["rows"] == 3 and verdict["differing"] == [], verdict


@real(TRACES / "openb_pod_list_default.csv")
def test_default_mode_is_not_the_go_stream() -> None:
    """The default source is dralab's own: same protocol, other draws (so the rows differ)."""
    cluster, workload, sources = trace("default")
    result = run_seed(cluster, "bestfit", 42, sources=sources)
    verdict = compare(read_cached(str(CACHE), workload, "bestfit"), [result])
    assert verdict["rows"] == 3 and verdict["matched"] < 3


@real(TRACES / "openb_pod_list_default.csv")
def test_cli_compare_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["trace", "openb", "--nodes", str(NODES_CSV), "--pods", pods_csv("default"), "--policy", "bestfit",
            "--seeds", "42", "--compat", "fgd-go", "--quiet", "-o", "json"]
    assert main([*base, "--compare", str(CACHE), "--csv-dir", str(tmp_path / "out")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["compat"] == "fgd-go"
    assert report["compare"] == {"rows": 3, "matched": 3, "differing": [], "missing": []}
    # what we wrote is what the cache holds, in its three layouts
    for name in ("analysis_allo_discrete.csv", "analysis_frag_discrete.csv", "analysis_frag_ratio_discrete.csv"):
        ours = (tmp_path / "out" / name).read_text().splitlines()
        assert ours[0] == (CACHE / name).read_text().splitlines()[0]
    # a cache with one value changed: exit 1, and the row and column are named
    changed = tmp_path / "changed"
    shutil.copytree(CACHE, changed)
    path = changed / "analysis_frag_discrete.csv"
    lines = path.read_text().splitlines()
    for k, line in enumerate(lines):
        if line.startswith("openb_pod_list_default,05-BestFit,1.3,42,"):
            cells = line.split(",")
            cells[4 + 100] = str(float(cells[4 + 100]) + 0.01)
            lines[k] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    text_argv = [a for a in base if a not in ("-o", "json")]
    assert main([*text_argv, "--compare", str(changed)]) == 1
    out = capsys.readouterr().out
    assert "2/3 rows match" in out and "seed 42 analysis_frag_discrete.csv: 1 columns differ, first 100" in out
    assert main([*base, "--compare", str(tmp_path / "nowhere")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_rows_use_the_analysis_scripts_arithmetic() -> None:
    rows = Rows(total_gpus=1)
    # arrived 0.26% and 0.74% of one GPU (milli / gpus / 10): buckets 0 and 1; nothing lands in bucket 2, so it
    # pools buckets 1..3; allocation 2.675 both times: numpy rounds the mean to 2.68 (Python: 2.67)
    rows.add(2, 26, 10.0, 100.0)
    rows.add(7, 26, 10.0, 100.0)
    rows.add(35, 26, 12.5, 50.0)
    alloc, frag, ratio = rows.columns()
    assert rows.arrived == [0.0, 1.0, 4.0] and rows.alloc == [2.6, 2.6, 2.6]
    assert alloc[0] == 2.6 and alloc[2] == alloc[1] == 2.6  # bucket 2 pools its neighbour 1 (3 is empty)
    assert ratio[4] == 25.0 and frag[4] == round(100 * 12.5 / 1000, 2)
    r2 = Rows(total_gpus=1)
    r2.alloc, r2.frag, r2.ratio, r2.arrived = [2.675], [0.0], [0.0], [0.0]
    assert r2.columns()[0][0] == 2.68 and round(2.675, 2) == 2.67


def test_cluster_fragment_is_exact_and_order_free() -> None:
    a = (0.1, 0.2, 0.3, 0.0, 1e-12, 3.0, 7.0)
    b = (0.7, 0.0, 0.1, 5.5, 0.0, 0.0, 1 / 3)
    one = ClusterFragment([a, b])
    two = ClusterFragment([b])
    two.add(a, 1)
    assert one.amounts() == two.amounts()
    one.replace(a, b)
    one.replace(b, a)
    assert one.amounts() == two.amounts()

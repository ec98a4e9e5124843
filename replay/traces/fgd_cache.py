"""The FGD authors' cached results, read and compared with dralab's runs column for column.

`dralab trace openb --compat fgd-go --compare DIR` is how a user checks that dralab reproduces the paper's
runs: every seed's row of allocation %, fragment % of GPUs and fragment % of idle GPUs (the three files of
DIR) must equal the cached row at each of the 131 arrived-% columns. The values are compared as the floats
the CSV text denotes, exactly: the compat mode computes them with the authors' arithmetic
(replay/traces/fgd_metrics.py), so an agreement "to 2 decimals" would hide a real difference.
"""

from __future__ import annotations

import csv
import os
from typing import Any

from .fgd_metrics import BUCKETS
from .fgd_policies import CACHED_NAMES

FILES = (("analysis_allo_discrete.csv", "alloc"), ("analysis_frag_discrete.csv", "frag"),
         ("analysis_frag_ratio_discrete.csv", "frag_idle"))
MAX_BYTES = 64 << 20  # the cached files are about 1 MB each


class CacheError(ValueError):
    """A cached file is missing or malformed; the message names the file and line."""


Cached = dict[int, dict[str, tuple[float, ...]]]  # seed -> RunResult field -> the 131 columns


def read_cached(directory: str, workload: str, policy: str) -> Cached:
    """The rows of one trace (``workload``, e.g. `openb_pod_list_default`) and policy, by seed."""
    name = CACHED_NAMES[policy]
    rows: Cached = {}
    for filename, field in FILES:
        path = os.path.join(directory, filename)
        try:
            if os.path.getsize(path) > MAX_BYTES:
                raise CacheError(f"{path}: larger than {MAX_BYTES >> 20} MiB")
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                missing = [c for c in ("workload", "sc_policy", "seed", "0", str(BUCKETS - 1))
                           if c not in (reader.fieldnames or [])]
                if missing:
                    raise CacheError(f"{path}: line 1: no column {missing[0]!r}")
                for row in reader:
                    if row["workload"] != workload or row["sc_policy"] != name:
                        continue
                    where = f"{path}: line {reader.line_num}"
                    try:
                        seed = int(row["seed"])
                        values = tuple(float(row[str(i)]) for i in range(BUCKETS))
                    except (TypeError, ValueError):
                        raise CacheError(f"{where}: a seed or column value is not a number") from None
                    rows.setdefault(seed, {})[field] = values
        except OSError as exc:
            raise CacheError(f"--compare: cannot read {path}: {exc.strerror or exc}") from None
    return rows


def compare(cached: Cached, results: list[Any]) -> dict[str, Any]:
    """``{"rows", "matched", "differing": [{"seed", "file", "columns", "first": {...}}], "missing"}``: a row is
    one seed in one file; ``columns`` counts the differing columns; ``missing``: seeds the cache lacks."""
    differing: list[dict[str, Any]] = []
    missing: list[int] = []
    rows = matched = 0
    for r in results:
        expected = cached.get(r.seed)
        if expected is None:
            missing.append(r.seed)
            continue
        for filename, field in FILES:
            want = expected.get(field)
            if want is None:
                continue
            rows += 1
            got = getattr(r, field)
            bad = [i for i in range(BUCKETS) if got[i] != want[i]]
            if not bad:
                matched += 1
                continue
            differing.append({"seed": r.seed, "file": filename, "columns": len(bad),
                              "first": {"column": bad[0], "cached": want[bad[0]], "ours": got[bad[0]]}})
    return {"rows": rows, "matched": matched, "differing": differing, "missing": missing}


def render_comparison(result: dict[str, Any], directory: str) -> str:
    lines = [f"compared with {directory}: {result['matched']}/{result['rows']} rows match column for column"]
    for d in result["differing"][:20]:
        first = d["first"]
        lines.append(f"  seed {d['seed']} {d['file']}: {d['columns']} columns differ, first {first['column']}: "
                     f"cached {first['cached']}, ours {first['ours']}")
    if result["missing"]:
        lines.append(f"  no cached rows for seeds {', '.join(map(str, result['missing']))}")
    return "\n".join(lines) + "\n"

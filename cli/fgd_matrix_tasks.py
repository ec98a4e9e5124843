"""One run of the FGD experiment matrix (benchmarks/fgd_matrix.py): a (trace, policy, seed) task by its index.

In a module of the package, not in the benchmark script, so that a Ray worker (`fgd_matrix.py --ray`) imports
these functions by name, as a forkserver pool worker does: the script's `__main__` would be pickled by value,
and the worker's inputs (`_WORKER`, the traces it has imported) would not outlive one task.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

_WORKER: dict[str, Any] = {}


def init(traces: str, tasks: list[tuple[str, str, int]], compat: str, compare: bool) -> None:
    _WORKER.update(traces=traces, tasks=tasks, compat=compat, compare=compare, clusters={}, cached={})


def run(index: int) -> dict[str, Any]:
    """The task's row; each worker imports a trace (and reads its cached results) once."""
    from dralab.replay.traces.fgd import run_seed
    from dralab.replay.traces.fgd_cache import compare, read_cached
    from dralab.trace_cmd import load_trace

    w = _WORKER
    trace, policy, seed = w["tasks"][index]
    root = Path(w["traces"])
    if trace not in w["clusters"]:
        w["clusters"][trace] = load_trace(str(root / "openb_node_list_gpu_node.csv"),
                                          str(root / f"openb_pod_list_{trace}.csv"))
    cluster, workload, sources = w["clusters"][trace]
    c0 = time.process_time()
    result = run_seed(cluster, policy, seed, compat=w["compat"], sources=sources)
    row: dict[str, Any] = {"trace": trace, "policy": policy, "seed": seed, "alloc_100": result.alloc[100],
                           "frag_100": result.frag[100], "pods": result.pods, "failed": result.failed,
                           "cpu_s": round(time.process_time() - c0, 3)}
    if w["compare"]:
        key = (workload, policy)
        if key not in w["cached"]:
            w["cached"][key] = read_cached(str(root / "fgd_expected_results"), workload, policy)
        verdict = compare(w["cached"][key], [result])
        row["rows"], row["matched"] = verdict["rows"], verdict["matched"]
    return row

"""The FGD experiment's speed (issue 9): one run of the default openb trace per policy, on one core, in pods
per second, against the targets (BestFit under 5 s, FGD under 15 s, at least 700 pods/s: 40x the FGD
authors' simulator, about 18 pods/s on 2 vCPUs), and what the whole matrix (17 traces x 6 policies x 10
seeds) would take on this machine's cores at those rates.

    python benchmarks/fgd_bench.py [--traces DIR] [--seed 42] [--policies bestfit,fgd,...] [--cores 2]

The trace is imported once (replay/traces/openb.py -> a checked scenario -> replay/traces/fgd_cluster.py, timed apart:
every `dralab trace openb` command pays it once); each policy's run is replay/traces/fgd.py `run_seed`, exactly
what the command runs per seed. CPU time is the figure that holds on a shared machine. Prints a table and
a JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from dralab.core.scenario.load import parse_scenario
from dralab.replay.traces.fgd import run_seed
from dralab.replay.traces.fgd_cluster import build_cluster
from dralab.replay.traces.fgd_policies import POLICY_NAMES
from dralab.replay.traces.openb import read_nodes, read_pods, to_scenario

TARGET_S = {"bestfit": 5.0, "fgd": 15.0}
TARGET_PODS_PER_S = 700
MATRIX_RUNS = 17 * 6 * 10


def run(traces: Path, seed: int, policies: list[str], cores: int) -> dict[str, Any]:
    t0, c0 = time.perf_counter(), time.process_time()
    nodes, pods = traces / "openb_node_list_gpu_node.csv", traces / "openb_pod_list_default.csv"
    scenario = parse_scenario(to_scenario(read_nodes(nodes), read_pods(pods), "openb_pod_list_default"), "bench")
    cluster = build_cluster(scenario)
    out: dict[str, Any] = {"import_s": round(time.perf_counter() - t0, 2),
                           "import_cpu_s": round(time.process_time() - c0, 2), "seed": seed, "runs": {}}
    for policy in policies:
        t, c = time.perf_counter(), time.process_time()
        result = run_seed(cluster, policy, seed)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        met = cpu < TARGET_S.get(policy, float("inf")) and result.pods / cpu >= TARGET_PODS_PER_S
        out["runs"][policy] = {"pods": result.pods, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                               "pods_per_cpu_s": round(result.pods / cpu), "target_s": TARGET_S.get(policy), "met": met}
    mean_cpu = sum(r["cpu_s"] for r in out["runs"].values()) / max(1, len(out["runs"]))
    out["matrix_estimate_min"] = round(MATRIX_RUNS * mean_cpu / cores / 60, 1)
    out["cores"] = cores
    return out


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from traces_path import real_trace  # $DRALAB_TRACES, or ../shared/traces beside the repository

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--traces", default=str(real_trace("openb")))
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--policies", default=",".join(POLICY_NAMES))
    ap.add_argument("--cores", type=int, default=2)
    args = ap.parse_args()
    r = run(Path(args.traces), args.seed, [p for p in args.policies.split(",") if p], args.cores)
    print(f"import (CSV -> checked scenario -> arrays): {r['import_s']} s")
    print(f"{'policy':<12}{'pods':>7}{'CPU s':>8}{'pods/s':>9}  target")
    for policy, x in r["runs"].items():
        rate = f">= {TARGET_PODS_PER_S} pods/s"
        target = f"< {x['target_s']:g} s and {rate}" if x["target_s"] else rate
        verdict = "met" if x["met"] else "NOT met"
        print(f"{policy:<12}{x['pods']:>7}{x['cpu_s']:>8}{x['pods_per_cpu_s']:>9}  {target}: {verdict}")
    print(f"the whole matrix ({MATRIX_RUNS} runs) at these rates on {r['cores']} cores: "
          f"about {r['matrix_estimate_min']} min")
    print(json.dumps(r))


if __name__ == "__main__":
    main()

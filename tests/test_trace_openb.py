"""`dralab trace openb`: the openb importer (CSV -> a scenario `parse_scenario` accepts, errors naming file,
line and column), the FGD protocol's pieces (typical pods, inflation, policies), the CLI contract (JSON keys,
CSV layout, exit 2), and the acceptance check against the FGD authors' cached medians on the default trace."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from traces_path import absent, needs, real_trace

from dralab.cli import main
from dralab.core.scenario.load import parse_scenario
from dralab.replay.traces.fgd import MARKS, PyDraws, arrival_order, medians, run_seed, typical_pods
from dralab.replay.traces.fgd_cluster import Cluster, build_cluster
from dralab.replay.traces.fgd_policies import Context, NodeInfo, Shape, bestfit, fgd, node_fragment, packing
from dralab.replay.traces.openb import OpenbError, read_nodes, read_pods, to_scenario
from dralab.trace_cmd import load_cluster, run_seeds

TRACES = real_trace("openb")  # $DRALAB_TRACES/openb or ../shared/traces/openb (tests/traces_path.py)
NODES_CSV = TRACES / "openb_node_list_gpu_node.csv"
DEFAULT_CSV = TRACES / "openb_pod_list_default.csv"
ABSENT = absent(NODES_CSV, DEFAULT_CSV)  # why the real-trace tests skip, or ""

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time," \
             "scheduled_time\n"


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.fixture(scope="module")
def default_cluster() -> Cluster:
    """The default trace through the importer and the scenario loader, once for the module (about 3 s)."""
    if ABSENT:
        pytest.skip(ABSENT)
    cluster, workload = load_cluster(str(NODES_CSV), str(DEFAULT_CSV))
    assert workload == "openb_pod_list_default"
    return cluster  # type: ignore[no-any-return]


@pytest.fixture
def small(tmp_path: Path) -> tuple[str, str]:
    nodes = write(tmp_path, "nodes.csv", NODE_HEADER + "n-0,32000,131072,4,V100M16\nn-1,96000,393216,8,G2\n"
                  "n-2,64000,262144,0,\n")
    pods = write(tmp_path, "pods.csv", POD_HEADER
                 + "p-0,12000,16384,1,1000,,LS,Running,0,1,0\n"
                 + "p-1,6000,12288,1,460,,LS,Running,0,1,0\n"
                 + "p-2,4000,8192,2,1000,V100M16|G2,LS,Running,0,1,0\n"
                 + "p-3,2000,4096,0,0,,BE,Running,0,1,0\n"
                 + "p-4,8000,8192,1,250,G2,LS,Running,0,1,0\n")
    return nodes, pods


def test_importer_makes_a_scenario_the_loader_accepts(small: tuple[str, str]) -> None:
    nodes, pods = read_nodes(small[0]), read_pods(small[1])
    assert [n.name for n in nodes] == ["n-0", "n-1"]  # the CPU-only node is left out
    scenario = parse_scenario(to_scenario(nodes, pods))
    assert sum(e.count for e in scenario.nodes) == 2 and len(scenario.workload) == 5
    templates = {o["metadata"]["name"]: o for o in scenario.objects if o["kind"] == "ResourceClaimTemplate"}
    share = templates["gpu-1x460"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert share["capacity"]["requests"] == {"gpu_milli": "460"} and share["count"] == 1
    spec = templates["gpu-2x1000-v100m16-g2"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert "V100M16" in spec["selectors"][0]["cel"]["expression"]
    slices = scenario.node_groups[0].resource_slices[0]["spec"]["devices"]
    assert slices[0]["allowMultipleAllocations"] and slices[0]["capacity"]["gpu_milli"]["value"] == "1000"
    cluster = build_cluster(scenario)
    assert cluster.total_gpus == 12 and len(cluster.pods) == 5
    by_name = dict(zip(cluster.pod_names, cluster.pods, strict=True))
    g2 = cluster.models.index("G2")
    assert by_name["p-4"] == Shape(8000, 8192, 1, 250, frozenset({g2}), "G2")  # the CEL selector, evaluated
    assert by_name["p-2"].models is None and by_name["p-2"].spec == "V100M16|G2"  # both models: any; as written
    assert by_name["p-3"] == Shape(2000, 4096, 0, 0, None)


@pytest.mark.parametrize(("text", "where"), [
    ("p-0,12000,16384,1,x,,LS,Running,0,1,0\n", ":2: column `gpu_milli`: expected a whole number"),
    ("p-0,12000,16384,1,1500,,LS,Running,0,1,0\n", ":2: column `gpu_milli`: must be in [0, 1000]"),
    ("p-0,12000,16384,1,500,,LS,Running,0,1,0\np-0,1,1,0,0,,LS,Running,0,1,0\n", ":3: column `name`: duplicate"),
    ("p-0,12000,16384,2,500,,LS,Running,0,1,0\n", ":2: column `gpu_milli`: a pod of several GPUs"),
    ("p-0,12000\n", ":2: expected 11 fields, got 2"),
    ("p-0,12000,16384,1,500,bad model!,LS,Running,0,1,0\n", ":2: column `gpu_spec`: not a GPU model name"),
])
def test_bad_pod_rows_name_file_line_and_column(tmp_path: Path, text: str, where: str) -> None:
    path = write(tmp_path, "pods.csv", POD_HEADER + text)
    with pytest.raises(OpenbError) as err:
        read_pods(path)
    assert isinstance(err.value, ValueError) and str(err.value).startswith(path) and where in str(err.value)


def test_bad_node_files(tmp_path: Path) -> None:
    with pytest.raises(OpenbError, match="column `memory_mib`: missing column"):
        read_nodes(write(tmp_path, "a.csv", "sn,cpu_milli,gpu,model\n"))
    with pytest.raises(OpenbError, match=r":2: column `model`: a GPU node needs a model"):
        read_nodes(write(tmp_path, "b.csv", NODE_HEADER + "n-0,1000,1000,2,\n"))
    with pytest.raises(OpenbError, match="cannot read"):
        read_nodes(str(tmp_path / "missing.csv"))


def test_fragment_and_policies_on_one_node() -> None:
    node = NodeInfo(0, 32000, 131072, 4)
    typical = [(0.5, 1000, 1, 500, None), (0.5, 1000, 0, 0, None)]
    # a half-used GPU: the 500-share shape can use it; the CPU-only shape can use no idle share
    assert node_fragment(typical, 0, 32000, (1000, 500, 1000, 1000)) == 0.5 * 0 + 0.5 * 3500
    assert node_fragment(typical, 0, 32000, (1000, 300, 1000, 1000)) == 0.5 * 300 + 0.5 * 3300
    assert node_fragment(typical, 0, 500, (1000, 300, 1000, 1000)) == 0.5 * 3300 + 0.5 * 3300  # no cpu left
    ctx = Context(typical)
    share = Shape(1000, 1000, 1, 300, None)
    assert bestfit(ctx, share, node, 32000, 131072, (1000, 400, 1000, 300)) == (
        int((1 - ((31000 / 128000) * 0.5 + (2400 / 8000) * 0.5)) * 100), (3,))  # the tightest GPU, first index
    assert packing(ctx, share, node, 32000, 131072, (1000, 400, 1000, 1000)) == (96, (1,))
    score, gpus = fgd(ctx, share, node, 32000, 131072, (1000, 500, 1000, 1000))  # type: ignore[misc]
    assert gpus == (0,) or gpus == (1,)
    assert fgd(ctx, share, node, 32000, 131072, (200, 200, 200, 200)) is None


def test_typical_pods_and_inflation_on_the_default_trace(default_cluster: Cluster) -> None:
    cluster = default_cluster
    assert len(cluster.nodes) == 1213 and cluster.total_gpus == 6212
    typical = typical_pods(cluster.pods)
    assert len(typical) == 35 and round(typical[-1][0] * 7766) == 31  # README: 35 shapes cover 7,766 pods
    assert abs(sum(f for f, *_ in typical) - 1) < 1e-9
    order = arrival_order(cluster, PyDraws(42))
    assert 10_500 < len(order) < 11_200 and sorted(order[:len(cluster.pods)]) == list(range(len(cluster.pods)))
    # the simulator's stop test adds one GPU's share, the total the whole request: it may overshoot by 7 GPUs
    assert 1.3 * 6212 * 1000 - 1000 < sum(cluster.pods[i].num * cluster.pods[i].milli for i in order) \
        <= 1.3 * 6212 * 1000 + 7000


@needs(NODES_CSV, DEFAULT_CSV, TRACES / "fgd_expected_results")
def test_cli_json_csv_and_determinism(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["trace", "openb", "--nodes", str(NODES_CSV), "--pods", str(DEFAULT_CSV), "--policy", "packing",
            "--seeds", "42", "-o", "json", "--quiet", "--csv-dir", str(tmp_path)]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert {"trace", "policy", "seeds", "alloc_pct", "frag_pct", "wall_s"} <= report.keys()
    assert report["trace"] == "openb_pod_list_default" and report["policy"] == "packing"
    assert list(report["alloc_pct"]) == [str(m) for m in MARKS] == list(report["frag_pct"])
    for name in ("analysis_allo_discrete.csv", "analysis_frag_discrete.csv", "analysis_frag_ratio_discrete.csv"):
        cached = (TRACES / "fgd_expected_results" / name).read_text().splitlines()[0]
        rows = list(csv.reader((tmp_path / name).open()))
        assert ",".join(rows[0]) == cached and len(rows) == 2
        assert rows[1][:4] == ["openb_pod_list_default", "04-GpuPacking", "1.3", "42"]
        assert (rows[1][4] == "6212") == (name == "analysis_allo_discrete.csv")
    assert float(list(csv.reader((tmp_path / "analysis_allo_discrete.csv").open()))[1][5 + 100]) == \
        report["alloc_pct"]["100"]


def test_cli_exit_2(tmp_path: Path, small: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    nodes, pods = small
    base = ["trace", "openb", "--nodes", nodes, "--pods", pods, "--seeds", "1", "--quiet"]
    assert main([*base, "--policy", "worstfit"]) == 2
    assert "unknown policy 'worstfit'" in capsys.readouterr().err
    assert main([*base, "--policy", "fgd", "--seeds", "5-1"]) == 2
    bad = write(tmp_path, "bad.csv", POD_HEADER + "p-0,12000,16384,1,abc,,LS,Running,0,1,0\n")
    assert main(["trace", "openb", "--nodes", nodes, "--pods", bad, "--policy", "fgd", "--quiet"]) == 2
    assert f"{bad}:2: column `gpu_milli`" in capsys.readouterr().err
    assert main(["trace", "openb", "--nodes", str(tmp_path / "none.csv"), "--pods", pods, "--policy", "fgd"]) == 2
    assert main([*base, "--policy", "bestfit", "-o", "json"]) == 0  # the small trace runs
    assert json.loads(capsys.readouterr().out)["policy"] == "bestfit"


def test_acceptance_bestfit_and_fgd_on_the_default_trace(default_cluster: Cluster) -> None:
    """Five seeds (42-46) on two processes to stay within the test budget; the cached medians are over
    ten seeds (BestFit 92.91, FGD 95.23), so the tolerance is a little wider than the 10-seed target of 0.3
    (docs/traces.md has the 10-seed measurement)."""
    got = {policy: medians(run_seeds(default_cluster, policy, list(range(42, 47)), 2, True))["alloc_pct"]["100"]
           for policy in ("bestfit", "fgd")}
    assert abs(got["bestfit"] - 92.91) < 0.4, got
    assert abs(got["fgd"] - 95.23) < 0.4, got
    assert got["fgd"] >= got["bestfit"] + 2, got


def test_run_seed_is_a_function_of_the_seed(small: tuple[str, str]) -> None:
    cluster = build_cluster(parse_scenario(to_scenario(read_nodes(small[0]), read_pods(small[1]))))
    for policy in ("random", "dotprod", "clustering", "packing", "bestfit", "fgd"):
        assert run_seed(cluster, policy, 7) == run_seed(cluster, policy, 7)

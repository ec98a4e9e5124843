"""Sweeps on Ray (issue 24): `dralab chaos --ray` and `dralab trace openb --ray` give what the local pool gives
(the same JSON, the same kept and shrunk logs byte for byte), a seed that raises raises, a Ray that cannot be
reached is exit 3 at once; the KubeRay RayJob of docs/deploy.md and the compose `chaos` service are what the
CLI accepts. Runs on the session's local Ray (conftest.py `ray_session`)."""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.actors.ray_sweep import MAX_CHUNK, chunk_size, ray_finished
from dralab.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
RACE = str(ROOT / "scenarios" / "scale-down-race.yaml")  # seed 5 breaks bound-to-ready-nodes at rate 30
DEPLOY = ROOT / "docs" / "deploy.md"
# What depends on where and how fast the sweep ran, not on its seeds.
RUN_ONLY = ("wall_s", "jobs", "cluster_hours_per_wall_minute", "out", "files", "failed", "ray")


def chaos_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["chaos", *argv, "-o", "json", "--quiet"])
    return code, json.loads(capsys.readouterr().out)


def test_unreachable_ray_is_exit_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import ray

    if ray.is_initialized():  # the session's Ray would be used as it is (this test runs first in the module)
        pytest.skip("a Ray is up in this process")
    code = main(["chaos", RACE, "--seeds", "1-2", "--ray", "127.0.0.1:1", "--out", str(tmp_path), "--quiet"])
    assert code == 3 and "nothing answers at 127.0.0.1:1" in capsys.readouterr().err


def test_chunks() -> None:
    assert chunk_size(10, 2) == 1 and chunk_size(320, 2) == 10 and chunk_size(10**6, 100) == MAX_CHUNK


def test_chaos_on_ray_is_the_local_pool(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        ray_session: None) -> None:
    argv = [RACE, "--seeds", "1-12", "--rate", "30", "--shrink-trials", "40"]
    code_pool, pool = chaos_json(capsys, *argv, "--jobs", "2", "--out", str(tmp_path / "pool"))
    code_ray, on_ray = chaos_json(capsys, *argv, "--ray", "auto", "--out", str(tmp_path / "ray"))
    assert code_pool == code_ray == 1 and pool["seeds_failed"] == 1 and on_ray["ray"] == "auto"
    assert {k: v for k, v in pool.items() if k not in RUN_ONLY} == \
        {k: v for k, v in on_ray.items() if k not in RUN_ONLY}
    # the failing seed's verdict and shrink, its logs shipped back into --out under the pool's names
    strip = [{k: v for k, v in f.items() if k != "files"} for f in pool["failed"]]
    assert strip == [{k: v for k, v in f.items() if k != "files"} for f in on_ray["failed"]]
    assert on_ray["failed"][0]["shrunk"]["reproduced"]
    names = [Path(f).name for f in pool["files"]]
    assert names == ["scale-down-race-seed5.dralog", "scale-down-race-seed5.small.dralog"]
    assert on_ray["files"] == [str(tmp_path / "ray" / n) for n in names]
    for n in names:
        assert (tmp_path / "ray" / n).read_bytes() == (tmp_path / "pool" / n).read_bytes()


def test_a_seed_that_raises_raises(ray_session: None) -> None:
    got: list[Any] = []
    with pytest.raises(ValueError, match="math domain error"):
        for batch in ray_finished(math.sqrt, dict, (), [4, 9, -1, 16], "auto"):
            got += batch


def test_results_come_back_whole(ray_session: None) -> None:
    got = [r for batch in ray_finished(math.sqrt, dict, (), list(range(300)), "auto") for r in batch]
    assert sorted(got) == [math.sqrt(s) for s in range(300)]


def _openb(tmp_path: Path) -> tuple[str, str]:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn-0,32000,131072,4,V100M16\nn-1,96000,393216,8,G2\n"
                     "n-2,64000,262144,0,\n")
    pods = tmp_path / "pods.csv"
    head = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
            "scheduled_time\n")
    pods.write_text(head + "p-0,12000,16384,1,1000,,LS,Running,0,1,0\np-1,6000,12288,1,460,,LS,Running,0,1,0\n"
                    "p-2,4000,8192,2,1000,V100M16|G2,LS,Running,0,1,0\np-3,2000,4096,0,0,,BE,Running,0,1,0\n"
                    "p-4,8000,8192,1,250,G2,LS,Running,0,1,0\n")
    return str(nodes), str(pods)


def test_trace_openb_on_ray_is_the_local_pool(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                              ray_session: None) -> None:
    nodes, pods = _openb(tmp_path)
    argv = ["trace", "openb", "--nodes", nodes, "--pods", pods, "--policy", "fgd", "--seeds", "1-6", "-o", "json",
            "--quiet"]
    reports = []
    for extra in (["--jobs", "2"], ["--ray", "auto"]):
        assert main([*argv, *extra]) == 0
        report = json.loads(capsys.readouterr().out)
        del report["wall_s"]
        reports.append(report)
    assert reports[0] == reports[1] and len(reports[0]["per_seed"]) == 6


def test_ray_refused_where_nothing_is_spread(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    nodes, pods = _openb(tmp_path)
    assert main(["trace", "openb", "--time-aware", "--nodes", nodes, "--pods", pods, "--ray", "auto"]) == 2
    assert "--ray: runs the seeds of the openb FGD protocol" in capsys.readouterr().err


def _deploy_blocks() -> list[dict[str, Any]]:
    blocks = re.findall(r"```yaml\n(.*?)```", DEPLOY.read_text(), re.S)
    return [yaml.safe_load(b) for b in blocks]


def test_the_rayjob_of_a_million_seeds() -> None:
    """The KubeRay RayJob of docs/deploy.md, checked without kubectl: the fields KubeRay's ray.io/v1 RayJob
    has (its CRD: entrypoint, rayClusterSpec, shutdownAfterJobFinishes...), every Ray container with the token,
    and an entrypoint the CLI accepts."""
    jobs = [d for d in _deploy_blocks() if isinstance(d, dict) and d.get("kind") == "RayJob"]
    assert len(jobs) == 1
    job = jobs[0]
    assert job["apiVersion"] == "ray.io/v1" and job["metadata"]["name"]
    spec = job["spec"]
    assert set(spec) <= {"entrypoint", "rayClusterSpec", "shutdownAfterJobFinishes", "ttlSecondsAfterFinished",
                         "activeDeadlineSeconds", "backoffLimit", "submissionMode", "runtimeEnvYAML",
                         "submitterPodTemplate", "entrypointNumCpus", "suspend"}
    argv = shlex.split(spec["entrypoint"].replace('"$RAY_ADDRESS"', "10.0.0.1:6380"))
    ns = build_parser().parse_args(argv[1:])
    assert argv[0] == "dralab" and ns.command == "chaos" and ns.ray == "10.0.0.1:6380"
    assert ns.seeds == "1-1000000" and (ROOT / ns.scenario).is_file() and ns.output == "json"
    cluster = spec["rayClusterSpec"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    for group in groups:
        for c in group["template"]["spec"]["containers"]:
            env = {e["name"]: e for e in c["env"]}
            assert env["RAY_AUTH_MODE"]["value"] == "token"
            assert env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]["name"]
            assert c["image"] and c["resources"]["requests"]["cpu"]
    assert all(g["rayStartParams"].get("num-cpus") for g in cluster["workerGroupSpecs"])
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"  # the driver only: seeds go to workers


def test_the_compose_chaos_service() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    svc = compose["services"]["chaos"]
    assert svc["profiles"] == ["chaos"]  # `docker compose up` alone runs what it ran before
    env = svc["environment"]
    assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"].startswith("${RAY_AUTH_TOKEN:?")
    argv = [re.sub(r"\$\{\w+:-(.*)\}", r"\1", str(a)) for a in svc["command"]]
    ns = build_parser().parse_args(argv[1:])
    assert ns.command == "chaos" and ns.ray == env["RAY_ADDRESS"] == "ray-head:6380"
    assert (ROOT / ns.scenario).is_file() and ns.out.startswith("/data/")
    assert svc["entrypoint"] == ["dralab-driver-entrypoint"]

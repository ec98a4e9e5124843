"""`dralab allocate` as a user calls it: outcomes, exit codes, explanations, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dra"
TOPO = str(FIXTURES / "nvlink-topology.yaml")


def dralab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dralab", *args], capture_output=True, text=True, timeout=60)


def test_topology_mismatch_is_told_apart_from_capacity() -> None:
    """6 of 8 GPUs free, but at most 3 on one NVLink domain: a topology problem, not capacity."""
    proc = dralab("allocate", "-f", TOPO, "-o", "json")
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["node"] == "node-a" and out["outcome"] == "unsatisfiable" and out["claims"] == []
    (why,) = out["explanations"]
    assert why["kind"] == "topology"
    assert why["attribute"] == "gpu.example.com/nvlinkDomain" and why["matching"] == 8 and why["free"] == 6


def test_capacity_shortage_says_capacity(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all(Path(TOPO).read_text()))
    train = next(d for d in docs if d["kind"] == "ResourceClaim" and d["metadata"]["name"] == "train")
    train["spec"]["devices"]["constraints"] = []
    train["spec"]["devices"]["requests"][0]["exactly"]["count"] = 7
    path = tmp_path / "cap.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    out = json.loads(dralab("allocate", "-f", str(path), "-o", "json").stdout)
    assert out["outcome"] == "unsatisfiable"
    assert out["explanations"][0]["kind"] == "capacity"


def test_allocated_output_is_status_allocation(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all(Path(TOPO).read_text()))
    train = next(d for d in docs if d["kind"] == "ResourceClaim" and d["metadata"]["name"] == "train")
    train["spec"]["devices"]["requests"][0]["exactly"]["count"] = 3
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    proc = dralab("allocate", "-f", str(path), "-o", "yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = yaml.safe_load(proc.stdout)
    (claim,) = out["claims"]
    results = claim["allocation"]["devices"]["results"]
    # First fit in slice order, skipping the devices the other claim holds (gpu-0, gpu-4).
    assert [r["device"] for r in results] == ["gpu-1", "gpu-2", "gpu-3"]
    assert {r["request"] for r in results} == {"gpus"}
    assert claim["allocation"]["nodeSelector"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]
    }


def test_bad_field_is_exit_2_with_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(Path(TOPO).read_text().replace("resourceSliceCount: 1", "resourceSliceCount: one"))
    proc = dralab("allocate", "-f", str(path))
    assert proc.returncode == 2
    assert f"{path}: documents[2].spec.pool.resourceSliceCount: expected int, got str" in proc.stderr


def test_unknown_node_is_exit_2() -> None:
    proc = dralab("allocate", "-f", TOPO, "--node", "nope")
    assert proc.returncode == 2 and "no Node named 'nope'" in proc.stderr

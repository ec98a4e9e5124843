"""`dralab audit`: pending pods grouped by cause, and `-o html`, the cluster drawn as nodes x devices (issue 23).

The picture's states are checked against the audit's own numbers (stranded squares = `devices.stranded` for every
fixture), the page for escaping and caps, and the page in headless Chromium (skipped only when chromium is not
installed; CI installs it): it drew every node and device, and the screenshot has each state's colour.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.cli import main
from dralab.core.analysis.audit import audit
from dralab.core.analysis.audit_groups import group_by_cause, group_lines
from dralab.core.analysis.audit_html import COLOURS, render
from dralab.core.analysis.audit_picture import NOT_SELECTED, SELECTED_ELSEWHERE, Cell, Parent, Picture, picture
from dralab.core.analysis.causes import CAUSES
from dralab.core.dra.api import parse_documents

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "audit"
PICTURE = FIXTURES / "picture.yaml"


def load(path: Path) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs[0]["items"] if len(docs) == 1 and docs[0].get("kind") == "List" else docs


def drawn(docs: list[dict[str, Any]], **caps: int) -> tuple[dict[str, Any], Picture]:
    view: dict[str, Any] = {}
    report = audit(parse_documents(copy.deepcopy(docs), "dump.yaml"), "1.37", view=view)
    return report, picture(view["snap"], view["verdicts"], report, **caps)


def page(docs: list[dict[str, Any]], **caps: int) -> str:
    report, pic = drawn(docs, **caps)
    return render(pic, report, group_by_cause(report))


# ---------------------------------------------------------------- grouping by cause


def test_pending_pods_are_grouped_by_cause_with_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    report, _ = drawn(load(PICTURE))
    groups = group_by_cause(report)
    assert [(g["cause"], g["count"], g["pods"]) for g in groups] == [
        ("counters", 1, ["ml/mig4"]), ("gated", 1, ["ml/queued"]), ("missing", 1, ["ml/lost"]),
        ("selector", 1, ["ml/pinned"]), ("topology", 1, ["ml/train"])]
    assert all(g["advice"] == CAUSES[g["cause"]].remedy and g["meaning"] == CAUSES[g["cause"]].meaning
               for g in groups)
    assert main(["audit", "-f", str(PICTURE), "-o", "json"]) == 0
    out = yaml.safe_load(capsys.readouterr().out)
    assert out["groups"] == groups


def test_groups_count_most_first_and_name_podgroups() -> None:
    pods = [{"namespace": "a", "name": f"p{i}", "node": None, "reason": "topology", "pod_group": "a/g"}
            for i in range(7)]
    pods += [{"namespace": "a", "name": "q", "node": None, "reason": "taint"},
             {"namespace": "a", "name": "r", "node": None, "reason": "new-cause"},
             {"namespace": "a", "name": "fits", "node": None, "reason": None},
             {"namespace": "a", "name": "bound", "node": "n", "reason": None}]
    groups = group_by_cause({"pods": pods})
    assert [(g["cause"], g["count"]) for g in groups] == [("topology", 7), ("new-cause", 1), ("taint", 1)]
    assert groups[0]["pod_groups"] == ["a/g"] and "pod_groups" not in groups[2]
    assert groups[1]["advice"].startswith("see the pods' messages")
    lines = group_lines(groups)
    assert lines[1] == "  topology: 7 pods in PodGroup(s) a/g (a/p0, a/p1, a/p2, a/p3, a/p4, and 2 more)"
    assert lines[2] == "    " + CAUSES["topology"].meaning + "; " + CAUSES["topology"].remedy


def test_the_table_ends_with_the_groups(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "-f", str(PICTURE)]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("pending by cause:")
    assert out[at + 1] == "  counters: 1 pod (ml/mig4)" and out[at + 9] == "  topology: 1 pod (ml/train)"


# ---------------------------------------------------------------- the picture


def test_every_device_state_where_the_dump_puts_it() -> None:
    report, pic = drawn(load(PICTURE))
    by = {b.name: b for b in pic.nodes}
    assert dict(by["node-a"].counts) == {"used": 3, "free": 5}
    assert [label for label, _ in by["node-a"].domains] == ["gpu.example.com/nvlinkDomain=0",
                                                            "gpu.example.com/nvlinkDomain=1"]
    assert by["node-a"].pending == [("ml/pinned", "selector"), ("ml/train", "topology")]
    assert dict(by["node-b"].counts) == {"used": 2, "tainted": 6}
    # MIG: each GPU's counter set is a parent holding the full device and its two halves; a half in use blocks
    # the full GPU (their counters overlap), which is free but cannot be allocated
    assert dict(by["node-c"].counts) == {"used": 1, "blocked": 1, "free": 4}
    parents = [i for _, items in by["node-c"].domains for i in items]
    assert all(isinstance(p, Parent) for p in parents)
    assert [(p.name, [(c.name, c.state) for c in p.cells]) for p in parents if isinstance(p, Parent)] == [
        ("gpu-0-counters", [("gpu-0", "blocked"), ("gpu-0-3g-a", "used"), ("gpu-0-3g-b", "free")]),
        ("gpu-1-counters", [("gpu-1", "free"), ("gpu-1-3g-a", "free"), ("gpu-1-3g-b", "free")])]
    assert [label for label, _ in by["node-c"].domains] == ["resource.kubernetes.io/pcieRoot=pci0000",
                                                            "resource.kubernetes.io/pcieRoot=pci0001"]
    assert by["node-d"].status == "NotReady" and dict(by["node-d"].counts) == {"stranded": 4}
    assert by["node-e"].taints == ["dedicated=inference:NoSchedule"] and dict(by["node-e"].counts) == {"stranded": 4}
    assert dict(by["node-f"].counts) == {"stranded": 4}  # NICs nobody asks for
    assert pic.totals["stranded"] == report["devices"]["stranded"] == 12
    # why: node-d's GPUs are selected by pending claims (class gpu) but the node is not Ready; nobody asks for NICs
    titles = {b.name: {c.title for _, items in b.domains for c in items if isinstance(c, Cell)} for b in pic.nodes}
    assert all(f"stranded: {SELECTED_ELSEWHERE}" in t for t in titles["node-d"])
    assert all(f"stranded: {NOT_SELECTED}" in t for t in titles["node-f"])


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.yaml") if "invalid" not in p.name))
def test_the_page_counts_what_the_audit_counts(fixture: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                               ) -> None:
    """Every fixture, through the CLI (each read under its own release): one square per device, used squares =
    allocated devices, stranded squares = the report's stranded."""
    target = tmp_path / "a.html"
    assert main(["audit", "-f", str(FIXTURES / fixture), "-o", "json", "--html", str(target)]) == 0
    d = yaml.safe_load(capsys.readouterr().out)["devices"]
    squares = re.findall(r'<span class="d (\w+)" title=', target.read_text())
    assert len(squares) == d["total"]
    assert squares.count("used") == d["allocated"] and squares.count("stranded") == d["stranded"]


def _big(nodes: int) -> list[dict[str, Any]]:
    """``nodes`` nodes of 4 GPUs, and one pod pinned (nodeSelector) to the last node, asking 8: capacity there."""
    docs = [d for d in load(PICTURE) if d["kind"] == "DeviceClass"]
    for i in range(nodes):
        name = f"n{i:03d}"
        docs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"id": name}},
                     "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}})
        docs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                     "spec": {"driver": "gpu.example.com", "nodeName": name,
                              "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                              "devices": [{"name": f"gpu-{j}"} for j in range(4)]}})
    request = {"name": "g", "exactly": {"deviceClassName": "gpu", "count": 8}}
    docs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "c", "namespace": "x"}, "spec": {"devices": {"requests": [request]}}})
    docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "x"},
                 "spec": {"nodeSelector": {"id": f"n{nodes - 1:03d}"},
                          "resourceClaims": [{"name": "g", "resourceClaimName": "c"}],
                          "containers": [{"name": "m", "image": "i", "resources": {"claims": [{"name": "g"}]}}]}})
    return docs


def test_a_large_cluster_is_capped_and_summarised() -> None:
    report, pic = drawn(_big(130), max_nodes=10, max_devices=3)
    assert len(pic.nodes) == 10 and pic.hidden_nodes == 120
    assert pic.nodes[-1].name == "n129" and pic.nodes[-1].pending == [("x/p", "capacity")]  # its closest node is drawn
    assert pic.nodes[0].hidden_devices == 1 and sum(len(items) for _, items in pic.nodes[0].domains) == 3
    assert sum(pic.hidden_counts.values()) == 480 and pic.totals["stranded"] == report["devices"]["stranded"] == 516
    text = render(pic, report, group_by_cause(report))
    assert text.count('<section class="node') == 10 and "120 more node(s) not drawn" in text
    assert "516 stranded" in text and "1 more device(s) not drawn" in text
    assert "closest node of 1 pending pod(s): 1 capacity; x/p (capacity)</div>" in text


def test_a_pool_of_no_one_node_has_its_own_block() -> None:
    docs = load(PICTURE) + [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "f"},
                             "spec": {"driver": "fabric.example.com", "allNodes": True,
                                      "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                                      "devices": [{"name": "link-0"}, {"name": "link-1"}]}}]
    report, pic = drawn(docs)
    assert [(b.name, dict(b.counts)) for b in pic.shared] == [("fabric.example.com/fabric", {"stranded": 2})]
    assert pic.totals["stranded"] == report["devices"]["stranded"] == 14
    assert "Devices not local to one node" in render(pic, report, group_by_cause(report))


def test_every_string_of_the_dump_is_escaped() -> None:
    """What the API server lets through unchecked (attribute strings, scheduling gate names) stays text."""
    docs = load(PICTURE)
    evil = '"><script>alert(1)</script>'
    for d in docs:
        if d["kind"] == "ResourceSlice" and d["metadata"]["name"] == "node-a-gpus":
            d["spec"]["devices"][0]["attributes"]["model"] = {"string": evil}
        if d["kind"] == "Pod" and d["metadata"]["name"] == "queued":
            d["spec"]["schedulingGates"] = [{"name": "<img src=x onerror=alert(2)>"}]
    text = page(docs)
    assert "<script" not in text and "<img" not in text
    assert "&lt;script&gt;" in text and "&lt;img src=x" in text
    assert "&quot;&gt;&lt;script" in text  # a quote cannot end a title attribute either


def test_podgroups_are_listed_with_what_is_in_the_way(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "a.html"
    assert main(["audit", "-f", str(FIXTURES / "podgroup-topology.yaml"), "--html", str(target)]) == 0
    capsys.readouterr()
    text = target.read_text()
    row = re.search(r'<tr class="podgroup">(.*?)</tr>', text)
    assert row is not None and "<td>ml/train-workers-0</td>" in row.group(1) and "<td>topology</td>" in row.group(1)
    assert "PodGroups: ml/train-workers-0" in text  # the group's members, grouped under their cause


# ---------------------------------------------------------------- the CLI


def test_cli_html_to_stdout_or_to_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "-f", str(PICTURE), "-o", "html"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!DOCTYPE html>") and out.count('<section class="node') == 6
    assert "<script" not in out and "http" not in out  # self-contained: no script, no link
    target = tmp_path / "audit.html"
    assert main(["audit", "-f", str(PICTURE), "--html", str(target)]) == 0
    assert "pending by cause:" in capsys.readouterr().out  # the table still goes to stdout
    assert target.read_text() == out
    assert main(["audit", "-f", str(PICTURE), "-o", "html", "--html", str(target)]) == 0
    assert capsys.readouterr().out == ""
    assert main(["audit", "-f", str(PICTURE), "--html", str(tmp_path)]) == 2  # a directory: refused first
    captured = capsys.readouterr()
    assert "--html" in captured.err and captured.out == ""


# ---------------------------------------------------------------- rendered in a browser


def _pixels(path: Path) -> dict[str, int]:
    """Pixels of each state's colour in a PNG screenshot."""
    import matplotlib.image
    import numpy

    rgb = (matplotlib.image.imread(str(path))[..., :3] * 255).round().astype(numpy.int32)
    out = {}
    for state, colour in COLOURS.items():
        want = numpy.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=numpy.int32)
        out[state] = int((numpy.abs(rgb - want).max(axis=-1) <= 2).sum())
    return out


def test_the_page_draws_in_chromium(tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed (CI installs it: .ci/run)")
    out = tmp_path / "audit.html"
    assert main(["audit", "-f", str(PICTURE), "-o", "html", "--html", str(out)]) == 0
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*base, "--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    assert len(re.findall(r'<section class="node', dom)) == 6
    assert len(re.findall(r'<span class="d (?:used|free|stranded|tainted|blocked)" title=', dom)) == 34
    assert len(re.findall(r'<tr class="pod"', dom)) == 5
    shot = tmp_path / "shot.png"
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1200,1000", out.as_uri()],
                   capture_output=True, timeout=60, check=True)
    pixels = _pixels(shot)
    squares = {"used": 6, "free": 9, "stranded": 12, "tainted": 6, "blocked": 1}  # + one legend swatch each
    for state, n in squares.items():
        assert pixels[state] >= 150 * (n + 1), (state, pixels)  # a 14x14 square, its rounded corners aside


# ---------------------------------------------------------------- a real dump


def test_a_real_dump_gke_gpu_fungibility(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The GKE GPU-fungibility tutorial scaled to 3 replicas on its one A100 80GB node (tests/fixtures/audit/real):
    upstream leaves replicas 2 and 3 Pending ("cannot allocate all claims") for the autoscaler; the audit says
    capacity, add nodes, and the page draws the node's one GPU, used, in its PCIe-root domain, with the taint."""
    dump = FIXTURES / "real" / "gke-gpu-fungibility.yaml"
    target = tmp_path / "a.html"
    assert main(["audit", "-f", str(dump), "-o", "json", "--html", str(target)]) == 0
    report = yaml.safe_load(capsys.readouterr().out)
    assert report["devices"] == {"total": 1, "allocated": 1, "free": 0, "stranded": 0}
    assert report["groups"] == [{"cause": "capacity", "count": 2,
                                 "pods": ["default/vllm-gpu-5f7c9d8b6-9mrtl", "default/vllm-gpu-5f7c9d8b6-kz7vd"],
                                 "meaning": CAUSES["capacity"].meaning, "advice": CAUSES["capacity"].remedy}]
    text = target.read_text()
    assert re.findall(r'<span class="d (\w+)" title="([^"]*)"', text) == [
        ("used", "gpu.nvidia.com/gke-gpu-a100-80gb-pool-c78060b4-cg6n/gpu-0: used (gpu.nvidia.com/addressingMode=None, "
                 "gpu.nvidia.com/architecture=Ampere, gpu.nvidia.com/brand=Nvidia, "
                 "gpu.nvidia.com/cudaComputeCapability=8.0.0, gpu.nvidia.com/cudaDriverVersion=13.0.0, "
                 "gpu.nvidia.com/driverVersion=580.126.20, gpu.nvidia.com/productName=NVIDIA A100-SXM4-80GB, "
                 "gpu.nvidia.com/type=gpu, gpu.nvidia.com/uuid=GPU-e89d84ee-93b4-a63d-ac3f-8c242831ac09, "
                 "resource.kubernetes.io/pciBusID=0000:00:05.0, resource.kubernetes.io/pcieRoot=pci0000:00)")]
    assert '<div class="dlabel">resource.kubernetes.io/pcieRoot=pci0000:00</div>' in text
    assert "taint cloud.google.com/compute-class=vllm-gpu-ccc:NoSchedule" in text
    assert "closest node of 2 pending pod(s): 2 capacity" in text

"""`kubectl dralab` (cli/kubectl_plugin.py): the current context's objects read through kubectl, then the same code
as `dralab audit|schedule|whatif|allocate -f`. kubectl is a stand-in on PATH (tests/kubectl_standin.py) serving
recorded dumps and recording its arguments; the plugin runs as the installed console script would, in a
subprocess with that PATH."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
TOPOLOGY = FIXTURES / "whatif" / "topology-dump.yaml"  # pending train pods in default, a bound agent in `system`
GROUPS = FIXTURES / "whatif" / "groups.yaml"
PLUGIN = [sys.executable, "-c", "import sys; from dralab.kubectl_plugin import main; sys.exit(main())"]


class Cluster:
    """A tmp dir with the stand-in `kubectl` first on PATH, the dump it serves and the calls it saw."""

    def __init__(self, tmp: Path, dump: Path) -> None:
        self.bin = tmp / "bin"
        self.bin.mkdir()
        script = self.bin / "kubectl"
        script.write_text(f"#!{sys.executable}\n" + (ROOT / "tests" / "kubectl_standin.py").read_text())
        script.chmod(0o755)
        self.calls_file = tmp / "calls.jsonl"
        self.env = {**os.environ, "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
                    "STANDIN_CALLS": str(self.calls_file), "STANDIN_DUMP": str(dump)}

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*PLUGIN, *args], capture_output=True, text=True, timeout=120,
                              env={**self.env, **env})

    def calls(self) -> list[list[str]]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines()]


def dralab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dralab", *args], capture_output=True, text=True, timeout=120)


def test_the_console_script_is_installed_with_the_package() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-dralab"] == "dralab.kubectl_plugin:main"  # kubectl runs kubectl-<name> as `kubectl name`
    assert scripts["dralab"] == "dralab.cli:main"


def test_audit_reads_every_kind_with_the_connection_flags_and_answers_as_dralab_does(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, TOPOLOGY)
    proc = cluster.run("audit", "--context", "prod", "--kubeconfig", "/k/config", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    direct = dralab("audit", "-f", str(TOPOLOGY), "-o", "json")
    assert json.loads(proc.stdout) == json.loads(direct.stdout)  # the same code on the same objects
    calls = cluster.calls()
    assert [c[0] for c in calls] == ["api-resources", "get"]
    assert calls[0] == ["api-resources", "-o", "name", "--verbs=list", "--context=prod", "--kubeconfig=/k/config"]
    get = calls[1]
    assert get[2:] == ["--all-namespaces", "-o", "yaml", "--context=prod", "--kubeconfig=/k/config"]
    names = get[1].split(",")
    for name in ("nodes", "pods", "resourceslices.resource.k8s.io", "resourceclaims.resource.k8s.io",
                 "resourceclaimtemplates.resource.k8s.io", "deviceclasses.resource.k8s.io",
                 "devicetaintrules.resource.k8s.io", "workloads.scheduling.k8s.io", "podgroups.scheduling.k8s.io",
                 "podgroups.scheduling.x-k8s.io", "priorityclasses.scheduling.k8s.io", "poddisruptionbudgets.policy"):
        assert name in names  # full names: Kueue's workloads.kueue.x-k8s.io is another kind


def test_kinds_the_server_does_not_serve_are_left_out_and_said(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, FIXTURES / "audit" / "taint.yaml")
    served = "nodes,pods,resourceslices.resource.k8s.io,resourceclaims.resource.k8s.io,deviceclasses.resource.k8s.io"
    proc = cluster.run("audit", STANDIN_SERVED=served)
    assert proc.returncode == 0, proc.stderr
    assert cluster.calls()[1][1] == served  # only what api-resources listed, in the plugin's order
    assert "not served by the cluster, left out: resourceclaimtemplates.resource.k8s.io" in proc.stderr
    assert proc.stdout == dralab("audit", "-f", str(FIXTURES / "audit" / "taint.yaml")).stdout


def test_a_kind_withdrawn_between_the_calls_is_dropped_and_the_get_retried(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, FIXTURES / "audit" / "taint.yaml")
    proc = cluster.run("audit", "-o", "json", STANDIN_GONE="podgroups.scheduling.x-k8s.io")
    assert proc.returncode == 0, proc.stderr
    gets = [c[1].split(",") for c in cluster.calls() if c[0] == "get"]
    assert len(gets) == 2 and "podgroups.scheduling.x-k8s.io" in gets[0]
    assert "podgroups.scheduling.x-k8s.io" not in gets[1]
    assert "does not serve podgroups.scheduling.x-k8s.io: left out" in proc.stderr


def test_half_failed_discovery_is_a_warning(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, FIXTURES / "audit" / "taint.yaml")
    message = ("error: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: the server is "
               "currently unable to handle the request")
    proc = cluster.run("audit", STANDIN_FAIL=f"api-resources:1:{message}")
    assert proc.returncode == 0, proc.stderr
    assert "warning: kubectl api-resources: error: unable to retrieve the complete list" in proc.stderr


def _pending_elsewhere(tmp_path: Path) -> Path:
    """The topology dump and a pending pod in namespace team-b."""
    docs = yaml.safe_load(TOPOLOGY.read_text())
    items = docs["items"] if docs.get("kind") == "List" else [docs]
    items.append({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "big", "namespace": "team-b", "uid": "6f1c0a52-0009-4b8e-9d7a-000000000009"},
                  "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "900"}}}]},
                  "status": {"phase": "Pending"}})
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def _pending(report: dict[str, Any]) -> set[str]:
    return {f"{p['namespace']}/{p['name']}" for p in report["pods"] if p["node"] is None}


def test_a_namespace_narrows_the_pods_asked_about_not_the_cluster_state(tmp_path: Path) -> None:
    dump = _pending_elsewhere(tmp_path)
    cluster = Cluster(tmp_path, dump)
    every = json.loads(cluster.run("audit", "-o", "json").stdout)
    saved = tmp_path / "saved.yaml"
    proc = cluster.run("audit", "-n", "default", "-o", "json", "--save-dump", str(saved))
    assert proc.returncode == 0, proc.stderr
    one = json.loads(proc.stdout)
    assert _pending(every) == {"default/train-0", "default/train-1", "team-b/big"}
    assert _pending(one) == {"default/train-0", "default/train-1"}
    # the agent in `system` still holds its GPU: devices are counted from every namespace's claims
    assert one["devices"] == every["devices"] and every["devices"]["allocated"] == 3
    assert all("--all-namespaces" in c for c in cluster.calls() if c[0] == "get")
    assert "-n default: 1 pending pods of other namespaces left out" in proc.stderr
    kept = {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"])
            for o in yaml.safe_load(saved.read_text())["items"] if o["kind"] == "Pod"}
    assert ("Pod", "system", "agent") in kept and ("Pod", "team-b", "big") not in kept
    again = dralab("audit", "-f", str(saved), "-o", "json")  # the saved dump reads again offline
    assert json.loads(again.stdout) == one
    assert "creationTimestamp: '2025-11-03T08:00:00Z'" in saved.read_text()  # a string still, not a datetime
    before = saved.read_text()
    failed = cluster.run("audit", "--save-dump", str(saved), STANDIN_FAIL="get:1:error: Unauthorized")
    assert failed.returncode == 2 and saved.read_text() == before  # a failed read leaves the file as it was


def test_whatif_schedule_and_allocate_run_through_the_plugin(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, TOPOLOGY)
    whatif = cluster.run("whatif", "--node-groups", str(GROUPS), "-o", "json", "--policy", "dra")
    assert whatif.returncode == 0, whatif.stderr
    direct = dralab("whatif", "-f", str(TOPOLOGY), "--node-groups", str(GROUPS), "-o", "json", "--policy", "dra")
    assert json.loads(whatif.stdout) == json.loads(direct.stdout)
    schedule = cluster.run("schedule")
    assert schedule.returncode == 0 and json.loads(schedule.stdout) == json.loads(
        dralab("schedule", "-f", str(TOPOLOGY)).stdout)
    allocate = cluster.run("allocate", "--node", "gpu-node-a", "-o", "json")
    direct = dralab("allocate", "-f", str(TOPOLOGY), "--node", "gpu-node-a", "-o", "json")
    assert allocate.returncode == direct.returncode == 1  # unsatisfiable: 4 in one NVLink domain, 3 free there
    assert json.loads(allocate.stdout) == json.loads(direct.stdout)
    assert cluster.calls()[-1][1] == ("nodes,resourceslices.resource.k8s.io,resourceclaims.resource.k8s.io,"
                                      "deviceclasses.resource.k8s.io")  # what allocate reads, no more


def test_kubectl_missing_is_exit_2(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, TOPOLOGY)
    proc = cluster.run("audit", "--kubectl", str(tmp_path / "nowhere" / "kubectl"))
    assert proc.returncode == 2 and "kubectl: not found" in proc.stderr and not proc.stdout
    shutil.rmtree(cluster.bin)
    proc = cluster.run("audit", PATH=str(cluster.bin))
    assert proc.returncode == 2 and "kubectl: not found (is kubectl installed and on PATH?" in proc.stderr


def test_kubectl_failing_says_the_command_and_its_message(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, TOPOLOGY)
    proc = cluster.run("audit", "--context", "prod",
                       STANDIN_FAIL="get:1:error: You must be logged in to the server (Unauthorized)")
    assert proc.returncode == 2 and not proc.stdout
    assert "`kubectl get nodes,pods," in proc.stderr and "--context=prod` failed with exit status 1" in proc.stderr
    assert "error: You must be logged in to the server (Unauthorized)" in proc.stderr
    proc = cluster.run("audit", STANDIN_FAIL="api-resources:1:error: dial tcp 10.0.0.1:6443: connect: refused")
    assert proc.returncode == 2
    assert "`kubectl api-resources -o name --verbs=list` failed with exit status 1" in proc.stderr


def test_output_that_is_not_a_list_is_exit_2(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, TOPOLOGY)
    proc = cluster.run("audit", STANDIN_STDOUT="items: [a, b\n  c: {\n")
    assert proc.returncode == 2 and "printed output that is not YAML dralab reads at line 2, column 4" in proc.stderr
    proc = cluster.run("audit", STANDIN_STDOUT="apiVersion: v1\nkind: List\nitems: []\nkind: List\n")
    assert proc.returncode == 2 and "duplicate key `kind`" in proc.stderr  # read as Kubernetes reads YAML
    proc = cluster.run("audit", STANDIN_STDOUT="apiVersion: v1\nkind: Pod\n")
    assert proc.returncode == 2 and "printed kind 'Pod', expected a `kind: List`" in proc.stderr


def test_an_object_the_loader_refuses_names_the_cluster_not_a_temporary_file(tmp_path: Path) -> None:
    bad = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "x" * 300}}]}
    cluster = Cluster(tmp_path, TOPOLOGY)
    proc = cluster.run("audit", STANDIN_STDOUT=yaml.safe_dump(bad))
    assert proc.returncode == 2
    assert "the cluster's objects (kubectl get; keep them with --save-dump FILE): items[0].metadata.name" in proc.stderr
    assert "kubectl-dralab-" not in proc.stderr


def test_a_slow_kubectl_times_out(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, TOPOLOGY)
    proc = cluster.run("audit", "--kubectl-timeout", "0.5", STANDIN_SLEEP="5")
    assert proc.returncode == 2 and "did not finish within 0.5s (--kubectl-timeout)" in proc.stderr


def test_bad_options_are_refused_before_kubectl_runs(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, TOPOLOGY)
    for args in (["audit", "-o", "html-please"], ["explode"], ["audit", "-n", "a", "-A"],
                 ["audit", "--kubectl-timeout", "0"], []):
        proc = cluster.run(*args)
        assert proc.returncode == 2, (args, proc.stderr)
    assert cluster.calls() == []
    assert cluster.run("--help").returncode == 0
    helped = cluster.run("audit", "--help")
    assert helped.returncode == 0 and "--save-dump" in helped.stdout and "--filename" in helped.stdout


@pytest.mark.skipif(shutil.which("kubectl-dralab") is None, reason="the console script is not on PATH")
def test_the_installed_script_runs() -> None:
    proc = subprocess.run(["kubectl-dralab", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("kubectl-dralab ")


DUMPS = sorted([*(FIXTURES / "audit").glob("*.yaml"), *(FIXTURES / "podgroups").glob("*.yaml"),
                FIXTURES / "dra" / "kubectl-list.yaml", TOPOLOGY])


@pytest.mark.parametrize("dump", DUMPS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_recorded_dump_audits_the_same_through_kubectl(dump: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """What the plugin asks kubectl for is every kind the audit reads: served back by kind, each recorded dump
    gives the audit `dralab audit -f` gives (the stand-in serves only the kinds asked for)."""
    from dralab.cli import main as dralab_main
    from dralab.kubectl_plugin import main as plugin_main

    cluster = Cluster(tmp_path, dump)
    for key in ("PATH", "STANDIN_CALLS", "STANDIN_DUMP"):
        monkeypatch.setenv(key, cluster.env[key])
    code = plugin_main(["audit", "-o", "json"])
    through, err = capsys.readouterr()
    direct_code = dralab_main(["audit", "-f", str(dump), "-o", "json"])
    direct, direct_err = capsys.readouterr()
    assert (code, through) == (direct_code, direct), (err, direct_err)


def test_a_list_over_the_dump_limit_is_refused_with_its_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dralab.core.dra import api
    from dralab.inputs import InputError
    from dralab.kubectl_get import parse_list

    path = tmp_path / "list.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems: []\n" + "#" * 2048 + "\n")
    assert parse_list(str(path), "kubectl get x")["items"] == []
    monkeypatch.setattr(api, "MAX_FILE_BYTES", 1024)
    with pytest.raises(InputError, match=r"`kubectl get x` printed 2\d\d\d bytes, over the 0 MiB dralab reads"):
        parse_list(str(path), "kubectl get x")

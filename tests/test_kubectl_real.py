"""`kubectl dralab` through a real kubectl binary (skipped where none is installed): kubectl finds the plugin on
PATH and runs it, and the plugin's own kubectl calls (api-resources, get -A -o yaml) go to a read-only stand-in
API server (tests/fake_apiserver.py) serving a recorded dump. What this checks that the stand-in kubectl of
test_kubectl_plugin.py cannot: the real argument syntax, the real List kubectl prints (items given their
apiVersion and kind), and kubectl's own rule for flags before a plugin's name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_apiserver import FakeAPIServer

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl on PATH")
ROOT = Path(__file__).resolve().parent.parent
TOPOLOGY = ROOT / "tests" / "fixtures" / "whatif" / "topology-dump.yaml"


def _kubectl(tmp: Path, server: FakeAPIServer, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl ARGS` with `kubectl-dralab` (for this interpreter, as the installed console script would be) first
    on PATH and a kubeconfig naming `server`."""
    folder = tmp / "plugins"
    if not folder.exists():
        folder.mkdir()
        script = folder / "kubectl-dralab"
        script.write_text(f"#!{sys.executable}\nimport sys\nfrom dralab.kubectl_plugin import main\nsys.exit(main())\n")
        script.chmod(0o755)
    env = {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(tmp),
           "KUBECONFIG": str(server.kubeconfig(tmp / "config")), "KUBECACHEDIR": str(tmp / "cache")}
    return subprocess.run(["kubectl", *args], capture_output=True, text=True, timeout=120, env=env, cwd=tmp)


def test_a_real_kubectl_runs_the_plugin_on_what_the_server_serves(tmp_path: Path) -> None:
    with FakeAPIServer(TOPOLOGY) as server:
        proc = _kubectl(tmp_path, server, "dralab", "audit", "-o", "json", "--save-dump", str(tmp_path / "d.yaml"))
    assert proc.returncode == 0, proc.stderr
    direct = subprocess.run([sys.executable, "-m", "dralab", "audit", "-f", str(TOPOLOGY), "-o", "json"],
                            capture_output=True, text=True, timeout=120)
    assert json.loads(proc.stdout) == json.loads(direct.stdout)
    assert "not served by the cluster, left out: devicetaintrules.resource.k8s.io" in proc.stderr
    assert "/api/v1/pods" in server.requests and "/apis/resource.k8s.io/v1/resourceslices" in server.requests
    saved = (tmp_path / "d.yaml").read_text()
    assert saved.startswith("apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Node\n")  # kubectl's own List


def test_flags_before_the_plugin_name_are_kubectls_error(tmp_path: Path) -> None:
    with FakeAPIServer(TOPOLOGY) as server:
        proc = _kubectl(tmp_path, server, "--context", "fake", "dralab", "audit")
        after = _kubectl(tmp_path, server, "dralab", "audit", "--context", "fake")
    assert proc.returncode != 0 and "flags cannot be placed before plugin name: --context" in proc.stderr
    assert after.returncode == 0, after.stderr


def test_a_list_rbac_refuses_is_exit_2_with_kubectls_words(tmp_path: Path) -> None:
    with FakeAPIServer(TOPOLOGY, forbidden=("pods",)) as server:
        proc = _kubectl(tmp_path, server, "dralab", "audit")
    assert proc.returncode == 2 and not proc.stdout
    assert "--all-namespaces -o yaml` failed with exit status 1" in proc.stderr
    assert 'User "auditor" cannot list resource "pods"' in proc.stderr

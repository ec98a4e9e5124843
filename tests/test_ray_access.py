"""Reaching Ray (issue 18, "Ray"): an unreachable `--ray` exits 3 within 30 s with one line; a cluster with
token authentication on says that it wants a token and which variables to set, and works once they are set;
a local Ray started by dralab listens on 127.0.0.1 only, with a token; nothing Ray prints reaches stdout.

The token tests start a real `ray start --head` on a free port, in a temporary folder, bound to 127.0.0.1,
in a process group of its own that is killed afterwards (never `ray stop`: it would stop every Ray on
the machine)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dralab.actors.ray_access import RayUnreachable, probe_ray

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
TOKEN = "0123456789abcdef" * 4
RAY_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS",
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a child: no Ray variables of ours, a home of its own (no ~/.ray/auth_token)."""
    env = {k: v for k, v in os.environ.items() if k not in RAY_VARS}
    env.update(HOME=str(home), RAY_USAGE_STATS_ENABLED="0", **extra)
    return env


def dralab(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dralab", *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def test_nothing_listening_is_exit_3_within_seconds(tmp_path: Path) -> None:
    """Before: Ray retried for minutes, printing warnings (the subprocess timed out here)."""
    port = _free_port()  # bound and closed: nothing listens there
    started = time.monotonic()
    proc = dralab("run", str(QUICKSTART), "--ray", f"127.0.0.1:{port}", "--embedded", "-o", "json",
                  env=_env(tmp_path))
    took = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert took < 30
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("dralab: error:")]
    assert len(errors) == 1 and f"nothing answers at 127.0.0.1:{port}" in errors[0], proc.stderr[-2000:]


def test_a_listener_that_is_not_ray_is_refused_in_bounded_time() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(RayUnreachable, match="no Ray GCS answered within 3s"):
            probe_ray(f"127.0.0.1:{port}", gcs_timeout_s=3)
        assert time.monotonic() - started < 10


def test_addresses_the_probe_leaves_to_ray() -> None:
    probe_ray("auto")  # Ray finds the cluster itself: nothing to probe
    with pytest.raises(RayUnreachable, match="nothing answers"):
        probe_ray(f"ray://127.0.0.1:{_free_port()}")


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(name))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        out.add(pid)
        todo += children.get(pid, [])
    return out


def _listening(pids: set[int]) -> list[str]:
    """The local addresses of the TCP sockets these processes listen on (/proc/net/tcp and tcp6)."""
    inodes: set[str] = set()
    for pid in pids:
        with_fds = Path(f"/proc/{pid}/fd")
        try:
            for fd in with_fds.iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                out.append(fields[1].split(":")[0])
    return out


def _loopback(hex_address: str) -> bool:
    if len(hex_address) == 8:  # IPv4, little-endian: 127.x.x.x ends in 7F
        return hex_address.endswith("7F")
    words = [hex_address[i:i + 8] for i in range(0, 32, 8)]
    if words[:3] == ["00000000", "00000000", "FFFF0000"]:  # ::ffff:a.b.c.d
        return words[3].endswith("7F")
    return words == ["00000000", "00000000", "00000000", "01000000"]  # ::1


# Runs in a child (the test session's own Ray is already up in this process): dralab's local Ray, an actor,
# then what every process of that Ray listens on, and whether its GCS lets in a client without the token
# (a probe from another process, whose environment has no Ray variables: a stranger on this machine).
_LOCAL = """
import json, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
import ray
from dralab.actors.live_runtime import ray_runtime
from test_ray_access import _descendants, _listening

@ray.remote
class Echo:
    def pid(self):
        return os.getpid()

with ray_runtime(None, "json"):
    actor = Echo.remote()
    ray.get(actor.pid.remote())
    gcs = ray.get_runtime_context().gcs_address
    listening = _listening(_descendants(os.getpid()))
    token_set = bool(os.environ.get("RAY_AUTH_TOKEN"))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    stranger = subprocess.run([sys.executable, "-c", "import sys; from dralab.actors.ray_access import probe_ray; "
                               "probe_ray(sys.argv[1])", gcs], capture_output=True, text=True, env=clean)
print(json.dumps({"gcs": gcs, "listening": listening, "token_set": token_set, "stranger": stranger.stderr,
                  "token_after": os.environ.get("RAY_AUTH_TOKEN")}))
"""


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_local_ray_listens_on_loopback_only_and_wants_a_token(tmp_path: Path) -> None:
    """Before: the GCS, the raylet and every actor listened on all interfaces (`*:port`)."""
    proc = subprocess.run([sys.executable, "-c", _LOCAL, str(Path(__file__).parent)], capture_output=True,
                          text=True, timeout=110, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["gcs"].startswith("127.0.0.1:")
    assert len(seen["listening"]) >= 3  # the GCS, the raylet, the actor at least
    assert all(_loopback(a) for a in seen["listening"]), seen["listening"]
    assert seen["token_set"] and "requires an authentication token" in seen["stranger"], seen["stranger"][-2000:]
    assert seen["token_after"] is None  # restored once Ray was shut down
    assert not (tmp_path / ".ray" / "auth_token").exists()  # the run's token was never written to a file


@pytest.fixture(scope="module")
def token_cluster() -> Iterator[str]:
    """`ray start --head` with token authentication, bound to 127.0.0.1; its address."""
    folder = Path(tempfile.mkdtemp(prefix="dr-ray-"))  # short: Ray's socket paths must fit in 107 bytes
    port = _free_port()
    env = _env(folder / "home", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    (folder / "home").mkdir()
    start = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--port", str(port), "--num-cpus", "2",
         "--include-dashboard", "false", "--temp-dir", str(folder / "r"), "--disable-usage-stats"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = start.communicate(timeout=90)
        if start.returncode != 0:
            pytest.fail(f"ray start failed: {out[-2000:]}")
        yield f"127.0.0.1:{port}"
    finally:
        with __import__("contextlib").suppress(ProcessLookupError):
            os.killpg(start.pid, signal.SIGKILL)  # the group `ray start` made: its GCS, raylet and workers
        subprocess.run(["rm", "-rf", str(folder)], check=False)


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_cluster_with_token_auth_says_which_variables_to_set(token_cluster: str, tmp_path: Path) -> None:
    """Before: 'Failed to connect to Ray cluster' after ~20 s, the token never mentioned."""
    started = time.monotonic()
    proc = dralab("run", str(QUICKSTART), "--ray", token_cluster, "--embedded", env=_env(tmp_path))
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert time.monotonic() - started < 30
    errors = [line for line in proc.stderr.splitlines() if line.startswith("dralab: error:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    assert "requires an authentication token" in errors[0]
    assert "RAY_AUTH_MODE=token" in errors[0] and "RAY_AUTH_TOKEN" in errors[0]
    wrong = dralab("run", str(QUICKSTART), "--ray", token_cluster, "--embedded",
                   env=_env(tmp_path, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="f" * 64))
    assert wrong.returncode == 3 and "the token given was refused" in wrong.stderr, wrong.stderr[-2000:]


@pytest.mark.live
@pytest.mark.timeout(180)
def test_a_run_on_a_cluster_with_token_auth_works_with_the_token(token_cluster: str, tmp_path: Path) -> None:
    """RAY_AUTH_TOKEN alone is enough (dralab turns token mode on when a token is configured); the run's
    actors and the embedded bus live on that cluster. RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: the cluster is
    on 127.0.0.1, so this driver's node must be too (docs/deploy.md)."""
    log = tmp_path / "c.dralog"
    proc = dralab("run", str(QUICKSTART), "--ray", token_cluster, "--embedded", "--speed", "60", "-o", "json",
                  "--log", str(log), env=_env(tmp_path, RAY_AUTH_TOKEN=TOKEN, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0"),
                  timeout=170)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["mode"] == "cluster" and summary["pods"]["pending"] == 0


@pytest.mark.live
@pytest.mark.timeout(200)
def test_nothing_ray_prints_reaches_stdout_when_an_actor_is_killed(redis_url: str, tmp_path: Path) -> None:
    """A reactor-kill mid-run: Ray's driver prints `(raylet) A worker died ...` (and, with console logs,
    the actors' own lines); stdout must still be exactly the one JSON summary."""
    spec = yaml.safe_load(QUICKSTART.read_text())
    spec["spec"]["faults"] = [{"at": "30s", "kind": "reactor-kill", "reactor": "scheduler"}]
    scenario = tmp_path / "kill.yaml"
    scenario.write_text(yaml.safe_dump(spec))
    proc = dralab("run", str(scenario), "--redis", redis_url, "--speed", "30", "-o", "json",
                  env=_env(tmp_path), timeout=190)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)  # the whole of stdout: one object
    assert summary["faults"]  # the kill was played

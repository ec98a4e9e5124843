"""Reaching Ray safely: a bounded probe of a cluster given with ``--ray``, and the environment of a local
Ray that dralab starts itself (token authentication on, every socket on the loopback interface).

Why a probe before ``ray.init``: Ray 2.60 retries an unreachable GCS for minutes, printing a warning
every few seconds, and against a cluster with token authentication on it fails after ~20 s with
"Failed to connect to Ray cluster", never saying a token is missing. The probe connects with plain TCP
first (nothing listening: a one-line answer at once), then asks the GCS for the cluster's id in a child
process that is killed after ``gcs_timeout_s`` (Ray's own client cannot be bounded in-process), and reads
Ray's ``AuthenticationError`` there to say which variables to set. So ``dralab run --ray ADDRESS`` exits
3 within ~20 s whatever is (or is not) at ADDRESS.

Token authentication (Ray 2.60, docs.ray.io/en/latest/ray-security/token-auth.html): ``RAY_AUTH_MODE=token``
turns it on, the token comes from ``RAY_AUTH_TOKEN``, else the file named by ``RAY_AUTH_TOKEN_PATH``, else
``~/.ray/auth_token``. Ray enables it by default for a new local cluster (``ray.init()``) and for
``ray start --head`` when a token exists, but a driver joining an explicit address uses it only when
``RAY_AUTH_MODE=token`` is set; dralab does what Ray does for ``address="auto"``: a token found switches
token mode on (docs/deploy.md).

A local Ray: Ray binds its gRPC servers (GCS, raylet, every worker) to all interfaces unless the node's IP
is a loopback address, and it replaces a loopback ``_node_ip_address`` by the machine's address unless it
believes cluster support is off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, a constant read when Ray is
imported). ``local_ray_environment`` turns that off while Ray starts (the constant, and the variable the
processes Ray starts inherit), so every socket of the local Ray listens on 127.0.0.1 only; and it gives
the run a fresh token in ``RAY_AUTH_TOKEN`` unless one is configured, so Ray does not write one into
``~/.ray/auth_token``. Both are restored when the run's Ray is shut down.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator

__all__ = ["RayUnreachable", "local_ray_environment", "probe_ray", "token_help"]

TOKEN_VARS = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
LOCAL_ONLY_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
# Run in a child process: connect to the GCS and read the cluster id; one line says how it went.
_PROBE = """
import sys
try:
    from ray._raylet import GcsClient
    GcsClient(address=sys.argv[1]).cluster_id
except Exception as exc:
    kind = "auth" if type(exc).__name__ == "AuthenticationError" or "nauthenticated" in str(exc) else "error"
    print(kind, type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else "", flush=True)
    sys.exit(1)
print("ok", flush=True)
"""


class RayUnreachable(Exception):
    """Ray at the given address cannot be used; the message says why and what to do, in one line."""


def token_help() -> str:
    return ("set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<the cluster's token> (or RAY_AUTH_TOKEN_PATH=<a file "
            "holding it>); `ray get-auth-token` on the head node prints it")


def _host_port(address: str) -> tuple[str, int] | None:
    """``host:port`` (or ``ray://host:port``, ``[v6]:port``) of an address, None for ``auto`` and the like."""
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def enable_token_if_configured() -> None:
    """What Ray does for ``address="auto"``, for an explicit address too: a token that is configured
    (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token) switches token mode on unless RAY_AUTH_MODE
    says otherwise."""
    if os.environ.get("RAY_AUTH_MODE") is not None:
        return
    with contextlib.suppress(ImportError):
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )

        maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def _token_configured() -> bool:
    """Where Ray 2.60 looks for a token: RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH names, ~/.ray/auth_token."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    return os.path.isfile(path)


def probe_ray(address: str, connect_timeout_s: float = 5.0, gcs_timeout_s: float = 15.0) -> None:
    """Fail fast, with one line, unless a Ray GCS that accepts this process answers at ``address``."""
    where = _host_port(address)
    if where is None:
        return  # `auto` and the like: Ray finds the cluster itself
    host, port = where
    try:
        with socket.create_connection((host, port), timeout=connect_timeout_s):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise RayUnreachable(f"--ray {address}: nothing answers at {host}:{port} ({reason}); start Ray there "
                             f"(`ray start --head --port {port}`) or leave --ray out to start Ray locally") from None
    if address.startswith("ray://"):
        return  # Ray Client's server speaks its own protocol: ray.init says what goes wrong
    enable_token_if_configured()
    if os.environ.get("RAY_AUTH_MODE") == "token" and not _token_configured():
        raise RayUnreachable(f"--ray {address}: RAY_AUTH_MODE=token but no token is configured: {token_help()}")
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE, f"{host}:{port}"], capture_output=True, text=True,
                              timeout=gcs_timeout_s, env=os.environ.copy())
    except subprocess.TimeoutExpired:
        raise RayUnreachable(f"--ray {address}: something listens at {host}:{port} but no Ray GCS answered "
                             f"within {gcs_timeout_s:.0f}s (the GCS port of `ray start --head --port`?)") from None
    lines = proc.stdout.strip().splitlines()
    answer = lines[-1] if lines else f"error {proc.stderr.strip().splitlines()[-1:]!r}"
    if answer == "ok":
        return
    kind, _, detail = answer.partition(" ")
    if "authentication token" in proc.stderr.lower():  # Ray's native client may abort instead of raising
        kind = "auth"
    if kind == "auth":
        given = "the token given was refused" if os.environ.get("RAY_AUTH_MODE") == "token" else "none was given"
        raise RayUnreachable(f"--ray {address}: the Ray cluster requires an authentication token (token "
                             f"authentication is on) and {given}: {token_help()}")
    raise RayUnreachable(f"--ray {address}: no usable Ray GCS at {host}:{port}: {detail}")


@contextlib.contextmanager
def local_ray_environment() -> Iterator[None]:
    """Around starting (and running) a local Ray: loopback only, token authentication with a run token
    unless one is configured; everything restored afterwards."""
    from ray._private import ray_constants

    saved = {k: os.environ.get(k) for k in (LOCAL_ONLY_VAR, "RAY_AUTH_MODE", *TOKEN_VARS)}
    cluster_support = ray_constants.ENABLE_RAY_CLUSTER
    os.environ[LOCAL_ONLY_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False  # read by services.get_node_ip_address when Ray starts
    if os.environ.get("RAY_AUTH_MODE", "token") == "token" and not any(os.environ.get(k) for k in TOKEN_VARS):
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)  # Ray turns token mode on for a new local cluster
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = cluster_support
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

"""A private, throw-away ``redis-server`` for tests and for ``dralab run`` without a Redis URL.

Why private: the machine may run a shared Redis on 6379 that other people use; dralab must never
write there by accident. So we start our own server from PATH on a free port, bound to 127.0.0.1
only, persistence off unless asked (AOF with ``appendfsync everysec``), in a temp dir, and kill it
on exit. The context manager is synchronous so it works in fixtures and in async code alike.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["private_redis_server", "redis_server_available"]

SHARED_REDIS_PORT = 6379  # never ours


def redis_server_available() -> bool:
    """True when a ``redis-server`` executable is on PATH."""
    return shutil.which("redis-server") is not None


def _free_port() -> int:
    for _ in range(20):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port != SHARED_REDIS_PORT:
            return port
    raise RuntimeError("could not find a free TCP port on 127.0.0.1")


def _pings(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextlib.contextmanager
def private_redis_server(
    *, appendonly: bool = False, dir: str | Path | None = None, start_timeout_s: float = 10.0
) -> Iterator[str]:
    """Start a private ``redis-server`` and yield its URL ``redis://127.0.0.1:PORT/0``.

    ``dir`` is the server's working directory (AOF files land there); by default a temp dir that
    is removed on exit. Raises ``RuntimeError`` with the server's log if it does not answer PING
    within ``start_timeout_s``.
    """
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("redis-server is not on PATH (install the redis-server package)")
    with contextlib.ExitStack() as stack:
        workdir = Path(dir) if dir is not None else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        workdir.mkdir(parents=True, exist_ok=True)
        log = workdir / "redis.log"
        last_error = ""
        for _attempt in range(3):  # the free port can be taken between probe and bind: retry
            port = _free_port()
            args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--protected-mode", "yes",
                    "--save", "", "--dir", str(workdir), "--logfile", str(log), "--daemonize", "no"]
            args += ["--appendonly", "yes", "--appendfsync", "everysec"] if appendonly else [
                "--appendonly", "no"]
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
            stack.callback(_stop, proc)
            deadline = time.monotonic() + start_timeout_s
            while proc.poll() is None and time.monotonic() < deadline and not _pings(port):
                time.sleep(0.02)
            if proc.poll() is None and _pings(port):
                yield f"redis://127.0.0.1:{port}/0"
                return
            _stop(proc)
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            text = log.read_text(errors="replace") if log.exists() else ""
            last_error = (err + text).strip()[-2000:]
            if "Address already in use" not in last_error:
                break
        raise RuntimeError(
            f"private redis-server did not answer PING within {start_timeout_s:g}s; log:\n{last_error}")

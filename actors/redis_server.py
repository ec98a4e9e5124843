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

__all__ = ["RedisServer", "private_redis_server", "redis_server_available"]

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


class RedisServer:
    """A private ``redis-server`` that can be killed and started again on the same port and data
    directory (what a Redis restart looks like to its clients), for fault tests.

    ``appendfsync`` is ``None`` (persistence off), ``"everysec"`` or ``"always"`` (AOF on). Use as
    a context manager, or call ``start``/``kill``/``stop`` yourself.
    """

    def __init__(self, dir: str | Path, *, appendfsync: str | None = "everysec",
                 start_timeout_s: float = 10.0) -> None:
        if appendfsync not in (None, "everysec", "always", "no"):
            raise ValueError(f"appendfsync must be None, everysec, always or no, not {appendfsync!r}")
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not on PATH (install the redis-server package)")
        self.exe, self.dir, self.appendfsync = exe, Path(dir), appendfsync
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def start(self) -> str:
        """Start the server (on its port of last time, if any) and wait for PING; its URL."""
        if self.pid is not None:
            return self.url
        self.dir.mkdir(parents=True, exist_ok=True)
        log = self.dir / "redis.log"
        for _attempt in range(3 if not self.port else 50):
            port = self.port or _free_port()
            args = [self.exe, "--port", str(port), "--bind", "127.0.0.1", "--protected-mode", "yes",
                    "--save", "", "--dir", str(self.dir), "--logfile", str(log), "--daemonize", "no"]
            if self.appendfsync is None:
                args += ["--appendonly", "no"]
            else:
                args += ["--appendonly", "yes", "--appendfsync", self.appendfsync]
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
            deadline = time.monotonic() + self.start_timeout_s
            while proc.poll() is None and time.monotonic() < deadline and not _pings(port):
                time.sleep(0.02)
            if proc.poll() is None and _pings(port):
                self.proc, self.port = proc, port
                return self.url
            _stop(proc)
            text = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            if "Address already in use" not in text:
                raise RuntimeError(f"redis-server did not answer PING within {self.start_timeout_s:g}s:\n{text}")
            time.sleep(0.1)  # the old socket may linger a moment on a restart
        raise RuntimeError(f"redis-server could not bind port {self.port or 'any'}")

    def kill(self) -> None:
        """SIGKILL: a crash of the process (what was written to the AOF file stays there)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def stop(self) -> None:
        """SIGTERM: a clean shutdown (Redis flushes and fsyncs the AOF)."""
        if self.proc is not None:
            _stop(self.proc)

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

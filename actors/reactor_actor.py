"""A Ray actor that hosts one reactor, or several on one shared view: consume the log, fold it into
the view, let each hosted reactor decide, append.

Why the shape:
- The loop runs in its own thread with its own asyncio loop, started by the constructor, so that
  when Ray restarts a crashed actor (which re-runs `__init__` and loses all memory) the loop comes
  back by itself, with nobody having to call a start method.

The loop itself (the fold, the decisions, the snapshots, reclaiming entries) is in actors/reactor_loop.py.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any

import ray
import structlog

from .bus import Bus, BusUnavailable
from .bus_factory import BusSpec, open_bus
from .gc_tuning import TENURE_EVERY
from .reactor_loop import ReactorLoop, SnapshotPolicy

log = structlog.get_logger("dralab.actor")
CONNECT_PATIENCE_S = 60.0  # a (re)started actor waits this long for its bus before exiting for a restart


async def _open_patiently(spec: BusSpec, name: str, patience_s: float = CONNECT_PATIENCE_S) -> Bus:
    """Open the bus, retrying for ``patience_s`` while it is unreachable (Redis restarting): a
    restarted actor waits for its bus rather than crash-looping through Ray restarts."""
    deadline = time.monotonic() + patience_s
    delay = 0.1
    while True:
        try:
            return await open_bus(spec)
        except BusUnavailable as exc:
            if time.monotonic() + delay > deadline:
                raise
            log.warning("actor.bus_unreachable", reactor=name, error=str(exc)[:300], retry_in_s=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


@ray.remote(max_restarts=-1, max_task_retries=-1, num_cpus=0)
class ReactorActor:
    """Hosts one reactor by name, or the ``reactors`` named on one shared view (a host: its consumer
    group, consumer and snapshot are named ``name``). Plain (threaded) actor: its methods only read
    counters."""

    def __init__(self, name: str, bus_spec: BusSpec, log_format: str = "console",
                 snapshots: SnapshotPolicy | None = None, reactors: list[str] | None = None) -> None:
        from .logs import configure

        configure(log_format)
        self.name = name
        self._reactors = list(reactors) if reactors else [name]
        self._loop: ReactorLoop | None = None
        self._error: str | None = None
        self._snapshots = snapshots
        self._thread = threading.Thread(target=self._main, args=(bus_spec,), daemon=True)
        self._thread.start()

    def _main(self, bus_spec: BusSpec) -> None:
        async def go() -> None:
            structlog.contextvars.bind_contextvars(actor=self.name)  # in every line of this actor's loop
            bus = await _open_patiently(bus_spec, self.name)
            self._loop = ReactorLoop(self.name, bus, group=self.name, consumer=f"{self.name}-0",
                                     snapshots=self._snapshots, reactors=self._reactors, tenure_every=TENURE_EVERY)
            log.info("actor.started", reactor=self.name, reactors=self._reactors, pid=os.getpid())
            try:
                await self._loop.run()
            finally:
                await bus.close()

        try:
            asyncio.run(go())
        except Exception as exc:
            # Crash-only: a reactor that cannot go on (its bus went away) kills its process, so
            # that Ray restarts it and it rebuilds its view from the log. (A bad entry is not
            # such a case: it is set aside and skipped, see actors/wire.py.)
            self._error = f"{type(exc).__name__}: {exc}"
            offset = self._loop.state.offset if self._loop is not None else None
            log.error("actor.failed", actor=self.name, reactor=self.name, offset=offset, error=self._error,
                      action="exit for a restart")
            os._exit(1)

    def status(self) -> dict[str, Any]:
        loop = self._loop
        out: dict[str, Any] = {
            "name": self.name, "pid": os.getpid(), "error": self._error, "alive": self._thread.is_alive(),
            "hosts": list(self._reactors),
        }
        if loop is not None:
            out.update(loop.stats)
            out["gc_tenures"], out["gc_tenure_ms"] = loop.tenure.count, loop.tenure.last_ms
            out["view_offset"] = loop.state.offset
            out["anomalies"] = list(loop.state.anomalies)
        return out

    def stop(self, timeout_s: float = 5.0) -> bool:
        """Finish the current step (acknowledging what it read) and end the loop."""
        if self._loop is not None:
            self._loop.stopping = True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

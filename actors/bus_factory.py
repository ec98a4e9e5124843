"""Where the log is, as plain data that can be handed to a Ray actor, and how to open it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .bus import Bus


@dataclass(frozen=True)
class BusSpec:
    kind: str  # "redis" | "ray"
    url: str = ""  # redis URL (may hold a password: never log it, see redact_url)
    stream: str = ""
    actor: str = ""  # name of the LogActor for kind "ray"
    namespace: str = "dralab"
    handle: Any = None  # the LogActor's handle, when known (a handle passes to actors as an argument)

    def describe(self) -> str:
        from .redis_bus import redact_url

        if self.kind == "redis":
            return f"redis {redact_url(self.url)} stream {self.stream}"
        return f"embedded bus (Ray actor {self.actor})"


async def open_bus(spec: BusSpec) -> Bus:
    if spec.kind == "redis":
        from .redis_bus import RedisBus

        return await RedisBus.connect(spec.url, spec.stream)
    if spec.kind == "ray":
        import ray

        from .embedded_bus import RayBus

        return RayBus(spec.handle if spec.handle is not None else ray.get_actor(spec.actor, namespace=spec.namespace))
    raise ValueError(f"unknown bus kind {spec.kind!r}")

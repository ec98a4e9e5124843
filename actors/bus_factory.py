"""Where the log is, as plain data that can be handed to a Ray actor, and how to open it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from .bus import Bus, BusUnavailable


@dataclass(frozen=True)
class BusSpec:
    kind: str  # "redis" | "ray"
    url: str = ""  # redis URL (may hold a password: never log it, see redact_url)
    stream: str = ""
    actor: str = ""  # name of the LogActor for kind "ray"
    namespace: str = "dralab"

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

        # A named actor becomes visible shortly after its creation: look it up for a few seconds.
        for _ in range(100):
            try:
                return RayBus(ray.get_actor(spec.actor, namespace=spec.namespace))
            except ValueError:
                await asyncio.sleep(0.1)
        raise BusUnavailable(f"embedded bus: no log actor named {spec.actor!r} in namespace {spec.namespace!r}")
    raise ValueError(f"unknown bus kind {spec.kind!r}")

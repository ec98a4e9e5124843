"""The reactor contract: a pure function of (view, now, seeded random) returning intents.

The same reactor object runs inside a Ray actor, inside the deterministic simulator and inside
verify; only the runtime around it differs. A reactor must not read clocks, sockets, globals or
unseeded randomness: the random source it is handed is derived from (run seed, reactor name, view
offset, now), so recomputing a decision from the same view at the same time gives the same answer.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..log.events import AnyEvent, Record
from ..state.cluster import ClusterState

Trigger = Literal["events", "interval"]


@dataclass(frozen=True)
class Decision:
    """What a reactor wants: events to append (one atomic record) and when to be woken next."""

    events: tuple[AnyEvent, ...] = ()
    wake_at: int | None = None  # cluster ms; None: only when the view changes


class Reactor(Protocol):
    """`trigger` tells the runtime when to call: on every view change ("events"), or only at the
    times it asked for ("interval", e.g. the autoscaler's scan loop)."""

    name: str
    trigger: Trigger

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision: ...


class _SeededOnUse(random.Random):
    """A `random.Random` seeded with `material` at its first draw, not when made: every decision gets
    one, few draw from it (hashing and seeding were ~4% of a simulation). Every draw of `Random`'s
    methods goes through `random()` or `getrandbits()`, both overridden, so the stream is exactly that of
    `random.Random(material)`."""

    def __init__(self, material: str) -> None:  # noqa: D107 - no super().__init__: that would seed now
        self._material: str | None = material
        self.gauss_next = None

    def _seed_now(self) -> None:
        material, self._material = self._material, None
        assert material is not None
        digest = hashlib.blake2b(material.encode(), digest_size=8).digest()
        super().seed(int.from_bytes(digest, "big"))

    def random(self) -> float:
        if self._material is not None:
            self._seed_now()
        return super().random()

    def getrandbits(self, k: int, /) -> int:
        if self._material is not None:
            self._seed_now()
        return super().getrandbits(k)

    def getstate(self) -> Any:
        if self._material is not None:
            self._seed_now()
        return super().getstate()

    def seed(self, *args: object, **kwargs: object) -> None:
        self._material = None
        super().seed(*args, **kwargs)  # type: ignore[arg-type]


def decision_rng(seed: int, reactor: str, view_offset: int, now: int) -> random.Random:
    """The random source of one decision: a function of its inputs only, so replay can recreate it."""
    return _SeededOnUse(f"{seed}/{reactor}/{view_offset}/{now}")


def decision_id(reactor: str, view_offset: int, now: int) -> str:
    """Idempotency id of a decision: a recomputation after a crash appends nothing twice."""
    return f"{reactor}@{view_offset}/{now}"


def decide(reactor: Reactor, view: ClusterState, now: int, seed: int) -> tuple[Record | None, int | None]:
    """Run one reactor on one view; the record to append (None if nothing to do) and its wake time."""
    decision = reactor.react(view, now, decision_rng(seed, reactor.name, view.offset, now))
    if not decision.events:
        return None, decision.wake_at
    record = Record(
        id=decision_id(reactor.name, view.offset, now),
        source=reactor.name,
        view=view.offset,
        t=now,
        events=tuple(decision.events),
    )
    return record, decision.wake_at


def expectations(record: Record, view: ClusterState) -> dict[str, int]:
    """Optimistic concurrency: every object the record writes must be as the view saw it."""
    return {key: view.version(key) for key in record.writes()}

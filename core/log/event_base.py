"""The base of every event of the log schema (:mod:`.events` holds the tagged union and the codec) and the
object keys events write, shared by the schema's areas (one module each: events_nodes, events_dra,
events_gangs, events_provisioning, events_faults)."""

from __future__ import annotations

from typing import Any

import msgspec


class Event(msgspec.Struct, tag_field="type", frozen=True, array_like=False):
    """Base of all events. `touched()` lists the objects the event writes (for versions and conflicts)."""

    def touched(self) -> tuple[str, ...]:
        return ()


def pod_key(namespace: str, name: str) -> str:
    return f"pod/{namespace}/{name}"


def node_key(name: str) -> str:
    return f"node/{name}"


def group_key(name: str) -> str:
    return f"group/{name}"


def claim_key(namespace: str, name: str) -> str:
    return f"claim/{namespace}/{name}"


def _meta(manifest: dict[str, Any]) -> tuple[str, str]:
    meta = manifest.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _pool_keys(allocation: dict[str, Any]) -> tuple[str, ...]:
    """Allocations in one pool conflict: counters and shared capacity are accounted per pool."""
    results = (allocation.get("devices") or {}).get("results") or []
    return tuple(dict.fromkeys(f"pool/{r.get('driver')}/{r.get('pool')}" for r in results))


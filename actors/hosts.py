"""Which reactors share an actor process: the run's layout (``dralab run --hosts N``).

By default every reactor has an actor of its own (named after it): its own consumer group, its own
fold of the whole log, its own snapshot. Every one of those processes reads, decodes and folds
every entry, so six reactors on two cores fold the log six times, and that, not Redis, bounds the
live path's throughput (docs/delivery.md#benchmark-the-live-paths-throughput-and-latency).

With ``hosts=N`` the reactors are dealt round-robin, in the run's order (scheduler, autoscaler,
cloud, lifecycle, drivers..., claims, broker), into N host actors ``host-0``..``host-N-1``. A host
reads the log once through its consumer group (``host-i``), folds it once, and lets each of its
reactors decide on that view, each decision appended with the reactor's own id, view offset and
expectations (actors/reactor_loop.py). Its snapshot is saved under the host's name. One host per
core is a reasonable deployment; driver shards dealt to different hosts still spread the drivers'
work over processes.

The trade-off: a crash of a host's process (or of one of its reactors: crash-only) restarts all its
reactors, and they decide nothing while it rebuilds; a reactor whose decisions are slow (the
scheduler on a large cluster) delays the others of its host.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["host_layout"]


def host_layout(reactors: Sequence[str], hosts: int = 0) -> dict[str, list[str]]:
    """Actor name -> the reactors it hosts, in the run's order. ``hosts <= 0``: one actor per
    reactor, named after it; else ``min(hosts, len(reactors))`` hosts ``host-i``, dealt round-robin."""
    if hosts <= 0:
        return {name: [name] for name in reactors}
    n = min(hosts, len(reactors))
    return {f"host-{i}": list(reactors[i::n]) for i in range(n)}

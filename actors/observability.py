"""What a live run shows while it goes on: Prometheus metrics (``dralab run --metrics-port``) and the
progress line.

Everything here is computed by the driver from what it already has: its own fold of the log (a
:class:`ClusterState`, and the records and events it folded per source), the latest ``status()`` of
each reactor actor (polled about once a second by one background task, never one Ray call per event)
and the consumer groups' positions on the bus. The functions that turn that into metric families are
pure (no socket, no clock) and unit-tested; the HTTP server is prometheus_client's, bound to
127.0.0.1 unless told otherwise, and it asks the driver's event loop for a fresh :class:`Observation`
at each scrape (the fold is only ever read from the loop's thread).

Names follow kube-scheduler (``scheduler_*``) and cluster-autoscaler (``cluster_autoscaler_*``) where
the meaning is the same; dralab's own are prefixed ``dralab_``. Times are cluster seconds where the
HELP says so (a run at ``--speed 20`` moves 20 cluster seconds per wall second). docs/deploy.md lists
every metric.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from dralab.core.analysis.waits import pending_cause
from dralab.core.state.cluster import ClusterState

from .bus import GroupInfo

# Cluster seconds from a pod's creation to its binding: 0.25 s to about 2.3 h, doubling.
LATENCY_BUCKETS: tuple[float, ...] = tuple(0.25 * 2**k for k in range(16))
# Counters an actor keeps since its (re)start that are exposed per actor.
ACTOR_COUNTERS: dict[str, tuple[str, str]] = {
    "applied": ("dralab_actor_entries_applied", "Log entries folded into the actor's view since it (re)started."),
    "acked": ("dralab_actor_entries_acked", "Log entries the actor acknowledged to its consumer group since it "
              "(re)started."),
    "decisions": ("dralab_actor_decisions", "Records (decisions) the actor appended to the log since it "
                  "(re)started."),
    "conflicts": ("dralab_actor_conflicts", "Decisions dropped because an object version had moved "
                  "(optimistic concurrency) since the actor (re)started."),
    "dead_letters": ("dralab_actor_dead_letters", "Undecodable entries the actor set aside since it (re)started."),
    "reclaimed": ("dralab_actor_entries_reclaimed", "Entries the actor claimed from a consumer that stopped "
                  "acknowledging (XAUTOCLAIM) since it (re)started."),
    "snapshots_saved": ("dralab_actor_snapshots_saved", "State snapshots the actor saved since it (re)started."),
}


@dataclass
class Observation:
    """What the driver knows at one moment (the input of :func:`families` and :func:`progress`)."""

    state: ClusterState
    cluster_time_s: float = 0.0
    records_by_source: Mapping[str, int] = field(default_factory=dict)  # from the driver's fold of the log
    events_by_source: Mapping[str, int] = field(default_factory=dict)
    actors: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # latest status() per actor
    restarts: Mapping[str, int] = field(default_factory=dict)  # restarts the driver saw (the pid changed)
    groups: Mapping[str, GroupInfo] = field(default_factory=dict)  # consumer group -> its position
    log_end: int = 0  # last offset on the bus when the groups were read
    trimmed: int = 0


def pending_by_reason(state: ClusterState) -> dict[str, int]:
    """Pending pods by dralab's reason (core.summary.pending_cause: the scheduler's cause, ``gang``
    while waiting at Permit, ``not-yet-tried``), most first."""
    counts = Counter(pending_cause(state, state.pods[k]) for k in state.pods_by_phase["Pending"])
    return dict(counts.most_common())


def nodes_by_group_state(state: ClusterState) -> dict[tuple[str, str], int]:
    """(node group, Ready | NotReady | Provisioning) -> nodes. Provisioning: the cloud accepted the
    VM and it has not registered yet; NotReady: registered, not Ready (yet, or any more)."""
    out: Counter[tuple[str, str]] = Counter()
    for node in state.nodes.values():
        out[(node.group, "Ready" if node.ready else "NotReady")] += 1
    for vm in state.provisioning_nodes.values():
        out[(vm.group, "Provisioning")] += 1
    return dict(sorted(out.items()))


def autoscaler_node_states(state: ClusterState) -> dict[str, int]:
    """Nodes by cluster-autoscaler's ``nodes_count`` states: ready, unready (was Ready once),
    notStarted (never Ready yet), unregistered (the cloud's VM, not registered yet)."""
    out = {"ready": 0, "unready": 0, "notStarted": 0, "unregistered": len(state.provisioning_nodes)}
    for node in state.nodes.values():
        out["ready" if node.ready else ("unready" if node.ready_t >= 0 else "notStarted")] += 1
    return out


def allocation_latencies(state: ClusterState) -> list[float]:
    """Cluster seconds from creation to binding of every pod bound so far."""
    return [(p.bound_t - p.created_t) / 1000 for p in state.pods.values() if p.bound_t >= 0]


def histogram_buckets(values: Iterable[float], bounds: tuple[float, ...]) -> tuple[list[tuple[str, float]], float]:
    """Cumulative Prometheus buckets (``le`` as text, ``+Inf`` last) and the sum of ``values``."""
    counts = [0] * (len(bounds) + 1)
    total = 0.0
    for v in values:
        total += v
        i = next((i for i, b in enumerate(bounds) if v <= b), len(bounds))
        counts[i] += 1
    out, running = [], 0
    for bound, n in zip((*[_le(b) for b in bounds], "+Inf"), counts, strict=True):
        running += n
        out.append((bound, float(running)))
    return out, total


def _le(b: float) -> str:
    return repr(float(b))


def families(obs: Observation) -> list[Metric]:
    """Every metric family of a run at one moment (see docs/deploy.md#observability)."""
    s = obs.state
    out: list[Metric] = []

    def gauge(name: str, doc: str, labels: tuple[str, ...], rows: Iterable[tuple[tuple[str, ...], float]]) -> None:
        g = GaugeMetricFamily(name, doc, labels=list(labels))
        for values, v in rows:
            g.add_metric(list(values), v)
        out.append(g)

    def counter(name: str, doc: str, labels: tuple[str, ...], rows: Iterable[tuple[tuple[str, ...], float]]) -> None:
        c = CounterMetricFamily(name, doc, labels=list(labels))
        for values, v in rows:
            c.add_metric(list(values), v)
        out.append(c)

    # --- the log, as the driver folds it
    gauge("dralab_cluster_time_seconds", "Cluster time of the run (cluster seconds).", (), [((), obs.cluster_time_s)])
    gauge("dralab_log_offset", "Offset of the last log entry the driver folded.", (), [((), s.offset)])
    counter("dralab_log_records", "Log records (entries) appended, by source: a reactor's name, or scenario for "
            "external inputs.", ("source",), [((k,), v) for k, v in sorted(obs.records_by_source.items())])
    counter("dralab_log_events", "Events appended to the log, by the source of their record.", ("source",),
            [((k,), v) for k, v in sorted(obs.events_by_source.items())])
    counter("dralab_log_trimmed_entries", "Entries trimmed from the stream (all acknowledged by every group).",
            (), [((), obs.trimmed)])

    # --- consumers
    gauge("dralab_consumer_group_lag", "Entries in the log not yet delivered to the consumer group (last offset "
          "minus the group's last delivered).", ("group",),
          [((g,), max(0, obs.log_end - i.last_delivered)) for g, i in sorted(obs.groups.items())])
    gauge("dralab_consumer_group_pending", "Entries delivered to the consumer group and not acknowledged yet.",
          ("group",), [((g,), i.pending) for g, i in sorted(obs.groups.items())])
    gauge("dralab_actor_up", "1 if the reactor actor answered its last status() without error, else 0.",
          ("actor",), [((a,), 0.0 if st.get("error") else 1.0) for a, st in sorted(obs.actors.items())])
    counter("dralab_actor_restarts", "Restarts of the reactor actor the driver saw (its process id changed).",
            ("actor",), [((a,), obs.restarts.get(a, 0)) for a in sorted(obs.actors)])
    gauge("dralab_actor_view_offset", "Offset of the last entry in the reactor actor's view.", ("actor",),
          [((a,), st["view_offset"]) for a, st in sorted(obs.actors.items()) if "view_offset" in st])
    for key, (name, doc) in ACTOR_COUNTERS.items():
        counter(name, doc, ("actor",), [((a,), st[key]) for a, st in sorted(obs.actors.items()) if key in st])
    # per reactor: an actor may host several (dralab run --hosts N)
    for key, (name, doc) in {"decisions": ("dralab_reactor_decisions", "Records (decisions) the reactor appended "
                                           "since its actor (re)started."),
                             "conflicts": ("dralab_reactor_conflicts", "Decisions of the reactor dropped on a "
                                           "version conflict since its actor (re)started.")}.items():
        counter(name, doc, ("actor", "reactor"),
                [((a, r), n[key]) for a, st in sorted(obs.actors.items())
                 for r, n in sorted((st.get("reactors") or {}).items())])

    # --- scheduler (kube-scheduler's names)
    reasons = pending_by_reason(s)
    gated = reasons.get("gang", 0)
    not_tried = reasons.get("not-yet-tried", 0)
    attempted = sum(reasons.values()) - gated - not_tried
    gauge("scheduler_pending_pods", "Pending pods by queue: active (not tried yet), unschedulable (tried, "
          "PodScheduled=False). Gang members waiting at Permit are not counted (as upstream).", ("queue",),
          [(("active",), not_tried), (("unschedulable",), attempted)])
    gauge("dralab_pending_pods", "Pending pods by dralab's reason (the scheduler's cause, gang while waiting at "
          "Permit, not-yet-tried).", ("reason",), [((r,), n) for r, n in reasons.items()])
    counter("scheduler_schedule_attempts", "Scheduling attempts by result: scheduled (pods bound), unschedulable "
            "(PodScheduled=False written).", ("result",),
            [(("scheduled",), s.runs), (("unschedulable",), sum(p.attempts for p in s.pods.values()))])
    buckets, total = histogram_buckets(allocation_latencies(s), LATENCY_BUCKETS)
    h = HistogramMetricFamily("dralab_pod_scheduling_sli_duration_seconds",
                              "Time from a pod's creation to its binding, in CLUSTER seconds (not wall seconds), "
                              "of every pod bound so far; like kube-scheduler's "
                              "scheduler_pod_scheduling_sli_duration_seconds.")
    h.add_metric([], buckets, total)
    out.append(h)

    # --- autoscaler (cluster-autoscaler's names) and nodes
    gauge("dralab_nodes", "Nodes by node group and state: Ready, NotReady (registered), Provisioning (the cloud's "
          "VM, not registered yet).", ("node_group", "state"),
          [((g, st), n) for (g, st), n in nodes_by_group_state(s).items()])
    gauge("cluster_autoscaler_nodes_count", "Nodes by state: ready, unready (was Ready), notStarted (never Ready "
          "yet), unregistered (VM not registered yet).", ("state",),
          [((k,), v) for k, v in autoscaler_node_states(s).items()])
    gauge("cluster_autoscaler_node_groups_count", "Node groups the autoscaler manages.", ("node_group_type",),
          [(("autoscaled",), len(s.node_groups))])
    gauge("cluster_autoscaler_unschedulable_pods_count", "Pending pods: unschedulable (the scheduler said so), "
          "scheduler_unprocessed (not tried yet).", ("type",),
          [(("unschedulable",), attempted + gated), (("scheduler_unprocessed",), not_tried)])
    ups: Counter[str] = Counter()
    up_nodes: Counter[str] = Counter()
    for _, group, delta in s.scale_ups:
        ups[group] += 1
        up_nodes[group] += delta
    counter("cluster_autoscaler_scaled_up_nodes", "Nodes asked for by scale-ups.", (), [((), sum(up_nodes.values()))])
    counter("dralab_scale_ups", "Scale-ups requested, by node group.", ("node_group",),
            [((g,), n) for g, n in sorted(ups.items())])
    counter("dralab_scaled_up_nodes", "Nodes asked for by scale-ups, by node group.", ("node_group",),
            [((g,), n) for g, n in sorted(up_nodes.items())])
    counter("cluster_autoscaler_failed_scale_ups", "Nodes of scale-ups the cloud refused or could not deliver, by "
            "node group.", ("node_group",), [((g,), st.failed) for g, st in sorted(s.node_groups.items())])
    return out


def progress(obs: Observation, events_per_s: float) -> dict[str, Any]:
    """The fields of the progress line (and of the ``run.progress`` log event)."""
    s = obs.state
    return {
        "cluster_time_s": round(obs.cluster_time_s, 1),
        "offset": s.offset,
        "events": s.events_applied,
        "events_per_s": round(events_per_s, 1),
        "pods_scheduled": len(s.pods_by_phase["Running"]) + len(s.pods_by_phase["Succeeded"]),
        "pods_pending": len(s.pods_by_phase["Pending"]),
        "pending_by_reason": pending_by_reason(s),
        "nodes": len(s.nodes),
        "nodes_ready": sum(n.ready for n in s.nodes.values()),
        "nodes_provisioning": len(s.provisioning_nodes),
        "actors_restarted": sum(obs.restarts.values()),
    }


def progress_text(p: Mapping[str, Any]) -> str:
    """One short line, e.g. ``t=120.0s  log 345 (52.3 ev/s)  pending 3 (capacity 2, gang 1)  nodes 5/6
    ready +1 coming  restarts 0``."""
    reasons = ", ".join(f"{r} {n}" for r, n in p["pending_by_reason"].items())
    pending = f"pending {p['pods_pending']}" + (f" ({reasons})" if reasons else "")
    coming = f" +{p['nodes_provisioning']} coming" if p["nodes_provisioning"] else ""
    return (f"t={p['cluster_time_s']:.1f}s  events {p['events']} ({p['events_per_s']:.1f}/s)  "
            f"scheduled {p['pods_scheduled']}  {pending}  nodes {p['nodes_ready']}/{p['nodes']} ready{coming}  "
            f"restarts {p['actors_restarted']}")


class _RunCollector(Collector):
    """Asks the driver's event loop for an Observation at each scrape (the fold is read only there)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, observe: Callable[[], Observation],
                 timeout_s: float = 5.0) -> None:
        self.loop, self.observe, self.timeout_s = loop, observe, timeout_s
        self._last: list[Metric] = []

    def collect(self) -> Iterable[Metric]:
        async def now() -> list[Metric]:
            return families(self.observe())

        with contextlib.suppress(Exception):  # the loop is busy or gone: the last families
            self._last = asyncio.run_coroutine_threadsafe(now(), self.loop).result(self.timeout_s)
        return list(self._last)


class MetricsServer:
    """``/metrics`` in Prometheus text format, served by a thread of this process."""

    def __init__(self, host: str, port: int, loop: asyncio.AbstractEventLoop,
                 observe: Callable[[], Observation]) -> None:
        from prometheus_client import start_http_server

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_RunCollector(loop, observe))
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.host = host
        self.port = int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

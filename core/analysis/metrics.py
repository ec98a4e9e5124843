"""Metrics of a run, computed from its log: what the cluster paid for, what it left idle, how long pods
waited and why, which scale-ups brought nothing.

They are a pure function of the records (no clock, no I/O): the log is the truth, so `sim`, `run` and a
replayed `.dralog` give the same numbers for the same records. :func:`compute_metrics` folds the records
through a :class:`~dralab.core.state.cluster.ClusterState` and integrates over cluster time: the state after a
record holds from that record's `t` until the next record's (times are clamped to never go backwards: a
live log may append a decision computed a few ms before an input already in the log). The run ends at
the last record's `t`, or at `end_ms` when given (the scenario's duration: nodes are paid until the end
even when nothing happens after the last record); records after `end_ms` are still folded (the final
counts match the summary) but add no time.

The per-record work is proportional to what the record changed: only the nodes a record touches have
their GPUs recounted (`node/<name>` keys, the nodes of the pods and claims it writes, before and after
it applies), only the pods it writes have their pending reason and device demand recomputed, and the
totals (paid, used, free per node as a histogram) are kept incrementally, so a step costs O(touched +
distinct free counts + distinct reasons), not O(nodes + pods).

Definitions (the approximations are deliberate, and documented in docs/cli.md):

- **GPUs of a node**: its allocatable extended resources named `*/gpu` plus the DRA devices of the
  ResourceSlices its group's templates render for it (the slices it publishes when it turns Ready). A
  DRA device that consumes no shared counters is one GPU; devices that consume counters (partitions of
  a partitionable device) count once per distinct counter set they consume: drivers publish one counter
  set per physical GPU, so eight MIG profiles of one GPU are one GPU, not eight. Slices a node publishes
  beyond its group's templates (nodes outside any group) raise its count from when they appear.
- **used**: GPUs of bound pods: their extended resources (`node.used`), and DRA devices of the node's
  slices that are allocated (dedicated or shared).
- **used by share**: the same GPUs, each weighted by the share of it in use: a GPU partitioned through
  shared counters by the share its allocated partitions consume (the most-consumed counter of its
  counter set), a device shared through consumable capacity (KEP-5075, `allowMultipleAllocations`) by
  the share of its capacity its allocations consume (the most-consumed capacity); extended GPUs and
  dedicated devices count whole. A GPU whose share is below 1 is *partially used*.
- **held**: GPUs that gang members waiting at Permit hold (`node.reserved`, and the devices of their
  in-flight allocations): paid, unavailable to others, doing no work; they count as idle. A counter
  set is used when any device consuming it is.
- **paid**: every node from its `NodeCreated` (the Node registering, not the cloud starting its VM)
  until it is deleted (a `NodeDeleted` event naming it, or its disappearance from `state.nodes`) or the
  end of the run.
- **unready**: paid GPUs of nodes that are not Ready yet.
- **idle**: GPUs held at Permit, plus the unused GPUs of Ready nodes during intervals when no pending
  pod could use them: a node's free GPUs (GPUs - used - held) and the unused share of its partially
  used GPUs (1 - share, as `used by share` weighs them) count as idle when no pending pod asks for
  devices, or when every pending pod that does asks for more devices than that node offers: its free
  GPUs plus its partially used GPUs (each of which may still offer a partition to a pod asking for
  one; demand per pod as the scheduler's fragmentation score counts it, `pod_demand`). So paid =
  used by share + idle + unready + the unused GPUs a pending pod could use. Selectors, taints and
  device attributes are not weighed: a pending pod that could not land there anyway still makes the
  unused GPUs "wanted", so idle is a lower bound (stranded, below, weighs them). A pod held by a
  scheduling gate (e.g. waiting for Kueue's admission) asks for nothing: it cannot be placed until the gate is removed.
- **stranded** (issue 22): while pods asking for devices wait, the free GPUs of Ready nodes where no pending
  pod passes the scheduler's filters and gets its claims allocated, by the nearest pod's cause (topology,
  counters, taint, selector, ...); **wanted**: those where some pod could go. :mod:`.stranded` says how.
- **fragmentation**: while pods asking for devices wait, the share of the free (whole) GPUs of Ready
  nodes that no waiting pod can use (fewer free on the node than the smallest demand).
- **allocation ratio**: used GPUs / GPUs of Ready nodes, time-weighted over the intervals when some
  Ready node has GPUs (undefined, and left out of the mean, when none has).
- **pending pod-seconds**: for every pending pod, the time it spent pending, attributed to its reason
  at each moment (`pending_cause`: its condition's cause, `gang` while waiting at Permit,
  `not-yet-tried` before the scheduler looked at it).
- **scale-ups without pod**: the nodes a group creates beyond its starting ones are attributed to its
  scale-ups first in, first out (the k-th such node belongs to the scale-up that asked for it; nodes
  the cloud reports as failed take their place in that order); a scale-up none of whose nodes ever had
  a pod bound counts, including one whose nodes never came.
  `nodes_never_used` counts the scale-up nodes (non-initial nodes of a group) that never had a pod bound.

The numbers are a :class:`~.run_metrics.RunMetrics`; the fold that computes them is
:class:`~.metrics_fold.MetricsFold`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..log.events import Record, decode_record
from .metrics_fold import MetricsFold
from .run_metrics import RunMetrics


def compute_metrics(records: Iterable[tuple[int, Record]], end_ms: int | None = None) -> RunMetrics:
    """The metrics of a run from its `(offset, Record)` pairs, up to `end_ms` (default: the last record's t)."""
    replay = MetricsFold()
    now: int | None = None  # cluster time of the state, clamped so that it never goes backwards
    for offset, record in records:
        t = record.t if now is None else max(record.t, now)
        if now is not None:
            replay.integrate((t if end_ms is None else min(t, end_ms)) - now)
        replay.step(offset, record, t)
        now = t
    end = (now or 0) if end_ms is None else end_ms
    if now is not None:
        replay.integrate(end - now)
    return replay.result(end)


def metrics_from_entries(entries: Iterable[tuple[int, bytes]], end_ms: int | None = None) -> RunMetrics:
    """compute_metrics over stored entries (`(offset, payload)`, as the simulator and a live run keep them)."""
    return compute_metrics(((offset, decode_record(payload, offset)) for offset, payload in entries), end_ms)

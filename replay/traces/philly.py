"""The Microsoft Philly job trace (the digest Pollux's artifact uses) as a dralab scenario.

Each job of `philly.csv` (`timestamp, duration, num_gpus, gpu_time, cluster`) becomes a workload arrival
at its submission time (relative to the window's start) that runs for its duration:
- a job of at most `gpus_per_node` GPUs is one pod asking for `num_gpus` GPUs (`nvidia.com/gpu`);
- a larger job is a gang (issue 9: "a PodGroup of num_gpus / 8 pods for multi-node jobs"): a
  `scheduling.k8s.io/v1alpha1` Workload with one pod group whose gang policy's `minCount` is the number
  of pods, and `ceil(num_gpus / gpus_per_node)` pods referencing it (`spec.workloadRef`), each asking for
  a whole node's GPUs but the last, which asks for the remainder (Philly has 12- and 24-GPU jobs).

The result is a scenario document, checked by `parse_scenario` like a hand-written one (the same
machinery, not a side channel), built by `jobs_scenario` from `TraceJob`s, which the Pollux workloads
(replay/traces/pollux.py) share: a node group of `gpus_per_node`-GPU nodes that the autoscaler grows up
to `max_nodes`, `start_nodes` of them at the start. A window (`start`, `hours`) and a virtual cluster
(`cluster`) pick the jobs; jobs still running at the window's end just run on.

Input is untrusted: a bad row is reported with the file, its line and the column (PhillyError, a
ValueError the CLI turns into exit 2), and the number of rows read is bounded (`MAX_ROWS`).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dralab.core.kube.versions import LEGACY_GATES, LEGACY_RUNTIME_CONFIG, LEGACY_VERSION

MAX_ROWS = 200_000
MAX_FILE_BYTES = 64 * 1024 * 1024
COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
GPU = "nvidia.com/gpu"


class TraceRowError(ValueError):
    """A row or file of a trace that is not what it should be; the message names the file, line and column."""

    def __init__(self, path: str, line: int, column: str, message: str) -> None:
        where = f"{path}:{line}" + (f": column {column}" if column else "")
        super().__init__(f"{where}: {message}")


def whole(error: type[TraceRowError], path: str, line: int, column: str, text: str, low: int, high: int) -> int:
    """A whole number in [low, high] from a trace's field, or ``error`` naming the file, line and column."""
    try:
        value = int(text)
    except ValueError:
        raise error(path, line, column, f"not a whole number: {text!r}") from None
    if not low <= value <= high:
        raise error(path, line, column, f"must be {low} to {high}, got {value}")
    return value


def seconds(error: type[TraceRowError], path: str, line: int, column: str, text: str, unit: str) -> float:
    """A finite amount >= 0 (of ``unit``, for the message) from a trace's field."""
    try:
        value = float(text)
    except ValueError:
        raise error(path, line, column, f"not a number of {unit}: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise error(path, line, column, f"must be a finite number >= 0, got {text!r}")
    return value


class PhillyError(TraceRowError):
    """A row or file that is not a Philly job list."""


@dataclass(frozen=True)
class PhillyJob:
    line: int  # in the file (1: the header)
    submitted: datetime
    duration_s: float
    gpus: int
    cluster: str
    gpu_time_s: float = 0.0  # GPU-seconds (the Pollux workloads' generator picked applications by it)


def load_philly(path: str | Path, max_rows: int = MAX_ROWS) -> list[PhillyJob]:
    """The jobs of a Philly CSV, in submission order (the file is not sorted; ties keep file order)."""
    p = Path(path)
    if p.stat().st_size > MAX_FILE_BYTES:
        raise PhillyError(str(p), 0, "", f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    jobs: list[PhillyJob] = []
    with p.open(newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header[: len(COLUMNS)]) != COLUMNS:
            raise PhillyError(str(p), 1, "", f"expected the header {','.join(COLUMNS)}, got {header!r}")
        for row in reader:
            line = reader.line_num
            if not row or all(not c.strip() for c in row):
                continue  # the file ends with a blank line
            if len(jobs) >= max_rows:
                raise PhillyError(str(p), line, "", f"more than {max_rows} jobs")
            jobs.append(_job(str(p), line, row))
    jobs.sort(key=lambda j: (j.submitted, j.line))
    return jobs


def _job(path: str, line: int, row: list[str]) -> PhillyJob:
    if len(row) < len(COLUMNS):
        raise PhillyError(path, line, "", f"{len(row)} columns, expected {len(COLUMNS)}")
    values = dict(zip(COLUMNS, (c.strip() for c in row), strict=False))
    try:
        submitted = datetime.strptime(values["timestamp"], TIME_FORMAT)
    except ValueError:
        got = values["timestamp"]
        raise PhillyError(path, line, "timestamp", f"expected YYYY-MM-DD HH:MM:SS, got {got!r}") from None
    duration = seconds(PhillyError, path, line, "duration", values["duration"], "seconds")
    gpus = whole(PhillyError, path, line, "num_gpus", values["num_gpus"], 1, 4096)
    gpu_time = seconds(PhillyError, path, line, "gpu_time", values["gpu_time"], "GPU-seconds")
    return PhillyJob(line, submitted, duration, gpus, values["cluster"], gpu_time)


def select(jobs: list[PhillyJob], *, start: datetime | None = None, hours: float = 24.0,
           cluster: str | None = None) -> list[PhillyJob]:
    """The jobs of `cluster` (None: every virtual cluster) submitted in [start, start + hours); `start`
    defaults to the first such job's submission."""
    chosen = [j for j in jobs if cluster is None or j.cluster == cluster]
    if not chosen:
        return []
    begin = start or chosen[0].submitted
    return [j for j in chosen if 0 <= (j.submitted - begin).total_seconds() < hours * 3600]


@dataclass(frozen=True)
class TraceJob:
    """A job of any trace, as the scenario builder takes it: `gpus` GPUs from `at_s` seconds after the
    scenario's start for `duration_s` seconds. `labels` and `annotations` go on its pods; `group_labels` on the
    gang's Workload (None: `labels`)."""

    name: str  # an RFC 1123 label; the pods' names start with it
    at_s: int
    duration_s: float
    gpus: int
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    group_labels: dict[str, str] | None = None


def pods_of(job: PhillyJob | TraceJob, gpus_per_node: int) -> list[int]:
    """GPUs per pod: one pod up to a node's GPUs, else whole nodes and the remainder."""
    if job.gpus <= gpus_per_node:
        return [job.gpus]
    full, rest = divmod(job.gpus, gpus_per_node)
    return [gpus_per_node] * full + ([rest] if rest else [])


def philly_scenario(jobs: list[PhillyJob], *, name: str = "philly", hours: float = 24.0, gpus_per_node: int = 8,
                    max_nodes: int = 64, start_nodes: int = 0, seed: int = 0, autoscaler: str = "count",
                    cpu_per_gpu: int = 4, memory_per_gpu_gi: int = 64, min_run_s: float = 1.0,
                    provision_delay: tuple[str, str] | None = None) -> dict[str, Any]:
    """A scenario document for `jobs` (already selected: `select`), the first submission at time 0;
    `provision_delay` (min, max): a new node's scale-up to Ready (default: at once)."""
    begin = jobs[0].submitted if jobs else datetime(2017, 1, 1)
    trace_jobs = [TraceJob(f"job-{i}", int((job.submitted - begin).total_seconds()), job.duration_s, job.gpus,
                           group_labels={"dralab.io/philly-cluster": job.cluster}) for i, job in enumerate(jobs)]
    return jobs_scenario(trace_jobs, trace="philly", name=name, hours=hours, gpus_per_node=gpus_per_node,
                         max_nodes=max_nodes, start_nodes=start_nodes, seed=seed, autoscaler=autoscaler,
                         cpu_per_gpu=cpu_per_gpu, memory_per_gpu_gi=memory_per_gpu_gi, min_run_s=min_run_s,
                         provision_delay=provision_delay)


def jobs_scenario(jobs: list[TraceJob], *, trace: str, name: str, hours: float = 24.0, gpus_per_node: int = 8,
                  max_nodes: int = 64, start_nodes: int = 0, seed: int = 0, autoscaler: str = "count",
                  cpu_per_gpu: int = 4, memory_per_gpu_gi: int = 64, min_run_s: float = 1.0,
                  provision_delay: tuple[str, str] | None = None) -> dict[str, Any]:
    """The scenario document of a trace's jobs (Philly's, Pollux's): one pod per job of up to `gpus_per_node`
    GPUs, a gang (Workload + `ceil(gpus / gpus_per_node)` pods) per larger job, each running for its duration
    (at least `min_run_s`); pods labelled `dralab.io/<trace>-job: <job name>`, image `<trace>:job`. One node
    group of `gpus_per_node`-GPU nodes, `max_nodes` at most, `start_nodes` at t=0."""
    if gpus_per_node < 1 or max_nodes < 1 or not 0 <= start_nodes <= max_nodes:
        raise ValueError("need gpus_per_node >= 1, max_nodes >= 1 and 0 <= start_nodes <= max_nodes")
    objects: list[dict[str, Any]] = []
    workload: list[dict[str, Any]] = []
    for job in jobs:
        run_s = max(min_run_s, job.duration_s)
        parts = pods_of(job, gpus_per_node)
        ref: dict[str, Any] | None = None
        if len(parts) > 1:
            group_labels = job.labels if job.group_labels is None else job.group_labels
            objects.append({"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
                            "metadata": {"name": job.name, "labels": dict(group_labels)},
                            "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": len(parts)}}}]}})
            ref = {"name": job.name, "podGroup": "workers"}
        for gpus, count in _runs(parts):
            pod_name = job.name if len(parts) == 1 else f"{job.name}-{gpus}g"
            spec: dict[str, Any] = {"containers": [{"name": "main", "image": f"{trace}:job", "resources": {
                "requests": {"cpu": str(cpu_per_gpu * gpus), "memory": f"{memory_per_gpu_gi * gpus}Gi"},
                "limits": {GPU: str(gpus)}}}]}
            if ref is not None:
                spec["workloadRef"] = ref
            metadata: dict[str, Any] = {"name": pod_name, "labels": {f"dralab.io/{trace}-job": job.name, **job.labels}}
            if job.annotations:
                metadata["annotations"] = dict(job.annotations)
            workload.append({"at": f"{job.at_s}s", "count": count, "runFor": f"{int(math.ceil(run_s))}s",
                             "pod": {"metadata": metadata, "spec": spec}})
    template = {"apiVersion": "v1", "kind": "Node", "metadata": {"labels": {"gpu": trace}},
                "status": {"allocatable": {"cpu": str(cpu_per_gpu * gpus_per_node * 2),
                                           "memory": f"{memory_per_gpu_gi * gpus_per_node * 2}Gi",
                                           "pods": "110", GPU: str(gpus_per_node)}}}
    spec_doc: dict[str, Any] = {
        "seed": seed, "duration": f"{int(hours * 3600)}s", "policy": {"autoscaler": autoscaler},
        "nodeGroups": [{"name": "gpu", "min": 0, "max": max_nodes, "template": template,
                        **({"provisionDelay": {"min": provision_delay[0], "max": provision_delay[1]}}
                           if provision_delay else {})}],
        "objects": objects, "workload": workload,
        # the gangs are 1.35 Workloads (scheduling.k8s.io/v1alpha1): the release that serves them, with dralab's
        # legacy gates (docs/versions.md), so a trace run records the same log as before releases could be chosen
        "kubernetes": {"version": LEGACY_VERSION, "featureGates": dict(LEGACY_GATES),
                       "runtimeConfig": dict(LEGACY_RUNTIME_CONFIG)},
    }
    if start_nodes:
        spec_doc["nodes"] = [{"group": "gpu", "count": start_nodes}]
    return {"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": name}, "spec": spec_doc}


def _runs(parts: list[int]) -> list[tuple[int, int]]:
    """[8, 8, 4] -> [(8, 2), (4, 1)]: one arrival per distinct pod size."""
    out: list[tuple[int, int]] = []
    for gpus in parts:
        if out and out[-1][0] == gpus:
            out[-1] = (gpus, out[-1][1] + 1)
        else:
            out.append((gpus, 1))
    return out

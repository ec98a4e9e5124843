"""The Pollux (OSDI'21) evaluation workloads as a dralab scenario, with durations from the Philly trace.

A workload CSV (`name, time, application, num_replicas, batch_size`; adaptdl's `osdi21-artifact`,
`simulator/workloads/workload-{1..8}.csv`, 160 jobs each) gives each job an arrival (`time`, seconds
from the workload's start) and a GPU count (`num_replicas`), but no duration: Pollux's simulator runs a
job until its model has trained, at the speed of throughput profiles that are not in the artifact. Here
each job runs for the duration of a Philly job, and the jobs go through the scenario builder of the
Philly trace (`philly.jobs_scenario`): one pod of `num_replicas` GPUs up to a node's GPUs, a gang (a
Workload of `ceil(num_replicas / 8)` pods) above, arriving at `time` (relative to the window's start).
Pods are named after the job and carry its application (label `dralab.io/pollux-application`), batch
size and the Philly job its duration came from (annotations).

Durations, a modelling choice. The workloads were generated (the artifact's `simulator/workload.py`) by
sampling 160 jobs from `philly.csv`, after keeping the jobs of at least 60 s and under 1,000 GPU-hours and
those submitted in the 8 hours after 02:00 of any day; a job's `time` is its submission's time of day
minus 2 hours, and its application is chosen by its GPU-time: under 1 GPU-hour cifar10 or ncf, under 10
deepspeech2 or bert, under 100 yolov3, else imagenet. `num_replicas` and `batch_size` are then drawn from
the application's configurations, so they say nothing about the Philly job. Which Philly job a row came
from is not recorded, but `time` and `application` narrow it down: the candidates are the kept Philly jobs
submitted at that second of the day (`time` + 2 h) whose GPU-time is in the application's range. Every
row of the 8 workloads has at least one candidate (a check that the reading is right: with any other
offset about half have none), about 45% exactly one. A job's duration is that of a candidate drawn with
`random.Random(seed)` (one draw per job, in file order); a row with no candidate (a workload made some
other way) draws from every kept Philly job in its application's range. The duration is the Philly job's
wall-clock time, whatever its GPU count was: under Pollux a job's length depends on the GPUs it gets,
and here every job keeps `num_replicas` GPUs from start to end.

Input is untrusted: a bad row is reported with the file, its line and the column (PolluxError, a
ValueError the CLI turns into exit 2); file size and rows are bounded.
"""

from __future__ import annotations

import csv
import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .philly import PhillyJob, TraceJob, TraceRowError, jobs_scenario, whole

MAX_ROWS = 100_000
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_TIME_S = 366 * 24 * 3600
MAX_BATCH = 1 << 30
MAX_NAME = 50  # room for the gang pods' "-8g-12" suffixes within a 63-character label
COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
# The generator's choices (adaptdl osdi21-artifact simulator/workload.py): the Philly jobs it samples from,
# its window's start (--start, hours after midnight) and the GPU-time range of each application.
MIN_DURATION_S = 60.0
MAX_GPU_TIME_S = 1000 * 3600.0
OFFSET_S = 2 * 3600
GPU_TIME_RANGE = {"cifar10": (0.0, 3600.0), "ncf": (0.0, 3600.0), "deepspeech2": (3600.0, 36000.0),
                  "bert": (3600.0, 36000.0), "yolov3": (36000.0, 360000.0), "imagenet": (360000.0, MAX_GPU_TIME_S)}
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class PolluxError(TraceRowError):
    """A row or file that is not a Pollux workload; the message names the file, line and column."""


@dataclass(frozen=True)
class PolluxJob:
    line: int  # in the file (1: the header)
    name: str
    time_s: int  # arrival, seconds from the workload's start
    application: str
    replicas: int  # GPUs
    batch_size: int


@dataclass(frozen=True)
class Drawn:
    """A job's duration and where it came from: the Philly job's line, how many candidates it was drawn
    from, and how they were matched (`time`: same second of the day and GPU-time range; `application`: the
    range alone)."""

    duration_s: float
    philly_line: int
    candidates: int
    matched: str


def load_workload(path: str | Path, max_rows: int = MAX_ROWS) -> list[PolluxJob]:
    """The jobs of a Pollux workload CSV, in arrival order (ties keep file order)."""
    p = Path(path)
    if p.stat().st_size > MAX_FILE_BYTES:
        raise PolluxError(str(p), 0, "", f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    jobs: list[PolluxJob] = []
    names: dict[str, int] = {}
    with p.open(newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header) != COLUMNS:
            raise PolluxError(str(p), 1, "", f"expected the header {','.join(COLUMNS)}, got {header!r}")
        for row in reader:
            line = reader.line_num
            if not row or all(not c.strip() for c in row):
                continue
            if len(jobs) >= max_rows:
                raise PolluxError(str(p), line, "", f"more than {max_rows} jobs")
            job = _job(str(p), line, row)
            if job.name in names:
                raise PolluxError(str(p), line, "name", f"{job.name!r} is already the name of line {names[job.name]}")
            names[job.name] = line
            jobs.append(job)
    jobs.sort(key=lambda j: (j.time_s, j.line))
    return jobs


def _job(path: str, line: int, row: list[str]) -> PolluxJob:
    if len(row) != len(COLUMNS):
        raise PolluxError(path, line, "", f"{len(row)} columns, expected {len(COLUMNS)}")
    v = dict(zip(COLUMNS, (c.strip() for c in row), strict=True))
    if len(v["name"]) > MAX_NAME or not _NAME.fullmatch(v["name"]):
        raise PolluxError(path, line, "name", f"expected at most {MAX_NAME} lower case alphanumeric characters or "
                                              "'-', starting and ending with an alphanumeric one, got "
                                              f"{v['name'][:80]!r}")
    if v["application"] not in GPU_TIME_RANGE:
        raise PolluxError(path, line, "application", f"unknown application {v['application'][:80]!r}; expected "
                                                     f"one of {', '.join(GPU_TIME_RANGE)}")
    return PolluxJob(line, v["name"], whole(PolluxError, path, line, "time", v["time"], 0, MAX_TIME_S),
                     v["application"], whole(PolluxError, path, line, "num_replicas", v["num_replicas"], 1, 4096),
                     whole(PolluxError, path, line, "batch_size", v["batch_size"], 1, MAX_BATCH))


def draw_durations(jobs: list[PolluxJob], philly: list[PhillyJob], seed: int = 0) -> list[Drawn]:
    """Each job's duration (in the order of `jobs`), drawn with `random.Random(seed)` from its candidate
    Philly jobs (the module's docstring); a function of its arguments. ValueError if no Philly job is in
    a job's application range."""
    kept = sorted((j for j in philly if j.duration_s >= MIN_DURATION_S and j.gpu_time_s < MAX_GPU_TIME_S),
                  key=lambda j: j.line)
    by_app: dict[str, list[PhillyJob]] = {a: [] for a in GPU_TIME_RANGE}
    by_second: dict[tuple[int, str], list[PhillyJob]] = {}
    for j in kept:
        second = j.submitted.hour * 3600 + j.submitted.minute * 60 + j.submitted.second
        for app, (low, high) in GPU_TIME_RANGE.items():
            if low <= j.gpu_time_s < high:
                by_app[app].append(j)
                by_second.setdefault((second, app), []).append(j)
    rng = random.Random(seed)
    out: list[Drawn] = []
    for job in jobs:
        candidates = by_second.get(((job.time_s + OFFSET_S) % 86400, job.application))
        matched = "time"
        if not candidates:
            candidates, matched = by_app[job.application], "application"
        if not candidates:
            raise ValueError(f"no Philly job of at least {MIN_DURATION_S:g} s in {job.application}'s GPU-time range "
                             f"{GPU_TIME_RANGE[job.application]} (GPU-seconds) to draw {job.name}'s duration from")
        pick = candidates[rng.randrange(len(candidates))]
        out.append(Drawn(pick.duration_s, pick.line, len(candidates), matched))
    return out


def pollux_scenario(jobs: list[PolluxJob], drawn: list[Drawn], *, name: str = "pollux", start_s: int = 0,
                    hours: float = 24.0, gpus_per_node: int = 8, max_nodes: int = 64, start_nodes: int = 0,
                    seed: int = 0, autoscaler: str = "count",
                    provision_delay: tuple[str, str] | None = None) -> dict[str, Any]:
    """A scenario document of the jobs arriving in [start_s, start_s + hours) (`drawn`: their durations,
    `draw_durations`), `start_s` at time 0: `philly.jobs_scenario`'s pods and gangs."""
    if len(drawn) != len(jobs):
        raise ValueError(f"{len(drawn)} durations for {len(jobs)} jobs")
    end_s = start_s + hours * 3600
    chosen = [TraceJob(job.name, job.time_s - start_s, d.duration_s, job.replicas,
                       labels={"dralab.io/pollux-application": job.application},
                       annotations={"dralab.io/pollux-batch-size": str(job.batch_size),
                                    "dralab.io/philly-line": str(d.philly_line)})
              for job, d in zip(jobs, drawn, strict=True) if start_s <= job.time_s < end_s]
    return jobs_scenario(chosen, trace="pollux", name=name, hours=hours, gpus_per_node=gpus_per_node,
                         max_nodes=max_nodes, start_nodes=start_nodes, seed=seed, autoscaler=autoscaler,
                         provision_delay=provision_delay)


def matched_counts(drawn: list[Drawn]) -> dict[str, int]:
    """How the durations were found: `unique` (one candidate at the job's second), `ambiguous` (several),
    `application` (none at that second: the application's range)."""
    c = Counter("application" if d.matched == "application" else "unique" if d.candidates == 1 else "ambiguous"
                for d in drawn)
    return {k: c[k] for k in ("unique", "ambiguous", "application")}

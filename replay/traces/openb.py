"""The `openb` trace (Alibaba GPU cluster trace v2023, the FGD paper's data) as a dralab scenario.

The importer reads the node list (`sn, cpu_milli, memory_mib, gpu, model`) and a pod list (`name, cpu_milli,
memory_mib, num_gpu, gpu_milli, gpu_spec, ...`) and writes the scenario document `parse_scenario` checks, the
same as a hand-written one, so the trace runs through dralab's own device model:

- a node group per distinct node shape (cpu, memory, GPU count, model), its nodes listed in `spec.nodes`;
  cpu and memory from `cpu_milli` / `memory_mib`;
- the GPUs through DRA: one ResourceSlice per node, a device per GPU with the model as attribute
  `gpu.openb.dralab.io/model` and a consumable capacity `gpu_milli: 1000` (`allowMultipleAllocations`), so
  GPU-sharing pods share a device (KEP-5075);
- a pod per row (all at t=0; the FGD protocol ignores the trace's times), with cpu/memory requests and, for GPU
  pods, a claim from a ResourceClaimTemplate per GPU shape: `num_gpu` devices, each consuming `gpu_milli` of
  `gpu_milli` (1000: the whole device), and a CEL selector on the model when `gpu_spec` lists models.

Bad input raises :class:`OpenbError` (a ValueError) naming the file, line and column. Sizes are bounded
(:data:`MAX_ROWS`, :data:`MAX_FIELD`) so a wrong file fails fast instead of filling memory.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEVICE_CLASS", "DRIVER", "GPU_MILLI", "MAX_ROWS", "OpenbError", "OpenbNode", "OpenbPod",
    "read_nodes", "read_pods", "template_name", "to_scenario",
    "TimedWindow", "read_pod_times", "timed_scenario",  # the time-aware variant
]

DRIVER = "gpu.openb.dralab.io"
DEVICE_CLASS = "gpu.openb.dralab.io"
GPU_MILLI = "gpu_milli"  # the consumable capacity of a GPU device, in thousandths of the GPU
MAX_ROWS = 200_000
MAX_FIELD = 256
MAX_GPUS_PER_NODE = 64
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
# The pod's `gpu_spec` as written (models in file order): the selector already says which models it may use;
# the FGD simulator also sorts and keys its typical pods by this string, which the exact mode needs.
GPU_SPEC_ANNOTATION = "openb.dralab.io/gpu-spec"
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")  # gpu_spec etc. optional (multigpu*)
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class OpenbError(ValueError):
    """A bad trace file: ``str()`` is ``file:line: column `col`: message`` (the CLI exits 2 on it)."""

    def __init__(self, file: str, line: int | None, column: str | None, message: str) -> None:
        self.file, self.line, self.column, self.message = file, line, column, message
        where = file + (f":{line}" if line is not None else "") + (f": column `{column}`" if column else "")
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True, slots=True)
class OpenbNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class OpenbPod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU, 0..1000 (the FGD simulator clamps it to that range)
    gpu_spec: tuple[str, ...]  # allowed models, () for any


def _rows(path: str, required: tuple[str, ...]) -> Iterable[tuple[int, dict[str, str]]]:
    try:
        f = open(path, newline="", encoding="utf-8")  # noqa: SIM115 (closed below; generator)
    except OSError as exc:
        raise OpenbError(path, None, None, f"cannot read: {exc.strerror or exc}") from None
    with f:
        reader = csv.reader(f)
        try:
            header = next(reader, None)
            if header is None:
                raise OpenbError(path, 1, None, "the file is empty; expected a header row")
            header = [h.strip() for h in header]
            missing = [c for c in required if c not in header]
            if missing:
                raise OpenbError(path, 1, missing[0], f"missing column; the header must have {', '.join(required)}")
            for row in reader:
                line = reader.line_num
                if line > MAX_ROWS + 1:
                    raise OpenbError(path, line, None, f"too many rows (at most {MAX_ROWS})")
                if not row or all(not c.strip() for c in row):
                    continue
                if len(row) != len(header):
                    raise OpenbError(path, line, None, f"expected {len(header)} fields, got {len(row)}")
                for col, value in zip(header, row, strict=True):
                    if len(value) > MAX_FIELD:
                        raise OpenbError(path, line, col, f"field longer than {MAX_FIELD} characters")
                yield line, dict(zip(header, row, strict=True))
        except (csv.Error, UnicodeDecodeError) as exc:
            raise OpenbError(path, reader.line_num, None, f"not a CSV file: {exc}") from None


def _int(path: str, line: int, row: dict[str, str], col: str, lo: int, hi: int, default: int | None = None) -> int:
    text = row.get(col, "").strip()
    if text == "" and default is not None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise OpenbError(path, line, col, f"expected a whole number, got {text!r}") from None
    if not lo <= value <= hi:
        raise OpenbError(path, line, col, f"must be in [{lo}, {hi}], got {value}")
    return value


def _name(path: str, line: int, row: dict[str, str], col: str, kind: str, seen: dict[str, int]) -> str:
    """A row's name: not empty, not seen on an earlier line (``seen``: name -> line, updated)."""
    name = row[col].strip()
    if not name:
        raise OpenbError(path, line, col, f"empty {kind} name")
    if name in seen:
        raise OpenbError(path, line, col, f"duplicate {kind} `{name}` (also line {seen[name]})")
    seen[name] = line
    return name


def read_nodes(path: str, gpu_only: bool = True) -> list[OpenbNode]:
    """The node list; with ``gpu_only`` (the FGD experiments) the CPU-only nodes are left out."""
    nodes: list[OpenbNode] = []
    seen: dict[str, int] = {}
    for line, row in _rows(path, NODE_COLUMNS):
        name = _name(path, line, row, "sn", "node", seen)
        cpu = _int(path, line, row, "cpu_milli", 1, 10**8)
        mem = _int(path, line, row, "memory_mib", 1, 10**9)
        gpus = _int(path, line, row, "gpu", 0, MAX_GPUS_PER_NODE, default=0)
        model = row["model"].strip()
        if gpus and not _MODEL.fullmatch(model):
            raise OpenbError(path, line, "model",
                             f"a GPU node needs a model name (letters, digits, `-_.`), got {model!r}")
        if gpus or not gpu_only:
            nodes.append(OpenbNode(name, cpu, mem, gpus, model if gpus else ""))
    if not nodes:
        raise OpenbError(path, None, None, "no GPU nodes in the file")
    return nodes


def read_pods(path: str) -> list[OpenbPod]:
    """The pod list, in file order. `gpu_milli` is the per-GPU share (1000 = whole GPUs); `gpu_spec` is a
    `|`-separated list of allowed models. Times and QoS are not read: the FGD protocol does not use them."""
    pods: list[OpenbPod] = []
    seen: dict[str, int] = {}
    for line, row in _rows(path, POD_COLUMNS):
        name = _name(path, line, row, "name", "pod", seen)
        cpu = _int(path, line, row, "cpu_milli", 0, 10**8)
        mem = _int(path, line, row, "memory_mib", 0, 10**9)
        num = _int(path, line, row, "num_gpu", 0, MAX_GPUS_PER_NODE)
        milli = _int(path, line, row, "gpu_milli", 0, 1000, default=0)
        spec_text = (row.get("gpu_spec") or "").strip()
        spec = tuple(s.strip() for s in spec_text.split("|") if s.strip()) if spec_text else ()
        for model in spec:
            if not _MODEL.fullmatch(model):
                raise OpenbError(path, line, "gpu_spec", f"not a GPU model name: {model!r}")
        if num and milli == 0:
            raise OpenbError(path, line, "gpu_milli", f"a pod with num_gpu {num} needs a gpu_milli in 1..1000")
        if num > 1 and milli != 1000:
            raise OpenbError(path, line, "gpu_milli", "a pod of several GPUs must take whole GPUs (1000)")
        if num == 0:
            milli, spec = 0, ()
        pods.append(OpenbPod(name, cpu, mem, num, milli, spec))
    if not pods:
        raise OpenbError(path, None, None, "no pods in the file")
    return pods


def _label(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def group_name(n: OpenbNode) -> str:
    """`g2-8gpu-96c-384gi`: model, GPUs, cores, GiB (ceil): unique per node shape."""
    return f"{_label(n.model)}-{n.gpus}gpu-{n.cpu_milli}m-{n.memory_mib}mi"


def template_name(num_gpu: int, milli: int, spec: tuple[str, ...]) -> str:
    """The claim template of a GPU shape: `gpu-1x460` (460 thousandths of one GPU), `gpu-2x1000-v100m16-...`."""
    return "-".join([f"gpu-{num_gpu}x{milli}", *(_label(m) for m in spec)])[:253]


def model_selector(spec: tuple[str, ...]) -> str:
    models = ", ".join(f'"{m}"' for m in spec)
    return f'device.attributes["{DRIVER}"].model in [{models}]'


def _node_group(shape: OpenbNode, count: int) -> dict[str, Any]:
    devices = [{"name": f"gpu-{i}", "allowMultipleAllocations": True,
                "attributes": {"model": {"string": shape.model}, "index": {"int": i}},
                "capacity": {GPU_MILLI: {"value": "1000"}}} for i in range(shape.gpus)]
    return {
        "name": group_name(shape), "max": count,
        "template": {"apiVersion": "v1", "kind": "Node",
                     "metadata": {"labels": {f"{DRIVER}/model": shape.model}},
                     "status": {"allocatable": {"cpu": f"{shape.cpu_milli}m", "memory": f"{shape.memory_mib}Mi",
                                                "pods": "1000"}}},
        "resourceSlices": [{"spec": {"driver": DRIVER, "devices": devices}}],
    }


def _template(num: int, milli: int, spec: tuple[str, ...]) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": DEVICE_CLASS, "count": num,
                               "capacity": {"requests": {GPU_MILLI: str(milli)}}}
    if spec:
        exactly["selectors"] = [{"cel": {"expression": model_selector(spec)}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": template_name(num, milli, spec)},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}


def _pod(p: OpenbPod) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "openb",
                                 "resources": {"requests": {"cpu": f"{p.cpu_milli}m", "memory": f"{p.memory_mib}Mi"}}}
    spec: dict[str, Any] = {"containers": [container]}
    if p.num_gpu:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template_name(p.num_gpu, p.gpu_milli,
                                                                                              p.gpu_spec)}]
        container["resources"]["claims"] = [{"name": "gpu"}]
    metadata: dict[str, Any] = {"name": _label(p.name)}
    if p.gpu_spec:
        metadata["annotations"] = {GPU_SPEC_ANNOTATION: "|".join(p.gpu_spec)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def to_scenario(nodes: list[OpenbNode], pods: list[OpenbPod], name: str = "openb") -> dict[str, Any]:
    """The scenario document: node groups per node shape (nodes in first-seen order), the GPU DeviceClass, a
    claim template per GPU shape, and one workload entry per pod at t=0 (`at: 0s`, no `runFor`: the FGD
    protocol has no departures)."""
    shapes: dict[tuple[int, int, int, str], tuple[OpenbNode, int]] = {}
    for n in nodes:
        key = (n.cpu_milli, n.memory_mib, n.gpus, n.model)
        first, count = shapes.get(key, (n, 0))
        shapes[key] = (first, count + 1)
    templates: dict[str, dict[str, Any]] = {}
    for p in pods:
        if p.num_gpu:
            t = _template(p.num_gpu, p.gpu_milli, p.gpu_spec)
            templates.setdefault(t["metadata"]["name"], t)
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DEVICE_CLASS},
                    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
    return {
        "apiVersion": "dralab.io/v1alpha1", "kind": "Scenario",
        "metadata": {"name": _label(name)[:63]},
        "spec": {
            "seed": 0, "duration": "1h",
            "objects": [device_class, *templates.values()],
            "nodeGroups": [_node_group(shape, count) for shape, count in shapes.values()],
            "nodes": [{"group": group_name(shape), "count": count} for shape, count in shapes.values()],
            "workload": [{"at": "0s", "pod": _pod(p)} for p in pods],
        },
    }


# --- The time-aware variant (issue 9, "beyond the paper"): pods arrive at `creation_time`, leave at
# `deletion_time`, and the node groups start small for the autoscaler to grow. The FGD protocol above does
# not use any of this.

TIME_COLUMNS = ("creation_time", "deletion_time")
MAX_TIME_S = 10**10  # seconds; the trace's times are seconds from its start (about 1.3e7 for 149 days)


def read_pod_times(path: str) -> dict[str, tuple[int | None, int | None]]:
    """Each pod's (creation, deletion) in seconds, by pod name (an empty field: None). A separate pass over
    the file, so `read_pods` (and the FGD protocol that uses it) stays as it is; the pod lists without
    time columns (`multigpu*`) are refused, naming the column."""
    times: dict[str, tuple[int | None, int | None]] = {}
    for line, row in _rows(path, POD_COLUMNS + TIME_COLUMNS):
        created, deleted = (None if not row[c].strip() else _int(path, line, row, c, 0, MAX_TIME_S)
                            for c in TIME_COLUMNS)
        times[row["name"].strip()] = (created, deleted)
    return times


@dataclass(frozen=True, slots=True)
class TimedWindow:
    """What the time-aware import kept and left out, for the report (counts of trace pods)."""

    start_s: int  # the window's start, seconds after the trace's first creation
    hours: float
    arriving: int  # created inside the window
    carried_in: int  # created before the window and still running at its start: they arrive at 0
    no_time: int  # no creation time: left out
    zero_length: int  # deletion <= creation: left out (they never ran)
    open_ended: int  # no deletion time: they run to the end of the window
    nodes_at_start: int
    nodes_max: int


def timed_scenario(nodes: list[OpenbNode], pods: list[OpenbPod], times: dict[str, tuple[int | None, int | None]],
                   *, start_s: int = 0, hours: float = 24.0, start_fraction: float = 0.0,
                   provision_delay: tuple[str, str] = ("2m", "4m"), autoscaler: str = "count",
                   carry_in: bool = True, name: str = "openb-timed",
                   seed: int = 0) -> tuple[dict[str, Any], TimedWindow]:
    """The trace over the window [start_s, start_s + hours) (seconds after the first creation), as a scenario
    the autoscaler is in: a pod created in the window arrives at `creation - window start` and runs for
    `deletion - creation` (dralab's `runFor` counts from the pod's start, so a pod that waits leaves that much
    later than in the trace); with `carry_in`, pods created before the window and running at its start arrive
    at 0 and run for what they had left. Each node shape is a node group with `min: 0`, `max`: the trace's
    nodes of that shape, `round(start_fraction * max)` of them Ready at t=0 and the rest for the autoscaler
    to add (after `provision_delay`, drawn per node from [min, max]) and remove (scale-down, defaults)."""
    if not 0.0 <= start_fraction <= 1.0:
        raise ValueError(f"start_fraction must be in [0, 1], got {start_fraction}")
    if not 0 < hours <= 24 * 366:
        raise ValueError(f"hours must be in (0, 8784], got {hours}")
    doc = to_scenario(nodes, [], name)
    created = [c for c, _ in times.values() if c is not None]
    origin = min(created) if created else 0
    begin, end = origin + start_s, origin + start_s + int(hours * 3600)
    arrivals: list[tuple[int, int | None, OpenbPod]] = []
    no_time = zero = open_ended = carried = 0
    for p in pods:
        c, d = times.get(p.name, (None, None))
        if c is None:
            no_time += 1
            continue
        if d is not None and d <= c:
            zero += 1
            continue
        if c >= end or (d is not None and d <= begin) or (c < begin and not carry_in):
            continue
        carried += c < begin
        open_ended += d is None
        at = max(c, begin)
        arrivals.append((at - begin, None if d is None else d - at, p))
    arrivals.sort(key=lambda a: a[0])
    templates: dict[str, dict[str, Any]] = {}
    for _, _, p in arrivals:
        if p.num_gpu:
            t = _template(p.num_gpu, p.gpu_milli, p.gpu_spec)
            templates.setdefault(t["metadata"]["name"], t)
    spec = doc["spec"]
    spec.update(seed=seed, duration=f"{int(hours * 3600)}s", policy={"autoscaler": autoscaler})
    spec["objects"] = spec["objects"] + list(templates.values())
    low, high = provision_delay
    starting: list[dict[str, Any]] = []
    for group, entry in zip(spec["nodeGroups"], spec["nodes"], strict=True):
        group["min"], group["provisionDelay"] = 0, {"min": low, "max": high}
        count = round(start_fraction * group["max"])
        if count:
            starting.append({"group": entry["group"], "count": count})
    spec["nodes"] = starting
    spec["workload"] = [{"at": f"{at}s", **({"runFor": f"{run}s"} if run is not None else {}), "pod": _pod(p)}
                        for at, run, p in arrivals]
    window = TimedWindow(start_s, hours, len(arrivals) - carried, carried, no_time, zero, open_ended,
                         sum(n["count"] for n in starting), len(nodes))
    return doc, window

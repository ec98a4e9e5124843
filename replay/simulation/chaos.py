"""Random fault schedules and one chaos run per seed: what `dralab chaos` runs on each of its processes.

A chaos seed draws a schedule of faults (`chaos_schedule`) for a scenario: kinds from a list, times
uniform over the run (a Poisson process of `rate` faults per simulated hour), targets drawn from the
scenario itself (its starting nodes, its node groups, the run's reactors), parameters in ranges that
make sense, durations from 30 s to 10 min. The schedule becomes the scenario's `spec.faults`, so each
fault is an ordinary external input of the run (`FaultInjected`): the kept log replays, verifies and
shrinks like any other. The run itself is the normal simulator with the scenario's own seed (the chaos
seed draws the schedule only), invariants checked while it runs (the monitor) and after it (liveness,
over the finished log). A livelock (`SimulationStuck`) and a reactor that raises are failures of
their own (`livelock`, `exception`).

Everything here is a function of (scenario, chaos seed, options): the same seed gives the same
schedule, the same log and the same verdict on any process, which is what makes `--jobs` irrelevant
to the results. The process pool itself lives in the CLI (cli/chaos_cmd.py).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from dralab.core.checks.liveness import DEFAULT_BOUND_MS
from dralab.core.cluster.nodes import node_name
from dralab.core.kube.durations import format_duration
from dralab.core.log.events import Record, decode_record
from dralab.core.run.config import policies, run_config
from dralab.core.run.inputs import SOURCE
from dralab.core.scenario.faults import (
    BUS_KINDS,
    FAULT_KINDS,
    FOREIGN_FORMS,
    KINDS,
    MAX_FAULTS,
    SCENARIO_ONLY_KINDS,
    TAINT_EFFECTS,
    Fault,
    check_fault,
)
from dralab.core.scenario.load import Scenario
from dralab.replay.logs.logfile import make_header, write_log
from dralab.replay.simulation.sim import SimulationStuck, Simulator

# redis-restart and foreign-writer only mean something to a live run's bus (BUS_KINDS).
DEFAULT_KINDS: tuple[str, ...] = tuple(k for k in FAULT_KINDS if k not in BUS_KINDS and k not in SCENARIO_ONLY_KINDS)
LIVE_KINDS: tuple[str, ...] = (*DEFAULT_KINDS, "foreign-writer")  # --live; plus redis-restart with a Redis of its own
REACTORS = ("scheduler", "autoscaler", "cloud", "lifecycle", "drivers", "claims")
DEFAULT_RATE = 6.0  # faults per simulated hour
MIN_FOR_MS, MAX_FOR_MS = 30_000, 600_000
LIVELOCK, EXCEPTION = "livelock", "exception"
RUN_ERROR, DIVERGENCE = "run-error", "divergence"  # live only: the run did not finish; replay --verify disagreed
UNSHRINKABLE = (LIVELOCK, EXCEPTION, RUN_ERROR, DIVERGENCE)
DEFAULT_DRIVER, DEFAULT_DEVICE = "gpu.example.com", "gpu-0"


class ChaosError(ValueError):
    """Options `chaos_schedule` cannot honour (an unknown kind, a rate <= 0); the message says which."""


@dataclass(frozen=True)
class Targets:
    """What a schedule may hit in a scenario: its starting nodes (by group), groups, drivers, devices."""

    nodes: tuple[str, ...]
    node_group: dict[str, str]
    groups: tuple[str, ...]
    drivers: dict[str, tuple[str, ...]]  # group -> its DRA drivers
    devices: dict[str, tuple[str, ...]]  # driver -> device names of its slice templates

    @classmethod
    def of(cls, scenario: Scenario) -> Targets:
        nodes: list[str] = []
        node_group: dict[str, str] = {}
        index: dict[str, int] = {}
        for initial in scenario.nodes:  # the names setup_record gives the starting nodes
            for _ in range(initial.count):
                i = index.get(initial.group, 0)
                index[initial.group] = i + 1
                name = node_name(initial.group, i)
                nodes.append(name)
                node_group[name] = initial.group
        if not nodes:  # no starting node: the first nodes the autoscaler would add
            for g in scenario.node_groups:
                for i in range(min(g.max, 4)):
                    nodes.append(node_name(g.name, i))
                    node_group[nodes[-1]] = g.name
        drivers: dict[str, tuple[str, ...]] = {}
        devices: dict[str, list[str]] = {}
        for g in scenario.node_groups:
            names = [d.name for d in g.drivers]
            for template in g.resource_slices:
                spec = template.get("spec", {}) or {}
                driver = str(spec.get("driver", "") or "")
                if driver and driver not in names:
                    names.append(driver)
                for device in spec.get("devices", []) or []:
                    if driver and isinstance(device, dict) and device.get("name"):
                        devices.setdefault(driver, []).append(str(device["name"]))
            drivers[g.name] = tuple(names)
        return cls(tuple(nodes), node_group, tuple(g.name for g in scenario.node_groups), drivers,
                   {k: tuple(dict.fromkeys(v)) for k, v in devices.items()})


def check_kinds(kinds: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The kinds, checked (ChaosError names an unknown one and lists the valid ones)."""
    if not kinds:
        raise ChaosError(f"name at least one fault kind; valid: {', '.join(FAULT_KINDS)}")
    for kind in kinds:
        if kind not in KINDS or kind in SCENARIO_ONLY_KINDS:
            valid = (k for k in FAULT_KINDS if k not in SCENARIO_ONLY_KINDS)
            raise ChaosError(f"unknown fault kind {kind!r}; valid: {', '.join(valid)}")
    return tuple(dict.fromkeys(kinds))


def usable_kinds(kinds: tuple[str, ...], targets: Targets) -> tuple[str, ...]:
    """The kinds the scenario gives a target to (no node kinds without nodes, no group kinds without groups)."""
    have = {"node": bool(targets.nodes), "group": bool(targets.groups), "reactor": True, "": True}
    return tuple(k for k in kinds if have[KINDS[k].target])


def chaos_schedule(scenario: Scenario, seed: int, kinds: tuple[str, ...] = DEFAULT_KINDS,
                   rate: float = DEFAULT_RATE) -> list[Fault]:
    """The faults chaos seed `seed` injects into `scenario`, in time order (each passes `check_fault`)."""
    if not rate > 0:
        raise ChaosError(f"rate must be > 0 faults per simulated hour, got {rate}")
    kinds = check_kinds(kinds)
    rng = random.Random(f"dralab-chaos/{seed}")
    targets = Targets.of(scenario)
    usable = usable_kinds(kinds, targets)
    duration = scenario.duration_ms
    if not usable or duration <= 0:
        return []
    mean_gap_ms = 3_600_000 / rate
    faults: list[Fault] = []
    t = 0.0
    while len(faults) < MAX_FAULTS:
        t += rng.expovariate(1.0 / mean_gap_ms)  # a Poisson process: times uniform over the run
        at_ms = int(t) // 1000 * 1000  # whole seconds: readable in the log and in `dralab replay --at`
        if at_ms > duration:
            break
        kind = rng.choice(usable)
        item = _draw(rng, kind, at_ms, targets)
        faults.append(check_fault(item, duration, f"chaos seed {seed} fault {len(faults)}"))
    return faults


def _draw(rng: random.Random, kind: str, at_ms: int, targets: Targets) -> dict[str, Any]:
    """One fault as `spec.faults[]` writes it (so `check_fault` checks exactly what a user could write)."""
    spec = KINDS[kind]
    item: dict[str, Any] = {"at": f"{at_ms}ms", "kind": kind,
                            "for": format_duration(rng.randint(MIN_FOR_MS // 1000, MAX_FOR_MS // 1000) * 1000)}
    if spec.target == "node":
        item["node"] = rng.choice(targets.nodes)
    elif spec.target == "group":
        item["group"] = rng.choice(targets.groups)
    elif spec.target == "reactor":
        item["reactor"] = rng.choice(REACTORS)
    if "driver" in spec.required:
        node = item.get("node", "")
        drivers = targets.drivers.get(targets.node_group.get(node, ""), ()) or (DEFAULT_DRIVER,)
        item["driver"] = rng.choice(drivers)
        if "device" in spec.required:
            item["device"] = rng.choice(targets.devices.get(item["driver"], ()) or (DEFAULT_DEVICE,))
    if kind == "node-taint":
        item["taint"] = {"key": "dralab.io/chaos", "value": f"t{at_ms // 1000}",
                         "effect": rng.choice(TAINT_EFFECTS)}
    elif kind == "driver-slow":
        item["delay"] = format_duration(rng.randint(5, 300) * 1000)
    elif kind == "delay":
        item["delay"] = format_duration(rng.randint(1, 300) * 100)  # 100 ms to 30 s
    elif kind == "quota-cut":
        item["quota"] = rng.randint(0, 4)
    elif kind == "partial-fulfilment":
        item["fraction"] = rng.randint(0, 19) / 20  # 0 to 0.95: something is always missing
    elif kind == "stale-view":
        item["lag"] = rng.randint(1, 50)
    elif kind == "clock-skew":
        item["skew"] = format_duration(rng.randint(1, 120) * 1000)
    elif kind == "swizzle":
        item["reactors"] = rng.sample(REACTORS, rng.randint(2, len(REACTORS)))
        item["step"] = format_duration(rng.randint(1, 60) * 1000)
    elif kind == "foreign-writer":
        item["entries"] = rng.randint(1, 5)
        item["form"] = rng.choice(FOREIGN_FORMS)
    return item


@dataclass
class SeedResult:
    """One chaos seed's verdict. `failures`: invariant (or livelock, exception) -> violations seen;
    `first`: the first one broken (the shrink target); `files`: the logs kept for it."""

    seed: int
    faults: int
    kinds: dict[str, int]
    records: int
    sim_ms: int
    failures: dict[str, int] = field(default_factory=dict)
    first: str = ""
    message: str = ""
    files: list[str] = field(default_factory=list)
    shrunk: dict[str, Any] = field(default_factory=dict)
    digest: str = ""  # of the log: the same seed must give the same log on any process
    live: dict[str, Any] = field(default_factory=dict)  # a live seed: the faults played, restarts, outages

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "ok": self.ok, "faults": self.faults, "kinds": self.kinds,
                "records": self.records, "digest": self.digest, "sim_s": self.sim_ms / 1000, "failures": self.failures,
                "first": self.first, "message": self.message, "files": self.files,
                **({"shrunk": self.shrunk} if self.shrunk else {}), **({"live": self.live} if self.live else {})}


@dataclass(frozen=True)
class ChaosOptions:
    kinds: tuple[str, ...] = DEFAULT_KINDS
    rate: float = DEFAULT_RATE
    out_dir: str = "chaos-out"
    shrink: bool = True
    shrink_trials: int = 150
    liveness_bound_ms: int | None = None  # None: check_records' default


def scenario_seed(scenario: Scenario) -> int:
    return int(scenario.seed) if scenario.seed is not None else 0


def with_faults(scenario: Scenario, faults: list[Fault]) -> Scenario:
    """The scenario with `faults` as its `spec.faults` (after the ones it had, time order kept)."""
    merged = sorted([*scenario.faults, *faults], key=lambda f: f.at_ms)
    return msgspec.structs.replace(scenario, faults=merged)


def prepare(scenario: Scenario, seed: int, options: ChaosOptions) -> tuple[Scenario, SeedResult]:
    """The scenario with seed `seed`'s faults, and the seed's result to fill in (simulated or live)."""
    faults = chaos_schedule(scenario, seed, options.kinds, options.rate)
    kinds: dict[str, int] = {}
    for f in faults:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    return with_faults(scenario, faults), SeedResult(seed, len(faults), dict(sorted(kinds.items())), 0, 0)


def run_seed(scenario: Scenario, seed: int, options: ChaosOptions) -> SeedResult:
    """Simulate `scenario` under chaos seed `seed`'s schedule; judge it; keep (and shrink) a failing log."""
    run, result = prepare(scenario, seed, options)
    base = DEFAULT_BOUND_MS if options.liveness_bound_ms is None else options.liveness_bound_ms
    # liveness checked as the run goes, on the simulator's own state (the same samples as `check_records`
    # over the finished log would take, without folding the log a second time)
    sim = Simulator(run, scenario_seed(scenario), liveness_bound_ms=liveness_bound(run, base))
    found: list[tuple[int, str, str]] = []  # (offset, invariant, message)
    try:
        sim_result = sim.run()
        entries = sim_result.entries
        result.sim_ms = run.duration_ms
        found += [(v.offset, v.invariant, v.message) for v in sim_result.violations]
    except SimulationStuck as exc:
        entries = sim.entries
        result.sim_ms = sim.state.t
        found.append((len(entries), LIVELOCK, str(exc)))
    except Exception as exc:  # noqa: BLE001 - a reactor that raises under some fault is a finding, not a crash
        entries = sim.entries
        result.sim_ms = sim.state.t
        found.append((len(entries), EXCEPTION, f"{type(exc).__name__}: {exc}"))
    result.records = len(entries)
    result.digest = log_digest(entries)
    judge(run, seed, entries, found, result, options)
    return result


def judge(run: Scenario, seed: int, entries: list[tuple[int, bytes]], found: list[tuple[int, str, str]],
          result: SeedResult, options: ChaosOptions, mode: str = "sim") -> None:
    """Record what a seed broke, (offset, invariant or failure, message) each; keep and shrink its log."""
    if not found:
        return
    for _, name, _ in found:
        result.failures[name] = result.failures.get(name, 0) + 1
    _, result.first, result.message = min(found, key=lambda f: f[0])
    _keep(run, seed, entries, result, options, mode)


def liveness_bound(run: Scenario, base_ms: int = DEFAULT_BOUND_MS) -> int:
    """The liveness bound of a chaos run: `base_ms` plus the longest stretch during which runtime faults
    held the scheduler back (killed, paused, partitioned, delayed... `swizzle` if it names it). A pod that
    could be scheduled waits for the scheduler: that wait is the fault's doing, not a liveness bug. Node,
    device and cloud faults need no allowance: liveness judges a pod on the cluster as it is."""
    spans = sorted(
        (f.at_ms, run.duration_ms if f.for_ms is None else f.at_ms + f.for_ms) for f in run.faults
        if KINDS[f.kind].who == "runtime" and (f.target == "scheduler" or "scheduler" in f.params.get("reactors", ())
                                              or f.kind == "redis-restart"))
    longest, start, end = 0, -1, -1
    for lo, hi in spans:
        if lo > end:
            start, end = lo, hi
        else:
            end = max(end, hi)
        longest = max(longest, end - start)
    return base_ms + longest


def log_digest(entries: list[tuple[int, bytes]]) -> str:
    h = hashlib.sha256()
    for offset, payload in entries:
        h.update(offset.to_bytes(8, "big") + payload)
    return h.hexdigest()[:16]


def log_name(scenario: Scenario, seed: int, small: bool = False) -> str:
    return f"{scenario.name}-seed{seed}{'.small' if small else ''}.dralog"


def _keep(run: Scenario, seed: int, entries: list[tuple[int, bytes]], result: SeedResult,
          options: ChaosOptions, mode: str) -> None:
    out = Path(options.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    chaos = {"seed": seed, "kinds": list(options.kinds), "rate": options.rate, "first": result.first}
    header = make_header(scenario=run.name, seed=scenario_seed(run), policy=policies(run_config(run)), mode=mode,
                         chaos=chaos)
    path = out / log_name(run, seed)
    write_log(path, header, entries)
    result.files.append(str(path))
    if options.shrink and result.first not in UNSHRINKABLE:
        _shrink(run, seed, entries, result, options, header)


def _shrink(run: Scenario, seed: int, entries: list[tuple[int, bytes]], result: SeedResult,
            options: ChaosOptions, header: dict[str, Any]) -> None:
    from dralab.replay.simulation.outcomes import resolve_target
    from dralab.replay.simulation.shrink import Shrinker, final_log

    try:
        target = resolve_target(result.first)
    except KeyError:
        return
    inputs: list[Record] = [r for r in (decode_record(p, o) for o, p in entries) if r.source == SOURCE]
    shrunk = Shrinker(inputs, target, max_trials=options.shrink_trials).run()
    result.shrunk = {"target": target.name, "reproduced": shrunk.reproduced, "stopped": shrunk.stopped,
                     "trials": shrunk.trials, "units_before": shrunk.before, "units_after": shrunk.after}
    if not shrunk.reproduced:
        return
    small = final_log(shrunk)
    path = Path(options.out_dir) / log_name(run, seed, small=True)
    small_header = {**header, "shrunk_from": log_name(run, seed),
                    "shrink": {"until": target.name, "removed": shrunk.removed, "units_after": shrunk.after,
                               "duration_ms": shrunk.duration_after_ms, "shifted_ms": shrunk.shift_ms}}
    write_log(path, small_header, small.entries)
    result.files.append(str(path))

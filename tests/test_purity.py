"""Reactors are pure: no clock, no socket, no environment, no global random; only the rng they are handed.

A whole simulation (and its verification) runs while every such source is patched to raise. Then each
reactor is called on many real views: twice on the same (view, now, seed) gives the same decision, the
view is left untouched, and a different seed changes the decision only when the reactor drew from its rng.
Finally the log does not depend on the process (string hashing is salted per process).
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import os
import random
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import GPU_TAINT, GPU_TOLERATION, arrival, group, node_template, pod, scenario_doc

from dralab.core.engine.contract import decide, decision_rng
from dralab.core.log.events import decode_record
from dralab.core.run.config import build_reactors, run_config
from dralab.core.scenario.load import Scenario, load_scenario, parse_scenario
from dralab.core.state.cluster import ClusterState
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import Simulator
from dralab.replay.simulation.verify import verify

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


def busy_doc() -> dict[str, Any]:
    """Several groups with delay ranges, equal nodes (scheduler ties), a random expander, finishing pods."""
    tol = [GPU_TOLERATION]
    return scenario_doc(
        [group("a", max=4, delay=("20s", "50s"), cost=3.0, template=node_template(gpu=4, taints=[GPU_TAINT])),
         group("b", max=4, delay=("10s", "40s"), cost=3.0, template=node_template(gpu=4, taints=[GPU_TAINT])),
         group("c", max=2, delay="15s", template=node_template(gpu=8, labels={"zone": "c"}))],
        nodes={"a": 1, "b": 1},
        workload=[arrival("0s", pod("w", gpu=1, tolerations=tol), count=6, run_for="90s"),
                  arrival("5s", pod("big", gpu=4, tolerations=tol, priority=5), count=3),
                  arrival("30s", pod("zoned", gpu=2, node_selector={"zone": "c"}), count=3, run_for="2m"),
                  arrival("40s", pod("huge", gpu=16))],
        duration="15m", expander="random", score="least-allocated", scan_interval="7s", name="busy",
    )


SCENARIOS = [load_scenario(QUICKSTART), parse_scenario(busy_doc())]


class Forbidden(AssertionError):
    pass


def forbidden(name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise Forbidden(f"{name} called during a simulation")

    return call


class ForbiddenEnviron(dict[str, str]):
    def __getitem__(self, key: str) -> str:
        raise Forbidden(f"os.environ[{key!r}] read during a simulation")

    def get(self, key: str, default: Any = None) -> Any:
        raise Forbidden(f"os.environ.get({key!r}) during a simulation")

    def __contains__(self, key: object) -> bool:
        raise Forbidden(f"{key!r} in os.environ during a simulation")


class ForbiddenDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz: Any = None) -> Any:
        raise Forbidden("datetime.datetime.now called during a simulation")

    @classmethod
    def utcnow(cls) -> Any:
        raise Forbidden("datetime.datetime.utcnow called during a simulation")

    @classmethod
    def today(cls) -> Any:
        raise Forbidden("datetime.datetime.today called during a simulation")


TIME_FUNCTIONS = ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns",
                  "process_time", "process_time_ns", "sleep", "localtime", "gmtime")
RANDOM_FUNCTIONS = ("random", "randint", "choice", "choices", "shuffle", "sample", "randrange", "uniform",
                    "getrandbits", "randbytes", "seed", "gauss")


def forbid_outside_world(m: pytest.MonkeyPatch) -> None:
    for fn in TIME_FUNCTIONS:
        m.setattr(time, fn, forbidden(f"time.{fn}"))
    for fn in RANDOM_FUNCTIONS:
        m.setattr(random, fn, forbidden(f"random.{fn}"))
    m.setattr(datetime, "datetime", ForbiddenDatetime)
    m.setattr(os, "urandom", forbidden("os.urandom"))
    m.setattr(os, "getenv", forbidden("os.getenv"))
    m.setattr(os, "environ", ForbiddenEnviron())
    m.setattr(socket, "socket", forbidden("socket.socket"))
    m.setattr(socket, "create_connection", forbidden("socket.create_connection"))
    m.setattr(uuid, "uuid4", forbidden("uuid.uuid4"))
    m.setattr(uuid, "uuid1", forbidden("uuid.uuid1"))


@pytest.fixture
def no_outside_world(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with monkeypatch.context() as m:
        forbid_outside_world(m)
        yield


def test_the_patches_bite(no_outside_world: None) -> None:
    for call in (time.time, time.monotonic, time.perf_counter, datetime.datetime.now, random.random,
                 lambda: random.randint(1, 2), lambda: random.choice([1]), lambda: random.shuffle([1]),
                 lambda: os.urandom(1), lambda: os.environ["HOME"], lambda: socket.socket()):
        with pytest.raises(Forbidden):
            call()
    assert random.Random(3).random() == random.Random(3).random()  # a seeded instance still works


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_simulation_needs_no_clock_socket_environment_or_global_random(
    sc: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = Simulator(sc, 7).run()  # the reference run, in the ordinary world
    assert any(decode_record(p, o).source == "autoscaler" for o, p in expected.entries)
    with monkeypatch.context() as m:
        forbid_outside_world(m)
        result = Simulator(sc, 7).run()
        report = verify(LogFile("x", {}, result.entries))
    assert result.entries == expected.entries
    assert result.violations == []
    assert report.ok and report.checked > 0


# ---------------------------------------------------------------- reactor calls on real views


class CountingRandom(random.Random):
    """A seeded random source that counts draws (every Random method bottoms out in these two)."""

    def __init__(self, seed: int) -> None:
        self.draws = 0
        super().__init__(seed)

    def random(self) -> float:
        self.draws += 1
        return super().random()

    def getrandbits(self, k: int) -> int:
        self.draws += 1
        return super().getrandbits(k)


def views(sc: Scenario, seed: int = 7) -> Iterator[tuple[ClusterState, int]]:
    """Every view of a run that some decision was made on, with that decision's time."""
    entries = Simulator(sc, seed).run().entries
    records = [decode_record(p, o) for o, p in entries]
    state = ClusterState()
    wanted = {r.view: r.t for r in records if r.source != "scenario"}
    for offset, rec in enumerate(records, start=1):
        state.apply(offset, rec)
        if offset in wanted:
            yield copy.deepcopy(state), wanted[offset]
        # and a few later times on the same view, where timers fire
        if offset == len(records):
            for later in (rec.t + 1, rec.t + 60_000, rec.t + 3_600_000):
                yield copy.deepcopy(state), later


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_reactors_are_deterministic_and_leave_the_view_alone(sc: Scenario) -> None:
    reactors = build_reactors(run_config(sc))
    calls = 0
    for view, now in views(sc):
        before = copy.deepcopy(view)
        for reactor in reactors:
            for seed in (0, 7):
                a = decide(reactor, view, now, seed)
                b = decide(reactor, view, now, seed)
                assert a == b, f"{reactor.name} at t={now} on view {view.offset}"
                calls += 1
        assert view == before, "a reactor changed its view"
    assert calls > 20


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_seed_matters_only_through_the_rng(sc: Scenario) -> None:
    reactors = build_reactors(run_config(sc))
    used_rng = differed = 0
    for view, now in views(sc):
        for reactor in reactors:
            rng = CountingRandom(1)
            base = reactor.react(view, now, rng)
            others = [reactor.react(view, now, CountingRandom(s)) for s in range(2, 12)]
            if rng.draws == 0:
                assert all(o == base for o in others), f"{reactor.name} differs by seed without drawing from its rng"
            else:
                used_rng += 1
                differed += any(o != base for o in others)
            assert reactor.react(view, now, decision_rng(5, reactor.name, view.offset, now)) == reactor.react(
                view, now, decision_rng(5, reactor.name, view.offset, now))
    if sc.name == "busy":  # delay ranges, ties and the random expander: the rng must be in play there
        assert used_rng > 0 and differed > 0


# ---------------------------------------------------------------- across processes


_CHILD = """
import hashlib, json, sys
from dralab.core.scenario.load import load_scenario, parse_scenario
from dralab.replay.simulation.sim import simulate
arg = sys.argv[1]
sc = load_scenario(arg) if arg.endswith(".yaml") else parse_scenario(json.loads(arg))
h = hashlib.sha256()
for offset, payload in simulate(sc, 11).entries:
    h.update(offset.to_bytes(8, "big") + payload)
print(h.hexdigest())
"""


@pytest.mark.parametrize("source", [str(QUICKSTART), json.dumps(busy_doc())], ids=["quickstart", "busy"])
def test_log_does_not_depend_on_the_process(source: str) -> None:
    """Different string-hash salts (PYTHONHASHSEED) must not change a single byte: no set-order leaks."""
    digests = set()
    for salt in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": salt}
        proc = subprocess.run([sys.executable, "-c", _CHILD, source], capture_output=True, text=True, env=env,
                              timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        digests.add(proc.stdout.strip())
    assert len(digests) == 1
    sc = load_scenario(source) if source.endswith(".yaml") else parse_scenario(json.loads(source))
    here = hashlib.sha256()
    for offset, payload in Simulator(sc, 11).run().entries:
        here.update(offset.to_bytes(8, "big") + payload)
    assert digests == {here.hexdigest()}

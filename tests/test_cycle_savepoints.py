"""Cycle savepoints (core/scheduler/cycle.py), which the PodGroup cycle, topology placements, composite trees and
workload-aware preemption roll back: whatever a savepoint's scope did (bindings, removals, nested savepoints kept
or rolled back), rolling it back leaves every node's usage, the devices in use and the events as they were."""

from __future__ import annotations

import random

from builders import GPU_TOLERATION, Log, node_template, pod
from hypothesis import given, settings
from hypothesis import strategies as st

from dralab.core.scheduler.cycle import Cycle
from dralab.core.scheduler.plugins.dynamic_resources import PodClaims


def cluster() -> Log:
    log = Log()
    log.group("gpu", max=4)
    for i in range(4):
        log.node(f"gpu-{i}", group="gpu", template=node_template(gpu=8))
    for i in range(12):
        log.pod(pod(f"p{i}", gpu=2, tolerations=[GPU_TOLERATION]))
    for i in range(4):
        log.bind(f"pod/default/p{i}", f"gpu-{i}")
    return log


def snapshot(cycle: Cycle) -> tuple[dict[str, dict[str, int]], int, int]:
    usage = {n: {k: v for k, v in cycle.used[n].items() if v} for n in cycle.view.nodes}
    return usage, len(cycle.events), len(cycle.assumed)


ops = st.lists(st.tuples(st.sampled_from(["bind", "remove", "nest-keep", "nest-drop"]), st.integers(0, 11),
                         st.integers(0, 3)), max_size=25)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_rollback_restores_everything_kept_or_not_inside(steps: list[tuple[str, int, int]]) -> None:
    log = cluster()
    view = log.state
    cycle = Cycle(view, random.Random(0))
    bound: set[str] = set()
    for i in (10, 11):  # the decision changed some nodes before the savepoint
        cycle.bind(view.pods[f"pod/default/p{i}"], f"gpu-{i - 10}", PodClaims(), {})
        bound.add(f"pod/default/p{i}")
    before = snapshot(cycle)
    outer = cycle.savepoint()
    removed: set[str] = set()
    for op, i, n in steps:
        key = f"pod/default/p{i}"
        p = view.pods[key]
        if op == "bind" and p.node is None and key not in bound:
            cycle.bind(p, f"gpu-{n}", PodClaims(), {})
            bound.add(key)
        elif op == "remove" and p.node is not None and key not in removed:
            cycle.remove(p, [])
            removed.add(key)
        elif op.startswith("nest"):
            inner = cycle.savepoint()
            free = next((q for q in view.pods.values() if q.node is None and q.key not in bound), None)
            if free is not None:
                cycle.bind(free, f"gpu-{n}", PodClaims(), {})
            if op == "nest-keep":
                cycle.release(inner)
                if free is not None:
                    bound.add(free.key)
            else:
                cycle.rollback(inner)
    cycle.rollback(outer)
    assert snapshot(cycle) == before


def test_a_released_savepoint_keeps_its_bindings() -> None:
    log = cluster()
    cycle = Cycle(log.state, random.Random(0))
    sp = cycle.savepoint()
    cycle.bind(log.state.pods["pod/default/p5"], "gpu-0", PodClaims(), {})
    cycle.release(sp)
    assert cycle.used["gpu-0"]["nvidia.com/gpu"] == 4 and len(cycle.events) == 1

"""The scheduling queue's timing (core/scheduler/queue.py): a pod that failed waits in the unschedulable
pool until an event can make it schedulable or five minutes pass, then for its backoff (1 s doubling to
10 s per failed attempt); the scheduler wakes itself for both."""

from __future__ import annotations

import random

from builders import Log, node_template, pod

from dralab.core.scheduler.queue import MAX_IN_UNSCHEDULABLE_MS, backoff_ms, due
from dralab.core.scheduler.reactor import Scheduler


def test_backoff_doubles_from_one_second_to_ten() -> None:
    assert [backoff_ms(n) for n in range(1, 7)] == [1_000, 2_000, 4_000, 8_000, 10_000, 10_000]


def _parked(attempts: int) -> tuple[Log, str]:
    log = Log()
    log.node("n0", template=node_template(gpu=1))
    p = log.pod(pod("big", gpu=2), t=0)
    for i in range(attempts):
        log.unschedulable(p, t=i * 100)
    return log, p


def test_a_parked_pod_waits_for_an_event_then_for_its_backoff() -> None:
    log, p = _parked(attempts=3)  # last attempt at t=200, backoff 4 s
    state = log.state
    assert due(state, state.pods[p], 1_000) == (False, 200 + MAX_IN_UNSCHEDULABLE_MS)  # no event since
    log.node("n1", template=node_template(gpu=1), t=500)  # room appears
    assert due(state, state.pods[p], 1_000) == (False, 4_200)  # moved, but backing off
    assert due(state, state.pods[p], 4_200) == (True, None)


def test_a_parked_pod_is_flushed_after_five_minutes_without_events() -> None:
    log, p = _parked(attempts=1)
    assert due(log.state, log.state.pods[p], MAX_IN_UNSCHEDULABLE_MS) == (True, None)


def test_the_scheduler_wakes_for_backoff_and_flush_and_counts_attempts() -> None:
    log, p = _parked(attempts=1)
    log.node("n1", template=node_template(gpu=1), t=300)
    decision = Scheduler().react(log.state, 500, random.Random(0))
    assert decision.events == () and decision.wake_at == 1_000  # backing off until 1 s after the attempt
    decision = Scheduler().react(log.state, 1_000, random.Random(0))
    assert [type(e).__name__ for e in decision.events] == ["PodUnschedulable"]  # tried, failed, written
    log.append(*decision.events, t=1_000, source="scheduler")
    assert log.state.pods[p].attempts == 2
    decision = Scheduler().react(log.state, 2_000, random.Random(0))
    assert decision.events == () and decision.wake_at == 1_000 + MAX_IN_UNSCHEDULABLE_MS

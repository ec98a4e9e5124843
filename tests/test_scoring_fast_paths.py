"""The fast paths (feasibility cache, inlined loop, lazy DRA) against the plain framework (plain.py) when the
scheduler scores with a scheduler configuration (core/scheduler/scoring.py): the release's default profile
and others, over random clusters whose nodes sometimes carry PreferNoSchedule taints, images and zone labels,
and pods that sometimes prefer a zone, tolerate the taint, request no cpu/memory (NonZeroRequested) or name
a node's image. Both schedulers must write the same events decision after decision.

Seen to fail on a deliberate break: NodeAffinity declared POINTWISE (its normalization then cached per node).
(Keying the feasibility cache without the pod's NonZeroRequested additions was not caught in 40 examples:
those change a score by a point at most here.) What both schedulers share (the
plugins' arithmetic, NonZero) is checked by tests/test_scoring.py and the upstream tables instead.
"""

from __future__ import annotations

import random
from typing import Any

from builders import Log, node_template, pod
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_scheduler_fast_paths import ZONES

from dralab.core.engine.contract import decision_rng
from dralab.core.kube.versions import make_profile, profile_config
from dralab.core.log.events import NodeTaintsChanged, PodBound
from dralab.core.scheduler.config import default_config, parse_config
from dralab.core.scheduler.reactor import Scheduler

SOFT = {"key": "soft", "value": "x", "effect": "PreferNoSchedule"}
IMAGES = ("busybox", "registry.k8s.io/pause:3.9", "nvcr.io/nvidia/pytorch:24.01")
CONFIGS = {
    "default": default_config("1.37"),
    "most": parse_config({"profiles": [{"pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}]}, "c", "1.37"),
    "ratio": parse_config({"profiles": [{"pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {
            "type": "RequestedToCapacityRatio", "resources": [{"name": "cpu", "weight": 2},
                                                           {"name": "nvidia.com/gpu", "weight": 5}],
            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                   {"utilization": 100, "score": 10}]}}}}]}]}, "c", "1.37"),
    "few": parse_config({"percentageOfNodesToScore": 10}, "c", "1.37"),
}


def random_node(r: random.Random) -> dict[str, Any]:
    node = node_template(
        gpu=r.choice((0, 1, 2, 4, 8)), cpu=str(r.choice((2, 4, 8, 16))), memory=f"{r.choice((4, 16, 64))}Gi",
        pods=r.choice((2, 3, 5, 110)), labels={"zone": r.choice(ZONES)},
        taints=[SOFT] if r.random() < 0.2 else None)
    if r.random() < 0.3:
        node["status"]["images"] = [{"names": [r.choice(IMAGES)], "sizeBytes": r.choice((10, 300, 900)) << 20}]
    return node


def random_pod(r: random.Random, i: int) -> dict[str, Any]:
    p = pod(f"p{i}", gpu=r.choice((0, 0, 1, 2)), cpu=r.choice((None, "500m", "1", "2")),
            memory=r.choice((None, "1Gi", "8Gi")), priority=r.choice((None, 0, 10)),
            tolerations=[{"key": "soft", "operator": "Exists"}] if r.random() < 0.3 else None)
    spec = p["spec"]
    spec["containers"][0]["image"] = r.choice(IMAGES)
    if r.random() < 0.3:  # a sidecar without requests: NonZeroRequested's 100m / 200Mi, requests unchanged
        spec["containers"].append({"name": "side", "image": r.choice(IMAGES)})
    if r.random() < 0.3:
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": r.choice((1, 50)), "preference": {"matchExpressions": [
                {"key": "zone", "operator": "In", "values": [r.choice(ZONES)]}]}}]}}
    return p


def decide_both(seed: int, nodes: int, rounds: int, config: str) -> list[int]:
    r = random.Random(seed)
    lg = Log()
    for i in range(nodes):
        lg.node(f"n{i}", template=random_node(r), ready=r.random() > 0.1)
    next_pod = 0
    for _ in range(r.randint(1, 3 * nodes + 3)):
        next_pod += 1
        lg.pod(random_pod(r, next_pod))
    kubernetes = profile_config(make_profile("1.37"))
    fast, plain = (Scheduler(kubernetes=kubernetes, config=CONFIGS[config]) for _ in range(2))
    plain.fast_paths = False
    bound = []
    now = 1_000
    for _ in range(rounds):
        view = lg.state
        got = fast.react(view, now, decision_rng(seed, "scheduler", view.offset, now)).events
        want = plain.react(view, now, decision_rng(seed, "scheduler", view.offset, now)).events
        assert got == want, f"seed {seed}, {config}, t={now}: the fast paths decided otherwise"
        bound.append(sum(isinstance(e, PodBound) for e in got))
        if got:
            lg.append(*got, t=now, source="scheduler")
        now += r.choice((1_000, 30_000, 400_000))
        for _ in range(r.randint(0, 6)):
            next_pod += 1
            lg.pod(random_pod(r, next_pod), t=now)
        running = sorted(k for k, p in lg.state.pods.items() if p.node is not None and p.phase == "Running")
        for k in r.sample(running, min(len(running), r.randint(0, 3))):
            lg.finish(k, t=now)
        names = sorted(lg.state.nodes)
        if names and r.random() < 0.3:
            name = r.choice(names)
            lg.append(NodeTaintsChanged(name=name, taints=() if lg.state.nodes[name].taints else (SOFT,)), t=now)
    return bound


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), nodes=st.integers(0, 12), rounds=st.integers(1, 5),
       config=st.sampled_from(sorted(CONFIGS)))
def test_fast_paths_score_as_the_plain_framework(seed: int, nodes: int, rounds: int, config: str) -> None:
    decide_both(seed, nodes, rounds, config)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), nodes=st.integers(101, 160), config=st.sampled_from(sorted(CONFIGS)))
def test_fast_paths_score_as_the_plain_framework_past_100_nodes(seed: int, nodes: int, config: str) -> None:
    decide_both(seed, nodes, 3, config)


def test_the_check_binds_pods() -> None:
    assert sum(b for seed in range(4) for b in decide_both(seed, 8, 3, "default")) > 10

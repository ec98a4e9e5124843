"""cluster-autoscaler's scale-down flags as spec.autoscaler fields (core/scenario/scale_down_flags.py), each against
upstream's documented effect (config/flags/flags.go help texts, FAQ.md), on the reactor in a release profile."""

from __future__ import annotations

from typing import Any

import pytest
from builders import Log, arrival, group, node_template, pod, scenario_doc

from dralab.core.autoscaler.disruption.drain import DrainRules, drainability
from dralab.core.autoscaler.reactor import Autoscaler
from dralab.core.engine.contract import decision_rng
from dralab.core.kube.versions import LEGACY_PROFILE, make_profile, profile_config
from dralab.core.log.events import AnyEvent, NodeNotReady, NodesUnremovable, NodeTaintsChanged
from dralab.core.run.config import run_config
from dralab.core.scenario.load import ScenarioError, parse_scenario
from dralab.core.state.objects import PodState

MIN = 60_000
RELEASE = profile_config(make_profile("1.37"))


def cpu_node(lg: Log, name: str, cpu: str = "4", **meta: Any) -> None:
    template = node_template(cpu=cpu, gpu=0)
    template["metadata"] = {**template.get("metadata", {}), **meta}
    lg.node(name, group="cpu", template=template, t=0)


def owned(name: str, kind: str = "ReplicaSet", **kw: Any) -> dict[str, Any]:
    manifest = pod(name, **kw)
    manifest["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": f"{name}-owner",
                                                "uid": "u", "controller": True}]
    return manifest


def base() -> Log:
    lg = Log()
    lg.group("cpu", template=node_template(cpu="4", gpu=0), t=0)
    return lg


def loop(lg: Log, now: int, kubernetes: dict[str, Any] | None = RELEASE, **flags: Any) -> list[AnyEvent]:
    decision = Autoscaler(kubernetes=kubernetes, scale_down_flags=flags).react(
        lg.state, now, decision_rng(0, "autoscaler", lg.offset, now))
    lg.append(*decision.events, t=now, source="autoscaler")
    return list(decision.events)


def tainted(events: list[AnyEvent]) -> list[str]:
    return [e.name for e in events if isinstance(e, NodeTaintsChanged) and e.taints]


def reasons(lg: Log) -> dict[str, str]:
    return dict(lg.state.scale_down.unremovable)


# ---------------------------------------------------------------- the loader


def doc(**autoscaler: Any) -> dict[str, Any]:
    d = scenario_doc([group("cpu", min=0, max=4, template=node_template(cpu="4", gpu=0))], nodes={"cpu": 1},
                     workload=[arrival(0, pod("p", cpu="1"))], duration="5m")
    d["spec"]["autoscaler"] = autoscaler
    d["spec"]["kubernetes"] = {"version": "1.37"}
    return d


def test_flags_are_fields_named_after_them_and_the_old_fields_are_aliases() -> None:
    sc = parse_scenario(doc(scaleDownUnneededTime="2m", maxScaleDownParallelism=3, ignoreDaemonSetsUtilization=True),
                        "f.yaml")
    entry = run_config(sc)["autoscaler"]
    assert entry["scale_down"]["unneeded_time_ms"] == 2 * MIN  # where scaleDown.unneededTime lands
    assert entry["scale_down_flags"] == {"max_scale_down_parallelism": 3, "ignore_daemonsets_utilization": True}
    same = parse_scenario(doc(scaleDownUnneededTime="2m", scaleDown={"unneededTime": "120s"}), "f.yaml")
    assert run_config(same)["autoscaler"]["scale_down"]["unneeded_time_ms"] == 2 * MIN
    assert "scale_down_flags" not in run_config(parse_scenario(doc(), "f.yaml"))["autoscaler"]


@pytest.mark.parametrize(("autoscaler", "field"), [
    ({"scaleDownUnneededTime": "2m", "scaleDown": {"unneededTime": "3m"}}, "spec.autoscaler.scaleDownUnneededTime"),
    ({"scaleDownGpuUtilizationThreshold": 1.5}, "spec.autoscaler.scaleDownGpuUtilizationThreshold"),
    ({"maxDrainParallelism": 0}, "spec.autoscaler.maxDrainParallelism"),
    ({"maxGracefulTerminationSec": 600}, "spec.autoscaler.maxGracefulTerminationSec"),
    ({"scaleDownCandidatesPoolRatio": 0.1}, "spec.autoscaler.scaleDownCandidatesPoolRatio"),
])
def test_bad_flags_are_refused_naming_the_field(autoscaler: dict[str, Any], field: str) -> None:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(doc(**autoscaler), "f.yaml")
    assert field in str(e.value)


def test_delays_after_delete_and_failure_need_a_release_profile() -> None:
    """The legacy profile (forced for logs written before profiles) writes no scale-down events, so it has no
    deletion or failure clock: the two delays are refused there rather than ignored."""
    with pytest.raises(ScenarioError, match="scaleDownDelayAfterFailure"):
        parse_scenario(doc(scaleDownDelayAfterFailure="1m"), "f.yaml", profile=LEGACY_PROFILE)
    parse_scenario(doc(scaleDownDelayAfterFailure="1m"), "f.yaml")


# ---------------------------------------------------------------- their effects


def test_max_scale_down_parallelism_caps_the_nodes_marked_per_loop() -> None:
    lg = base()
    for name in ("a", "b", "c"):
        cpu_node(lg, name)
    assert tainted(loop(lg, 11 * MIN)) == ["a", "b", "c"]  # default 10
    lg = base()
    for name in ("a", "b", "c"):
        cpu_node(lg, name)
    assert tainted(loop(lg, 11 * MIN, max_scale_down_parallelism=1)) == ["a"]


def test_delay_after_delete_pauses_scale_down_after_a_deletion() -> None:
    """--scale-down-delay-after-delete: 'How long after node deletion that scale down evaluation resumes'."""
    for delay, second in ((0, 11 * MIN + 10_000), (5 * MIN, 16 * MIN)):
        lg = base()
        cpu_node(lg, "a")
        cpu_node(lg, "b")
        flags = {"max_scale_down_parallelism": 1, "delay_after_delete_ms": delay}
        t, marks = 11 * MIN, []
        while len(marks) < 2 and t < 30 * MIN:
            marks += [(t, n) for n in tainted(loop(lg, t, **flags))]
            t += 10_000
        assert marks == [(11 * MIN, "a"), (second, "b")]


def test_unready_nodes_go_after_the_unready_time() -> None:
    """--scale-down-unready-time (20m): 'How long an unready node should be unneeded before it is eligible for
    scale down'; the legacy profile never scaled an unready node down."""
    lg = base()
    cpu_node(lg, "a")
    lg.append(NodeNotReady(name="a"), t=MIN)
    assert tainted(loop(lg, 11 * MIN)) == [] and reasons(lg) == {}  # NotUnreadyLongEnough: not written
    assert tainted(loop(lg, 20 * MIN + 10_000)) == ["a"]
    lg = base()
    cpu_node(lg, "a")
    lg.append(NodeNotReady(name="a"), t=MIN)
    assert tainted(loop(lg, 25 * MIN, unready_enabled=False)) == [] and reasons(lg) == {"a": "ScaleDownUnreadyDisabled"}
    assert tainted(loop(lg, 25 * MIN, kubernetes=None)) == []


def test_the_scale_down_disabled_annotation_keeps_a_node() -> None:
    lg = base()
    cpu_node(lg, "a", annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"})
    assert tainted(loop(lg, 11 * MIN)) == [] and reasons(lg) == {"a": "ScaleDownDisabledAnnotation"}


def test_ignore_daemonsets_utilization() -> None:
    """A DaemonSet pod using 3 of 4 CPUs: the node is not underutilized unless --ignore-daemonsets-utilization."""
    for flags, marked in (({}, []), ({"ignore_daemonsets_utilization": True}, ["a"])):
        lg = base()
        cpu_node(lg, "a")
        lg.bind(lg.pod(owned("ds", kind="DaemonSet", cpu="3"), t=0), "a", t=0)
        assert tainted(loop(lg, 11 * MIN, **flags)) == marked
        assert reasons(lg) == {}  # NotUnderutilized, CurrentlyBeingDeleted: ordinary states, not written


def gpu_node_half_used() -> Log:
    lg = Log()
    lg.group("gpu", template=node_template(cpu="96", gpu=8), t=0)
    lg.node("g", group="gpu", template=node_template(cpu="96", gpu=8), t=0)
    lg.bind(lg.pod(pod("train", gpu=4), t=0), "g", t=0)
    return lg


def test_the_gpu_threshold_is_its_own_in_release_profiles() -> None:
    """--scale-down-gpu-utilization-threshold serves nodes with GPUs; --scale-down-utilization-threshold the others.
    Under the legacy profile dralab's one threshold served both, as it still does unless the GPU flag is set."""
    lg = gpu_node_half_used()
    loop(lg, 11 * MIN, gpu_utilization_threshold=0.4)
    assert reasons(lg) == {}  # 4/8 = 0.5, above 0.4: NotUnderutilized, an ordinary state
    lg = gpu_node_half_used()
    loop(lg, 11 * MIN, gpu_utilization_threshold=0.6)
    assert reasons(lg) == {"g": "BlockedByPod"}  # below 0.6: a candidate, its bare pod blocks the drain
    lg = gpu_node_half_used()
    decision = Autoscaler(kubernetes=RELEASE, scale_down={"utilization_threshold": 0.6},
                          scale_down_flags={"gpu_utilization_threshold": 0.4}).react(
        lg.state, 11 * MIN, decision_rng(0, "autoscaler", lg.offset, 11 * MIN))
    assert not [e for e in decision.events if isinstance(e, NodesUnremovable)]  # the GPU threshold decides


def test_autoscaler_8707_a_node_at_the_threshold_is_underutilized_since_the_fix() -> None:
    """4 of 8 GPUs is exactly the default 0.5: 1.35 (the bug, `>=`) keeps the node, 1.36+ (PR #8975, `>`) finds it
    underutilized (here its bare pod then blocks the drain)."""
    for version, reasons_written in (("1.35", {}), ("1.36", {"g": "BlockedByPod"}), ("1.37", {"g": "BlockedByPod"})):
        lg = gpu_node_half_used()
        loop(lg, 11 * MIN, kubernetes=profile_config(make_profile(version)))
        assert reasons(lg) == reasons_written, version  # 1.35: NotUnderutilized, not written


def test_max_drain_parallelism_drains_more_nodes_at_once() -> None:
    for flags, marked in (({}, ["a"]), ({"max_drain_parallelism": 2}, ["a", "b"])):
        lg = base()
        cpu_node(lg, "big", cpu="8")
        lg.bind(lg.pod(pod("pinned", cpu="5"), t=0), "big", t=0)  # 5/8: needed, room for 3
        for name in ("a", "b"):
            cpu_node(lg, name)
            lg.bind(lg.pod(owned(f"web-{name}", cpu="1"), t=0), name, t=0)
        assert tainted(loop(lg, 11 * MIN, **flags)) == marked


def plain(name: str, **meta: Any) -> PodState:
    manifest = owned(name)
    manifest["metadata"].update(meta)
    return PodState(key=f"pod/default/{name}", manifest=manifest, requests={}, priority=0, created_t=0,
                    created_offset=0, run_for_ms=-1)


def test_skip_nodes_with_flags_turn_the_drainability_rules_off() -> None:
    system = plain("dns", namespace="kube-system")
    assert drainability(system) == ("blocked", "UnmovableKubeSystemPod")
    assert drainability(system, DrainRules(system_pods=False))[0] == "moves"
    local = plain("cache")
    local.manifest["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    assert drainability(local) == ("blocked", "LocalStorageRequested")
    assert drainability(local, DrainRules(local_storage=False))[0] == "moves"
    custom = plain("worker")
    custom.manifest["metadata"]["ownerReferences"][0]["kind"] = "RayCluster"
    assert drainability(custom) == ("blocked", "NotReplicated")
    assert drainability(custom, DrainRules(custom_controller_pods=False))[0] == "moves"


def test_node_group_autoscaling_options_override_the_flags_per_group() -> None:
    """NodeGroupAutoscalingOptions: a group's own scaleDownUnneededTime (here 2m) beside the flag's 10m."""
    lg = base()
    lg.group("fast", template=node_template(cpu="4", gpu=0), t=0)
    cpu_node(lg, "slow-0")
    lg.node("fast-0", group="fast", template=node_template(cpu="4", gpu=0), t=0)
    assert tainted(loop(lg, 3 * MIN, group_options={"fast": {"unneeded_time_ms": 2 * MIN}})) == ["fast-0"]


def test_node_group_autoscaling_options_are_read_from_the_scenario() -> None:
    d = doc()
    d["spec"]["nodeGroups"][0]["autoscalingOptions"] = {"scaleDownUnneededTime": "2m",
                                                        "ignoreDaemonSetsUtilization": True}
    entry = run_config(parse_scenario(d, "f.yaml"))["autoscaler"]
    assert entry["scale_down_flags"] == {"group_options": {"cpu": {"unneeded_time_ms": 2 * MIN,
                                                                   "ignore_daemonsets_utilization": True}}}
    d["spec"]["nodeGroups"][0]["autoscalingOptions"] = {"maxNodeProvisionTime": "5m"}
    with pytest.raises(ScenarioError, match=r"spec\.nodeGroups\[0\]\.autoscalingOptions\.maxNodeProvisionTime"):
        parse_scenario(d, "f.yaml")
    d["spec"]["nodeGroups"][0]["autoscalingOptions"] = {"scaleDownUnneededTime": "2m"}
    with pytest.raises(ScenarioError, match="autoscalingOptions"):
        parse_scenario(d, "f.yaml", profile=LEGACY_PROFILE)

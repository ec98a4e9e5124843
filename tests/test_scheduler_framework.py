"""The scheduler's framework types (issue 19): one NodeResourcesFit, and filters that answer with a Status."""

from __future__ import annotations

from collections import Counter

from builders import GPU, GPU_TAINT, Log, node_template, pod

from dralab.core.scheduler.filters import FILTERS, fit_error, pending_cause
from dralab.core.scheduler.framework import Code, Status
from dralab.core.scheduler.plugins.node_resources_fit import (
    KUBELET_MAX_PODS_DEFAULT,
    allocatable_of,
    fit_status,
    lacking,
)


def test_the_pod_slot_first_then_each_request_in_order() -> None:
    checks = [("cpu", 2000), ("memory", 10), (GPU, 1)]
    full = {"pods": 3, "cpu": 7000, "memory": 0, GPU: 4}
    alloc = {"pods": 3, "cpu": 8000, "memory": 5, GPU: 4}
    assert list(lacking(checks, full, alloc)) == ["pods"]
    assert list(lacking(checks, full, alloc, every=True)) == ["pods", "cpu", "memory", GPU]
    assert not lacking([("cpu", 0)], {}, {})  # a request of 0 is never short, the slot defaults to 110
    assert list(lacking(checks, {**full, "pods": 0}, alloc)) == ["cpu"]


def test_the_kubelets_max_pods_default_when_a_node_does_not_say() -> None:
    assert KUBELET_MAX_PODS_DEFAULT == 110
    assert allocatable_of({}, "pods") == 110 and allocatable_of({}, "cpu") == 0
    assert not lacking([], {"pods": 109}, {}) and list(lacking([], {"pods": 110}, {})) == ["pods"]


def test_fit_status_is_unschedulable_with_the_cause() -> None:
    assert fit_status([("cpu", 1)], {}, {"cpu": 1}) is None
    cpu = fit_status([("cpu", 2)], {}, {"cpu": 1})
    gpu = fit_status([(GPU, 2)], {}, {GPU: 1})
    slot = fit_status([], {"pods": 1}, {"pods": 1})
    assert cpu == Status(Code.UNSCHEDULABLE, "Insufficient cpu", "resources", plugin="NodeResourcesFit")
    assert gpu is not None and (gpu.message, gpu.cause) == (f"Insufficient {GPU}", "capacity")
    assert slot is not None and (slot.message, slot.cause) == ("Too many pods", "resources")
    assert all(s is not None and s.is_rejected() and s.is_resolvable() for s in (cpu, gpu, slot))


def test_each_filter_status_says_the_cause_its_message_counts_for() -> None:
    """A filter's Status carries the pending cause the FitError's reasons give (pending_cause), and is
    UnschedulableAndUnresolvable exactly for the filters that no freed room could satisfy."""
    lg = Log()
    lg.node("ready", template=node_template(gpu=1, labels={"zone": "a"}, taints=[GPU_TAINT]))
    lg.node("down", template=node_template(gpu=1), ready=False)
    lg.node("cordoned", template=node_template(unschedulable=True))
    lg.pod(pod("p", gpu=2, node_selector={"zone": "b"}))
    lg.pod(pod("q", gpu=2, node_selector={"zone": "a"}))
    lg.pod(pod("r", gpu=2, node_selector={"zone": "a"}, tolerations=[{"operator": "Exists"}]))
    seen: dict[str, Status] = {}
    for p in lg.state.pods.values():
        for node in lg.state.nodes.values():
            for f in FILTERS:
                status = f(p, node, node.used)
                if status is not None:
                    seen[status.message] = status
                    break
    assert {s.cause for s in seen.values()} == {"not-ready", "selector", "taint", "capacity"}
    for message, status in seen.items():
        assert status.cause == pending_cause(Counter([message])), message
        assert status.is_resolvable() == (status.cause == "capacity"), message
        one = fit_error(1, Counter([message]))
        assert (one.code, one.cause) == (status.code, status.cause)
    assert fit_error(3, Counter(seen)).code == Code.UNSCHEDULABLE  # one node came as close as capacity
    assert fit_error(0, Counter()).cause == "capacity"


def test_each_plugin_module_declares_its_name_and_extension_points_in_upstreams_order() -> None:
    """Every module under core/scheduler/plugins/ is one plugin: its NAME and the extension points it
    implements (EXTENSION_POINTS, in interface.go's order); the registered filters are the Filter plugins'."""
    import importlib
    import pkgutil

    from dralab.core.scheduler import plugins
    from dralab.core.scheduler.framework import ExtensionPoint

    order = list(ExtensionPoint)
    assert [p.value for p in order] == ["PreEnqueue", "PreFilter", "Filter", "PostFilter", "PreScore", "Score",
                                        "Reserve", "Permit", "PreBind", "Bind"]
    declared: dict[str, tuple[ExtensionPoint, ...]] = {}
    for info in pkgutil.iter_modules(plugins.__path__):
        module = importlib.import_module(f"{plugins.__name__}.{info.name}")
        points = module.EXTENSION_POINTS
        assert points and list(points) == sorted(points, key=order.index), info.name
        declared[module.NAME] = points
    assert {"NodeUnschedulable", "NodeAffinity", "TaintToleration", "NodeResourcesFit", "DynamicResources",
            "GangScheduling", "SchedulingGates"} <= set(declared)
    registered = {importlib.import_module(f.__module__).NAME for f in FILTERS}
    # DynamicResources' Filter is registered apart: it runs last and lazily, on the best-scored nodes;
    # PodTopologySpread's and InterPodAffinity's read the decision's pods, bound per attempt (placement.py)
    assert registered == {n for n, p in declared.items() if ExtensionPoint.FILTER in p} - {
        "DynamicResources", "PodTopologySpread", "InterPodAffinity"}

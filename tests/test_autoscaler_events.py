"""cluster-autoscaler's Events and status ConfigMap (issue 22): TriggeredScaleUp / NotTriggerScaleUp as
processors/status/eventing_scale_up_processor.go writes them, at most one per reason and pod every 5 minutes (the
recorder's spam filter), the `cluster-autoscaler-status` ConfigMap rendered from the log, and where they show:
replay --explain, replay --at, the summary."""

from __future__ import annotations

from typing import Any

import yaml
from builders import GPU_TOLERATION, arrival, group, node_template, pod, scenario_doc, simulated

from dralab.core.analysis.autoscaler_status import render_configmap, status_configmap
from dralab.core.analysis.summary import render_text, summarize
from dralab.core.log.events import AutoscalerEvent, decode_record
from dralab.core.state.cluster import ClusterState
from dralab.replay.simulation.timetravel import describe, explain, render, render_story


def doc(groups: list[dict[str, Any]], workload: list[Any], duration: str = "12m", **autoscaler: Any) -> dict[str, Any]:
    d = scenario_doc(groups, workload=workload, duration=duration)
    d["spec"]["kubernetes"] = {"version": "1.37"}
    d["spec"]["autoscaler"] = autoscaler
    return d


def said(result: Any) -> list[tuple[int, AutoscalerEvent]]:
    out = []
    for o, p in result.entries:
        rec = decode_record(p, o)
        out += [(rec.t, e) for e in rec.events if isinstance(e, AutoscalerEvent)]
    return out


def state_at(result: Any, t_ms: int) -> ClusterState:
    state = ClusterState()
    for o, p in result.entries:
        rec = decode_record(p, o)
        if rec.t > t_ms:
            break
        state.apply(o, rec)
    return state


def test_not_trigger_scale_up_names_each_groups_reason_once_per_five_minutes() -> None:
    """A pod asking 16 GPUs: the 8-GPU group's template cannot hold it (Insufficient nvidia.com/gpu), the other
    group is at its max size; the message counts groups per reason; the recorder lets it through at 30 s (the GPU
    buffer), 5m30s and 10m30s only, although every 10 s loop computes it."""
    groups = [group("gpu", max=4, delay="1m", template=node_template(gpu=8)),
              group("full", max=0, delay="1m", template=node_template(gpu=8))]
    result = simulated(doc(groups, [arrival(0, pod("big", gpu=16, tolerations=[GPU_TOLERATION]))]), 1)
    events = [(t, e) for t, e in said(result) if e.reason == "NotTriggerScaleUp"]
    assert [t for t, _ in events] == [30_000, 330_000, 630_000]
    assert {e.message for _, e in events} == {
        "pod didn't trigger scale-up: 1 Insufficient nvidia.com/gpu, 1 max node group size reached"}
    assert {e.pod for _, e in events} == {"pod/default/big"} and not any(e.warning for _, e in events)
    story = explain(((o, decode_record(p, o)) for o, p in result.entries), "big")
    assert story["final"]["autoscaler"] == {"reason": "NotTriggerScaleUp", "message": events[0][1].message}
    assert "autoscaler NotTriggerScaleUp: pod didn't trigger scale-up: 1 Insufficient" in render_story(story)
    assert sum(1 for s in story["story"] if "NotTriggerScaleUp" in s["event"]) == 3
    summary = summarize(result.state, [])
    assert summary["autoscaler"] == {"scale_ups": 0, "pods_triggered": 0, "pods_not_triggering": 1,
                                     "not_triggering_reasons": {"Insufficient nvidia.com/gpu": 1,
                                                                "max node group size reached": 1},
                                     "configmap_events": {}}
    assert ("autoscaler 0 scale-ups triggered, 1 pods not triggering (reasons: Insufficient nvidia.com/gpu: 1, "
            "max node group size reached: 1)") in render_text(summary)


def test_triggered_scale_up_message_and_backoff_reason() -> None:
    """TriggeredScaleUp: "pod triggered scale-up: [{group current->new (max: max)}]"; after the group's scale-up
    fails (out of stock) it is in backoff, and a pod that only it can take says so."""
    groups = [group("gpu", max=10, delay="1m", template=node_template(gpu=8))]
    groups[0]["stock"] = [{"from": "0s", "until": "1h", "available": 1}]
    work = [arrival(0, pod("a", gpu=8, tolerations=[GPU_TOLERATION])),
            arrival(0, pod("b", gpu=8, tolerations=[GPU_TOLERATION]))]
    result = simulated(doc(groups, work, duration="4m"), 1)
    triggered = [e for _, e in said(result) if e.reason == "TriggeredScaleUp"]
    assert [(e.pod, e.message) for e in triggered[:2]] == [
        ("pod/default/a", "pod triggered scale-up: [{gpu 0->2 (max: 10)}]"),
        ("pod/default/b", "pod triggered scale-up: [{gpu 0->2 (max: 10)}]")]
    refused = [e for _, e in said(result) if e.reason == "NotTriggerScaleUp"]
    assert refused and refused[0].message == "pod didn't trigger scale-up: 1 in backoff after failed scale-up"
    # the status ConfigMap at that point: the group in Backoff, with the cloud's reason
    t = next(t for t, e in said(result) if e.reason == "NotTriggerScaleUp")
    status = status_configmap(state_at(result, t))
    g = status["nodeGroups"][0]
    assert g["name"] == "gpu" and g["scaleUp"]["status"] == "Backoff"
    assert g["health"]["minSize"] == 0 and g["health"]["maxSize"] == 10 and g["health"]["cloudProviderTarget"] == 1
    assert status["autoscalerStatus"] == "Running" and status["clusterWide"]["health"]["status"] == "Healthy"


def test_status_configmap_while_nodes_come() -> None:
    groups = [group("gpu", max=10, delay="1m", template=node_template(gpu=8))]
    result = simulated(doc(groups, [arrival(0, pod("a", gpu=8, tolerations=[GPU_TOLERATION]))], duration="3m"), 1)
    during = status_configmap(state_at(result, 40_000))
    assert during["clusterWide"]["scaleUp"]["status"] == "InProgress"
    assert during["nodeGroups"][0]["scaleUp"]["status"] == "InProgress"
    assert during["nodeGroups"][0]["health"]["nodeCounts"]["unregistered"] == 1
    after = status_configmap(result.state)
    assert after["nodeGroups"][0]["scaleUp"]["status"] == "NoActivity"
    counts = after["clusterWide"]["health"]["nodeCounts"]["registered"]
    assert counts == {"total": 1, "ready": 1, "notStarted": 0, "suspended": 0}
    manifest = yaml.safe_load(render_configmap(result.state))
    assert manifest["metadata"] == {"name": "cluster-autoscaler-status", "namespace": "kube-system"}
    data = yaml.safe_load(manifest["data"]["status"])
    assert list(data) == ["time", "autoscalerStatus", "clusterWide", "nodeGroups"]
    assert list(data["clusterWide"]) == ["health", "scaleUp", "scaleDown"]
    desc = describe(result.state, {})
    assert desc["autoscaler_status"]["nodeGroups"][0]["name"] == "gpu"
    assert "cluster-autoscaler-status (kube-system ConfigMap, data.status):" in render(desc)


def test_audit_shows_the_autoscalers_last_event_from_a_dump(tmp_path: Any, capsys: Any) -> None:
    """`dralab audit` on a dump with `kubectl get events` in it: each pending pod's last TriggeredScaleUp or
    NotTriggerScaleUp from cluster-autoscaler (core/v1 Events and events.k8s.io/v1 ones)."""
    from dralab.cli import main
    from dralab.core.analysis.audit import audit
    from dralab.core.dra.api import parse_documents

    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    big = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "8"}}}]},
           "status": {"phase": "Pending"}}

    def event(reason: str, message: str, when: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"big.{when}", "namespace": "default"},
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "big"}, "reason": reason,
                "message": message, "source": {"component": "cluster-autoscaler"}, "lastTimestamp": when}

    newer = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "big.2", "namespace": "default"},
             "regarding": {"kind": "Pod", "namespace": "default", "name": "big"}, "reason": "NotTriggerScaleUp",
             "note": "pod didn't trigger scale-up: 1 Insufficient cpu", "reportingController": "cluster-autoscaler",
             "eventTime": "2026-01-01T00:10:00Z"}
    docs = [node, big, event("TriggeredScaleUp", "pod triggered scale-up: [{g 0->1 (max: 3)}]",
                             "2026-01-01T00:05:00Z"), newer]
    report = audit(parse_documents(docs, "dump.yaml"))
    row = next(p for p in report["pods"] if p["name"] == "big")
    assert row["autoscaler"] == {"reason": "NotTriggerScaleUp",
                                 "message": "pod didn't trigger scale-up: 1 Insufficient cpu"}
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(docs))
    capsys.readouterr()
    assert main(["audit", "-f", str(dump)]) == 0
    out = capsys.readouterr().out
    assert "  default/big: NotTriggerScaleUp: pod didn't trigger scale-up: 1 Insufficient cpu" in out

"""Scenario files: every bad input refused up front, with the file, the field's path and what was expected."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dralab.core.kube.durations import DurationError, format_duration, parse_duration
from dralab.core.kube.fields import FieldError
from dralab.core.kube.manifests import check_node, check_pod, node_allocatable, pod_requests
from dralab.core.kube.quantity import ERR_FORMAT_WRONG, ERR_SUFFIX
from dralab.core.scenario.load import (
    MAX_FILE_BYTES,
    Arrival,
    AutoscalerSettings,
    InitialNodes,
    Policy,
    Scenario,
    ScenarioError,
    SchedulerSettings,
    load_scenario,
    parse_scenario,
    replica_name,
)

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
GI = 1 << 30


def node_template() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"labels": {"gpu": "a100"}},
        "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}},
    }


def pod(name: str = "train") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "priority": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "trainer",
                    "resources": {"requests": {"cpu": "8"}, "limits": {"nvidia.com/gpu": "2"}},
                }
            ],
        },
    }


def scenario() -> dict[str, Any]:
    return {
        "apiVersion": "dralab.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "t"},
        "spec": {
            "duration": "10m",
            "nodeGroups": [{"name": "gpu-8x", "max": 4, "provisionDelay": "30s", "template": node_template()}],
            "nodes": [{"group": "gpu-8x", "count": 1}],
            "workload": [{"at": "0s", "count": 2, "pod": pod()}],
        },
    }


DELETE = object()
Keys = tuple[str | int, ...]


def edit(data: dict[str, Any], keys: Keys, value: object) -> None:
    target: Any = data
    for key in keys[:-1]:
        target = target[key]
    if value is DELETE:
        del target[keys[-1]]
    elif isinstance(target, list) and keys[-1] == len(target):
        target.append(value)
    else:
        target[keys[-1]] = value


def refusal(keys: Keys, value: object) -> ScenarioError:
    data = scenario()
    edit(data, keys, value)
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "s.yaml")
    return info.value


G0: Keys = ("spec", "nodeGroups", 0)
T0: Keys = (*G0, "template")
W0: Keys = ("spec", "workload", 0)
P0: Keys = (*W0, "pod")
C0: Keys = (*P0, "spec", "containers", 0)
GROUP_FIELDS = ("`name`, `min`, `max`, `provisionDelay`, `costPerHour`, `template`, `resourceSlices`, `zones`, "
                "`quota`, `stock`, `failureRate`, `notReadyFor`, `drivers`"
                ", `deleteDelay`, `deleteFailureRate`, `retryStockouts`, `neverReadyRate`, `zoneQuota`"
                ", `preemptionRate`, `preemptionNotice`, `autoscalingOptions`"
                ", `daemonSetPods`")  # the misbehaving cloud's (core/scenario/cloud_ops.py)
INVALID_NAME = (
    "is not a valid name: expected an RFC 1123 label (at most 63 lower case alphanumeric characters or '-', "
    "starting and ending with an alphanumeric character)"
)
INVALID_SUBDOMAIN = (
    "is not a valid name: expected an RFC 1123 subdomain (at most 253 lower case alphanumeric characters, "
    "'-' or '.', starting and ending with an alphanumeric character)"
)

# (keys to edit, new value or DELETE, expected path, expected message)
BAD: list[tuple[Keys, object, str, str]] = [
    # the document
    (("apiVersion",), "v1", "apiVersion", "expected `dralab.io/v1alpha1`, got `v1`"),
    (("kind",), "Cluster", "kind", "expected `Scenario`, got `Cluster`"),
    (("kind",), 3, "kind", "expected str, got int"),
    (("metadata",), DELETE, "metadata", "missing required field"),
    (
        ("status",),
        {},
        "status",
        "unknown field `status`; expected one of `apiVersion`, `kind`, `metadata`, `spec`",
    ),
    (("metadata", "name"), "My Run", "metadata.name", f"`My Run` {INVALID_SUBDOMAIN}"),
    (
        ("metadata", "namespace"),
        "x",
        "metadata.namespace",
        "unknown field `namespace`; expected one of `name`, `labels`, `annotations` (did you mean `name`?)",
    ),
    (("spec",), [], "spec", "expected map, got list"),
    # spec
    (("spec", "duration"), DELETE, "spec.duration", "missing required field"),
    (
        ("spec", "duration"),
        "ten minutes",
        "spec.duration",
        "invalid duration `ten minutes`: expected a number of seconds or a Go duration such as "
        "`30s`, `10m`, `1h30m`, `500ms`",
    ),
    (("spec", "duration"), "0s", "spec.duration", "must be longer than 0s"),
    (("spec", "duration"), "-1h", "spec.duration", "invalid duration `-1h`: must not be negative"),
    (("spec", "duration"), [], "spec.duration", "expected duration (e.g. `30s`, `10m`, `1h30m`), got list"),
    (("spec", "seed"), -1, "spec.seed", "must be >= 0, got -1"),
    (("spec", "seed"), "7", "spec.seed", "expected int, got str"),
    (("spec", "seed"), 1 << 63, "spec.seed", f"must be <= {(1 << 63) - 1}, got {1 << 63}"),
    (
        ("spec", "nodesGroups"),
        [],
        "spec.nodesGroups",
        "unknown field `nodesGroups`; expected one of `seed`, `duration`, `policy`, `scheduler`, "
        "`autoscaler`, `nodeGroups`, `nodes`, `workload`, `objects`, `faults`, `kubernetes` (did you mean "
        "`nodeGroups`?)",
    ),
    (
        ("spec", "policy"),
        {"autoscaler": "smart"},
        "spec.policy.autoscaler",
        "expected one of `count`, `dra`, `atomic`, got `smart`",
    ),
    (
        ("spec", "policy"),
        {"scheduler": "x"},
        "spec.policy.scheduler",
        "unknown field `scheduler`; expected one of `autoscaler`",
    ),
    (
        ("spec", "scheduler"),
        {"score": "balanced"},
        "spec.scheduler.score",
        "expected one of `most-allocated`, `least-allocated`, `fragmentation`, got `balanced`",
    ),
    (
        ("spec", "autoscaler"),
        {"expander": "cheapest"},
        "spec.autoscaler.expander",
        "expected one of `least-waste`, `most-pods`, `price`, `priority`, `random`, `least-nodes` (or a "
        "comma-separated chain of them), got `cheapest`",
    ),
    (("spec", "autoscaler"), {"scanInterval": 0}, "spec.autoscaler.scanInterval", "must be longer than 0s"),
    (("spec", "autoscaler"), "fast", "spec.autoscaler", "expected map, got str"),
    # node groups
    (("spec", "nodeGroups"), [], "spec.nodeGroups", "expected at least one node group"),
    (("spec", "nodeGroups"), DELETE, "spec.nodeGroups", "missing required field"),
    (("spec", "nodeGroups"), "gpu", "spec.nodeGroups", "expected list, got str"),
    (
        (*G0, "maxx"),
        3,
        "spec.nodeGroups[0].maxx",
        f"unknown field `maxx`; expected one of {GROUP_FIELDS} (did you mean `max`?)",
    ),
    ((*G0, "max"), "4", "spec.nodeGroups[0].max", "expected int, got str"),
    ((*G0, "max"), True, "spec.nodeGroups[0].max", "expected int, got bool"),
    ((*G0, "max"), 2.0, "spec.nodeGroups[0].max", "expected int, got float"),
    ((*G0, "max"), -1, "spec.nodeGroups[0].max", "must be >= 0, got -1"),
    ((*G0, "max"), DELETE, "spec.nodeGroups[0].max", "missing required field"),
    ((*G0, "min"), 5, "spec.nodeGroups[0].max", "must be >= min (5), got 4"),
    ((*G0, "min"), -1, "spec.nodeGroups[0].min", "must be >= 0, got -1"),
    ((*G0, "name"), "GPU_8x", "spec.nodeGroups[0].name", f"`GPU_8x` {INVALID_NAME}"),
    ((*G0, "name"), "a" * 64, "spec.nodeGroups[0].name", f"`{'a' * 64}` {INVALID_NAME}"),
    (
        (*G0, "provisionDelay"),
        {"min": "40s", "max": "30s"},
        "spec.nodeGroups[0].provisionDelay.max",
        "must be >= min (40s), got 30s",
    ),
    ((*G0, "provisionDelay"), {"min": "40s"}, "spec.nodeGroups[0].provisionDelay.max", "missing required field"),
    (
        (*G0, "provisionDelay"),
        {"low": "1s"},
        "spec.nodeGroups[0].provisionDelay.low",
        "unknown field `low`; expected one of `min`, `max`",
    ),
    (
        (*G0, "provisionDelay"),
        "1us",
        "spec.nodeGroups[0].provisionDelay",
        "invalid duration `1us`: not a whole number of milliseconds (dralab's time resolution)",
    ),
    ((*G0, "costPerHour"), -1, "spec.nodeGroups[0].costPerHour", "must be >= 0, got -1"),
    ((*G0, "costPerHour"), "cheap", "spec.nodeGroups[0].costPerHour", "expected number, got str"),
    # node templates
    ((*G0, "template"), DELETE, "spec.nodeGroups[0].template", "missing required field"),
    ((*T0, "kind"), "Pod", "spec.nodeGroups[0].template.kind", "expected `Node`, got `Pod`"),
    ((*T0, "apiVersion"), "v2", "spec.nodeGroups[0].template.apiVersion", "expected `v1`, got `v2`"),
    (
        (*T0, "status"),
        DELETE,
        "spec.nodeGroups[0].template.status",
        "missing required field: a Node template needs status.allocatable",
    ),
    ((*T0, "status"), {}, "spec.nodeGroups[0].template.status.allocatable", "missing required field"),
    (
        (*T0, "status", "allocatable", "pods"),
        DELETE,
        "spec.nodeGroups[0].template.status.allocatable.pods",
        "missing required field: a Node without allocatable pods runs no pod (kubelet's default is 110)",
    ),
    (
        (*T0, "status", "allocatable", "nvidia.com/gpu"),
        "8.5",
        "spec.nodeGroups[0].template.status.allocatable.nvidia.com/gpu",
        "must be an integer, got `8.5`",
    ),
    (
        (*T0, "status", "allocatable", "memory"),
        "1TB",
        "spec.nodeGroups[0].template.status.allocatable.memory",
        f"invalid quantity `1TB`: {ERR_FORMAT_WRONG}",
    ),
    (
        (*T0, "status", "allocatable", "memory"),
        "1Ti3",
        "spec.nodeGroups[0].template.status.allocatable.memory",
        f"invalid quantity `1Ti3`: {ERR_SUFFIX}",
    ),
    (
        (*T0, "status", "allocatable", "cpu"),
        "-1",
        "spec.nodeGroups[0].template.status.allocatable.cpu",
        "must be greater than or equal to 0, got `-1`",
    ),
    (
        (*T0, "status", "allocatable", "cpu"),
        None,
        "spec.nodeGroups[0].template.status.allocatable.cpu",
        "expected a quantity (e.g. `100m`, `1Gi`, `8`), got null",
    ),
    (
        (*T0, "status", "capacity"),
        {"pods": "1.5"},
        "spec.nodeGroups[0].template.status.capacity.pods",
        "must be an integer, got `1.5`",
    ),
    ((*T0, "metadata", "labels", "gpu"), 1, "spec.nodeGroups[0].template.metadata.labels.gpu", "expected str, got int"),
    (
        (*T0, "metadata", "labels", "gpu"),
        "a b",
        "spec.nodeGroups[0].template.metadata.labels.gpu",
        "`a b` is not a valid label value: at most 63 alphanumeric characters, '-', '_' or '.', starting and "
        "ending with an alphanumeric character (or empty)",
    ),
    (
        (*T0, "spec"),
        {"taints": [{"key": "gpu", "effect": "Never"}]},
        "spec.nodeGroups[0].template.spec.taints[0].effect",
        "expected one of `NoSchedule`, `PreferNoSchedule`, `NoExecute`, got `Never`",
    ),
    (
        (*T0, "spec"),
        {"taints": [{"key": "gpu"}]},
        "spec.nodeGroups[0].template.spec.taints[0].effect",
        "missing required field",
    ),
    ((*T0, "spec"), {"taints": {"key": "gpu"}}, "spec.nodeGroups[0].template.spec.taints", "expected list, got map"),
    (
        (*T0, "spec"),
        {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}]},
        "spec.nodeGroups[0].template.spec.taints[1]",
        "duplicate taint `a:NoSchedule` (also spec.nodeGroups[0].template.spec.taints[0]); "
        "taints must be unique by key and effect",
    ),
    (
        (*T0, "spec"),
        {"unschedulable": "yes"},
        "spec.nodeGroups[0].template.spec.unschedulable",
        "expected bool, got str",
    ),
    # initial nodes
    (("spec", "nodes", 0, "group"), "cpu", "spec.nodes[0].group", "unknown node group `cpu`; defined groups: `gpu-8x`"),
    (("spec", "nodes", 0, "group"), DELETE, "spec.nodes[0].group", "missing required field"),
    (("spec", "nodes", 0, "count"), 5, "spec.nodes[0].count", "must be <= the max of node group `gpu-8x` (4), got 5"),
    (
        ("spec", "nodes", 1),
        {"group": "gpu-8x", "count": 4},
        "spec.nodes[1].count",
        "must be <= the max of node group `gpu-8x` (4), got 4 (with earlier entries, 5)",
    ),
    (("spec", "nodes", 0, "count"), 0, "spec.nodes[0].count", "must be >= 1, got 0"),
    # arrivals
    ((*W0, "at"), DELETE, "spec.workload[0].at", "missing required field"),
    ((*W0, "at"), "11m", "spec.workload[0].at", "must be <= spec.duration (10m0s), got 11m0s"),
    ((*W0, "count"), 0, "spec.workload[0].count", "must be >= 1, got 0"),
    ((*W0, "count"), 10**7, "spec.workload[0].count", "must be <= 1000000, got 10000000"),
    ((*W0, "runFor"), "-1m", "spec.workload[0].runFor", "invalid duration `-1m`: must not be negative"),
    ((*W0, "runFor"), 0, "spec.workload[0].runFor", "must be longer than 0s"),
    (
        (*W0, "replicas"),
        2,
        "spec.workload[0].replicas",
        "unknown field `replicas`; expected one of `at`, `count`, `runFor`, `pod`",
    ),
    ((*W0, "pod"), DELETE, "spec.workload[0].pod", "missing required field"),
    # pods
    ((*P0, "kind"), "Deployment", "spec.workload[0].pod.kind", "expected `Pod`, got `Deployment`"),
    ((*P0, "metadata"), DELETE, "spec.workload[0].pod.metadata", "missing required field"),
    ((*P0, "metadata", "name"), DELETE, "spec.workload[0].pod.metadata.name", "missing required field"),
    ((*P0, "metadata", "name"), "Train", "spec.workload[0].pod.metadata.name", f"`Train` {INVALID_SUBDOMAIN}"),
    ((*P0, "metadata", "namespace"), "team.a", "spec.workload[0].pod.metadata.namespace", f"`team.a` {INVALID_NAME}"),
    (
        (*P0, "metadata", "labels"),
        {"app/": "x"},
        "spec.workload[0].pod.metadata.labels.app/",
        "invalid label key: `app/` is not a qualified name: expected an optional DNS subdomain prefix and '/', "
        "then at most 63 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric",
    ),
    ((*P0, "spec"), DELETE, "spec.workload[0].pod.spec", "missing required field"),
    (
        (*P0, "spec", "containers"),
        [],
        "spec.workload[0].pod.spec.containers",
        "missing required field: a Pod needs at least one container",
    ),
    ((*C0, "name"), DELETE, "spec.workload[0].pod.spec.containers[0].name", "missing required field"),
    (
        (*C0, "resources", "limits", "nvidia.com/gpu"),
        "1.5.5",
        "spec.workload[0].pod.spec.containers[0].resources.limits.nvidia.com/gpu",
        f"invalid quantity `1.5.5`: {ERR_FORMAT_WRONG}",
    ),
    (
        (*C0, "resources", "limits", "nvidia.com/gpu"),
        "Gi",
        "spec.workload[0].pod.spec.containers[0].resources.limits.nvidia.com/gpu",
        "invalid quantity `Gi`: the number has no digits",
    ),
    (
        (*C0, "resources", "requests", "cpu"),
        "8x",
        "spec.workload[0].pod.spec.containers[0].resources.requests.cpu",
        f"invalid quantity `8x`: {ERR_FORMAT_WRONG}",
    ),
    (
        (*C0, "resources", "requests", "cpu"),
        True,
        "spec.workload[0].pod.spec.containers[0].resources.requests.cpu",
        "expected a quantity (e.g. `100m`, `1Gi`, `8`), got bool",
    ),
    (
        (*C0, "resources", "limits", "cpu"),
        "4",
        "spec.workload[0].pod.spec.containers[0].resources.requests.cpu",
        "must be less than or equal to the cpu limit (4)",
    ),
    (
        (*C0, "resources", "requests", "nvidia.com/gpu"),
        "1",
        "spec.workload[0].pod.spec.containers[0].resources.requests.nvidia.com/gpu",
        "must be equal to the nvidia.com/gpu limit (2)",
    ),
    (
        (*C0, "resources", "requests", "example.com/fpga"),
        "1",
        "spec.workload[0].pod.spec.containers[0].resources.limits.example.com/fpga",
        "missing required field: a limit must be set for a non-overcommitable resource",
    ),
    (
        (*C0, "resources", "requests", "gpu"),
        "1",
        "spec.workload[0].pod.spec.containers[0].resources.requests.gpu",
        "`gpu` is not a standard resource for containers (cpu, memory, ephemeral-storage, hugepages-*)",
    ),
    (
        (*C0, "resources", "limits", "nvidia.com/gpu"),
        "-2",
        "spec.workload[0].pod.spec.containers[0].resources.limits.nvidia.com/gpu",
        "must be greater than or equal to 0, got `-2`",
    ),
    (
        (*C0, "resources", "limits", "nvidia.com/gpu"),
        "1e30",
        "spec.workload[0].pod.spec.containers[0].resources.limits.nvidia.com/gpu",
        "`1e30` is too large (more than 2^63-1 units)",
    ),
    ((*P0, "spec", "priority"), "high", "spec.workload[0].pod.spec.priority", "expected int, got str"),
    ((*P0, "spec", "priority"), 1 << 31, "spec.workload[0].pod.spec.priority", "must be <= 2147483647, got 2147483648"),
    (
        (*P0, "spec", "nodeSelector"),
        {"zone": 1},
        "spec.workload[0].pod.spec.nodeSelector.zone",
        "expected str, got int",
    ),
    ((*P0, "spec", "nodeSelector"), ["a"], "spec.workload[0].pod.spec.nodeSelector", "expected map, got list"),
    ((*P0, "spec", "tolerations"), {"key": "a"}, "spec.workload[0].pod.spec.tolerations", "expected list, got map"),
    ((*P0, "spec", "tolerations"), ["a"], "spec.workload[0].pod.spec.tolerations[0]", "expected map, got str"),
    (
        (*P0, "spec", "tolerations"),
        [{"key": "a", "operator": "In"}],
        "spec.workload[0].pod.spec.tolerations[0].operator",
        "expected one of `Equal`, `Exists`, got `In`",
    ),
    (
        (*P0, "spec", "tolerations"),
        [{"value": "x"}],
        "spec.workload[0].pod.spec.tolerations[0].operator",
        "must be `Exists` when `key` is empty (match every taint)",
    ),
    (
        (*P0, "spec", "tolerations"),
        [{"key": "a", "tolerationSeconds": 5, "effect": "NoSchedule"}],
        "spec.workload[0].pod.spec.tolerations[0].effect",
        "must be `NoExecute` when `tolerationSeconds` is set",
    ),
    (
        (*P0, "spec", "initContainers"),
        [{"name": "main"}],
        "spec.workload[0].pod.spec.initContainers[0].name",
        "duplicate container name `main` (also spec.workload[0].pod.spec.containers[0])",
    ),
    (
        (*P0, "spec", "initContainers"),
        [{"name": "init", "restartPolicy": "OnFailure"}],
        "spec.workload[0].pod.spec.initContainers[0].restartPolicy",
        "expected one of `Always`, got `OnFailure`",
    ),
    (
        (*P0, "spec", "resources"),
        {"requests": {"nvidia.com/gpu": "1"}},
        "spec.workload[0].pod.spec.resources.requests.nvidia.com/gpu",
        "pod-level resources support only cpu, memory and hugepages-*",
    ),
    # pod names: arrival 1 (one pod named train-1) clashes with arrival 0 (train-0, train-1)
    (
        ("spec", "workload", 1),
        {"at": "1m", "pod": pod("train-1")},
        "spec.workload[1].pod.metadata.name",
        "pod `default/train-1` gives a pod the same name as spec.workload[0] (every pod needs its own name; "
        "an arrival of N > 1 pods names them `<name>-0` .. `<name>-<N-1>`)",
    ),
    (
        ("spec", "workload", 1),
        {"at": "1m", "count": 3, "pod": pod()},
        "spec.workload[1].pod.metadata.name",
        "pod `default/train` gives a pod the same name as spec.workload[0] (every pod needs its own name; "
        "an arrival of N > 1 pods names them `<name>-0` .. `<name>-<N-1>`)",
    ),
]


@pytest.mark.parametrize(("keys", "value", "path", "message"), BAD, ids=[c[2] for c in BAD])
def test_bad_input_is_refused_with_path_and_reason(keys: Keys, value: object, path: str, message: str) -> None:
    error = refusal(keys, value)
    assert (error.file, error.path, error.message) == ("s.yaml", path, message)
    assert str(error) == f"s.yaml: {path}: {message}"


def test_quickstart_loads() -> None:
    s = load_scenario(QUICKSTART)
    assert s.name == "quickstart"
    assert s.source == str(QUICKSTART)
    assert s.seed == 7
    assert s.duration_ms == 600_000
    assert s.policy == Policy(autoscaler="count")
    assert s.scheduler == SchedulerSettings(score="most-allocated")
    assert s.autoscaler == AutoscalerSettings(
        scan_interval_ms=10_000, max_node_provision_time_ms=900_000, expander="least-waste"
    )
    [group] = s.node_groups
    assert (group.name, group.min, group.max, group.provision_delay_ms) == ("gpu-8x", 0, 3, (30_000, 45_000))
    assert node_allocatable(group.template)["nvidia.com/gpu"] == 8
    assert s.nodes == [InitialNodes(group="gpu-8x", count=1)]
    pods = sum(a.count for a in s.workload)
    gpus = sum(a.count * pod_requests(a.pod)["nvidia.com/gpu"] for a in s.workload)
    assert pods == 10
    assert 8 < gpus <= 3 * 8  # the starting node is not enough; the group's max is
    assert all(a.at_ms <= 120_000 for a in s.workload)
    assert [a.at_ms for a in s.workload] == sorted(a.at_ms for a in s.workload)


@pytest.mark.parametrize("path", sorted(ROOT.glob("scenarios/**/*.yaml")), ids=lambda p: p.name)
def test_every_scenario_file_loads(path: Path) -> None:
    s = load_scenario(path)
    assert s.node_groups
    assert all(pod_requests(a.pod) for a in s.workload)


def test_every_field_example() -> None:
    s = load_scenario(ROOT / "scenarios" / "examples" / "every-field.yaml")
    assert [g.provision_delay_ms for g in s.node_groups] == [(20_000, 20_000), (120_000, 240_000)]
    assert node_allocatable(s.node_groups[0].template) == {"cpu": 16_000, "memory": 64 * GI, "pods": 110}
    train = next(a for a in s.workload if a.pod["metadata"]["name"] == "train")
    # max(trainer 48 + sidecar 0.5, fetch-data 8) + overhead 0.25
    assert pod_requests(train.pod)["cpu"] == 48_750
    assert [a.pod["metadata"]["name"] for a in s.workload] == [
        "web", "train", "tune", "eval-smoke", "pretrain-worker", "eval"]
    assert s.scheduler.gang_timeout_ms == 600_000


def test_defaults() -> None:
    data = scenario()
    del data["spec"]["nodes"]
    s = parse_scenario(data)
    assert s.source == "<scenario>"
    assert s.seed is None
    assert s.policy == Policy()
    assert s.policy.autoscaler == "count"
    assert s.scheduler.score is None  # the release's default scheduler configuration (core/run/config.py)
    assert s.scheduler.gang_timeout_ms == 300_000
    assert s.autoscaler == AutoscalerSettings(
        scan_interval_ms=10_000, max_node_provision_time_ms=900_000, expander="least-waste"
    )
    assert s.nodes == []
    group = s.node_groups[0]
    assert (group.min, group.cost_per_hour, group.provision_delay_ms) == (0, 0.0, (30_000, 30_000))
    arrival = s.workload[0]
    assert (arrival.at_ms, arrival.count, arrival.run_for_ms) == (0, 2, None)


def test_everything_given() -> None:
    data = scenario()
    spec = data["spec"]
    spec.update(
        seed=42,
        policy={"autoscaler": "dra"},
        scheduler={"score": "least-allocated"},
        autoscaler={"scanInterval": 5, "maxNodeProvisionTime": "20m", "expander": "price"},
    )
    spec["nodeGroups"][0].update(min=1, provisionDelay={"min": "20s", "max": 40}, costPerHour=32)
    spec["workload"][0].update(runFor="1h30m", count=3)
    s = parse_scenario(data)
    assert s.seed == 42
    assert s.policy.autoscaler == "dra"
    assert s.scheduler.score == "least-allocated"
    assert s.autoscaler == AutoscalerSettings(
        scan_interval_ms=5000, max_node_provision_time_ms=1_200_000, expander="price"
    )
    group = s.node_groups[0]
    assert (group.min, group.provision_delay_ms, group.cost_per_hour) == (1, (20_000, 40_000), 32.0)
    assert isinstance(group.cost_per_hour, float)
    assert (s.workload[0].count, s.workload[0].run_for_ms) == (3, 5_400_000)


def test_arrivals_are_sorted_stably_by_time() -> None:
    data = scenario()
    data["spec"]["workload"] = [
        {"at": "2m", "pod": pod("c")},
        {"at": 30, "pod": pod("a")},
        {"at": "2m", "pod": pod("d")},
        {"at": "30s", "pod": pod("b")},
        {"at": "10m", "pod": pod("e")},  # at == duration is allowed
    ]
    s = parse_scenario(data)
    assert [(a.at_ms, a.pod["metadata"]["name"]) for a in s.workload] == [
        (30_000, "a"),
        (30_000, "b"),
        (120_000, "c"),
        (120_000, "d"),
        (600_000, "e"),
    ]


def test_manifests_are_kept_with_defaults_filled_and_input_untouched() -> None:
    data = scenario()
    p = data["spec"]["workload"][0]["pod"]
    del p["apiVersion"], p["kind"]
    p["spec"]["affinity"] = {"nodeAffinity": {"anything": ["kept"]}}
    p["metadata"]["annotations"] = {"note": "kept"}
    p["status"] = {"phase": "Pending"}
    del data["spec"]["nodeGroups"][0]["template"]["apiVersion"]
    original = copy.deepcopy(data)
    s = parse_scenario(data)
    assert data == original
    got = s.workload[0].pod
    assert (got["apiVersion"], got["kind"], got["metadata"]["namespace"]) == ("v1", "Pod", "default")
    assert got["spec"]["affinity"] == {"nodeAffinity": {"anything": ["kept"]}}
    assert got["metadata"]["annotations"] == {"note": "kept"}
    assert got["status"] == {"phase": "Pending"}
    assert s.node_groups[0].template["apiVersion"] == "v1"
    assert s.node_groups[0].template["status"]["allocatable"]["memory"] == "1Ti"  # quantities kept as written


def test_an_explicit_namespace_is_kept() -> None:
    data = scenario()
    data["spec"]["workload"][0]["pod"]["metadata"]["namespace"] = "team-a"
    assert parse_scenario(data).workload[0].pod["metadata"]["namespace"] == "team-a"


def test_pod_names_of_different_namespaces_or_bases_do_not_clash() -> None:
    data = scenario()
    other = pod("train")
    other["metadata"]["namespace"] = "other"
    data["spec"]["workload"] += [
        {"at": "1m", "pod": other},
        {"at": "1m", "pod": pod("train-2")},  # arrival 0 makes train-0 and train-1 only
        {"at": "1m", "pod": pod("train-01")},
        {"at": "1m", "count": 2, "pod": pod("train-0")},  # train-0-0, train-0-1
    ]
    assert len(parse_scenario(data).workload) == 5


def test_replica_names() -> None:
    assert replica_name("train", 1, 0) == "train"
    assert [replica_name("train", 3, i) for i in range(3)] == ["train-0", "train-1", "train-2"]


def test_scenario_round_trips_through_msgspec() -> None:
    s = load_scenario(QUICKSTART)
    encoded = msgspec.json.encode(s)
    assert msgspec.json.decode(encoded, type=Scenario) == s
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(s), type=Scenario) == s


def test_scenario_is_frozen() -> None:
    s = load_scenario(QUICKSTART)
    with pytest.raises(AttributeError):
        cast(Any, s).name = "x"


def test_non_mapping_top_level() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario([1, 2], "s.yaml")
    assert info.value.path == ""
    assert str(info.value) == "s.yaml: expected a Scenario document (a map) at the top level, got list"


def test_bool_keys_from_yaml_are_explained() -> None:
    data = scenario()
    data["spec"]["nodeGroups"][0]["template"]["metadata"]["labels"] = {True: "x"}
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "s.yaml")
    assert info.value.path == "spec.nodeGroups[0].template.metadata.labels"
    assert info.value.message == (
        "keys must be strings, got bool `true` (YAML reads unquoted yes/no/on/off/true/false as booleans: "
        "quote the key)"
    )


def test_non_finite_numbers_are_refused() -> None:
    data = scenario()
    data["spec"]["nodeGroups"][0]["costPerHour"] = float("inf")
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "s.yaml")
    assert str(info.value) == "s.yaml: spec.nodeGroups[0].costPerHour: a non-finite number (inf) is not allowed"


# --- files ----------------------------------------------------------------------------------------------


def write(tmp_path: Path, text: str | bytes, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def load_error(path: Path) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.file == str(path)
    return info.value


HEAD = "apiVersion: dralab.io/v1alpha1\nkind: Scenario\nmetadata: {name: t}\n"


def test_yaml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "spec:\n  duration: [10m\n  nodeGroups: []\n")
    error = load_error(path)
    assert (error.line, error.column) == (6, 13)
    assert error.path == ""
    assert str(error) == f"{path}:6:13: while parsing a flow sequence: did not find expected ',' or ']'"


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "spec:\n  duration: 10m\n  duration: 5m\n")
    error = load_error(path)
    assert str(error) == f"{path}:6:3: duplicate key `duration` (first at line 5)"


def test_anchors_and_aliases_share_a_pod(tmp_path: Path) -> None:
    text = HEAD + (
        "spec:\n"
        "  duration: 10m\n"
        "  nodeGroups:\n"
        "  - name: gpu\n"
        "    max: 2\n"
        "    template: {status: {allocatable: {pods: '110', nvidia.com/gpu: '8'}}}\n"
        "  workload:\n"
        "  - at: 0s\n"
        "    count: 2\n"
        "    pod: &p {metadata: {name: a}, spec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]}}\n"
        "  - at: 1m\n"
        "    pod:\n"
        "      <<: *p\n"
        "      metadata: {name: b}\n"
    )
    s = load_scenario(write(tmp_path, text))
    assert [a.pod["metadata"]["name"] for a in s.workload] == ["a", "b"]
    assert [pod_requests(a.pod) for a in s.workload] == [{"nvidia.com/gpu": 1}] * 2
    assert s.workload[1].pod["metadata"]["namespace"] == "default"


def test_timestamps_and_base_60_stay_strings(tmp_path: Path) -> None:
    text = HEAD + "spec:\n  duration: 1:30\n  nodeGroups: []\n"
    error = load_error(write(tmp_path, text))
    assert error.path == "spec.duration"
    assert error.message.startswith("invalid duration `1:30`")
    text = HEAD.replace("{name: t}", "{name: t, annotations: {created: 2024-01-01T00:00:00Z}}")
    error = load_error(write(tmp_path, text + "spec: {duration: 1m, nodeGroups: []}\n"))
    assert error.path == "spec.nodeGroups"  # the timestamp annotation was accepted as a string


def test_unsupported_yaml_types_are_refused(tmp_path: Path) -> None:
    text = HEAD.replace("{name: t}", "{name: t, labels: {a: !!binary aGVsbG8=}}") + "spec: {}\n"
    error = load_error(write(tmp_path, text))
    assert str(error).endswith("metadata.labels.a: unsupported YAML value of type bytes")


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    error = load_error(write(tmp_path, "\n".join(lines) + "\n"))
    assert error.message == "the document holds more than 5000000 values once YAML aliases are expanded"


def test_self_containing_alias_is_refused(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, "a: &a [1, *a]\n"))
    assert (error.path, error.message) == ("a[1]", "a YAML alias refers to a node that contains it")


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, "a: " + "[" * 200 + "]" * 200 + "\n"))
    assert error.message == "nested deeper than 100 levels"


def test_big_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, b"#" * (MAX_FILE_BYTES + 1))
    assert str(load_error(path)) == f"{path}: the file is larger than 16 MiB"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty; expected a Scenario document"),
        ("# only a comment\n", "the file is empty; expected a Scenario document"),
        ("- a\n- b\n", "expected a Scenario document (a map) at the top level, got list"),
        ("just text\n", "expected a Scenario document (a map) at the top level, got str"),
    ],
)
def test_not_a_scenario(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    assert str(load_error(path)) == f"{path}: {message}"


def test_two_documents_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "a: 1\n---\nb: 2\n")
    assert str(load_error(path)) == f"{path}:2:1: expected a single document in the stream: but found another document"


def test_unreadable_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    assert str(load_error(missing)) == f"{missing}: cannot read the file: No such file or directory"
    assert str(load_error(tmp_path)) == f"{tmp_path}: cannot read the file: Is a directory"


def test_scenario_error_formats() -> None:
    assert str(ScenarioError("f.yaml", "spec.x", "bad")) == "f.yaml: spec.x: bad"
    assert str(ScenarioError("f.yaml", "", "bad")) == "f.yaml: bad"
    assert str(ScenarioError("f.yaml", "", "bad", line=3, column=7)) == "f.yaml:3:7: bad"
    assert isinstance(ScenarioError("f", "", "m"), Exception)


# --- pod requests and node allocatable ------------------------------------------------------------------


def container(
    name: str, requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "resources": resources, **extra}


def a_pod(containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": containers, **spec}}


def test_requests_default_to_limits_and_containers_add_up() -> None:
    p = a_pod(
        [
            container("a", {"cpu": "100m", "memory": "1Gi"}, {"cpu": "1", "nvidia.com/gpu": "2"}),
            container("b", {"cpu": "200m"}),
            container("c"),
        ]
    )
    assert pod_requests(check_pod(p)) == {"cpu": 300, "memory": GI, "nvidia.com/gpu": 2}


def test_requests_are_rounded_once_on_the_exact_total() -> None:
    p = a_pod([container("a", {"cpu": "0.0005"}), container("b", {"cpu": "0.0005"})])
    assert pod_requests(p) == {"cpu": 1}
    p = a_pod([container("a", {"cpu": "0.0004"})])
    assert pod_requests(p) == {"cpu": 1}


def test_init_containers_raise_the_request_to_their_peak() -> None:
    p = a_pod(
        [container("main", {"cpu": "1", "memory": "1Gi"})],
        initContainers=[container("init", {"cpu": "3"}), container("small", {"memory": "512Mi"})],
    )
    assert pod_requests(check_pod(p)) == {"cpu": 3000, "memory": GI}


def test_sidecars_add_up_as_upstream() -> None:
    # KEP-753: a sidecar runs with the containers and with every init container after it.
    p = a_pod(
        [container("main", {"cpu": "1"})],
        initContainers=[
            container("sidecar", {"cpu": "1"}, restartPolicy="Always"),
            container("init", {"cpu": "3"}),
        ],
    )
    assert pod_requests(check_pod(p)) == {"cpu": 4000}  # max(1 + 1, 3 + 1)
    p = a_pod(
        [container("main", {"cpu": "5"})],
        initContainers=[
            container("init", {"cpu": "3"}),
            container("sidecar", {"cpu": "1"}, restartPolicy="Always"),
        ],
    )
    assert pod_requests(check_pod(p)) == {"cpu": 6000}  # max(5 + 1, 3)


def test_overhead_and_pod_level_resources() -> None:
    p = a_pod(
        [container("a", {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})],
        overhead={"cpu": "250m", "memory": "120Mi"},
        resources={"requests": {"cpu": "4"}, "limits": {"memory": "8Gi"}},
    )
    # pod-level cpu replaces the containers'; the memory limit does not become the request because a
    # container requests memory; the overhead is added last.
    assert pod_requests(check_pod(p)) == {"cpu": 4250, "memory": GI + 120 * (1 << 20), "nvidia.com/gpu": 1}
    p = a_pod([container("a", {"cpu": "1"})], resources={"limits": {"memory": "8Gi"}})
    assert pod_requests(check_pod(p)) == {"cpu": 1000, "memory": 8 * GI}


def test_node_allocatable_falls_back_to_capacity() -> None:
    status = {"capacity": {"cpu": "8", "pods": "110"}, "allocatable": {"cpu": "7500m", "pods": "110"}}
    assert node_allocatable({"status": status}) == {"cpu": 7500, "pods": 110}
    assert node_allocatable({"status": {"capacity": {"cpu": "8", "memory": "1Gi"}}}) == {"cpu": 8000, "memory": GI}
    assert node_allocatable({"status": {"allocatable": {}, "capacity": {"cpu": "8"}}}) == {}
    assert node_allocatable({}) == {}


def test_check_node_and_check_pod_return_checked_copies() -> None:
    node = {"status": {"capacity": {"pods": "10"}}}
    checked = check_node(node)
    assert checked == {"apiVersion": "v1", "kind": "Node", "status": {"capacity": {"pods": "10"}}}
    assert node == {"status": {"capacity": {"pods": "10"}}}
    with pytest.raises(FieldError) as info:
        check_pod({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": []}]}}, "pod")
    assert (info.value.path, info.value.message) == ("pod.spec.containers[0].resources", "expected map, got list")


# --- durations ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        ("30s", 30_000),
        ("10m", 600_000),
        ("1h30m", 5_400_000),
        ("500ms", 500),
        ("1.5h", 5_400_000),
        ("0", 0),
        ("0s", 0),
        ("+5s", 5000),
        (".5s", 500),
        ("5.s", 5000),
        ("30m1h", 5_400_000),
        ("1h1m1.5s", 3_661_500),
        ("2000us", 2),
        ("2000\u00b5s", 2),
        ("3000000ns", 3),
        (30, 30_000),
        (0.25, 250),
        ("90", 90_000),
        ("0.1", 100),
        ("2562047h", 2562047 * 3_600_000),
    ],
)
def test_durations(value: str | int | float, ms: int) -> None:
    assert parse_duration(value) == ms


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("-1s", "must not be negative"),
        (-1, "must not be negative"),
        ("-5", "must not be negative"),
        ("1us", "not a whole number of milliseconds (dralab's time resolution)"),
        (0.0001, "not a whole number of milliseconds (dralab's time resolution)"),
        ("2562048h", "too long (the limit is 2^63-1 nanoseconds, about 292 years)"),
        ("abc", "expected a number of seconds or a Go duration such as `30s`, `10m`, `1h30m`, `500ms`"),
        ("", "expected a number of seconds or a Go duration such as `30s`, `10m`, `1h30m`, `500ms`"),
        ("1h-5m", "expected a number of seconds or a Go duration such as `30s`, `10m`, `1h30m`, `500ms`"),
        (
            "1x",
            "unknown unit `x`; expected a number of seconds or a Go duration such as `30s`, `10m`, `1h30m`, `500ms`",
        ),
        ("1h5", "missing unit; expected a number of seconds or a Go duration such as `30s`, `10m`, `1h30m`, `500ms`"),
        (
            "1d",
            "unknown unit `d`; expected a number of seconds or a Go duration such as `30s`, `10m`, `1h30m`, `500ms`",
        ),
        (float("nan"), "not a finite number"),
        (True, "expected a number of seconds or a Go duration such as `30s`, `10m`, `1h30m`, `500ms`, got bool"),
    ],
)
def test_bad_durations(value: object, reason: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(cast(Any, value))
    assert info.value.reason == reason


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0s"),
        (1, "1ms"),
        (999, "999ms"),
        (1000, "1s"),
        (1500, "1.5s"),
        (61_001, "1m1.001s"),
        (3_600_000, "1h0m0s"),
        (5_400_000, "1h30m0s"),
        (-1500, "-1.5s"),
    ],
)
def test_format_duration(ms: int, text: str) -> None:
    assert format_duration(ms) == text


@given(st.integers(min_value=0, max_value=10**12))
def test_format_duration_round_trips(ms: int) -> None:
    assert parse_duration(format_duration(ms)) == ms


def test_arrival_struct_defaults() -> None:
    assert Arrival(at_ms=0, count=1, pod={}).run_for_ms is None

"""The scenario as typed data: what a checked scenario file becomes (scenario.py loads and checks it).

Apart from the loader so that the loader's helpers (dra.py, cloud.py) and everything
downstream can name these types without importing the loader, which imports them."""

from __future__ import annotations

from typing import Any, Literal, get_args

import msgspec

from ..kube import defaults as flag_defaults  # the scale-up flags' defaults (issue 22)
from ..kube.defaults import (
    EXPANDER,
    MAX_NODE_PROVISION_TIME_MS,
    MAX_NODE_STARTUP_TIME_MS,
    NODE_DELETE_DELAY_AFTER_TAINT_MS,
    SCALE_DOWN_DELAY_AFTER_ADD_MS,
    SCALE_DOWN_UNNEEDED_TIME_MS,
    SCALE_DOWN_UTILIZATION_THRESHOLD,
    SCAN_INTERVAL_MS,
)
from ..kube.versions import LEGACY_PROFILE, Profile, merge_gates
from ..kube.workloads import DEFAULT_GANG_TIMEOUT_MS
from ..log.events import DeviceBindingRule, DriverSpec, StockWindow
from ..log.events_cloud import NodeGroupCloudDefined
from .faults import Fault

API_VERSION = "dralab.io/v1alpha1"
KIND = "Scenario"

AutoscalerPolicy = Literal["count", "dra", "atomic"]
ScoreStrategy = Literal["most-allocated", "least-allocated", "fragmentation"]
Expander = Literal["least-waste", "most-pods", "price", "priority", "random"]
AUTOSCALER_POLICIES: tuple[str, ...] = get_args(AutoscalerPolicy)
SCORE_STRATEGIES: tuple[str, ...] = get_args(ScoreStrategy)
EXPANDERS: tuple[str, ...] = get_args(Expander)


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    autoscaler: AutoscalerPolicy = "count"


class SchedulerSettings(msgspec.Struct, frozen=True, kw_only=True):
    # dralab's single score policy (its float arithmetic); None: the release's default scheduler configuration
    # (core/scheduler/config.py), or most-allocated under the legacy profile
    score: ScoreStrategy | None = None
    # spec.scheduler.config: a KubeSchedulerConfiguration document as written (a map), checked against the
    # release when the run is configured (core/run/config.py scheduler_config; the scheduler layer knows it)
    config: dict[str, Any] | None = None
    gang_timeout_ms: int = DEFAULT_GANG_TIMEOUT_MS  # the Permit deadline of a gang (upstream: fixed 5m)
    # feature gates set in spec.scheduler.featureGates (any gate of the release; recorded in the scheduler's
    # configuration, as before profiles existed, and merged into the profile by the reactors)
    feature_gates: dict[str, bool] = msgspec.field(default_factory=dict)


class ScaleDownSettings(msgspec.Struct, frozen=True, kw_only=True):
    """cluster-autoscaler's scale-down flags; their defaults in core/kube/defaults.py."""

    enabled: bool = True
    utilization_threshold: float = SCALE_DOWN_UTILIZATION_THRESHOLD  # GPU nodes: GPU utilization
    unneeded_time_ms: int = SCALE_DOWN_UNNEEDED_TIME_MS
    delay_after_add_ms: int = SCALE_DOWN_DELAY_AFTER_ADD_MS
    delete_delay_after_taint_ms: int = NODE_DELETE_DELAY_AFTER_TAINT_MS
    recheck_before_delete: bool = True  # False: delete on the judgment made before tainting (the race)


class AutoscalerSettings(msgspec.Struct, frozen=True, kw_only=True):
    """cluster-autoscaler's flags a scenario sets; their defaults in core/kube/defaults.py."""

    scan_interval_ms: int = SCAN_INTERVAL_MS
    max_node_provision_time_ms: int = MAX_NODE_PROVISION_TIME_MS
    max_node_startup_time_ms: int = MAX_NODE_STARTUP_TIME_MS
    expander: str = EXPANDER  # one of EXPANDERS or a comma-separated chain (core/scenario/autoscaler_flags.py)
    scale_down: ScaleDownSettings = msgspec.field(default_factory=ScaleDownSettings)
    capacity_revoked: bool = False  # ProvisioningRequests: revoke a booking whose capacity is gone
    reserve_bookings: bool = False  # ProvisioningRequests: the scheduler honours a booking (a reservation)
    # ProvisioningRequests' virtual pods: claims from templates made in memory (the fix of autoscaler#10065)
    # or left unresolved, so such pods never fit (the bug); see core/autoscaler/simulation/virtual_claims.py
    provisioning_request_claims: str = "materialize"
    # whether the scenario set it: when not, the release decides (autoscaler#10065, core/kube/bugs.py; run/config.py)
    provisioning_request_claims_given: bool = False
    # cluster-autoscaler's scale-down flags set as spec.autoscaler fields, beyond those ScaleDownSettings holds (their
    # aliases): ScaleDown's keyword -> value, only those the scenario sets (core/scenario/scale_down_flags.py)
    scale_down_flags: dict[str, Any] = msgspec.field(default_factory=dict)
    # scale-up flags (issue 22; parsed by core/scenario/autoscaler_flags.py, defaults in core/kube/defaults.py)
    new_pod_scale_up_delay_ms: int = flag_defaults.NEW_POD_SCALE_UP_DELAY_MS
    max_nodes_total: int = flag_defaults.MAX_NODES_TOTAL
    ok_total_unready_count: int = flag_defaults.OK_TOTAL_UNREADY_COUNT
    max_total_unready_percentage: float = flag_defaults.MAX_TOTAL_UNREADY_PERCENTAGE
    max_nodes_per_scale_up: int = flag_defaults.MAX_NODES_PER_SCALE_UP
    expander_priorities: tuple[tuple[int, tuple[str, ...]], ...] = ()  # (priority, node group name regexes)
    balance_similar_node_groups: bool = flag_defaults.BALANCE_SIMILAR_NODE_GROUPS
    initial_node_group_backoff_ms: int = flag_defaults.INITIAL_NODE_GROUP_BACKOFF_MS
    max_node_group_backoff_ms: int = flag_defaults.MAX_NODE_GROUP_BACKOFF_MS
    node_group_backoff_reset_timeout_ms: int = flag_defaults.NODE_GROUP_BACKOFF_RESET_TIMEOUT_MS


class NodeGroup(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    min: int
    max: int
    provision_delay_ms: tuple[int, int]  # (low, high); equal when fixed
    cost_per_hour: float = 0.0
    template: dict[str, Any]  # the v1 Node manifest as loaded (apiVersion/kind filled in)
    # ResourceSlice templates (apiVersion/kind, spec.pool.generation and resourceSliceCount filled in;
    # metadata.name, spec.nodeName and spec.pool.name left for render_slices to fill per node)
    resource_slices: list[dict[str, Any]] = msgspec.field(default_factory=list)
    # the cloud and the drivers (core/scenario/cloud.py): defaults as the events' (no limits, no faults)
    zones: tuple[str, ...] = ()
    quota: int = -1  # -1: no quota
    stock: tuple[StockWindow, ...] = ()
    failure_rate: float = 0.0
    not_ready_ms: int = 0
    drivers: tuple[DriverSpec, ...] = ()
    binding: tuple[DeviceBindingRule, ...] = ()  # drivers[].bindingConditions (core/scenario/device_binding.py)
    # Pods each new node runs from the start (DaemonSets'), with their claims (core/scenario/template_pods.py)
    daemon_set_pods: tuple[dict[str, Any], ...] = ()
    cloud_ops: NodeGroupCloudDefined | None = None  # a misbehaving cloud's settings (core/scenario/cloud_ops.py)


class InitialNodes(msgspec.Struct, frozen=True, kw_only=True):
    group: str
    count: int


class Arrival(msgspec.Struct, frozen=True, kw_only=True):
    at_ms: int
    count: int
    # the v1 Pod manifest as loaded (apiVersion/kind/metadata.namespace filled in); of a Job arrival, its pod
    # template as a pod named after the Job, `count` its parallelism (what its pods ask for; not created as such)
    pod: dict[str, Any]
    run_for_ms: int | None = None  # of each pod (a Job's pods too)
    # a batch/v1 Job as checked (core/kube/jobs.py): its controller (core/controllers/jobs.py) makes the pods
    job: dict[str, Any] | None = None


class ObjectChange(msgspec.Struct, frozen=True, kw_only=True):
    """An object created, updated or deleted at a time of the run: a `spec.workload[]` entry `create`, `apply` or
    `delete` (core/scenario/object_changes.py), checked at load; `apply` is resolved there to a create or an
    update by what exists at that time."""

    at_ms: int
    op: Literal["create", "update", "delete"]
    kind: str
    name: str
    namespace: str = ""  # "" for cluster-scoped kinds
    manifest: dict[str, Any] = msgspec.field(default_factory=dict)  # as checked (create, update); {} to delete
    entry: int = 0  # its index in spec.workload (the record's id)
    time_added_ms: int = 0  # a DeviceTaintRule's taint timeAdded (bumped by an update that changes the effect)


class Scenario(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    seed: int | None
    duration_ms: int
    policy: Policy
    scheduler: SchedulerSettings
    autoscaler: AutoscalerSettings
    node_groups: list[NodeGroup]
    nodes: list[InitialNodes]
    workload: list[Arrival]
    source: str
    # resource.k8s.io/v1 DeviceClasses, ResourceClaimTemplates and ResourceClaims present at t=0, as loaded
    # (metadata.namespace filled in for claims and templates)
    objects: list[dict[str, Any]] = msgspec.field(default_factory=list)
    # faults injected at a time (core/scenario/faults.py), external inputs like the arrivals
    faults: list[Fault] = msgspec.field(default_factory=list)
    # the release emulated (spec.kubernetes, core/kube/versions.py), without spec.scheduler.featureGates; a
    # Scenario made in code rather than loaded from a file is dralab's model from before profiles (1.35 legacy)
    kubernetes: Profile = LEGACY_PROFILE
    # objects created, updated or deleted during the run (spec.workload[] create/apply/delete), in time order
    object_changes: list[ObjectChange] = msgspec.field(default_factory=list)


def effective_profile(scenario: Scenario) -> Profile:
    """The scenario's release with spec.scheduler.featureGates on top: what the cluster emulated runs with."""
    return merge_gates(scenario.kubernetes, scenario.scheduler.feature_gates, path="spec.scheduler")


def replica_name(base: str, count: int, i: int) -> str:
    """The name of replica ``i`` of an arrival of ``count`` pods named ``base``: ``base`` itself when the
    arrival has one pod, else ``base-i``. The loader refuses a scenario in which two pods share a name."""
    return base if count == 1 else f"{base}-{i}"

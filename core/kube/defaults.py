"""The one home of every default dralab takes from an upstream component's flag, field or constant.

Each default is named after what it models (the flag, the config field or the Go constant) and cites it,
so that a reader changing one knows what upstream does and every user (the scenario loader, the
autoscaler, the scheduler's queue, the controllers) reads the same value. Where dralab's value differs
from upstream's the comment says so. In the kube layer, the lowest, so that every layer can import it.

All times are milliseconds of cluster time.
"""

from __future__ import annotations

from typing import Final

MINUTE_MS: Final = 60_000

# --- cluster-autoscaler (cluster-autoscaler/config/flags/flags.go; config/autoscaling_options.go) -------

# --scan-interval (config.DefaultScanInterval = 10 s): how often the cluster is reevaluated.
SCAN_INTERVAL_MS: Final = 10_000
# --expander (expander.LeastWasteExpanderName): how scale-up picks a node group among those that help.
EXPANDER: Final = "least-waste"
# --max-node-provision-time (15 min): a VM not registered this long after the cloud accepted it is
# given up on (removeOldUnregisteredNodes).
MAX_NODE_PROVISION_TIME_MS: Final = 15 * MINUTE_MS
# --max-node-startup-time (15 min): a node registered but not ready this long later is given up on.
MAX_NODE_STARTUP_TIME_MS: Final = 15 * MINUTE_MS
# --scale-down-unneeded-time (config.DefaultScaleDownUnneededTime = 10 min).
SCALE_DOWN_UNNEEDED_TIME_MS: Final = 10 * MINUTE_MS
# --scale-down-delay-after-add (10 min).
SCALE_DOWN_DELAY_AFTER_ADD_MS: Final = 10 * MINUTE_MS
# --node-delete-delay-after-taint (5 s).
NODE_DELETE_DELAY_AFTER_TAINT_MS: Final = 5_000
# --scale-down-utilization-threshold (config.DefaultScaleDownUtilizationThreshold = 0.5); dralab applies
# it to GPU utilization on GPU nodes, as --scale-down-gpu-utilization-threshold (also 0.5) does.
SCALE_DOWN_UTILIZATION_THRESHOLD: Final = 0.5
# --max-scale-down-parallelism (10): empty nodes deleted per loop.
MAX_SCALE_DOWN_PARALLELISM: Final = 10
# --max-drain-parallelism (1): nodes with pods drained at once.
MAX_DRAIN_PARALLELISM: Final = 1
# --scale-down-non-empty-candidates-count (30): drain simulations per loop.
SCALE_DOWN_NON_EMPTY_CANDIDATES_COUNT: Final = 30
# Node-group backoff after a failed scale-up (utils/backoff/exponential_backoff.go):
# --initial-node-group-backoff-duration (5 min), --max-node-group-backoff-duration (30 min),
# --node-group-backoff-reset-timeout (3 h).
INITIAL_NODE_GROUP_BACKOFF_MS: Final = 5 * MINUTE_MS
MAX_NODE_GROUP_BACKOFF_MS: Final = 30 * MINUTE_MS
NODE_GROUP_BACKOFF_RESET_TIMEOUT_MS: Final = 3 * 60 * MINUTE_MS
# ProvisioningRequests: --provisioning-request-initial-backoff-time (1 min) and
# --provisioning-request-max-backoff-time (10 min), the retry backoff after a failed scale-up.
PROVISIONING_REQUEST_INITIAL_BACKOFF_MS: Final = MINUTE_MS
PROVISIONING_REQUEST_MAX_BACKOFF_MS: Final = 10 * MINUTE_MS
# ProvisioningRequests' booking: capacity stays booked in the simulation this long after Provisioned=True
# (processors/provreq: 10 min, a constant, no flag; then the condition BookingExpired).
PROVISIONING_REQUEST_RESERVATION_MS: Final = 10 * MINUTE_MS
# Lifetime (processors/provreq/processor.go; constants, no flags): defaultExpirationTime (7 days) and
# defaultTerminalProvReqTTL (7 days).
PROVISIONING_REQUEST_EXPIRATION_MS: Final = 7 * 24 * 60 * MINUTE_MS
PROVISIONING_REQUEST_TERMINAL_TTL_MS: Final = 7 * 24 * 60 * MINUTE_MS

# --- kube-scheduler (pkg/scheduler/apis/config/v1 defaults; pkg/scheduler/backend/queue) -------------------

# podInitialBackoffSeconds (1 s, DefaultPodInitialBackoffDuration) and podMaxBackoffSeconds (10 s,
# DefaultPodMaxBackoffDuration): the backoff of a pod after a failed scheduling attempt.
POD_INITIAL_BACKOFF_MS: Final = 1_000
POD_MAX_BACKOFF_MS: Final = 10_000
# DefaultPodMaxInUnschedulablePodsDuration (5 min): a pod parked in the unschedulable pool longer is
# flushed back to the active queue.
POD_MAX_IN_UNSCHEDULABLE_PODS_MS: Final = 5 * MINUTE_MS
# The GangScheduling plugin's Permit deadline (1.35, pkg/scheduler/backend/workloadmanager,
# DefaultSchedulingTimeoutDuration = 5 min). Fixed upstream; a setting in dralab.
GANG_SCHEDULING_TIMEOUT_MS: Final = 5 * MINUTE_MS

# --- workload controllers and Kueue -------------------------------------------------------------------

# batch/v1 Job spec.backoffLimit default (6).
JOB_BACKOFF_LIMIT: Final = 6
# Kueue ProvisioningRequestConfig.spec.retryStrategy defaults (apis/kueue, provisioningrequestconfig_types.go):
# backoffLimitCount 3, backoffBaseSeconds 60, backoffMaxSeconds 1800.
KUEUE_RETRY_BACKOFF_LIMIT_COUNT: Final = 3
KUEUE_RETRY_BACKOFF_BASE_S: Final = 60
KUEUE_RETRY_BACKOFF_MAX_S: Final = 1800

# --- cluster-autoscaler scale-down flags (config/flags/flags.go; config/autoscaling_options.go) ------------
# The same in every release dralab emulates (1.34-1.37): none of these defaults changed in that span.

# --scale-down-enabled (true).
SCALE_DOWN_ENABLED: Final = True
# --scale-down-unready-enabled (true): unready nodes may be scaled down too.
SCALE_DOWN_UNREADY_ENABLED: Final = True
# --scale-down-unready-time (config.DefaultScaleDownUnreadyTime = 20 min): how long an unready node must be
# unneeded before it is removed (ready nodes: --scale-down-unneeded-time).
SCALE_DOWN_UNREADY_TIME_MS: Final = 20 * MINUTE_MS
# --scale-down-delay-after-delete (0): how long after a node deletion scale-down evaluation resumes (0: no pause;
# the flag's help says nothing of the scan interval, and createAutoscalingOptions copies it as given).
SCALE_DOWN_DELAY_AFTER_DELETE_MS: Final = 0
# --scale-down-delay-after-failure (config.DefaultScaleDownDelayAfterFailure = 3 min).
SCALE_DOWN_DELAY_AFTER_FAILURE_MS: Final = 3 * MINUTE_MS
# --scale-down-gpu-utilization-threshold (config.DefaultScaleDownGpuUtilizationThreshold = 0.5): the threshold of
# nodes with a GPU (the provider's GPU config: an extended `*/gpu` resource); DRA nodes use the plain threshold
# (core/scaledown/eligibility isNodeBelowUtilizationThreshold).
SCALE_DOWN_GPU_UTILIZATION_THRESHOLD: Final = 0.5
# --ignore-daemonsets-utilization (false) and --ignore-mirror-pods-utilization (false): whether those pods' requests
# are left out of a node's utilization.
IGNORE_DAEMONSETS_UTILIZATION: Final = False
IGNORE_MIRROR_PODS_UTILIZATION: Final = False
# --max-pod-eviction-time (2 min): how long a drain retries an eviction a PodDisruptionBudget refuses.
MAX_POD_EVICTION_TIME_MS: Final = 2 * MINUTE_MS
# --max-graceful-termination-sec (600): the longest grace period a drain gives a pod (dralab's drains evict at once).
MAX_GRACEFUL_TERMINATION_SEC: Final = 600
# --skip-nodes-with-system-pods, --skip-nodes-with-local-storage, --skip-nodes-with-custom-controller-pods (all
# true): the drainability rules that make kube-system pods, pods with local storage and pods of controllers other
# than ReplicationController/ReplicaSet/Job/StatefulSet block a node's drain (simulator/drainability/rules).
SKIP_NODES_WITH_SYSTEM_PODS: Final = True
SKIP_NODES_WITH_LOCAL_STORAGE: Final = True
SKIP_NODES_WITH_CUSTOM_CONTROLLER_PODS: Final = True
# The per-node annotation that takes a node out of scale-down (FAQ "How can I prevent Cluster Autoscaler from
# scaling down a particular node?"; simulator.ScaleDownDisabledAnnotation reason).
SCALE_DOWN_DISABLED_ANNOTATION: Final = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
# Kueue Configuration.waitForPodsReady (apis/config/v1beta1 and v1beta2 defaults.go, Kueue 0.19): v1beta1 enables
# it with `enable: true` and then defaults `timeout` to 5 min (defaultPodsReadyTimeout) and `blockAdmission` to true;
# v1beta2 (served from 0.15) enables it by its presence, and from 0.19 also when absent (kueue PR #11855), with
# `timeout` 30 min (DefaultWaitForPodsReadyTimeout) and `blockAdmission` false. `recoveryTimeout` defaults to
# `timeout`; requeuingStrategy: timestamp Eviction, backoffLimitCount null (requeue forever), backoffBaseSeconds 60,
# backoffMaxSeconds 3600 (DefaultRequeuingBackoffBaseSeconds / DefaultRequeuingBackoffMaxSeconds).
KUEUE_PODS_READY_TIMEOUT_V1BETA1_MS: Final = 5 * MINUTE_MS
KUEUE_PODS_READY_TIMEOUT_V1BETA2_MS: Final = 30 * MINUTE_MS
KUEUE_REQUEUING_BACKOFF_BASE_S: Final = 60
KUEUE_REQUEUING_BACKOFF_MAX_S: Final = 3600
# --- the cloud ------------------------------------------------------------------------------------------

# A Spot instance's interruption notice: AWS gives two minutes (EC2 "Spot Instance interruption notices");
# GCE gives 30 s to preemptible and Spot VMs ("Preemption process"). The default of a spot-preemption fault
# without `notice` is AWS's.
SPOT_INTERRUPTION_NOTICE_MS: Final = 2 * MINUTE_MS
GCE_PREEMPTION_NOTICE_MS: Final = 30_000
# --- cluster-autoscaler's scale-up flags (issue 22; sigs.k8s.io/cluster-autoscaler pkg/config/flags/flags.go and
# pkg/core/static_autoscaler.go, read at commit 33c3f97 of 2026-08-21; the same values in every release 1.34-1.37)

# --new-pod-scale-up-delay (0s): pods younger than this are not considered for scale-up (filterOutYoungPods: a pod
# is considered when its age is strictly greater). The pod annotation below may only lengthen it.
NEW_POD_SCALE_UP_DELAY_MS: Final = 0
POD_SCALE_UP_DELAY_ANNOTATION: Final = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"
# unschedulablePodTimeBuffer (2 s) and unschedulablePodWithGpuTimeBuffer (30 s), constants of static_autoscaler.go
# (allPodsAreNew): no scale-up while the oldest pending pod is younger than 2 s, or the oldest pod asking a GPU
# extended resource (utils/gpu GPUVendorResourceNames) younger than 30 s; that loop's scale-down is skipped too.
UNSCHEDULABLE_POD_TIME_BUFFER_MS: Final = 2_000
UNSCHEDULABLE_POD_WITH_GPU_TIME_BUFFER_MS: Final = 30_000
GPU_VENDOR_RESOURCE_NAMES: Final = ("nvidia.com/gpu", "habana.ai/gaudi", "gpu.intel.com/xe", "amd.com/gpu",
                                    "microsoft.com/directx")
# --max-nodes-total (0: no limit): no scale-up once the ready nodes reach it; a scale-up is capped to it.
MAX_NODES_TOTAL: Final = 0
# --ok-total-unready-count (3) and --max-total-unready-percentage (45): more unready nodes than both and the
# cluster is unhealthy: the loop stops after the late-node checks (ClusterStateRegistry.IsClusterHealthy).
OK_TOTAL_UNREADY_COUNT: Final = 3
MAX_TOTAL_UNREADY_PERCENTAGE: Final = 45.0
# --max-nodes-per-scaleup (1000): the binpacking estimator adds at most this many nodes per group.
MAX_NODES_PER_SCALE_UP: Final = 1000
# --balance-similar-node-groups (false), and the comparator's tolerances (pkg/config/autoscaling_options.go):
# --memory-difference-ratio (0.015), --max-allocatable-difference-ratio (0.05).
BALANCE_SIMILAR_NODE_GROUPS: Final = False
MAX_CAPACITY_MEMORY_DIFFERENCE_RATIO: Final = 0.015
MAX_ALLOCATABLE_DIFFERENCE_RATIO: Final = 0.05
# --record-duplicated-events (false): cluster-autoscaler's event recorder lets one event per reason and object
# through every 5 minutes (pkg/utils/kubernetes/factory.go: burst 1, refill 1/300 s, keyed by reason and object).
EVENT_SPAM_INTERVAL_MS: Final = 5 * MINUTE_MS

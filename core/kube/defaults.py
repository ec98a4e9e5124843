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
# createAutoscalingOptions copies the flag as given, no fallback to the scan interval).
SCALE_DOWN_DELAY_AFTER_DELETE_MS: Final = 0
# --scale-down-delay-after-failure (config.DefaultScaleDownDelayAfterFailure = 3 min).
SCALE_DOWN_DELAY_AFTER_FAILURE_MS: Final = 3 * MINUTE_MS
# --scale-down-gpu-utilization-threshold (config.DefaultScaleDownGpuUtilizationThreshold = 0.5): the threshold of
# nodes with a GPU (the provider's GPU config: an extended `*/gpu` resource); DRA nodes use the plain threshold
# (core/scaledown/eligibility isNodeBelowUtilizationThreshold).
SCALE_DOWN_GPU_UTILIZATION_THRESHOLD: Final = 0.5
# --ignore-daemonsets-utilization (false) and --ignore-mirror-pods-utilization (false): whether those pods' requests
# are left out of a node's utilization (utilization/info.go Calculate).
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
# scaling down a particular node?"; the ScaleDownDisabledAnnotation unremovable reason).
SCALE_DOWN_DISABLED_ANNOTATION: Final = "cluster-autoscaler.kubernetes.io/scale-down-disabled"

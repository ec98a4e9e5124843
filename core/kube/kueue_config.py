"""Kueue's manager Configuration (config.kueue.x-k8s.io), the part dralab models: `waitForPodsReady`.

A scenario gives it as an object of `spec.objects` (`kind: Configuration`), as the file `kubectl -n kueue-system get
cm kueue-manager-config` holds. Every other field of the Configuration is refused naming it: each one changes what
Kueue does (quota, fair sharing, integrations) and dralab does not model it.

What the two API versions mean (apis/config/v1beta1 and v1beta2, defaults.go and configuration_conversion.go, Kueue
0.19; v1beta2 is served from 0.15):

| field | v1beta1 | v1beta2 |
|---|---|---|
| on | `enable: true` | the section present; from 0.19 also absent (kueue PR #11855) |
| `timeout` | 5m | 30m from 0.19; required before |
| `blockAdmission` | true | false |
| `recoveryTimeout` | `timeout` from 0.16, off before ("0s": off) | the same |
| `requeuingStrategy` | timestamp Eviction, backoffLimitCount null (forever), base 60 s, max 3600 s | the same |

:func:`pods_ready_settings` turns what the scenario gave (or nothing) into the effective settings for a Kueue
release; the broker (core/controllers/kueue_broker.py) reads them.
"""

from __future__ import annotations

from typing import Any

from .defaults import (
    KUEUE_PODS_READY_TIMEOUT_V1BETA1_MS,
    KUEUE_PODS_READY_TIMEOUT_V1BETA2_MS,
    KUEUE_REQUEUING_BACKOFF_BASE_S,
    KUEUE_REQUEUING_BACKOFF_MAX_S,
)
from .fields import FieldError, check_fields, expect_bool, expect_duration, expect_int, expect_map, expect_str, join

CONFIGURATION_KIND = "Configuration"
V1BETA1, V1BETA2 = "config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2"
CONFIG_API_VERSIONS = (V1BETA1, V1BETA2)
# Configuration fields Kueue has and dralab does not model (refused with this word rather than "unknown")
UNMODELLED = ("namespace", "manageJobsWithoutQueueName", "managedJobsNamespaceSelector", "internalCertManagement",
              "clientConnection", "integrations", "queueVisibility", "multiKueue", "fairSharing",
              "admissionFairSharing", "resources", "featureGates", "objectRetentionPolicies", "visibilityServer",
              "controller", "webhook", "health", "metrics", "leaderElection", "pprofBindAddress", "tls")
_WAIT = ("timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout")
_REQUEUING = ("timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds")
TIMESTAMPS = ("Eviction", "Creation")


def check_configuration(obj: dict[str, Any], path: str) -> dict[str, Any]:
    """The Configuration as given, checked; `metadata.name` defaults to `kueue-config` (one Configuration a run)."""
    api_version = obj.get("apiVersion")
    if api_version not in CONFIG_API_VERSIONS:
        raise FieldError(join(path, "apiVersion"), f"expected one of `{V1BETA1}`, `{V1BETA2}`, got `{api_version}`")
    for key in obj:
        if key in UNMODELLED:
            raise FieldError(join(path, key), f"Kueue's Configuration field `{key}` is not modelled by dralab "
                                              "(it models waitForPodsReady only); leave it out")
    check_fields(obj, path, ("apiVersion", "kind", "metadata", "waitForPodsReady"))
    meta = expect_map(obj.get("metadata") or {}, join(path, "metadata"))
    check_fields(meta, join(path, "metadata"), ("name",))
    out = {**obj, "metadata": {"name": expect_str(meta.get("name", "kueue-config"), join(path, "metadata.name"),
                                                  nonempty=True)}}
    if obj.get("waitForPodsReady") is not None:
        _check_wait(expect_map(obj["waitForPodsReady"], join(path, "waitForPodsReady")), join(path, "waitForPodsReady"),
                    api_version == V1BETA1)
    return out


def _check_wait(wait: dict[str, Any], path: str, v1beta1: bool) -> None:
    check_fields(wait, path, ("enable", *_WAIT) if v1beta1 else _WAIT)
    if wait.get("enable") is not None:
        expect_bool(wait["enable"], join(path, "enable"))
    for field in ("timeout", "recoveryTimeout"):
        if wait.get(field) is not None:
            expect_duration(wait[field], join(path, field))
    if wait.get("blockAdmission") is not None:
        expect_bool(wait["blockAdmission"], join(path, "blockAdmission"))
    if wait.get("requeuingStrategy") is not None:
        r_path = join(path, "requeuingStrategy")
        strategy = expect_map(wait["requeuingStrategy"], r_path)
        check_fields(strategy, r_path, _REQUEUING)
        stamp = strategy.get("timestamp")
        if stamp is not None and stamp not in TIMESTAMPS:
            raise FieldError(join(r_path, "timestamp"), f"expected `Eviction` or `Creation`, got `{stamp}`")
        if stamp == "Creation":  # it orders the queue; dralab's one ClusterQueue has unlimited quota and no order
            raise FieldError(join(r_path, "timestamp"), "`Creation` orders requeued Workloads in their ClusterQueue by "
                                                        "creation time; dralab models no queue order: leave it out or "
                                                        "use `Eviction`")
        for field in ("backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"):
            if strategy.get(field) is not None:
                expect_int(strategy[field], join(r_path, field), minimum=0, maximum=2**31 - 1)


def check_release(config: dict[str, Any], path: str, kueue: str) -> None:
    """What the Kueue release `kueue` refuses: v1beta2 before 0.15 (not served), a v1beta2 waitForPodsReady without
    `timeout` before 0.19 (required until its default came)."""
    minor = int(kueue.split(".")[1])
    if config["apiVersion"] == V1BETA2 and minor < 15:
        raise FieldError(join(path, "apiVersion"),
                         f"Kueue {kueue} does not serve `{V1BETA2}` (from 0.15); use `{V1BETA1}`")
    wait = config.get("waitForPodsReady")
    if config["apiVersion"] == V1BETA2 and wait is not None and minor < 19 and wait.get("timeout") is None:
        raise FieldError(join(path, "waitForPodsReady.timeout"),
                         f"required in Kueue {kueue} (`{V1BETA2}` defaults it from 0.19)")


def pods_ready_settings(config: dict[str, Any] | None, kueue: str) -> dict[str, Any] | None:
    """The effective waitForPodsReady of Kueue `kueue` given the scenario's Configuration (None: none given, as
    Kueue's default Configuration), or None when it is off. Times in ms; `backoff_limit_count` None: no limit."""
    minor = int(kueue.split(".")[1])
    if config is None:
        if minor < 19:
            return None
        config = {"apiVersion": V1BETA2}
    v1beta1 = config["apiVersion"] == V1BETA1
    wait = config.get("waitForPodsReady")
    if v1beta1 and not (wait or {}).get("enable"):
        return None
    if wait is None:
        if v1beta1 or minor < 19:
            return None
        wait = {}
    default_timeout = KUEUE_PODS_READY_TIMEOUT_V1BETA1_MS if v1beta1 else KUEUE_PODS_READY_TIMEOUT_V1BETA2_MS
    timeout = expect_duration(wait["timeout"], "timeout") if wait.get("timeout") is not None else default_timeout
    # recoveryTimeout defaults to timeout from 0.16 (defaults.go); before, unset means off
    recovery = expect_duration(wait["recoveryTimeout"], "recoveryTimeout") \
        if wait.get("recoveryTimeout") is not None else (timeout if minor >= 16 else 0)
    strategy = wait.get("requeuingStrategy") or {}
    limit = strategy.get("backoffLimitCount")
    return {
        "timeout_ms": timeout,
        "block_admission": bool(wait.get("blockAdmission", v1beta1)),
        "recovery_timeout_ms": recovery,  # 0: off
        "timestamp": strategy.get("timestamp") or "Eviction",
        "backoff_limit_count": None if limit is None else int(limit),
        "backoff_base_s": int(strategy.get("backoffBaseSeconds") or KUEUE_REQUEUING_BACKOFF_BASE_S),
        "backoff_max_s": int(strategy.get("backoffMaxSeconds") or KUEUE_REQUEUING_BACKOFF_MAX_S),
    }

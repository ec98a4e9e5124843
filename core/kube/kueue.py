"""The part of Kueue that dralab models: plain pods admitted through a ProvisioningRequest admission check.

Kueue (kubernetes-sigs/kueue, pkg/controller/admissionchecks/provisioning, v0.14) is what stands between a
team's pods and cluster-autoscaler's ProvisioningRequests in many GPU clusters: it holds the pods back
(scheduling gate `kueue.x-k8s.io/admission`), asks the autoscaler for their capacity with a
ProvisioningRequest, lets them go when the request is Provisioned, and retries with a new request when
one fails. dralab's broker reactor (core/controllers/kueue_broker.py) does this; this module holds the API
subset, the scenario checks and the naming, as plain functions.

What a scenario declares (real Kueue manifests in `spec.objects`): `AdmissionCheck`s whose controller is
`kueue.x-k8s.io/provisioning-request`, each pointing at a `ProvisioningRequestConfig`
(`provisioningClassName`, `parameters`, `managedResources`, `retryStrategy`). Pods labelled
`kueue.x-k8s.io/queue-name` are Kueue's: they get the admission gate when created (Kueue's pod webhook),
and every AdmissionCheck of the scenario applies to them. Kueue's manager Configuration (`kind:
Configuration`, its waitForPodsReady) is core/kube/kueue_config.py's. Not modelled: ClusterQueues, LocalQueues and
quota (as if one ClusterQueue with unlimited quota held every check), ResourceFlavors, preemption,
podSetUpdates' node selectors (dralab's autoscaler writes no provisioningClassDetails, so Kueue would skip each
entry), podSetMergePolicy, the jitter Kueue adds to the retry backoff, and workloads other than plain pods and
plain pod groups.
"""

from __future__ import annotations

import copy
from typing import Any

from .defaults import KUEUE_RETRY_BACKOFF_BASE_S as BACKOFF_BASE_S
from .defaults import KUEUE_RETRY_BACKOFF_LIMIT_COUNT as BACKOFF_LIMIT_COUNT
from .defaults import KUEUE_RETRY_BACKOFF_MAX_S as BACKOFF_MAX_S
from .fields import (
    FieldError,
    check_fields,
    check_metadata,
    expect_int,
    expect_list,
    expect_map,
    expect_str,
    expect_string_map,
    join,
    qualified_name_error,
)
from .kueue_config import CONFIGURATION_KIND, check_configuration
from .provreq import BEST_EFFORT_ATOMIC, CHECK_CAPACITY, CLASSES, MAX_PARAMETERS

KUEUE_API_VERSIONS = ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2")
ADMISSION_CHECK_KIND = "AdmissionCheck"
CONFIG_KIND = "ProvisioningRequestConfig"
KUEUE_KINDS = (ADMISSION_CHECK_KIND, CONFIG_KIND, CONFIGURATION_KIND)  # Configuration: core/kube/kueue_config.py
CONTROLLER = "kueue.x-k8s.io/provisioning-request"  # AdmissionCheck.spec.controllerName of this controller
ADMISSION_GATE = "kueue.x-k8s.io/admission"  # the scheduling gate Kueue's webhook puts on its pods
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
WORKLOAD_ANNOTATION = "dralab.io/workload"  # on the requests the broker makes (Kueue: an ownerReference)
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
POD_TEMPLATES_PREFIX = "ppt"  # podTemplatesPrefix
MAX_NAME = 253
# ProvisioningRequestConfig.spec.retryStrategy defaults: BACKOFF_* (core/kube/defaults.py, imported above)


def check_kueue_object(obj: dict[str, Any], path: str) -> dict[str, Any]:
    """Check an AdmissionCheck or a ProvisioningRequestConfig of `spec.objects` (cluster-scoped), or Kueue's
    manager Configuration (core/kube/kueue_config.py)."""
    if obj.get("kind") == CONFIGURATION_KIND:
        return check_configuration(copy.deepcopy(obj), path)
    out = copy.deepcopy(obj)
    api_version = out.get("apiVersion")
    if api_version not in KUEUE_API_VERSIONS:
        raise FieldError(join(path, "apiVersion"),
                         f"expected one of {', '.join(f'`{v}`' for v in KUEUE_API_VERSIONS)}, got `{api_version}`")
    meta = expect_map(out.get("metadata") or {}, join(path, "metadata"))
    check_metadata(meta, join(path, "metadata"), namespaced=False, name_required=True)
    if meta.get("namespace"):
        raise FieldError(join(path, "metadata.namespace"), f"a {out['kind']} is cluster-scoped: leave it out")
    out["metadata"] = meta
    spec_path = join(path, "spec")
    if out.get("spec") is None:
        raise FieldError(spec_path, "missing required field")
    spec = expect_map(out["spec"], spec_path)
    if out["kind"] == ADMISSION_CHECK_KIND:
        _check_admission_check(spec, spec_path)
    else:
        _check_config(spec, spec_path)
    return out


def _check_admission_check(spec: dict[str, Any], path: str) -> None:
    check_fields(spec, path, ("controllerName", "parameters", "retryDelayMinutes"), required=("controllerName",))
    controller = expect_str(spec["controllerName"], join(path, "controllerName"), nonempty=True)
    if controller != CONTROLLER:
        raise FieldError(join(path, "controllerName"),
                         f"dralab models the admission check controller `{CONTROLLER}` only, got `{controller}`")
    p_path = join(path, "parameters")
    if spec.get("parameters") is None:
        raise FieldError(p_path, f"missing required field: the {CONFIG_KIND} this check uses")
    params = expect_map(spec["parameters"], p_path)
    check_fields(params, p_path, ("apiGroup", "kind", "name"), required=("apiGroup", "kind", "name"))
    if params["apiGroup"] != "kueue.x-k8s.io":
        raise FieldError(join(p_path, "apiGroup"), f"expected `kueue.x-k8s.io`, got `{params['apiGroup']}`")
    if params["kind"] != CONFIG_KIND:
        raise FieldError(join(p_path, "kind"), f"expected `{CONFIG_KIND}`, got `{params['kind']}`")
    expect_str(params["name"], join(p_path, "name"), nonempty=True)


def _check_config(spec: dict[str, Any], path: str) -> None:
    check_fields(spec, path, ("provisioningClassName", "parameters", "managedResources", "retryStrategy",
                              "podSetUpdates", "podSetMergePolicy"), required=("provisioningClassName",))
    cls = expect_str(spec["provisioningClassName"], join(path, "provisioningClassName"), nonempty=True)
    if cls not in CLASSES:
        raise FieldError(join(path, "provisioningClassName"),
                         f"dralab models the classes `{CHECK_CAPACITY}` and `{BEST_EFFORT_ATOMIC}`, got `{cls}`")
    if spec.get("parameters") is not None:
        params = expect_string_map(spec["parameters"], join(path, "parameters"))
        if len(params) > MAX_PARAMETERS:
            raise FieldError(join(path, "parameters"), f"at most {MAX_PARAMETERS} entries, got {len(params)}")
    if spec.get("managedResources") is not None:
        m_path = join(path, "managedResources")
        for i, item in enumerate(expect_list(spec["managedResources"], m_path)):
            expect_str(item, f"{m_path}[{i}]", nonempty=True)
    if spec.get("retryStrategy") is not None:
        r_path = join(path, "retryStrategy")
        retry = expect_map(spec["retryStrategy"], r_path)
        check_fields(retry, r_path, ("backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"))
        for field in ("backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"):
            if retry.get(field) is not None:
                expect_int(retry[field], join(r_path, field), minimum=0, maximum=2**31 - 1)


def broker_config(objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The broker's settings (recorded in the run config) from the scenario's Kueue objects, or None when
    the scenario has no AdmissionCheck (then there is no broker). Raises FieldError for a check whose
    ProvisioningRequestConfig is missing; `objects` are those `check_objects` returned, in order."""
    configs = {o["metadata"]["name"]: o for o in objects if o.get("kind") == CONFIG_KIND}
    checks: list[dict[str, Any]] = []
    for i, obj in enumerate(objects):
        if obj.get("kind") != ADMISSION_CHECK_KIND:
            continue
        ref = obj["spec"]["parameters"]["name"]
        config = configs.get(ref)
        if config is None:
            raise FieldError(f"spec.objects[{i}].spec.parameters.name",
                             f"no {CONFIG_KIND} `{ref}` among the scenario's objects")
        spec = config["spec"]
        retry = spec.get("retryStrategy") or {}
        checks.append({
            "name": obj["metadata"]["name"],
            "provisioning_class": spec["provisioningClassName"],
            "parameters": dict(spec.get("parameters") or {}),
            "managed_resources": list(spec.get("managedResources") or []),
            "backoff_limit_count": int(retry.get("backoffLimitCount", BACKOFF_LIMIT_COUNT)),
            "backoff_base_s": int(retry.get("backoffBaseSeconds", BACKOFF_BASE_S)),
            "backoff_max_s": int(retry.get("backoffMaxSeconds", BACKOFF_MAX_S)),
        })
    configuration = next(((i, o) for i, o in enumerate(objects) if o.get("kind") == CONFIGURATION_KIND), None)
    if not checks:
        if configuration is not None:
            raise FieldError(f"spec.objects[{configuration[0]}]", "Kueue's Configuration configures the "
                             "ProvisioningRequest admission check's Workloads: the scenario has no AdmissionCheck")
        return None
    return {"checks": sorted(checks, key=lambda c: c["name"]),
            # the Configuration's waitForPodsReady as given (the broker applies its release's defaults), only when
            # given, so that runs without one record what they recorded before it was modelled
            **({"configuration": {k: v for k, v in configuration[1].items()
                                  if k in ("apiVersion", "waitForPodsReady")}} if configuration is not None else {})}


def is_queued(pod: dict[str, Any]) -> bool:
    """Kueue manages the pod (it names a queue)."""
    return bool(((pod.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL))


def gate_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as Kueue's pod webhook admits it: with the admission scheduling gate (once)."""
    spec = dict(pod.get("spec") or {})
    gates = [dict(g) for g in spec.get("schedulingGates") or []]
    if not any(g.get("name") == ADMISSION_GATE for g in gates):
        gates.append({"name": ADMISSION_GATE})
    spec["schedulingGates"] = gates
    return {**pod, "spec": spec}


def check_pod_group(pod: dict[str, Any], path: str) -> None:
    """A plain pod group names its size (Kueue waits for that many pods before it makes the Workload)."""
    meta = pod.get("metadata") or {}
    if not (meta.get("labels") or {}).get(GROUP_LABEL):
        return
    a_path = join(join(path, "metadata.annotations"), GROUP_TOTAL_ANNOTATION)
    value = (meta.get("annotations") or {}).get(GROUP_TOTAL_ANNOTATION)
    if value is None:
        raise FieldError(a_path, f"missing: a pod labelled `{GROUP_LABEL}` must say how many pods the group has")
    try:
        total = int(str(value))
    except ValueError:
        total = 0
    if total < 1:
        raise FieldError(a_path, f"expected a positive integer, got `{value}`")


def check_scheduling_gates(pod: dict[str, Any], path: str) -> None:
    """`spec.schedulingGates`: a list of `{name}` with qualified names, each once (the API server's rules).
    A gate nobody removes keeps the pod pending (SchedulingGated), as in Kubernetes."""
    spec = pod.get("spec") or {}
    if spec.get("schedulingGates") is None:
        return
    g_path = join(path, "spec.schedulingGates")
    seen: set[str] = set()
    for i, item in enumerate(expect_list(spec["schedulingGates"], g_path)):
        i_path = f"{g_path}[{i}]"
        gate = expect_map(item, i_path)
        check_fields(gate, i_path, ("name",), required=("name",))
        name = expect_str(gate["name"], join(i_path, "name"), nonempty=True)
        error = qualified_name_error(name)
        if error is not None:
            raise FieldError(join(i_path, "name"), error)
        if name in seen:
            raise FieldError(join(i_path, "name"), f"duplicate gate `{name}`")
        seen.add(name)


def gates(pod: dict[str, Any]) -> list[str]:
    return [str(g.get("name")) for g in (pod.get("spec") or {}).get("schedulingGates") or []]


def workload_of(pod: dict[str, Any]) -> tuple[str, int]:
    """The Kueue Workload a queued pod belongs to ("namespace/name") and how many pods it has: its pod
    group (label and total-count annotation) or the pod alone (Kueue names it `pod-<name>-<hash>`;
    dralab leaves the hash out)."""
    meta = pod.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    group = (meta.get("labels") or {}).get(GROUP_LABEL)
    if group:
        return f"{namespace}/{group}", int(str((meta.get("annotations") or {}).get(GROUP_TOTAL_ANNOTATION, 1)))
    return f"{namespace}/pod-{meta.get('name')}", 1


def _limit(name: str) -> str:
    return name[:MAX_NAME]


def request_name(workload: str, check: str, attempt: int) -> str:
    """ProvisioningRequestName: `<workload>-<check>-<attempt>` (the workload's name, not its namespace)."""
    return _limit(f"{workload.split('/', 1)[1]}-{check}-{attempt}")


def template_name(request: str, pod_set: str) -> str:
    """getProvisioningRequestPodTemplateName: `ppt-<request>-<podset>`."""
    return _limit(f"{POD_TEMPLATES_PREFIX}-{request}-{pod_set}")


def retry_delay_ms(failures: int, base_s: int, max_s: int) -> int:
    """getRemainingTimeToRetry's backoff: base after the first failure, doubling, at most max."""
    delay = base_s * 1000
    for _ in range(1, failures):
        delay *= 2
        if delay >= max_s * 1000:
            return max_s * 1000
    return min(delay, max_s * 1000)

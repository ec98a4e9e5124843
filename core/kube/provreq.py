"""ProvisioningRequests (autoscaling.x-k8s.io/v1) and PodTemplates: the API as cluster-autoscaler reads it.

A ProvisioningRequest asks for capacity for `count` pods of each of its `podSets` (a PodTemplate in
the same namespace); its class says how: `check-capacity.autoscaling.x-k8s.io` (does it fit now? no
scale-up) or `best-effort-atomic-scale-up.autoscaling.x-k8s.io` (scale one node group up for all of it,
or not at all). Pods consume a request through the annotation
`autoscaling.x-k8s.io/consume-provisioning-request: <name>` (the deprecated
`cluster-autoscaler.kubernetes.io/...` key is still recognised). Shapes and limits follow
cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go: podSets 1..32, count >= 1,
parameters a string map of at most 100 entries.
"""

from __future__ import annotations

import copy
from typing import Any

from .defaults import (
    PROVISIONING_REQUEST_EXPIRATION_MS,
    PROVISIONING_REQUEST_INITIAL_BACKOFF_MS,
    PROVISIONING_REQUEST_MAX_BACKOFF_MS,
    PROVISIONING_REQUEST_RESERVATION_MS,
    PROVISIONING_REQUEST_TERMINAL_TTL_MS,
)
from .fields import (
    FieldError,
    check_fields,
    checked_object,
    expect_int,
    expect_list,
    expect_map,
    expect_str,
    index,
    join,
)
from .manifests import check_pod

PROVREQ_API_VERSION = "autoscaling.x-k8s.io/v1"
PROVREQ_KIND = "ProvisioningRequest"
POD_TEMPLATE_KIND = "PodTemplate"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CLASSES = (CHECK_CAPACITY, BEST_EFFORT_ATOMIC)
CONSUME_ANNOTATIONS = ("autoscaling.x-k8s.io/consume-provisioning-request",
                       "cluster-autoscaler.kubernetes.io/consume-provisioning-request")
MAX_POD_SETS = 32
MAX_PARAMETERS = 100
# Defaults of cluster-autoscaler's ProvisioningRequest processing (their home: core/kube/defaults.py).
BOOKING_MS = PROVISIONING_REQUEST_RESERVATION_MS  # capacity held in the simulation this long after Provisioned
RETRY_INITIAL_MS = PROVISIONING_REQUEST_INITIAL_BACKOFF_MS  # --provisioning-request-initial-backoff-time
RETRY_MAX_MS = PROVISIONING_REQUEST_MAX_BACKOFF_MS  # --provisioning-request-max-backoff-time
# Lifetime (cluster-autoscaler processors/provreq/processor.go, provReqProcessor.refresh and
# DeleteOldProvReqs; constants, no flags): a request not Provisioned=True within `defaultExpirationTime`
# of its creation gets Failed=True (reason `Expired`); a request whose Provisioned or Failed condition
# was last written more than `defaultTerminalProvReqTTL` ago is deleted.
EXPIRATION_MS = PROVISIONING_REQUEST_EXPIRATION_MS  # defaultExpirationTime, 7 days
TERMINAL_TTL_MS = PROVISIONING_REQUEST_TERMINAL_TTL_MS  # defaultTerminalProvReqTTL, 7 days
MAX_UPDATED = 20  # defaultMaxUpdated: BookingExpired (reservation time) and Failed (Expired) per loop
EXPIRED_REASON = "Expired"  # conditions.ExpiredReason
EXPIRED_MSG = "ProvisioningRequest is expired"  # conditions.ExpiredMsg


# The taint that reserves a node for a ProvisioningRequest (`autoscaler.reserveBookings`, dralab's model
# of the integrated design where the scheduler honours a booking); its value is the request's
# `namespace.name` (a taint value cannot hold a slash).
BOOKING_TAINT = "dralab.io/booked-for-provisioning-request"


def booking_value(request: str | None) -> str | None:
    return request.replace("/", ".") if request else None


def consumed_request(pod: dict[str, Any]) -> str | None:
    """`namespace/name` of the ProvisioningRequest the pod consumes, if it carries the annotation."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    for key in CONSUME_ANNOTATIONS:
        if annotations.get(key):
            return f"{meta.get('namespace') or 'default'}/{annotations[key]}"
    return None


def retry_backoff_ms(attempts: int) -> int:
    """1 min after the first failed attempt, doubling, at most 10 min."""
    duration = RETRY_INITIAL_MS
    for _ in range(1, attempts):
        duration = min(duration * 2, RETRY_MAX_MS)
    return duration


def check_provisioning_request(obj: object, path: str) -> dict[str, Any]:
    """Check a ProvisioningRequest; return a copy with `metadata.namespace` filled in. A `status` is refused
    (the autoscaler writes it)."""
    if isinstance(obj, dict) and obj.get("status") is not None:
        raise FieldError(join(path, "status"), "a request starts without status (the autoscaler writes it); "
                                               "leave `status` out")
    req, spec, spec_path = checked_object(obj, path)
    check_fields(spec, spec_path, ("provisioningClassName", "podSets", "parameters"),
                 required=("provisioningClassName", "podSets"))
    cls = expect_str(spec["provisioningClassName"], join(spec_path, "provisioningClassName"), nonempty=True)
    if cls not in CLASSES:
        raise FieldError(join(spec_path, "provisioningClassName"),
                         f"dralab models the classes `{CHECK_CAPACITY}` and `{BEST_EFFORT_ATOMIC}`, got `{cls}`")
    sets_path = join(spec_path, "podSets")
    sets = expect_list(spec["podSets"], sets_path)
    if not 1 <= len(sets) <= MAX_POD_SETS:
        raise FieldError(sets_path, f"must have 1 to {MAX_POD_SETS} pod sets, got {len(sets)}")
    for i, item in enumerate(sets):
        s_path = index(sets_path, i)
        pod_set = expect_map(item, s_path)
        check_fields(pod_set, s_path, ("podTemplateRef", "count"), required=("podTemplateRef", "count"))
        ref = expect_map(pod_set["podTemplateRef"], join(s_path, "podTemplateRef"))
        check_fields(ref, join(s_path, "podTemplateRef"), ("name",), required=("name",))
        expect_str(ref["name"], join(s_path, "podTemplateRef.name"), nonempty=True)
        expect_int(pod_set["count"], join(s_path, "count"), minimum=1, maximum=2**31 - 1)
    if spec.get("parameters") is not None:
        params = expect_map(spec["parameters"], join(spec_path, "parameters"))
        if len(params) > MAX_PARAMETERS:
            raise FieldError(join(spec_path, "parameters"), f"at most {MAX_PARAMETERS} entries, got {len(params)}")
        for key, value in params.items():
            if len(expect_str(value, join(join(spec_path, "parameters"), key))) > 255:
                raise FieldError(join(join(spec_path, "parameters"), key), "at most 255 characters")
    return req


def check_pod_template(obj: object, path: str) -> dict[str, Any]:
    """Check a v1 PodTemplate; its `template` must make a valid Pod (what the autoscaler simulates)."""
    tmpl, inner, t_path = checked_object(obj, path, body="template")
    meta = tmpl["metadata"]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {**(inner.get("metadata") or {}), "name": meta["name"], "namespace": meta["namespace"]},
           "spec": inner.get("spec")}
    try:
        check_pod(pod)
    except FieldError as e:
        raise FieldError(join(t_path, e.path) if e.path else t_path, e.message) from None
    return tmpl


def fake_pods(request: dict[str, Any], templates: dict[str, dict[str, Any]]) -> list[dict[str, Any]] | str:
    """The pods the autoscaler simulates for a request (one per count of each pod set, named
    `<request>-<set>-<j>`), or the reason they cannot be made (a missing PodTemplate)."""
    meta = request["metadata"]
    namespace = meta["namespace"]
    out: list[dict[str, Any]] = []
    for i, pod_set in enumerate(request["spec"]["podSets"]):
        name = pod_set["podTemplateRef"]["name"]
        tmpl = templates.get(f"{namespace}/{name}")
        if tmpl is None:
            return f"PodTemplate {namespace}/{name} not found"
        inner = tmpl["template"]
        for j in range(int(pod_set["count"])):
            out.append(check_pod({"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {**(inner.get("metadata") or {}),
                                               "name": f"{meta['name']}-{i}-{j}", "namespace": namespace},
                                  "spec": copy.deepcopy(inner.get("spec"))}))
    return out

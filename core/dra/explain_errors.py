"""A selector that fails to evaluate, as an explanation of kind `selector-error`.

Upstream's structured allocator evaluates a request's selectors on each device it reaches that is not in use;
a CEL runtime error there (NVIDIA's gpu-test6 reads ``device.attributes["gpu.nvidia.com"].index``, which
current drivers no longer publish: "no such key: index") makes `Allocate` return the error
"claim <ns/name>: selector #<i>: CEL runtime error: <reason>" ("class <name>: ..." for a DeviceClass selector,
"CEL compile error" for one that does not compile) -- `selectorsMatch` in
k8s.io/dynamic-resource-allocation/structured/internal/*/allocator_*.go. The DynamicResources Filter returns
it as an Error status ("This should only fail if there is something wrong with the claim or class. Return an
error to abort scheduling of it.", pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go): the
scheduling attempt ends with PodScheduled=False reason SchedulerError and the pod is retried with backoff.
cluster-autoscaler lists only pods whose condition reason is Unschedulable (ArrangePodsBySchedulability,
cluster-autoscaler utils/kubernetes/listers.go), so it never scales up for such a pod.

So this is not a lack of devices: more nodes would not help, fixing the selector (or the driver's attributes)
does.
"""

from __future__ import annotations

from .explain import Explanation
from .prepare import SelectorFailed

KIND = "selector-error"


def upstream_message(exc: SelectorFailed) -> str:
    """The error upstream's allocator returns for this failure."""
    what = "CEL compile error" if exc.compile else "CEL runtime error"
    return f"{exc.where}: selector #{exc.index}: {what}: {exc.reason}"


def selector_error(exc: SelectorFailed, fallback_claim: str) -> Explanation:
    """The explanation of an allocation that ended on a selector error."""
    claim = exc.claim or fallback_claim
    request = exc.request or None
    text = (f"{upstream_message(exc)} (request {request or '?'} of claim {claim}, on device {exc.device}): "
            "kube-scheduler aborts the pod's scheduling attempt with this error (SchedulerError) and retries it; "
            "cluster-autoscaler does not act on such pods; fix the selector or the attributes it reads")
    return Explanation(claim, request, KIND, text, 0, 0)

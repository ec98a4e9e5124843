"""Resource names and resource arithmetic, as kube-scheduler counts them.

:func:`pod_requests` and :func:`node_allocatable` give amounts in :func:`~dralab.core.kube.quantity.resource_amount`
units: milli-cpu for ``cpu``; whole units for everything else (bytes of memory and storage, ``pods``,
extended resources such as ``nvidia.com/gpu``). A pod's requests follow
``k8s.io/component-helpers/resource.PodRequests``; they are summed exactly and rounded up once.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

import msgspec

from .fields import qualified_name_error
from .quantity import parse_quantity, resource_amount

__all__ = [
    "POD_LEVEL_RESOURCES",
    "is_extended_resource",
    "is_hugepages",
    "is_integer_resource",
    "is_native_resource",
    "node_allocatable",
    "pod_request_quantities",
    "pod_requests",
]

POD_LEVEL_RESOURCES = ("cpu", "memory")
_INTEGER_RESOURCES = ("pods",)


# --- resource names (k8s.io/kubernetes/pkg/apis/core/helper) -------------------------------------------


def is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """A resource outside the ``kubernetes.io`` domain, such as ``nvidia.com/gpu``: counted in whole
    units, never overcommitted (request must equal limit)."""
    if is_native_resource(name) or name.startswith("requests."):
        return False
    return qualified_name_error("requests." + name) is None


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_integer_resource(name: str) -> bool:
    return name in _INTEGER_RESOURCES or is_extended_resource(name)


# --- resource arithmetic --------------------------------------------------------------------------------


def _quantities(value: object) -> dict[str, Fraction]:
    if not isinstance(value, dict):
        return {}
    return {name: parse_quantity(q) for name, q in value.items()}


def _container_requests(container: object) -> dict[str, Fraction]:
    """A container's requests after API defaulting: a limit stands in for a missing request."""
    res = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(res, dict):
        return {}
    requests = _quantities(res.get("requests"))
    for name, limit in _quantities(res.get("limits")).items():
        requests.setdefault(name, limit)
    return requests


def _add(into: dict[str, Fraction], other: dict[str, Fraction]) -> None:
    for name, q in other.items():
        into[name] = into.get(name, Fraction(0)) + q


def _max(into: dict[str, Fraction], other: dict[str, Fraction]) -> None:
    for name, q in other.items():
        if name not in into or q > into[name]:
            into[name] = q


def pod_request_quantities(pod: dict[str, Any]) -> dict[str, Fraction]:
    """The pod's effective requests as exact quantities (see :func:`pod_requests`)."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return {}
    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or ():
        _add(total, _container_requests(container))
    sidecars: dict[str, Fraction] = {}
    init_max: dict[str, Fraction] = {}
    for container in spec.get("initContainers") or ():
        requests = _container_requests(container)
        if isinstance(container, dict) and container.get("restartPolicy") == "Always":
            # A sidecar runs alongside the regular containers and the init containers after it.
            _add(total, requests)
            _add(sidecars, requests)
            requests = dict(sidecars)
        else:
            _add(requests, sidecars)
        _max(init_max, requests)
    _max(total, init_max)

    res = spec.get("resources")
    if isinstance(res, dict):
        pod_level = _quantities(res.get("requests"))
        for name, limit in _quantities(res.get("limits")).items():
            # API defaulting: a pod-level limit becomes the request unless containers request it.
            if name not in pod_level and name not in total:
                pod_level[name] = limit
        for name, q in pod_level.items():
            if name in POD_LEVEL_RESOURCES or is_hugepages(name):
                total[name] = q
    _add(total, _quantities(spec.get("overhead")))
    return total


def pod_requests(pod: dict[str, Any]) -> dict[str, int]:
    """The pod's effective request per resource, as kube-scheduler computes it.

    Per container, a limit stands in for a missing request; regular containers add up; init containers
    raise the total to their own peak (sidecars, ``restartPolicy: Always``, add up and stay); pod-level
    ``spec.resources`` replaces cpu/memory/hugepages; ``spec.overhead`` is added. Amounts are in
    :func:`~dralab.core.kube.quantity.resource_amount` units (milli-cpu, bytes, whole units), rounded up once
    on the exact total. ``pods`` is not included: every pod takes one of a node's allocatable ``pods``.

    Memoised by the spec fields it reads (the pods of one workload share them, and every consumer of a
    live run folds every pod's creation): the exact arithmetic costs about 20 times the key.
    """
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return {}
    try:
        key = _KEY.encode(tuple(spec.get(f) for f in _REQUEST_FIELDS))
    except (TypeError, OverflowError, msgspec.EncodeError):  # OverflowError: an int beyond 64 bits somewhere
        return _pod_requests(pod)
    return dict(_requests_of(key))


_REQUEST_FIELDS = ("containers", "initContainers", "resources", "overhead")  # all pod_request_quantities reads
_KEY = msgspec.msgpack.Encoder()


@functools.lru_cache(maxsize=4096)
def _requests_of(key: bytes) -> dict[str, int]:
    """A cache entry: never handed out itself (callers get a copy)."""
    values = msgspec.msgpack.decode(key)
    return _pod_requests({"spec": {f: v for f, v in zip(_REQUEST_FIELDS, values, strict=True) if v is not None}})


def _pod_requests(pod: dict[str, Any]) -> dict[str, int]:
    return {name: resource_amount(name, q) for name, q in pod_request_quantities(pod).items()}


def node_allocatable(node: dict[str, Any]) -> dict[str, int]:
    """The node's ``status.allocatable`` (or, when absent, ``status.capacity``, as the API server
    defaults it) in :func:`~dralab.core.kube.quantity.resource_amount` units."""
    status = node.get("status")
    if not isinstance(status, dict):
        return {}
    alloc = status.get("allocatable")
    if alloc is None:
        alloc = status.get("capacity")
    return {name: resource_amount(name, q) for name, q in _quantities(alloc).items()}

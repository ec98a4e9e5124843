"""ImageLocality's Score (pkg/scheduler/framework/plugins/imagelocality/image_locality.go): a node that already
holds the pod's container images (node `status.images`) scores higher, each image's size scaled by the share
of the cluster's nodes holding it (its spread), the sum clamped to [23Mi, 1000Mi x containers] and mapped to
0..100, int64 arithmetic.

Modelled because it is small and dumps carry `status.images`; a scenario's nodes usually have none, and then
every node scores 0 and PreScore skips the plugin. Image names are normalized as upstream (`:latest` added
when there is no tag); init containers count. The spread reads every node, so the score is not cached per
node (not POINTWISE).
"""

from __future__ import annotations

from typing import Any

from ...state.cluster import NodeState, PodState
from ..framework import ExtensionPoint

NAME = "ImageLocality"
EXTENSION_POINTS = (ExtensionPoint.SCORE,)
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """`:latest` when the name has no tag (the last `:` not after the last `/`)."""
    return name + ":latest" if name.rfind(":") <= name.rfind("/") else name


def node_images(node: NodeState) -> dict[str, int]:
    """Image name -> size on the node, from status.images (every name of an image; sizes as given)."""
    out: dict[str, int] = {}
    for image in (node.manifest.get("status") or {}).get("images") or []:
        for name in image.get("names") or []:
            out[normalized_image_name(str(name))] = int(image.get("sizeBytes") or 0)
    return out


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    """calculatePriority: clamp to [minThreshold, maxThreshold], map to 0..MaxNodeScore."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    if max_threshold == MIN_THRESHOLD:
        return 0
    value = 100 * (sum_scores - MIN_THRESHOLD)
    divisor = max_threshold - MIN_THRESHOLD
    q = abs(value) // abs(divisor)  # Go's division, truncated toward zero
    return q if (value >= 0) == (divisor > 0) else -q


class ImageLocalityScore:
    NAME = NAME
    POINTWISE = False  # an image's spread counts every node

    def __init__(self, args: dict[str, Any], nonzero: Any = None) -> None:
        self._cycle: object = _UNSEEN
        self._images: dict[str, dict[str, int]] = {}  # node -> its images
        self._count: dict[str, int] = {}  # image -> nodes holding it
        self._total = 0
        self._manifests: list[dict[str, Any]] = []  # the nodes' manifests the above were read from

    def pre_score(self, cycle: Any, pod: PodState, nodes: list[NodeState]) -> Any | None:
        """The pod's images (normalized) and its container count; None when no node holds any of them."""
        if cycle is not self._cycle:
            self._cycle = cycle
            manifests = [n.manifest for n in nodes]  # the fold replaces a node's manifest, never edits it
            if manifests == self._manifests:
                return self._state(pod)
            self._manifests = manifests
            self._images = {n.name: imgs for n in nodes if (imgs := node_images(n))}
            self._count = {}
            for imgs in self._images.values():
                for name in imgs:
                    self._count[name] = self._count.get(name, 0) + 1
            self._total = len(nodes)
        return self._state(pod)

    def _state(self, pod: PodState) -> Any | None:
        if not self._count:  # no node holds any image: every node scores 0
            return None
        spec = pod.manifest.get("spec") or {}
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        images = [normalized_image_name(str(c.get("image"))) for c in containers if c.get("image")]
        if not any(name in self._count for name in images):
            return None
        return images, len(containers)

    def score(self, state: Any, pod: PodState, node: NodeState, used: dict[str, int]) -> int:
        images, containers = state
        held = self._images.get(node.name, {})
        total = 0
        for name in images:
            size = held.get(name)
            if size is not None:
                total += int(size * (self._count[name] / self._total))  # scaledImageScore
        return calculate_priority(total, containers)

    def normalize(self, state: Any, scores: dict[str, int]) -> None:
        return None


_UNSEEN = object()

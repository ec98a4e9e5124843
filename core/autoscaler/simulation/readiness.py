"""Whether a new node's DRA devices are ready, as cluster-autoscaler decides it (release profiles).

processors/customresources/dra_processor.go `FilterOutNodesWithUnreadyResources` (kubernetes-sigs/cluster-autoscaler
pkg/processors/customresources, `areResourcePoolsReady`): a Ready node of a node group whose template has
ResourceSlices is ready only when, for every driver of the template, the node has published at least as many
*complete* pools of that driver as the template has. A pool (driver, pool name) is complete when the number of its
slices at its highest generation equals that generation's `resourceSliceCount`; slices of older generations are
ignored. Device names and contents are not compared (a wrong prediction passes here and fails in Filter); drivers
the template does not have are not waited for; extra pools are fine. Otherwise the node counts as unready
(`ResourceUnready`): an upcoming node for scale-up, not a place to schedule.

So a node whose pool is published partly (fewer slices than `resourceSliceCount`, or a newer generation not
complete yet) stays unready, and scale-up neither counts it as room nor adds another node for the same pods.

The template is the group's slice templates as a new node would publish them (upstream prefers its template
registry, a sanitized real node's slices, over the cloud provider's template: kubernetes/autoscaler#8881; dralab
has one template per group). Which release first compared pools this way is not pinned (an earlier revision of the
processor compared each template pool's device names): every release profile uses this check. dralab's legacy model
(kept for legacy logs: capacity.py `devices_unpublished`) waits until every slice the group's templates name has
been published.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...state.cluster import ClusterState, NodeState

PoolSlice = tuple[str, str, int, int]  # (driver, pool, generation, resourceSliceCount) of one ResourceSlice


def complete_pools(slices: Iterable[PoolSlice]) -> dict[str, int]:
    """Driver -> how many of its pools are complete (`getCompleteResourcePools`)."""
    state: dict[tuple[str, str], list[int]] = {}  # (driver, pool) -> [generation, resourceSliceCount, slices seen]
    for driver, pool, generation, count in slices:
        seen = state.get((driver, pool))
        if seen is None or generation > seen[0]:
            seen = state[(driver, pool)] = [generation, count, 0]
        elif generation < seen[0]:
            continue  # an older generation: ignored
        seen[2] += 1
    out: dict[str, int] = {}
    for (driver, _), (_, count, seen_count) in state.items():
        if seen_count == count:
            out[driver] = out.get(driver, 0) + 1
    return out


def pools_ready(published: Iterable[PoolSlice], template: Iterable[PoolSlice]) -> bool:
    """`areResourcePoolsReady`: per driver of the template, at least as many complete pools on the node."""
    real = complete_pools(published)
    return all(real.get(driver, 0) >= count for driver, count in complete_pools(template).items())


def _template_slices(manifests: Iterable[dict[str, object]]) -> list[PoolSlice]:
    out: list[PoolSlice] = []
    for manifest in manifests:
        spec = manifest["spec"]
        assert isinstance(spec, dict)
        pool = spec.get("pool") or {}
        out.append((str(spec["driver"]), str(pool.get("name") or ""), int(pool.get("generation") or 0),
                    int(pool.get("resourceSliceCount") or 0)))
    return out


def dra_resources_ready(view: ClusterState, node: NodeState) -> bool:
    """The node's published slices against its group's template slices; True for a node of no group, or of a group
    whose template has no slices (upstream keeps such nodes as they are)."""
    group = view.node_groups.get(node.group)
    if group is None or not group.resource_slices:
        return True
    index = view.dra.slice_index()  # the node's slices: its own, and those of its name the index keeps as shared
    published = [(s.driver, s.pool, s.generation, s.resource_slice_count)  # (counter sets: upstream lists them too)
                 for _, s in (*index.by_node.get(node.name, ()), *index.shared)
                 if s.node_selection is not None and s.node_selection.node_name == node.name]
    return pools_ready(published, _template_slices(group.resource_slices))

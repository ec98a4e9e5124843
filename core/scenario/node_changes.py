"""A Node changed during a run: a `spec.workload[]` `apply` of kind Node (object_changes.py hands it here).

Nodes are not objects a scenario creates or deletes (node groups and the autoscaler make them, faults and the
autoscaler take them away), but what `kubectl label`, `kubectl taint` and `kubectl cordon` change on a running node
changes scheduling: so an `apply` of a Node is that patch of one starting node (`spec.nodes`: `<group>-<i>`):

    - at: 5m
      apply:
        apiVersion: v1
        kind: Node
        metadata: {name: gpu-0, labels: {maintenance: "true", team: null}}   # null removes a label
        spec: {taints: [{key: maintenance, effect: NoSchedule}], unschedulable: true}

`metadata.labels` and `metadata.annotations` are merged into the node's (a `null` value removes a key), as a merge
patch does; `spec.taints`, when given, replaces the node's taints (an empty list removes them all), and
`spec.unschedulable`, when given, cordons or uncordons it. The rest of a node (capacity, status) is its group's and
cannot change. A node that is gone by then (scaled down) is not found: the patch changes nothing, as the API server
would refuse it.
"""

from __future__ import annotations

from typing import Any

from ..kube.fields import (
    FieldError,
    check_fields,
    check_labels,
    expect_bool,
    expect_map,
    expect_str,
    join,
)
from ..kube.manifests import _check_taints
from .model import InitialNodes, ObjectChange


def starting_nodes(nodes: list[InitialNodes]) -> list[str]:
    """The names of the starting nodes: `<group>-<i>`, numbered per group across spec.nodes' entries (as
    core/cluster/nodes.py node_name names them when the run starts)."""
    counts: dict[str, int] = {}
    for entry in nodes:
        counts[entry.group] = counts.get(entry.group, 0) + entry.count
    return [f"{group}-{i}" for group, count in counts.items() for i in range(count)]


def check_node_change(raw: dict[str, Any], path: str, at_ms: int, entry: int, starting: set[str]) -> ObjectChange:
    """An `apply` of kind Node, checked: the patch as the ObjectChange's manifest (apiVersion, kind, metadata with
    the name and the labels/annotations given, spec with the taints/unschedulable given)."""
    check_fields(raw, path, ("apiVersion", "kind", "metadata", "spec"), required=("apiVersion", "kind", "metadata"))
    if expect_str(raw["apiVersion"], join(path, "apiVersion")) != "v1":
        raise FieldError(join(path, "apiVersion"), f"expected `v1`, got `{raw['apiVersion']}`")
    meta_path = join(path, "metadata")
    meta = expect_map(raw["metadata"], meta_path)
    check_fields(meta, meta_path, ("name", "labels", "annotations"), required=("name",))
    name = expect_str(meta["name"], join(meta_path, "name"))
    if name not in starting:
        known = ", ".join(f"`{n}`" for n in sorted(starting)) or "none"
        raise FieldError(join(meta_path, "name"), f"`{name}` is not a starting node (spec.nodes: {known}); a node the "
                                                  "autoscaler adds during the run has no name known before it")
    patch: dict[str, Any] = {"name": name}
    for field in ("labels", "annotations"):
        if meta.get(field) is not None:
            given = expect_map(meta[field], join(meta_path, field))
            kept = {k: v for k, v in given.items() if v is not None}  # null: removed
            if field == "labels":
                check_labels(kept, join(meta_path, field))
            else:
                for key, value in kept.items():
                    expect_str(value, join(join(meta_path, field), key))
            patch[field] = dict(given)
    spec_patch: dict[str, Any] = {}
    if raw.get("spec") is not None:
        spec_path = join(path, "spec")
        spec = expect_map(raw["spec"], spec_path)
        check_fields(spec, spec_path, ("taints", "unschedulable"))
        if "taints" in spec:
            _check_taints(spec["taints"], join(spec_path, "taints"))
            spec_patch["taints"] = [dict(t) for t in spec["taints"] or []]
        if spec.get("unschedulable") is not None:
            spec_patch["unschedulable"] = expect_bool(spec["unschedulable"], join(spec_path, "unschedulable"))
    manifest = {"apiVersion": "v1", "kind": "Node", "metadata": patch, "spec": spec_patch}
    return ObjectChange(at_ms=at_ms, op="update", kind="Node", name=name, manifest=manifest, entry=entry)

"""A DynamicResources Filter that fails with an error aborts the pod's whole scheduling attempt (release profiles).

Upstream (1.34-1.37): the structured allocator's `selectorsMatch` returns an error for a selector that fails to
evaluate on a device it reaches ("claim <ns/name>: selector #<i>: CEL runtime error: <reason>", "class <name>:
..." for a DeviceClass selector; k8s.io/dynamic-resource-allocation/structured/internal/*/allocator_*.go).
DynamicResources' Filter returns it as an Error status ("Return an error to abort scheduling of it.",
pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go); RunFilterPlugins wraps it as
`running "DynamicResources" filter plugin: <error>` (pkg/scheduler/framework/runtime/framework.go);
findNodesThatPassFilters' checkNode sends any Error status down its error channel and cancels the search, and
returns that error (pkg/scheduler/schedule_one.go): the error is not a FitError, so schedulingCycle skips
PostFilter and handleSchedulingFailure writes PodScheduled=False with reason `SchedulerError` and the message.
So one node whose devices break the selector ends the attempt, even when another node would take the pod; and
cluster-autoscaler, which lists only Unschedulable pods, never scales up for it.

dralab's node search runs DynamicResources' Filter lazily, on the best-scored nodes only (node_search.py); an
error on a node it did not reach would go unseen. So after the search, `first_error` runs the Filter on the
nodes upstream's search would have run it on: from the attempt's rotating start, every node that passes the
other filters, until as many feasible nodes as upstream wants are found (numFeasibleNodesToFind). That costs an
allocation per such node, so it runs only when one of the claims' selectors fails on some published device at
all (`DraPlugin.may_fail`, a cheap cached check); otherwise no Filter can fail with a selector error and the
search's answer stands.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..dra.allocator import Allocator
from ..state.cluster import NodeState
from .plugins.dynamic_resources import DraPlugin, PodClaims

CAUSE = "selector-error"  # dralab's cause, as the allocator's explanation kind (core/dra/explain_errors.py)


def first_error(dra: DraPlugin, allocator: Allocator, claims: PodClaims, nodes: dict[str, NodeState],
                order: Sequence[str], want: int, passes: Callable[[str], bool]) -> tuple[str, str] | None:
    """The Error status upstream's findNodesThatPassFilters would have returned for this attempt, as
    (condition message, dralab detail), or None. `order`: the nodes from the attempt's start; `passes`: whether a
    node passes the filters that run before DynamicResources (it is the last Filter plugin); `want`: the feasible
    nodes upstream stops at. (Upstream checks nodes in parallel and stops at the first error or when enough are
    found; here, in order: an error on any node checked before the search stops aborts the attempt.)"""
    found = 0
    for name in order:
        if found >= want:
            break
        if not passes(name):
            continue
        feasible, error = dra.filter_error(allocator, claims, nodes[name])
        if error is not None:
            return error
        if feasible:
            found += 1
    return None

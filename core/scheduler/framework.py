"""kube-scheduler's framework types (pkg/scheduler/framework/interface.go): the Status a plugin returns.

Why: a filter used to answer with a bare string, and what the string meant (which pending cause, whether
another node or preemption could ever help) was read back from its wording. A Status says it: upstream's
code, the reason as FitError prints it (`message`), and dralab's pending cause and detail (issue 4's
categories). As upstream, no Status (None) is Success: the hot loops test `is None`.

Codes, as upstream: Unschedulable means another attempt (after preemption, or once something frees up)
may succeed; UnschedulableAndUnresolvable means nothing short of a change to the node or the pod will
(upstream's preemption skips such nodes; the autoscaler may tell them apart). Wait is Permit's answer for
a gang member, Skip a PreFilter's or PreScore's "nothing for me to do". (Upstream's seventh code, Pending,
is not modelled.)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from ..state.cluster import NodeState, PodState


class Code(IntEnum):
    """Upstream's framework.Code, in its order (the values are upstream's)."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's answer: the code, upstream's reason (`message`, counted in the FitError text), dralab's
    pending cause and detail, and the plugin that answered."""

    code: Code
    message: str = ""
    cause: str = ""
    detail: str = ""
    plugin: str = ""

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_rejected(self) -> bool:
        """Unschedulable or UnschedulableAndUnresolvable (upstream's Status.IsRejected)."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def is_resolvable(self) -> bool:
        """Not UnschedulableAndUnresolvable: something within the cluster's reach (room freed, a node added)
        could make the pod fit (preemption's and the autoscaler's question)."""
        return self.code != Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def unschedulable(message: str, cause: str, plugin: str, detail: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE, message, cause, detail, plugin)


def unresolvable(message: str, cause: str, plugin: str, detail: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message, cause, detail, plugin)


class FilterPlugin(Protocol):
    """The Filter extension point: can the pod go on this node at this usage? None is Success. The
    filters (plugins/) are plain functions of this shape, run in filters.FILTERS' order."""

    def __call__(self, pod: PodState, node: NodeState, used: dict[str, int], /) -> Status | None: ...


class ScorePlugin(Protocol):
    """The Score extension point for one score policy (most-/least-allocated, fragmentation): the higher
    the better; ties are broken at random, as selectHost does."""

    def __call__(self, pod: PodState, node: NodeState, used: dict[str, int], /) -> float: ...

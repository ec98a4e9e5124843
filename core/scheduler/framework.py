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

from collections import Counter
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Generic, Protocol, TypeVar

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


class ExtensionPoint(StrEnum):
    """Upstream's extension points (pkg/scheduler/framework/interface.go), in the order a pod meets them:
    PreEnqueue before the queue; PreFilter, Filter, PostFilter, PreScore, Score in the scheduling cycle;
    Reserve and Permit at its end; PreBind and Bind in the binding cycle. A plugin module declares the
    points it implements (`EXTENSION_POINTS`, in this order) next to its `NAME`."""

    PRE_ENQUEUE = "PreEnqueue"
    PRE_FILTER = "PreFilter"
    FILTER = "Filter"
    POST_FILTER = "PostFilter"
    PRE_SCORE = "PreScore"
    SCORE = "Score"
    RESERVE = "Reserve"
    PERMIT = "Permit"
    PRE_BIND = "PreBind"
    BIND = "Bind"


# The cycle's state (upstream's CycleState; dralab's scheduler/cycle.py Cycle): a parameter here so that
# this module, which cycle.py imports for Status, imports nothing of it.
S = TypeVar("S", contravariant=True)


class PreEnqueuePlugin(Protocol):
    """PreEnqueue: may the pod enter the queue at all? None is Success; a rejection keeps it out (the
    scheduler writes it as the pod's condition) until something it waits for changes."""

    def __call__(self, pod: PodState, /) -> Status | None: ...


class PreFilterPlugin(Protocol[S]):
    """PreFilter: what the pod needs before any node is looked at (DynamicResources resolves its claims);
    a rejection fails the whole attempt, Skip leaves the plugin's Filter out for this pod."""

    def __call__(self, state: S, pod: PodState, /) -> Status | None: ...


class FilterPlugin(Protocol):
    """The Filter extension point: can the pod go on this node at this usage? None is Success. The
    filters (plugins/) are plain functions of this shape, run in filters.FILTERS' order."""

    def __call__(self, pod: PodState, node: NodeState, used: dict[str, int], /) -> Status | None: ...


class PostFilterPlugin(Protocol[S]):
    """PostFilter: runs when no node passed the filters, with each rejection's reason counted. Upstream's
    is preemption; dralab has none, and its PostFilter says why (the FitError's pending cause, refined by
    DynamicResources and fragmentation)."""

    def __call__(self, state: S, pod: PodState, reasons: Counter[str], /) -> Status: ...


class PreScorePlugin(Protocol[S]):
    """PreScore: once per pod before scoring the nodes that passed (the fragmentation score reads the
    decision's device demand here)."""

    def __call__(self, state: S, pod: PodState, nodes: list[NodeState], /) -> Status | None: ...


class ScorePlugin(Protocol):
    """The Score extension point for one score policy (most-/least-allocated, fragmentation): the higher
    the better; ties are broken at random, as selectHost does."""

    def __call__(self, pod: PodState, node: NodeState, used: dict[str, int], /) -> float: ...


class ReservePlugin(Protocol[S]):
    """Reserve: the chosen node's resources and devices are taken in the cycle's state (the assume
    cache) before binding; Unreserve gives them back when a later point rejects the pod."""

    def reserve(self, state: S, pod: PodState, node: str, /) -> Status | None: ...

    def unreserve(self, state: S, pod: PodState, node: str, /) -> None: ...


class PermitPlugin(Protocol[S]):
    """Permit: Success binds now, Wait holds the reserved pod (a gang member until its quorum), a
    rejection unreserves it."""

    def __call__(self, state: S, pod: PodState, node: str, /) -> Status | None: ...


class PreBindPlugin(Protocol[S]):
    """PreBind: what must be written before the binding (DynamicResources: the claims' allocations and
    reservedFor)."""

    def __call__(self, state: S, pod: PodState, node: str, /) -> Status | None: ...


class BindPlugin(Protocol[S]):
    """Bind: the binding itself (DefaultBinder; dralab's PodBound event)."""

    def __call__(self, state: S, pod: PodState, node: str, /) -> Status | None: ...


@dataclass(frozen=True)
class Profile(Generic[S]):
    """The plugins registered at each extension point, each tuple in the order its plugins run (upstream's
    KubeSchedulerProfile; the scheduler builds one per decision over its cycle, scheduler/profile.py). The
    Score point is the pod's score policy, chosen at PreScore; DynamicResources' Filter runs apart, last
    and lazily on the best-scored nodes (reactor.py, `_pick`)."""

    pre_enqueue: tuple[PreEnqueuePlugin, ...] = ()
    pre_filter: tuple[PreFilterPlugin[S], ...] = ()
    filter: tuple[FilterPlugin, ...] = ()
    post_filter: tuple[PostFilterPlugin[S], ...] = ()
    pre_score: tuple[PreScorePlugin[S], ...] = ()
    reserve: tuple[ReservePlugin[S], ...] = ()
    permit: tuple[PermitPlugin[S], ...] = ()
    pre_bind: tuple[PreBindPlugin[S], ...] = ()
    bind: tuple[BindPlugin[S], ...] = ()

"""Invariants that need the record stream, not only the folded state (see docs/invariants.md).

`RecordChecks` looks at every record twice: `before` it is applied (what the record does to the state
as it was: a claim allocated while already allocated, an offset out of sequence, an idempotency id
seen before) and `after` (what the state says once a scheduler's decision is in: pending pods it saw
and left without a reason). Each costs O(events of the record) plus, for `after`, the pods created and
still reason-less, each of which is reported or dropped once, so a log costs O(its length) in all.

Not detectable here: the same decision appended twice under two different ids (the ids differ and the
second record's events are applied as new; the fold reports its effects, e.g. a pod bound twice, under
`log-consistent`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..log.events import (
    ClaimAllocated,
    PodBound,
    PodCreated,
    PodReserved,
    PodUnreserved,
    PodUnschedulable,
    Record,
    ResourceClaimCreated,
)
from ..state.cluster import PENDING, ClusterState

SCHEDULER = "scheduler"


@dataclass(frozen=True)
class Finding:
    invariant: str
    offset: int
    t: int
    message: str


@dataclass
class RecordChecks:
    ids: dict[str, int] = field(default_factory=dict)  # idempotency id -> first offset
    last_offset: int = 0
    # pods created and without a PodScheduled condition yet: pod key -> None (ordered)
    reasonless: dict[str, None] = field(default_factory=dict)
    released: dict[str, int] = field(default_factory=dict)  # pod -> offset of its last PodReserved/Unreserved
    claims_made: dict[str, int] = field(default_factory=dict)  # pod -> offset its last claim was created at

    def before(self, offset: int, record: Record, state: ClusterState) -> list[Finding]:
        out: list[Finding] = []
        t = record.t
        if offset <= self.last_offset:
            out.append(Finding("no-entry-applied-twice", offset, t,
                               f"offset {offset} after {self.last_offset}: delivered again or out of order "
                               "(the fold skips it)"))
        elif offset != self.last_offset + 1:
            lost = offset - self.last_offset - 1
            out.append(Finding("no-entry-lost", offset, t,
                               f"offset {offset} follows {self.last_offset}: {lost} entr{'y' if lost == 1 else 'ies'} "
                               f"missing ({self.last_offset + 1}..{offset - 1})"))
        self.last_offset = max(self.last_offset, offset)
        first = self.ids.get(record.id)
        if first is not None:
            out.append(Finding("no-entry-applied-twice", offset, t,
                               f"idempotency id {record.id!r} already appended at offset {first}"))
        else:
            self.ids[record.id] = offset
        if offset <= state.offset:
            return out  # not applied: nothing below happens
        out += self._claims(offset, record, state)
        for event in record.events:
            if isinstance(event, PodCreated):
                self.reasonless.setdefault(event.key, None)
            elif isinstance(event, PodBound | PodUnschedulable):
                self.reasonless.pop(event.pod, None)  # bound, or given a reason
            elif isinstance(event, PodReserved | PodUnreserved):
                self.released[event.pod] = offset
            elif isinstance(event, ResourceClaimCreated) and event.pod:
                self.claims_made[event.pod] = offset
        return out

    def _claims(self, offset: int, record: Record, state: ClusterState) -> list[Finding]:
        """claim-allocated-once: a ClaimAllocated for a claim allocated and not deallocated (by the state
        or earlier in the same record), or held for another gang member waiting at Permit (and not
        released or bound earlier in the same record: the scheduler releases a timed-out member and
        gives its claim to another pod in one decision)."""
        out: list[Finding] = []
        now: dict[str, str] = {}
        held = {claim: r.pod for r in state.gang.reservations.values() for claim in r.allocations} \
            if state.gang.reservations and any(isinstance(e, ClaimAllocated) for e in record.events) else {}
        for event in record.events:
            if isinstance(event, PodUnreserved | PodBound) and held:
                # a hold ends when its pod is released or bound, earlier in the same record included
                held = {claim: pod for claim, pod in held.items() if pod != event.pod}
            if not isinstance(event, ClaimAllocated):
                continue
            claim = state.dra.claims.get(event.claim)
            if event.claim in now:
                out.append(Finding("claim-allocated-once", offset, record.t,
                                   f"claim {event.claim} allocated twice in one record (for {now[event.claim]} and "
                                   f"{event.pod})"))
            elif claim is not None and claim.allocation is not None:
                owner = next(iter(claim.reserved_for), "")
                out.append(Finding("claim-allocated-once", offset, record.t,
                                   f"claim {event.claim} allocated for {event.pod} while still allocated"
                                   + (f" (reserved for {owner})" if owner else "")))
            elif event.claim in held and held[event.claim] != event.pod:
                out.append(Finding("claim-allocated-once", offset, record.t,
                                   f"claim {event.claim} allocated for {event.pod} while held for "
                                   f"{held[event.claim]} waiting at Permit"))
            now[event.claim] = event.pod
        return out

    def after(self, offset: int, record: Record, state: ClusterState) -> list[Finding]:
        """pending-pods-have-reasons: once a scheduler decision computed on a view that includes a pod
        is applied, the pod is bound, or carries a PodScheduled condition (a reason), or is excused:
        for another scheduler (spec.schedulerName), waiting in PreBind (binding conditions), waiting at Permit
        or released from it after that view (a gang member), or waiting for the claim
        controller to create its claims (the scheduler does not try it yet, as upstream's PreFilter),
        judged on the decision's view: claims created after that view were not there for it to see
        (a delayed or stale scheduler decides on an older view than the log's end)."""
        if not self.reasonless or record.source != SCHEDULER or record.view < 0:
            return []
        pods = state.pods
        out: list[Finding] = []
        for key in list(self.reasonless):
            pod = pods.get(key)
            if pod is None or pod.condition is not None or pod.phase != PENDING or \
                    pod.manifest.get("spec", {}).get("schedulerName", "default-scheduler") != "default-scheduler":
                del self.reasonless[key]  # decided, gone, or another scheduler's pod (not ours to give a reason)
                continue
            if pod.created_offset > record.view:
                break  # created in creation order: the rest are newer still
            if key in state.gang.reservations or key in state.dra.binding or self.released.get(key, 0) > record.view:
                continue
            if _waiting_for_claims(state, key, pod.manifest) or self.claims_made.get(key, 0) > record.view:
                continue  # its claims did not exist in the view the scheduler decided on
            del self.reasonless[key]
            out.append(Finding("pending-pods-have-reasons", offset, record.t,
                               f"pod {key} pending without a reason after the scheduler's decision on view "
                               f"{record.view} (created at offset {pod.created_offset})"))
        return out


def _waiting_for_claims(state: ClusterState, key: str, manifest: dict[str, object]) -> bool:
    """The pod names claims from templates that the claim controller has not created yet."""
    spec = manifest.get("spec")
    wanted = (spec.get("resourceClaims") if isinstance(spec, dict) else None) or []
    made = state.dra.pod_claims.get(key, {})
    return any(isinstance(c, dict) and c.get("resourceClaimTemplateName") and c.get("name") not in made
               for c in wanted)

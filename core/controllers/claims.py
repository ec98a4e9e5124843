"""The resourceclaim controller (kube-controller-manager, pkg/controller/resourceclaim), as a reactor.

It creates a pod's claims from its ResourceClaimTemplates, named as upstream does (generateName
`<pod>-<pod claim name>-` with both parts shortened to fit, then five random characters, drawn from
the decision's seeded source), owned by the pod, annotated with the pod claim's name, and recorded
in the pod's status (resourceClaimStatuses) through the event's `pod`/`pod_claim` fields. When a
pod is done it takes the pod out of each claim's reservedFor, and deallocates a claim nobody uses
any more, so its devices are free again. A claim deleted while in use (core/state/object_changes.py) loses
its delete-protection finalizer once nobody reserves it, and is gone (syncClaim).

The same reactor hosts the workload controllers' part that matters here (workload_controllers.py): a
replicated pod that failed or was evicted gets a replacement. Both are kube-controller-manager.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..cluster.pod_claims import claim_manifest, generate_name, group_claims, owned_claim_manifest, same_source
from ..cluster.workload_controllers import replacements
from ..engine.contract import Decision, Trigger
from ..log.events import AnyEvent, ClaimReleased, ResourceClaimCreated, ResourceClaimRemoved
from ..state.cluster import FAILED, PENDING, SUCCEEDED, ClusterState, PodState
from ..state.gangs import PodGroupState


def _group_done(view: ClusterState, consumer: str) -> bool:
    """A PodGroup consumer of a claim is gone once every pod of the group has terminated: its controller then
    deletes the group, which its finalizer allows only then (KEP-4671 deletion protection), and deleting it
    takes it out of reservedFor (KEP-5729). dralab does not model the PodGroup's deletion itself."""
    if not consumer.startswith("podgroup/"):
        return False
    members = view.gang.group_members.get(consumer[len("podgroup/"):])
    return members is not None and bool(members) and all(view.pods[k].phase in (SUCCEEDED, FAILED) for k in members)


@dataclass
class ClaimController:
    name: str = "claims"
    trigger: Trigger = "events"

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        events: list[AnyEvent] = []
        for key in view.pods_by_phase[PENDING]:
            events.extend(self._create_claims(view, view.pods[key], rng))
        for group in view.gang.podgroups.values():
            if group.spec.get("resourceClaims"):
                events.extend(self._create_group_claims(view, group, rng))
        pods = view.pods  # not a set of every finished pod per decision: that grows all day long
        for claim_key, state in view.dra.claims.items():
            if state.reserved_for:
                gone = [p for p in state.reserved_for
                        if (p in pods and pods[p].phase in (SUCCEEDED, FAILED)) or _group_done(view, p)]
                for i, pod_key in enumerate(gone):
                    last = i == len(gone) - 1 and len(state.reserved_for) == len(gone)
                    events.append(ClaimReleased(claim=claim_key, pod=pod_key, deallocate=last))
        # a deleted claim nobody reserves any more: its delete-protection finalizer removed (objects over time)
        held = {k for r in view.gang.reservations.values() for k in r.allocations} if view.dra.deleting else set()
        events.extend(ResourceClaimRemoved(claim=key) for key in view.dra.deleting
                      if key in view.dra.claims and not view.dra.claims[key].reserved_for and key not in held)
        events.extend(replacements(view, rng))  # after the claims: their names' random draws come first
        return Decision(tuple(events))

    @staticmethod
    def _create_group_claims(view: ClusterState, group: PodGroupState, rng: random.Random) -> list[AnyEvent]:
        """KEP-5729: one claim per PodGroup for each of its template entries, owned by the group and named as
        a pod's would be (`<group>-<entry>-xxxxx`); `pod` names the group (`podgroup/<ns>/<name>`) as owner."""
        out: list[AnyEvent] = []
        owner = f"podgroup/{group.key}"
        have = view.dra.pod_claims.get(owner, {})
        namespace, name = group.key.split("/", 1)
        for entry in group.spec.get("resourceClaims") or []:
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name or entry.get("name") in have:
                continue
            template = view.dra.templates.get(f"{namespace}/{template_name}")
            if template is None:
                continue
            claim_name = generate_name(name, entry["name"], rng)
            out.append(ResourceClaimCreated(manifest=owned_claim_manifest(template, group.manifest, entry["name"],
                                                                          claim_name),
                                            pod=owner, pod_claim=entry["name"]))
        return out

    def _create_claims(self, view: ClusterState, pod: PodState, rng: random.Random) -> list[AnyEvent]:
        out: list[AnyEvent] = []
        entries = pod.manifest.get("spec", {}).get("resourceClaims")
        if not entries:
            return out  # most pods: no claims (every pending pod is looked at in every decision)
        have = view.dra.pod_claims.get(pod.key, {})
        namespace = pod.key.split("/")[1]
        pod_name = pod.key.split("/", 2)[2]
        shared = group_claims(view, pod) if pod.key in view.gang.group_of else {}
        for entry in entries:
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name or entry.get("name") in have:
                continue
            group = shared.get(entry.get("name", ""))
            if group is not None and same_source(group[1], entry):
                continue  # the PodGroup's claim (KEP-5729), made once for the group
            template = view.dra.templates.get(f"{namespace}/{template_name}")
            if template is None:
                continue  # the scheduler reports the pod as waiting for the missing template
            name = generate_name(pod_name, entry["name"], rng)
            out.append(ResourceClaimCreated(manifest=claim_manifest(template, pod, entry["name"], name),
                                            pod=pod.key, pod_claim=entry["name"]))
        return out

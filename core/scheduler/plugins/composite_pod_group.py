"""CompositePodGroups (KEP-6012, kube-scheduler 1.37 alpha, gate CompositePodGroup): groups of groups, as
JobSet and LeaderWorkerSet need (a leader group and worker groups that must all run, or N of M replicas).

A PodGroup names its parent with `spec.parentCompositePodGroupName`; a CompositePodGroup may have a parent too,
at most four levels deep (WorkloadMaxTreeDepth). The whole tree under the root is one scheduling unit:

- PreEnqueue walks the tree: a PodGroup is admissible when its pending or running pods reach `minCount` (a basic
  one: one pod), a composite when at least `minGroupCount` of its children are (a basic one: one child).
- The group algorithm runs depth first (upstream's groupRecursiveSchedulingDefaultAlgorithm): each PodGroup as
  its own cycle would, each composite keeping its children's placements only if at least `minGroupCount` of
  them succeed. The feasibility check gives up on a composite as soon as the children left cannot reach
  `minGroupCount` (an abort cascades upward: the composite's placements are rolled back).
- A composite's status gets `CompositePodGroupInitiallyScheduled` (terminal once True; reasons `Unschedulable`,
  `SchedulerError`, `Invalid`: a cycle, a tree deeper than four levels).
- Once the root is satisfied, the scheduler does not go back to re-enforce `minGroupCount` (KEP-6012).

Not modelled for composites: preemption (a composite that does not fit fails) and topology constraints on the
composite itself (the PodGroups' own constraints apply).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...log.events import PodGroupConditionSet
from ...state.cluster import PodState
from ...state.gangs import PodGroupState
from ..framework import ExtensionPoint
from ..queue import NOT_READY
from .pod_group import (
    Place,
    PodGroupCycle,
    Trial,
    accept,
    choose,
    live_members,
    reject,
    running_members,
)
from .scheduling_gates import SCHEDULING_GATED, gated

if TYPE_CHECKING:
    from ..cycle import Cycle

NAME = "CompositePodGroup"  # upstream: the GangScheduling plugin and the framework's recursive group algorithm
EXTENSION_POINTS = (ExtensionPoint.PRE_ENQUEUE, ExtensionPoint.PERMIT)
MAX_TREE_DEPTH = 4  # scheduling/v1beta1 WorkloadMaxTreeDepth
INITIALLY_SCHEDULED = "CompositePodGroupInitiallyScheduled"
KIND = "CompositePodGroup"


def root_of(groups: PodGroupCycle, leaf: str) -> tuple[str | None, str | None]:
    """(the root composite's key, None) for a PodGroup under a composite; (None, None) for a PodGroup without a
    parent; (the first composite met, why) when the tree cannot be scheduled (a missing composite, a cycle,
    more than four levels)."""
    gang = groups.view.gang
    group = gang.podgroups.get(leaf)
    parent = group.parent if group is not None else None
    if parent is None:
        return None, None
    seen, root, depth = [leaf], parent, 1
    while parent is not None:
        composite = gang.composites.get(parent)
        if composite is None:
            return root, f"waiting for composite pod group {parent} to be created"
        if parent in seen:
            return root, f"composite pod groups form a cycle: {' -> '.join([*seen, parent])}"
        seen.append(parent)
        depth += 1
        if depth > MAX_TREE_DEPTH:
            return root, f"the pod group tree under {parent} is deeper than {MAX_TREE_DEPTH} levels"
        root, parent = parent, composite.parent
    return root, None


@dataclass
class Tree:
    """The tree under one root: each composite's children (PodGroups and composites, in name order)."""

    root: str
    children: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # composite -> [(kind, key)]

    @classmethod
    def of(cls, groups: PodGroupCycle, root: str) -> Tree:
        gang = groups.view.gang
        tree = cls(root)
        by_parent: dict[str, list[tuple[str, str]]] = {}
        for key, group in gang.podgroups.items():
            if group.parent is not None:
                by_parent.setdefault(group.parent, []).append(("PodGroup", key))
        for key, composite in gang.composites.items():
            if composite.parent is not None:
                by_parent.setdefault(composite.parent, []).append((KIND, key))
        stack = [root]
        while stack:
            node = stack.pop()
            kids = sorted(by_parent.get(node, []), key=lambda k: k[1])
            tree.children[node] = kids
            stack.extend(key for kind, key in kids if kind == KIND and key not in tree.children)
        return tree

    def leaves(self) -> list[str]:
        return [key for kids in self.children.values() for kind, key in kids if kind == "PodGroup"]


@dataclass
class Outcome:
    """Per PodGroup of the tree: the trial that placed it (None: it failed), and why it failed."""

    trials: dict[str, Trial] = field(default_factory=dict)
    failed: dict[str, tuple[Trial, str | None]] = field(default_factory=dict)
    composites: dict[str, bool] = field(default_factory=dict)  # composite -> kept its placements


def schedule_composite(cycle: Cycle, groups: PodGroupCycle, root: str, pods: dict[str, list[PodState]],
                       place: Place) -> None:
    """The tree under `root` as one unit (see the module docstring); `pods`: the pending pods per PodGroup."""
    gang = groups.view.gang
    tree = Tree.of(groups, root)
    ready: dict[str, list[PodState]] = {}
    for leaf, members in pods.items():
        for pod in members:
            gate = gated(pod)
            if gate is not None:
                cycle.pending(pod, SCHEDULING_GATED, gate.message, gate.cause, gate.detail)
            else:
                ready.setdefault(leaf, []).append(pod)
                cycle.release_nomination(pod)
    if not _admissible(groups, tree, root):
        composite = gang.composites[root]
        # upstream's PreEnqueue message, verbatim (gangscheduling.go preEnqueueWithHierarchies, 1.37)
        message = f'waiting for composite pod group "{root.split("/", 1)[1]}" tree to meet quorum'
        for members in ready.values():
            for pod in members:
                cycle.pending(pod, NOT_READY, message, "gang", message)
        _condition(groups, cycle, composite, "False", "Unschedulable", message)
        return
    outcome = Outcome()
    _schedule(cycle, groups, tree, root, ready, place, outcome)
    for leaf, trial in outcome.trials.items():
        accept(cycle, groups, gang.podgroups[leaf], ready.get(leaf, []), trial, running_members(groups.view, leaf))
    for leaf, (trial, why) in outcome.failed.items():
        group = gang.podgroups[leaf]
        need = (group.min_count or 0) - running_members(groups.view, leaf)
        reject(cycle, groups, group, ready.get(leaf, []), trial, need, why)
    for node in tree.children:
        tier = gang.composites.get(node)
        if tier is None:
            continue
        if outcome.composites.get(node):
            _condition(groups, cycle, tier, "True", "Scheduled", "the composite pod group is scheduled")
        else:
            _condition(groups, cycle, tier, "False", "Unschedulable",
                       "fewer than minGroupCount of its pod groups can be scheduled together")


def invalid(cycle: Cycle, groups: PodGroupCycle, composite: str, pods: list[PodState], why: str) -> None:
    """A tree that cannot be scheduled at all: its pods wait, its composite says why (reason Invalid)."""
    missing = why.startswith("waiting")
    for pod in pods:
        cycle.pending(pod, NOT_READY if missing else "SchedulerError", why, "missing" if missing else "gang", why)
    state = groups.view.gang.composites.get(composite)
    if state is not None and not missing:
        _condition(groups, cycle, state, "False", "Invalid", why)


def _admissible(groups: PodGroupCycle, tree: Tree, node: str) -> bool:
    gang = groups.view.gang
    composite = gang.composites[node]
    need = composite.min_group_count or 1
    ready = 0
    for kind, key in tree.children.get(node, []):
        if kind == KIND:
            ready += _admissible(groups, tree, key)
        else:
            group = gang.podgroups[key]
            ready += live_members(groups.view, key) >= (group.min_count or 1)
    return ready >= need


def _descendants(tree: Tree, node: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for kind, key in tree.children.get(node, []):
        out.append((kind, key))
        if kind == KIND:
            out.extend(_descendants(tree, key))
    return out


def _leaves_under(tree: Tree, node: str) -> list[str]:
    out: list[str] = []
    for kind, key in tree.children.get(node, []):
        out.extend(_leaves_under(tree, key) if kind == KIND else [key])
    return out


def _schedule(cycle: Cycle, groups: PodGroupCycle, tree: Tree, node: str, ready: dict[str, list[PodState]],
              place: Place, outcome: Outcome) -> bool:
    """Depth first: keep a composite's children only if at least minGroupCount of them succeed."""
    gang = groups.view.gang
    composite = gang.composites[node]
    gang_policy = composite.min_group_count is not None
    need = composite.min_group_count or 1
    kids = tree.children.get(node, [])
    sp = cycle.savepoint()
    done = 0
    for i, (kind, key) in enumerate(kids):
        if kind == KIND:
            done += _schedule(cycle, groups, tree, key, ready, place, outcome)
        else:
            done += _leaf(cycle, groups, gang.podgroups[key], ready.get(key, []), place, outcome)
        if gang_policy and done + len(kids) - i - 1 < need:
            break  # PlacementFeasible: minGroupCount out of reach, abort (and upward)
    if done >= need:
        cycle.release(sp)
        outcome.composites[node] = True
        return True
    cycle.rollback(sp)
    for kind, key in _descendants(tree, node):
        if kind == KIND:
            outcome.composites[key] = False
    outcome.composites[node] = False
    why = f'its composite pod group "{node.split("/", 1)[1]}" cannot place {need} of its {len(kids)} groups together'
    for leaf in _leaves_under(tree, node):
        trial = outcome.trials.pop(leaf, None)
        if trial is not None:
            outcome.failed[leaf] = (Trial(trial.domain), why)
        elif leaf not in outcome.failed and ready.get(leaf):
            outcome.failed[leaf] = (Trial(None), why)
    return False


def _leaf(cycle: Cycle, groups: PodGroupCycle, group: PodGroupState, pods: list[PodState], place: Place,
          outcome: Outcome) -> bool:
    running = running_members(groups.view, group.key)
    min_count = group.min_count
    if not pods:
        return running >= (min_count or 1)
    need = min_count - running if min_count is not None else 0
    domains = groups.domains(group)
    if isinstance(domains, str):
        outcome.failed[group.key] = (Trial(None), f"no placement for the pod group: {domains}")
        return False
    best, trials = choose(cycle, groups, group, pods, place, domains, need)
    if best is None:
        outcome.failed[group.key] = (max(trials, key=lambda t: len(t.placed)), None)
        return False
    outcome.trials[group.key] = best
    return True


def _condition(groups: PodGroupCycle, cycle: Cycle, composite: PodGroupState, status: str, reason: str,
               message: str) -> None:
    old = composite.condition(INITIALLY_SCHEDULED)
    if old is not None and (old.status == "True" or (old.status, old.reason, old.message) == (status, reason, message)):
        return  # terminal once True; otherwise written when it changes
    cycle.events.append(PodGroupConditionSet(group=composite.key, condition=INITIALLY_SCHEDULED, status=status,
                                             reason=reason, message=message, kind=KIND))



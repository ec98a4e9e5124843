"""The external inputs of a log as removable pieces, and how a subset of them becomes input records again.

The shrinker removes *atoms* (the smallest pieces: one pod of an arrival, one starting node, one node
group, one object of the setup record, one other scenario record) in *units* of one kind at a time (a
whole arrival record is a unit of its pods). `InputSet.build` turns the atoms kept back into valid
input records: the setup record rebuilt with its remaining events in their original order (RunStarted
is always kept), every arrival record that keeps a pod under its own id, other records as they were.
A starting node is its `NodeCreated`, its `NodeReady` and the `ResourceSlicePublished` events whose
slice names it (`spec.nodeName`); a node group is its `NodeGroupDefined`, and is only offered for
removal once none of its starting nodes is left (`removable_groups`); the setup's other events (DRA
classes, claim templates, claims, Workloads) are objects, tried last (a pod needs its claim template).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dralab.core.log.events import (
    AnyEvent,
    NodeCreated,
    NodeGroupDefined,
    NodeReady,
    PodCreated,
    Record,
    ResourceSlicePublished,
    RunStarted,
)

KINDS = ("arrivals", "pods", "nodes", "node_groups", "objects", "other")
# (kind, id): ("pod", "3/1"), ("node", name), ("group", name), ("object", "4"), ("other", "5")
Atom = tuple[str, str]


class InputsError(ValueError):
    """The log's external inputs cannot be shrunk (no RunStarted first, say); the message says why."""


@dataclass
class InputSet:
    records: list[Record]  # the log's external inputs, in log order, the setup record first
    setup_atoms: list[Atom | None] = field(default_factory=list)  # per setup event (None: always kept)
    node_group: dict[str, str] = field(default_factory=dict)  # starting node -> its group
    arrivals: dict[int, list[Atom]] = field(default_factory=dict)  # record index -> its pod atoms
    others: dict[int, Atom] = field(default_factory=dict)  # record index -> its atom

    @classmethod
    def from_records(cls, records: list[Record]) -> InputSet:
        if not records or not records[0].events or not isinstance(records[0].events[0], RunStarted):
            raise InputsError("the log's first scenario record does not start with RunStarted")
        inputs = cls(records)
        setup = records[0]
        nodes = {e.name for e in setup.events if isinstance(e, NodeCreated)}
        for i, event in enumerate(setup.events):
            inputs.setup_atoms.append(_setup_atom(i, event, nodes))
            if isinstance(event, NodeCreated):
                inputs.node_group[event.name] = event.group
        for i, record in enumerate(records[1:], start=1):
            if record.events and all(isinstance(e, PodCreated) for e in record.events):
                inputs.arrivals[i] = [("pod", f"{i}/{j}") for j in range(len(record.events))]
            else:
                inputs.others[i] = ("other", str(i))
        return inputs

    def all_atoms(self) -> frozenset[Atom]:
        atoms: set[Atom] = {a for a in self.setup_atoms if a is not None}
        atoms.update(a for pods in self.arrivals.values() for a in pods)
        atoms.update(self.others.values())
        return frozenset(atoms)

    # ------------------------------------------------------------------ units per kind

    def arrival_units(self, kept: frozenset[Atom]) -> list[tuple[Atom, ...]]:
        """Each arrival record with a pod kept: the unit of its kept pods."""
        units = [tuple(a for a in pods if a in kept) for pods in self.arrivals.values()]
        return [u for u in units if u]

    def pod_units(self, kept: frozenset[Atom]) -> list[tuple[Atom, ...]]:
        return [(a,) for pods in self.arrivals.values() for a in pods if a in kept]

    def node_units(self, kept: frozenset[Atom]) -> list[tuple[Atom, ...]]:
        return [(a,) for a in self._setup_units("node") if a in kept]

    def removable_groups(self, kept: frozenset[Atom]) -> list[tuple[Atom, ...]]:
        """Node groups none of whose starting nodes is kept."""
        busy = {self.node_group[a[1]] for a in kept if a[0] == "node"}
        return [(a,) for a in self._setup_units("group") if a in kept and a[1] not in busy]

    def _setup_units(self, kind: str) -> list[Atom]:
        """The setup record's atoms of one kind, once each, in order (a node has several events)."""
        return list(dict.fromkeys(a for a in self.setup_atoms if a is not None and a[0] == kind))

    def object_units(self, kept: frozenset[Atom]) -> list[tuple[Atom, ...]]:
        """The setup record's other events (DRA objects: classes, claim templates, claims, Workloads...)."""
        return [(a,) for a in self._setup_units("object") if a in kept]

    def other_units(self, kept: frozenset[Atom]) -> list[tuple[Atom, ...]]:
        return [(a,) for a in self.others.values() if a in kept]

    def counts(self, kept: frozenset[Atom], duration_ms: int | None = None) -> dict[str, int]:
        """Units kept per kind (inputs after `duration_ms` count as removed)."""
        alive = self.alive(kept, duration_ms)
        return {
            "arrivals": len(self.arrival_units(alive)),
            "pods": len(self.pod_units(alive)),
            "nodes": len(self.node_units(alive)),
            "node_groups": sum(1 for a in alive if a[0] == "group"),
            "objects": sum(1 for a in alive if a[0] == "object"),
            "other": len(self.other_units(alive)),
        }

    def alive(self, kept: frozenset[Atom], duration_ms: int | None) -> frozenset[Atom]:
        """`kept` without the atoms of records after `duration_ms` (they would never be appended)."""
        if duration_ms is None:
            return kept
        late = {a for i, pods in self.arrivals.items() if self.records[i].t > duration_ms for a in pods}
        late.update(a for i, a in self.others.items() if self.records[i].t > duration_ms)
        return kept - late if late else kept

    # ------------------------------------------------------------------ back to records

    def build(self, kept: frozenset[Atom], duration_ms: int, shift_ms: int = 0) -> list[Record]:
        """The input records keeping `kept`, those after `duration_ms` dropped, every record but the setup
        one moved `shift_ms` earlier (never before 0), in time order (stable: log order at equal times)."""
        setup = self.records[0]
        events: list[AnyEvent] = [e for e, a in zip(setup.events, self.setup_atoms, strict=True)
                                  if a is None or a in kept]
        out = [Record(id=setup.id, source=setup.source, view=setup.view, t=setup.t, events=tuple(events))]
        later: list[Record] = []
        for i, record in enumerate(self.records[1:], start=1):
            t = max(0, record.t - shift_ms)
            if t > duration_ms:
                continue
            if i in self.arrivals:
                pods = tuple(e for e, a in zip(record.events, self.arrivals[i], strict=True) if a in kept)
                if pods:
                    later.append(Record(id=record.id, source=record.source, view=record.view, t=t, events=pods))
            elif self.others[i] in kept:
                later.append(Record(id=record.id, source=record.source, view=record.view, t=t, events=record.events))
        later.sort(key=lambda r: r.t)
        return out + later

    def first_later_t(self, kept: frozenset[Atom]) -> int | None:
        """Time of the earliest kept input after the setup record (None: none kept)."""
        times = [self.records[i].t for i, pods in self.arrivals.items() if any(a in kept for a in pods)]
        times += [self.records[i].t for i, a in self.others.items() if a in kept]
        return min(times) if times else None

    def has_other(self, kept: frozenset[Atom]) -> bool:
        return any(a in kept for a in self.others.values())


def _setup_atom(index: int, event: AnyEvent, nodes: set[str]) -> Atom | None:
    if isinstance(event, NodeGroupDefined):
        return ("group", event.name)
    if isinstance(event, (NodeCreated, NodeReady)) and event.name in nodes:
        return ("node", event.name)
    if isinstance(event, ResourceSlicePublished):
        owner = ((event.manifest or {}).get("spec") or {}).get("nodeName")
        if isinstance(owner, str) and owner in nodes:
            return ("node", owner)
    if isinstance(event, RunStarted):
        return None  # always kept: its config builds the reactors
    return ("object", str(index))  # DRA objects and anything else the setup holds

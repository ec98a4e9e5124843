"""What changed in a :class:`~dralab.core.analysis.audit_snapshot.Snapshot`, and how to undo it.

Two jobs, kept apart from the filters because they only move bookkeeping around:

- change tracking: ``version`` counts the changes, and each change names the nodes whose filter outcomes it
  may have changed (None: possibly every node). Callers that keep per-node results between bindings
  (`audit.evaluate`, through :class:`~dralab.core.analysis.audit_shape.Shape`) ask `changed_since` and redo only
  those nodes instead of every node;
- the undo journal: while a checkpoint is open (a gang placed tentatively, see
  :mod:`dralab.core.analysis.audit_gang`) every overwritten value is kept, so `unwind` can hand them back newest
  first. Nothing is kept while no checkpoint is open: a plain scheduling pass pays nothing for it.

The journal does not know the snapshot's fields: entries are ``(what, key, old value)`` and the snapshot
restores them itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..dra.allocator import AllocatedState

__all__ = ["ChangeJournal", "Checkpoint"]


@dataclass
class Checkpoint:
    """Where `Snapshot.rollback` returns to: the version, the journal's length, the devices in use."""

    version: int
    journal: int
    allocated: AllocatedState


class ChangeJournal:
    """Versions with the nodes each change touched, and the undo entries of the open checkpoints."""

    def __init__(self) -> None:
        self.version = 0
        self._changes: list[frozenset[str] | None] = []  # _changes[v]: the nodes change v -> v+1 touched
        self._checkpoints: list[Checkpoint] = []
        self._entries: list[tuple[str, str, Any]] = []

    def record(self, nodes: set[str] | None) -> None:
        """A change of ``nodes`` (None: any node): a new version."""
        self._changes.append(None if nodes is None else frozenset(nodes))
        self.version += 1

    def changed_since(self, version: int) -> set[str] | None:
        """The nodes that may have changed since ``version`` (None: possibly all of them)."""
        out: set[str] = set()
        for change in self._changes[version:]:
            if change is None:
                return None
            out |= change
        return out

    def keep(self, what: str, key: str, old: Any) -> None:
        """Remember the value ``old`` about to be overwritten, if a checkpoint is open (else nobody can ask)."""
        if self._checkpoints:
            self._entries.append((what, key, old))

    def open(self, allocated: AllocatedState) -> Checkpoint:
        """A new checkpoint, nested in the open ones; ``allocated``: a copy of the devices in use now."""
        cp = Checkpoint(self.version, len(self._entries), allocated)
        self._checkpoints.append(cp)
        return cp

    def release(self, cp: Checkpoint) -> None:
        """Close ``cp`` keeping its changes (its entries stay for an enclosing checkpoint, if any)."""
        assert self._checkpoints and self._checkpoints[-1] is cp, "checkpoints are released in order"
        self._checkpoints.pop()
        if not self._checkpoints:
            self._entries.clear()

    def unwind(self, cp: Checkpoint) -> list[tuple[str, str, Any]]:
        """Close ``cp`` and give the entries kept since, newest first, for the caller to restore."""
        assert self._checkpoints and self._checkpoints[-1] is cp, "checkpoints are rolled back in order"
        self._checkpoints.pop()
        undone = self._entries[cp.journal:][::-1]
        del self._entries[cp.journal:]
        return undone

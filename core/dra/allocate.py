"""`dralab allocate`: allocate the claims of an inventory for one node, as the scheduler would for a pod.

Claims that already carry `status.allocation` are in use: their devices are taken and their
capacity consumed. All the other claims are allocated together, all-or-nothing, exactly as the
DynamicResources plugin's Filter does for the unallocated claims of one pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .allocator import AllocatedState, AllocationError, AllocationOutcome, Allocator
from .cel import CelMatcher, SelectorError
from .model import Claim, Inventory, Node


class NodeChoiceError(ValueError):
    """The input does not say which node to allocate for (bad input: exit 2)."""


@dataclass
class AllocateReport:
    node: str
    outcome: str
    message: str
    claims: list[dict[str, Any]]
    explanations: list[dict[str, Any]]
    stats: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "outcome": self.outcome,
            "message": self.message,
            "claims": self.claims,
            "explanations": self.explanations,
            "stats": self.stats,
        }


def choose_node(inventory: Inventory, name: str | None) -> Node:
    if name is not None:
        node = inventory.nodes.get(name)
        if node is None:
            known = ", ".join(sorted(inventory.nodes)) or "none"
            raise NodeChoiceError(f"--node: no Node named {name!r} in the input (nodes: {known})")
        return node
    if len(inventory.nodes) == 1:
        return next(iter(inventory.nodes.values()))
    if not inventory.nodes:
        raise NodeChoiceError("the input holds no Node; add one (kind: Node) or name it with --node")
    raise NodeChoiceError(f"the input holds {len(inventory.nodes)} nodes; say which with --node "
                          f"({', '.join(sorted(inventory.nodes))})")


def allocate_inventory(inventory: Inventory, node_name: str | None = None) -> AllocateReport:
    node = choose_node(inventory, node_name)
    in_use = [c for c in inventory.claims.values() if c.allocation is not None]
    pending: list[Claim] = [c for c in inventory.claims.values() if c.allocation is None]
    allocator = Allocator(
        list(inventory.slices.values()), inventory.classes, AllocatedState.from_claims(in_use), CelMatcher()
    )
    try:
        outcome: AllocationOutcome = allocator.allocate(node, pending)
    except (AllocationError, SelectorError) as exc:
        return AllocateReport(node.name, "error", str(exc), [], [], {})
    claims = [
        {"name": c.name, "namespace": c.namespace, "allocation": outcome.allocations[c.key]}
        for c in pending
        if c.key in outcome.allocations
    ]
    explanations = [dict(e.__dict__) for e in outcome.explanations]
    return AllocateReport(node.name, outcome.outcome, outcome.message, claims, explanations, dict(outcome.stats))

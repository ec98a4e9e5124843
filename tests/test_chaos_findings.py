"""The findings kept in scenarios/chaos/findings/ stay reproducible: each log verifies and shows its
violation (see that folder's README for what each one means)."""

from __future__ import annotations

from pathlib import Path

from dralab.core.checks.log_check import check_records
from dralab.replay.logs.logfile import read_log
from dralab.replay.simulation.verify import verify

FINDINGS = Path(__file__).resolve().parents[1] / "scenarios" / "chaos" / "findings"


def test_a_gang_member_waiting_at_permit_is_bound_to_a_node_that_failed_meanwhile() -> None:
    log = read_log(FINDINGS / "gang-member-bound-to-notready-node.dralog")
    assert log.damage is None
    assert verify(log).ok
    result = check_records(log.records())
    assert {v.invariant for v in result.violations} == {"bound-to-ready-nodes"}
    assert {v.message for v in result.violations} == {
        f"pod pod/default/worker-{i} bound to gpu-8x-0 before it was Ready" for i in (2, 3)}
    assert "gang-member-bound-to-notready-node.dralog" in (FINDINGS / "README.md").read_text()

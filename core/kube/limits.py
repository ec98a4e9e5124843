"""dralab's documented maxima on what sizes a run: seeds, cluster time, nodes and pods.

Every input that sizes work is bounded here, once, so that a typo (``duration: 876000h``, a seed with
27 digits, ``count: 1000000000``) is refused up front with the field named (exit 2) instead of running
for hours, exhausting memory or failing deep inside with an OverflowError. The scenario loader
(core/scenario*.py) and the CLI's option checks (cli/bounds.py) read these; docs/scenario-format.md
states them.
"""

from __future__ import annotations

__all__ = [
    "MAX_CLUSTER_TIME_MS",
    "MAX_NODE_COUNT",
    "MAX_POD_COUNT",
    "MAX_SEED",
    "seed_error",
]

# Seeds are written into the log as msgspec ints and seed random.Random / numpy: 0 .. 2^63-1 fits all.
MAX_SEED = (1 << 63) - 1
# Any duration or time in a scenario (its duration, arrival times, timeouts, delays, fault times): 30 days.
MAX_CLUSTER_TIME_MS = 30 * 24 * 3_600_000
# Nodes of one node group (its `max`, starting nodes, quota, stock), and starting nodes of the scenario.
MAX_NODE_COUNT = 100_000
# Pods of a scenario, all arrivals together.
MAX_POD_COUNT = 1_000_000


def seed_error(seed: int) -> str | None:
    """Why ``seed`` is not a dralab seed (0 .. 2^63-1), or None."""
    if seed < 0:
        return f"must be >= 0, got {seed}"
    if seed > MAX_SEED:
        return f"must be < 2^63 ({MAX_SEED + 1}), got {seed}"
    return None

"""Scale-up options: what each node group would add for the pending pods, as cluster-autoscaler's
core/scaleup/orchestrator (ScaleUp computes an expansion option per node group, skipping groups in
backoff or at their max, and asks the expander to pick one).

The reactor (reactor.py) calls these on the pods left after FilterOutSchedulable (simulation/nodes.py);
ProvisioningRequests' best-effort-atomic scale-ups (provreq_broker.py) take an option only if it holds
all their pods. With the atomic policy, pods of a gang are binpacked together (`pending_gangs`).
"""

from __future__ import annotations

import random

from ...state.cluster import ClusterState, PodState
from ..simulation.capacity import Simulation
from .estimator import binpack
from .expanders import Option, expand


def atomic_option(view: ClusterState, sim: Simulation, pods: list[PodState], rng: random.Random, blocked: set[str],
                  expander: str, priorities: dict[str, int]) -> tuple[str, int] | None:
    """One node group that takes all `pods` on new nodes within its room (best-effort-atomic), as the
    expander picks among such groups."""
    options = [o for o in scale_up_options(view, sim, pods, blocked) if len(o.pods) == len(pods)]
    if not options:
        return None
    best = expand(expander, priorities, options, rng)
    return best.group.name, best.count


def scale_up_options(view: ClusterState, sim: Simulation, pods: list[PodState], blocked: set[str],
                     gangs: dict[str, list[PodState]] | None = None) -> list[Option]:
    """Each node group's scale-up for `pods` (binpacked within the group's room), where it helps;
    `blocked` groups (in backoff) are skipped."""
    options = []
    for name in sorted(view.node_groups):
        group = view.node_groups[name]
        room = group.max - group.target_size
        if room <= 0 or name in blocked:
            continue
        count, placed, waste = binpack(pods, group, room, sim, gangs)
        if count:
            options.append(Option(group, count, tuple(placed), waste))
    return options


def pending_gangs(view: ClusterState, pods: list[PodState]) -> dict[str, list[PodState]]:
    """The gangs among `pods` (gang key -> its pods here; gangs with a minimum count only): the atomic
    policy binpacks each gang whole."""
    out: dict[str, list[PodState]] = {}
    for pod in pods:
        ref = view.gang.refs.get(pod.key)
        if ref is not None and view.gang.min_count(ref) is not None:
            out.setdefault(ref.key, []).append(pod)
    return out

"""The DeviceTaintRules part of the cluster state (core/dra/taint_rules.py), folded from their events.

Kept apart from the rest of the DRA state because the rules change what the *scheduler* sees of the slices and
nothing else: the fold keeps the slices as the drivers published them (the autoscaler's simulation, the
invariants and the audit of the drivers read those), and :meth:`DeviceTaintState.index` gives the scheduler the
slices with the rules' taints added, as kube-scheduler's slice tracker does (resourceslice/tracker). Rules are
few, slices many: the patched index is built once per change of either and reused by every decision.

It also keeps what the device taint eviction controller needs and a slice does not say: when each NoExecute taint
a driver publishes first appeared (`no_execute_since`: upstream's taint `timeAdded`, which dralab's slices lack).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..dra.model import Slice, Taint
from ..dra.pools import SliceIndex
from ..dra.taint_rules import TaintRule, convert_rule, patch_slices
from ..log.events import DeviceTaintRuleCreated, DeviceTaintRuleDeleted, DeviceTaintRuleStatus

# events after which a parked pod may fit (a rule deleted or changed can untaint devices): core/state/cluster.py
RULE_ROOM_EVENTS = (DeviceTaintRuleCreated, DeviceTaintRuleDeleted)


def taint_key(device: str, taint: Taint) -> str:
    """A NoExecute taint of one device of a slice, as `no_execute_since` keys it."""
    return f"{device}/{taint.key}={taint.value}"


@dataclass
class RuleState:
    """One rule: its manifest (as created or last updated), when its taint was added (cluster ms), the
    controller's EvictionInProgress condition and how many pods it evicted for this rule."""

    manifest: dict[str, Any]
    time_added_ms: int = 0
    condition: dict[str, Any] | None = None
    evicted: int = 0
    status_ms: int = -1  # when the condition last changed (cluster ms): the controller waits 10 s between updates
    evicted_ms: int = -1  # when the rule last evicted pods: its next update comes 10 s later


@dataclass
class DeviceTaintState:
    rules: dict[str, RuleState] = field(default_factory=dict)  # rule name -> state
    # slice name -> {"<device>/<taint key>=<value>": cluster ms the slice first published that NoExecute taint}: the
    # taint's timeAdded as dralab knows it (a dump's slices: 0, the dump's time)
    no_execute_since: dict[str, dict[str, int]] = field(default_factory=dict)
    # derived, dropped when the rules change; caches, so not part of equality (nor of a snapshot)
    _converted: tuple[TaintRule, ...] | None = field(default=None, compare=False, repr=False)
    _patched: tuple[SliceIndex, SliceIndex] | None = field(default=None, compare=False, repr=False)
    # slice name -> (the slice as published, with the rules' taints): a slice republished is a new object, one that
    # is not keeps its patched devices (the allocator's caches are per device object); dropped with the rules
    _by_slice: dict[str, tuple[Slice, Slice]] = field(default_factory=dict, compare=False, repr=False)

    def apply(self, offset: int, event: object, anomalies: list[str], t: int = 0) -> bool:
        """Apply a DeviceTaintRule event (at cluster time `t`); False if it is not one."""
        match event:
            case DeviceTaintRuleCreated():
                try:
                    rule = convert_rule(event.manifest, "")
                except ValueError as exc:
                    anomalies.append(f"offset {offset}: DeviceTaintRule refused: {exc}")
                    return True
                old = self.rules.get(rule.name)
                self.rules[rule.name] = RuleState(event.manifest, event.time_added_ms,
                                                  old.condition if old else None, old.evicted if old else 0,
                                                  old.status_ms if old else -1, old.evicted_ms if old else -1)
                self._converted = self._patched = None
                self._by_slice = {}
            case DeviceTaintRuleDeleted():
                if self.rules.pop(event.name, None) is None:
                    anomalies.append(f"offset {offset}: deletion of unknown DeviceTaintRule {event.name}")
                self._converted = self._patched = None
                self._by_slice = {}
            case DeviceTaintRuleStatus():
                state = self.rules.get(event.name)
                if state is None:
                    anomalies.append(f"offset {offset}: status of unknown DeviceTaintRule {event.name}")
                    return True
                if event.condition != state.condition:
                    state.condition, state.status_ms = dict(event.condition), t
                if event.evicted != state.evicted:
                    state.evicted, state.evicted_ms = event.evicted, t
            case _:
                return False
        return True

    def slice_published(self, slc: Slice, t: int) -> None:
        """Note when each NoExecute taint of the slice's devices appeared (kept while the slice keeps publishing it;
        a taint gone and back counts from its return), so that the eviction controller can add tolerationSeconds."""
        seen = self.no_execute_since.get(slc.name)
        if seen is None and not any(tt.effect == "NoExecute" for d in slc.devices for tt in d.taints):
            return  # nearly every slice: nothing to note
        now = {taint_key(d.id.device, tt): (seen or {}).get(taint_key(d.id.device, tt), t)
               for d in slc.devices for tt in d.taints if tt.effect == "NoExecute"}
        if now:
            self.no_execute_since[slc.name] = now
        else:
            self.no_execute_since.pop(slc.name, None)

    def converted(self) -> tuple[TaintRule, ...]:
        """The rules in name order (the order the tracker appends their taints in)."""
        if self._converted is None:
            self._converted = tuple(convert_rule(self.rules[n].manifest, "") for n in sorted(self.rules))
        return self._converted

    def index(self, slices: Mapping[str, Slice], raw: SliceIndex) -> SliceIndex:
        """The scheduler's slice index: `raw` (the index of `slices`) when there is no rule, else the slices with
        the rules' taints, built once per change of the rules or of the slices (a new `raw`)."""
        if not self.rules:
            return raw
        cached = self._patched
        if cached is None or cached[0] is not raw:
            cached = self._patched = (raw, SliceIndex.build(self._patch(slices)))
        return cached[1]

    def _patch(self, slices: Mapping[str, Slice]) -> list[Slice]:
        rules = self.converted()
        seen, out = self._by_slice, []
        fresh: dict[str, tuple[Slice, Slice]] = {}
        for name, slc in slices.items():
            kept = seen.get(name)
            patched = kept[1] if kept is not None and kept[0] is slc else patch_slices((slc,), rules)[0]
            fresh[name] = (slc, patched)
            out.append(patched)
        self._by_slice = fresh
        return out

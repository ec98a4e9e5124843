"""dralab's pending causes: what each means and what a user can do about it, in one place.

The scheduler writes a cause on every PodScheduled=False condition (core/scheduler/framework.py's Status), the
summary counts pending pods by it (`pods.pending_by_reason`), `dralab audit` gives one per pending pod of a dump.
A count alone says little to someone who has not read docs/scheduler.md, so the summary's text and the audit's
table end with one line per cause present, from :data:`CAUSES` (docs/audit.md's table says the same at length).

Issue 21 adds five causes the feature helpers' code emits: `preemption` (a preemptor nominated to a node waits
for its victims to go; before, only a 1.36+ PodGroup's workload-aware preemption), `spread`
(PodTopologySpread), `affinity` (InterPodAffinity), `binding-conditions` (DynamicResources PreBind waiting for
a device's binding conditions, KEP-5007) and `device-taint` (DeviceTaintRules and ResourceSlice device taints,
KEP-5055).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["CAUSES", "Cause", "explain_lines"]


@dataclass(frozen=True)
class Cause:
    meaning: str
    remedy: str


CAUSES: dict[str, Cause] = {
    "capacity": Cause("no node the pod may use has enough free devices matching its claims",
                      "free devices, add nodes with such devices, or ask for fewer"),
    "topology": Cause("the room is there, but not together: no node's free matching devices meet the claim's "
                      "constraints, or no topology domain fits the whole PodGroup",
                      "make room in one domain (an NVLink domain, a rack), or relax the constraint"),
    "fragmentation": Cause("enough free matching devices in all, but not on one node",
                           "consolidate small consumers, split the workload, or pack (most-allocated)"),
    "resources": Cause("cpu, memory, pods or an extended resource is short",
                       "lower the requests, or free or add capacity"),
    "taint": Cause("every node the pod may use has a taint it does not tolerate",
                   "add a toleration, or remove the taint"),
    "selector": Cause("no node matches the pod's nodeSelector or required node affinity",
                      "fix the node labels or the selector"),
    "not-ready": Cause("the nodes are not Ready, cordoned, or their devices not all published",
                       "wait for the nodes or the driver, or uncordon"),
    "missing": Cause("an object the pod needs (claim, template, class, Workload, PodGroup) does not exist",
                     "create it, or fix the reference"),
    "gang": Cause("its gang cannot start: too few pods, or no room for minCount of them at once",
                  "create the missing pods or make room for the whole group"),
    "gated": Cause("the pod has scheduling gates: neither the scheduler nor the autoscaler looks at it",
                   "wait for the controller owning the gate, or remove your own gate"),
    "preemption": Cause("it preempted pods and waits for those victims to terminate (nominated node)",
                        "wait: the victims' terminationGracePeriodSeconds bounds it; if it never ends, look for "
                        "victims that do not terminate (finalizers) or a PodDisruptionBudget"),
    "spread": Cause("placing it would break a topologySpreadConstraint (maxSkew, minDomains) with "
                    "whenUnsatisfiable: DoNotSchedule",
                    "add nodes in the domains with fewest matching pods, raise maxSkew, or use ScheduleAnyway"),
    "affinity": Cause("no node meets its required pod affinity or anti-affinity, or an existing pod's "
                      "anti-affinity rejects it",
                      "run the pods it must be near, free a domain of the pods it must avoid, or relax the rule "
                      "to preferred"),
    "binding-conditions": Cause("its devices are allocated and it waits in PreBind for their binding conditions "
                                "(a device being attached or prepared)",
                                "wait for the driver to set the conditions; if a binding failure condition is set "
                                "or the binding timeout passes, the claim is deallocated and the pod retried"),
    "device-taint": Cause("the devices it could use carry taints (a DeviceTaintRule or the ResourceSlice) its "
                          "claim does not tolerate",
                          "add a toleration to the claim's request, or remove the DeviceTaintRule"),
    "other-scheduler": Cause("spec.schedulerName names a scheduler dralab does not run", "nobody will try it"),
    "not-yet-tried": Cause("the scheduler has not looked at it yet", "wait"),
}
NEW_IN_ISSUE_21 = ("preemption", "spread", "affinity", "binding-conditions", "device-taint")

# Issue 23: a selector that fails at runtime is not a lack of devices (core/dra/explain_errors.py); counters and
# consumable capacity are the stranded GPUs' causes (core/analysis/stranded.py) with their own remedies.
CAUSES["selector-error"] = Cause(
    "a CEL selector of its claims (or their DeviceClass) fails to evaluate on a device, e.g. \"no such key\" for an "
    "attribute the driver does not publish: kube-scheduler aborts each attempt with the error (SchedulerError) "
    "and cluster-autoscaler does not act on the pod",
    "fix the selector (guard optional attributes with has() or ?.), or publish the attribute; more nodes do not help")
CAUSES["counters"] = Cause(
    "matching devices are free, but the shared counters of their pool (a GPU's memory slices, partitions already "
    "made) cannot cover the partitions asked for",
    "free the overlapping partitions on one GPU, or ask for partitions that fit what is left")
CAUSES["consumable-capacity"] = Cause(
    "matching shareable devices are free, but their remaining consumable capacity cannot cover the request",
    "lower the capacity requested, or free shares of those devices")
NEW_IN_ISSUE_23 = ("selector-error", "counters", "consumable-capacity")


def explain_lines(causes: Iterable[str], indent: str = "  ") -> list[str]:
    """One line per distinct known cause of ``causes``, sorted: ``<cause>: <meaning>; <remedy>``."""
    lines = []
    for cause in sorted(set(causes)):
        found = CAUSES.get(cause)
        if found is not None:
            lines.append(f"{indent}{cause}: {found.meaning}; {found.remedy}")
    return lines

"""Run configuration: what the reactors of a run are, as plain data recorded in `RunStarted`.

Verify and what-if replays rebuild the reactors from this record alone, so every setting that can
change a decision must live here (and nowhere else: no environment variables, no globals).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..autoscaler.reactor import Autoscaler
from ..controllers.chaos import Chaos
from ..controllers.claims import ClaimController
from ..controllers.cloud import Cloud
from ..controllers.device_taint_eviction import DeviceTaintEviction
from ..controllers.drivers import Drivers
from ..controllers.jobs import JobController
from ..controllers.kueue_broker import KueueBroker
from ..controllers.lifecycle import Lifecycle
from ..engine.contract import Reactor
from ..kube.fields import FieldError
from ..kube.kueue import broker_config
from ..kube.versions import merge_gates, profile_config, profile_from_config
from ..scenario.autoscaler_flags import flags_entry
from ..scenario.load import Scenario, ScenarioError
from ..scheduler.config import default_config, parse_config
from ..scheduler.reactor import Scheduler


def run_config(scenario: Scenario, *, drivers_shards: int = 1) -> dict[str, Any]:
    """`drivers_shards`: a deployment choice of live runs (how many processes host the device drivers),
    recorded only when above 1, so that a replay rebuilds the same reactors."""
    return {
        **({"drivers_shards": drivers_shards} if drivers_shards > 1 else {}),
        "duration_ms": scenario.duration_ms,
        # the Kubernetes release emulated (core/kube/versions.py); absent: the legacy 1.35 model, so that a
        # run of that model records exactly what it recorded before profiles existed
        **({"kubernetes": entry} if (entry := profile_config(scenario.kubernetes)) is not None else {}),
        # Kueue's ProvisioningRequest admission checks, when the scenario has any (core/kube/kueue.py)
        **({"broker": broker} if (broker := broker_config(scenario.objects)) is not None else {}),
        # the chaos reactor, when the scenario injects faults (core/controllers/chaos.py)
        **({"chaos": {}} if scenario.faults else {}),
        # the device taint eviction controller, when the scenario can taint a device NoExecute (DeviceTaintRules,
        # slice templates: core/controllers/device_taint_eviction.py); other runs record what they did before
        **({"device_taint_eviction": {}} if _taint_rules(scenario) else {}),
        # the Job controller, when Jobs arrive (core/controllers/jobs.py): other runs record what they did before
        **({"jobs": {}} if any(a.job is not None for a in scenario.workload) else {}),
        # with PodDisruptionBudgets, which preemption reads (plugins/default_preemption.py); only when there are
        "scheduler": {**scheduler_entry(scenario), **({"pdbs": pdbs} if (pdbs := _pdbs(scenario)) else {})},
        "autoscaler": {
            "policy": scenario.policy.autoscaler,
            "scan_interval_ms": scenario.autoscaler.scan_interval_ms,
            "max_node_provision_time_ms": scenario.autoscaler.max_node_provision_time_ms,
            "max_node_startup_time_ms": scenario.autoscaler.max_node_startup_time_ms,
            "expander": scenario.autoscaler.expander,
            "scale_down": msgspec.to_builtins(scenario.autoscaler.scale_down),
            "capacity_revoked": scenario.autoscaler.capacity_revoked,
            "reserve_bookings": scenario.autoscaler.reserve_bookings,
            # recorded only when not the default, so logs written before the setting existed read the same
            **({"provisioning_request_claims": scenario.autoscaler.provisioning_request_claims}
               if scenario.autoscaler.provisioning_request_claims != "materialize" else {}),
            # scale-down flags set as spec.autoscaler fields (core/scenario/scale_down_flags.py): only those set
            **({"scale_down_flags": dict(flags)} if (flags := scenario.autoscaler.scale_down_flags) else {}),
            # the same budgets, which scale-down's drains respect (autoscaler/disruption/pdb.py); release profiles only:
            # the legacy model's drains never read budgets, and its logs must read as they were made
            **({"pdbs": pdbs} if (pdbs := _pdbs(scenario)) and profile_config(scenario.kubernetes) is not None
               else {}),
            # autoscaler#10065 (open: every release has it) unless the scenario sets provisioningRequestClaims itself:
            # virtual pods' template claims stay unresolved (autoscaler/simulation/virtual_claims.py); recorded only
            # where ProvisioningRequests can exist (objects, or Kueue's broker), so other runs record what they did
            **({"provisioning_request_claims": "unresolved"}
               if not scenario.autoscaler.provisioning_request_claims_given
               and scenario.kubernetes.bug("autoscaler#10065") and _provreqs(scenario) else {}),
            # the pods each new node of a group runs (nodeGroups[].daemonSetPods), only when a group has some
            **({"daemon_set_pods": ds} if (ds := {g.name: list(g.daemon_set_pods) for g in scenario.node_groups
                                                   if g.daemon_set_pods}) else {}),
            **flags_entry(scenario.autoscaler),  # scale-up flags set to non-defaults (scenario/autoscaler_flags.py)
        },
    }


def scheduler_config(scenario: Scenario) -> dict[str, Any] | None:
    """The effective scheduler configuration (core/scheduler/config.py) a run of the scenario scores with:
    spec.scheduler.config merged with its release's defaults, or those defaults when the scenario sets
    neither `score` nor `config`; None under the legacy profile (a log without a `kubernetes` entry scores as
    before profiles: most-allocated) and with `score` (dralab's single policy, kept as it was). A bad
    configuration is a ScenarioError naming the file and field (the loader cannot check it: the scheduler
    layer, where the plugins' argument checks live, comes after the scenario's)."""
    settings = scenario.scheduler
    if profile_config(scenario.kubernetes) is None or settings.score is not None:
        return None
    if settings.config is None:
        return default_config(scenario.kubernetes.version)
    try:
        return parse_config(settings.config, "spec.scheduler.config", scenario.kubernetes.version)
    except FieldError as e:
        raise ScenarioError(scenario.source, e.path, e.message) from None


def scheduler_entry(scenario: Scenario) -> dict[str, Any]:
    """The scheduler's configuration: under the legacy profile or with `score`, exactly what was recorded
    before scheduler configurations existed; else the effective configuration in place of `score`."""
    config = scheduler_config(scenario)
    return {
        **({"score": scenario.scheduler.score or "most-allocated"} if config is None else {}),
        "gang_timeout_ms": scenario.scheduler.gang_timeout_ms,
        "feature_gates": dict(scenario.scheduler.feature_gates),
        **({"config": config} if config is not None else {}),
    }


def build_reactors(config: dict[str, Any]) -> list[Reactor]:
    """The reactors of a run, in a fixed order (the simulator shuffles it with its own seed). The scheduler
    gets the release and merges its own feature gates into it; the autoscaler gets the same merged release
    (it simulates nodes with the scheduler's allocator features, autoscaler PR #10200)."""
    kubernetes = config.get("kubernetes")
    scheduler = config.get("scheduler", {})
    merged = merge_gates(profile_from_config(kubernetes), scheduler.get("feature_gates") or {},
                         path="config.scheduler")
    return [
        Scheduler(**scheduler, kubernetes=kubernetes),
        Autoscaler(**config.get("autoscaler", {}), kubernetes=profile_config(merged), release=kubernetes is not None),
        Cloud(kubernetes=profile_config(merged)),
        Lifecycle(),
        *drivers_shards(int(config.get("drivers_shards", 1))),
        ClaimController(),
        # Kueue's release and bug switches from the run's release entry (absent: the model earlier logs were made by)
        *([KueueBroker(**config["broker"], kubernetes=kubernetes)] if "broker" in config else []),
        *([Chaos(**config["chaos"])] if "chaos" in config else []),
        # the Job controller reads its gate (WorkloadWithJob) from the same merged release
        *([JobController(**config["jobs"], kubernetes=profile_config(merged))] if "jobs" in config else []),
        *([DeviceTaintEviction(**config["device_taint_eviction"], kubernetes=profile_config(merged))]
          if "device_taint_eviction" in config else []),
    ]


def _pdbs(scenario: Scenario) -> list[dict[str, Any]]:
    return [o for o in scenario.objects if o["kind"] == "PodDisruptionBudget"]


def _taint_rules(scenario: Scenario) -> bool:
    """Whether the scenario can taint a device NoExecute: DeviceTaintRules (spec.objects, `device-taint` faults) or
    a NoExecute taint in a node group's ResourceSlice templates."""
    return any(o.get("kind") == "DeviceTaintRule" for o in scenario.objects) or any(
        c.kind == "DeviceTaintRule" and c.op != "delete" for c in scenario.object_changes) or any(
        f.kind == "device-taint" for f in scenario.faults) or any(
        (t or {}).get("effect") == "NoExecute" for g in scenario.node_groups for s in g.resource_slices
        for d in (s.get("spec") or {}).get("devices") or [] for t in (d.get("taints") or []))


def drivers_shards(shards: int) -> list[Drivers]:
    """One `drivers` reactor, or `shards` of them (`drivers-0`...), each hosting a share of the nodes."""
    if shards <= 1:
        return [Drivers()]
    return [Drivers(name=f"drivers-{i}", shard=i, shards=shards) for i in range(shards)]


def policies(config: dict[str, Any]) -> dict[str, str]:
    """The `policy` object of the summary."""
    return {"autoscaler": str(config.get("autoscaler", {}).get("policy", "count"))}


def _provreqs(scenario: Scenario) -> bool:
    """Whether the run may have ProvisioningRequests whose virtual pods claim from a ResourceClaimTemplate (what
    autoscaler#10065 is about): some in spec.objects with such a PodTemplate, or Kueue's broker making them for
    workload pods with such claims."""
    def templated(spec: object) -> bool:
        claims = spec.get("resourceClaims") if isinstance(spec, dict) else None
        return any(isinstance(c, dict) and c.get("resourceClaimTemplateName") for c in claims or [])
    objects = scenario.objects
    if any(o.get("kind") == "ProvisioningRequest" for o in objects) and any(
            o.get("kind") == "PodTemplate" and templated((o.get("template") or {}).get("spec")) for o in objects):
        return True
    return broker_config(scenario.objects) is not None and any(templated(a.pod.get("spec")) for a in scenario.workload)

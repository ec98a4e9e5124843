"""Scenario files: load, check and type them before anything runs.

A scenario is a YAML document of kind ``Scenario`` (``apiVersion: dralab.io/v1alpha1``): a cluster (node
groups with a v1 Node template each, starting nodes), a workload (v1 Pod manifests arriving over time) and
the policies under test. Every bad input is refused up front with a :class:`ScenarioError` naming the
file, the path of the field (``spec.nodeGroups[1].max``) and what was expected. The format is described
in ``docs/scenario-format.md``.
"""

from __future__ import annotations

import os
from typing import Any, cast

from ..kube.durations import format_duration
from ..kube.errors import ScenarioError as ScenarioError
from ..kube.fields import (
    FieldError,
    check_fields,
    dns1123_label_error,
    dns1123_subdomain_error,
    expect_bool,
    expect_duration,
    expect_enum,
    expect_int,
    expect_list,
    expect_map,
    expect_number,
    expect_str,
    index,
    join,
    sanitize,
    type_name,
)
from ..kube.kueue import broker_config, check_pod_group, check_scheduling_gates, gate_pod, is_queued
from ..kube.limits import MAX_NODE_COUNT, MAX_POD_COUNT, MAX_SEED
from ..kube.manifests import _check_node, _check_pod
from ..kube.priority import admit_pod
from ..kube.versions import Profile, ProfileFlags
from ..kube.workloads import DEFAULT_GANG_TIMEOUT_MS
from ..kube.yaml_files import YamlError, load_yaml_file
from . import gates as gated
from .autoscaler_flags import FLAG_FIELDS, parse_expander, parse_flags
from .cloud import CLOUD_FIELDS, check_cloud, provision_delay
from .dra import check_objects, check_pod_claims, check_slice_templates, render_slices
from .faults import check_faults
from .jobs import check_job_arrival
from .kubernetes import check_kubernetes
from .kueue_release import check_kueue_release
from .model import (
    API_VERSION,
    AUTOSCALER_POLICIES,
    EXPANDERS,
    KIND,
    SCORE_STRATEGIES,
    Arrival,
    AutoscalerPolicy,
    AutoscalerSettings,
    InitialNodes,
    NodeGroup,
    Policy,
    ScaleDownSettings,
    Scenario,
    SchedulerSettings,
    ScoreStrategy,
    replica_name,
)
from .node_changes import starting_nodes
from .object_changes import check_object_changes, is_object_change
from .scale_down_flags import SCALE_DOWN_FLAGS, with_scale_down_flags
from .template_pods import FIELD as DAEMON_SET_PODS
from .template_pods import check_daemon_set_pods

__all__ = [
    "API_VERSION",
    "AUTOSCALER_POLICIES",
    "EXPANDERS",
    "KIND",
    "MAX_FILE_BYTES",
    "SCORE_STRATEGIES",
    "Arrival",
    "AutoscalerSettings",
    "InitialNodes",
    "NodeGroup",
    "Policy",
    "Scenario",
    "ScenarioError",
    "SchedulerSettings",
    "load_scenario",
    "parse_scenario",
    "render_slices",
    "replica_name",
]

MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_ARRIVAL_COUNT = MAX_POD_COUNT


def load_scenario(path: str | os.PathLike[str], *, profile: Profile | None = None,
                  flags: ProfileFlags | None = None) -> Scenario:
    """Read, check and type the scenario file at ``path``; raise :class:`ScenarioError` if it is bad.
    ``profile`` replaces the file's spec.kubernetes, ``flags`` (the command's) override it entry by entry."""
    file = os.fspath(path)
    try:
        data = load_yaml_file(file, max_bytes=MAX_FILE_BYTES)
    except YamlError as e:
        raise ScenarioError(file, "", e.message, line=e.line, column=e.column) from None
    if data is None:
        raise ScenarioError(file, "", f"the file is empty; expected a {KIND} document")
    return parse_scenario(data, file, profile=profile, flags=flags)


def parse_scenario(data: object, file: str = "<scenario>", *, profile: Profile | None = None,
                   flags: ProfileFlags | None = None) -> Scenario:
    """Check and type an already loaded scenario document (``data`` is not modified)."""
    try:
        return _parse(data, file, profile, flags)
    except FieldError as e:
        raise ScenarioError(file, e.path, e.message) from None


# --- checks ---------------------------------------------------------------------------------------------

_TOP = ("apiVersion", "kind", "metadata", "spec")
_METADATA = ("name", "labels", "annotations")
_SPEC = ("seed", "duration", "policy", "scheduler", "autoscaler", "nodeGroups", "nodes", "workload", "objects",
         "faults", "kubernetes")
_GROUP = ("name", "min", "max", "provisionDelay", "costPerHour", "template", "resourceSlices", *CLOUD_FIELDS,
          "autoscalingOptions")  # the last: scale_down_flags.py
_GROUP_FIELDS: tuple[str, ...] = (*_GROUP, DAEMON_SET_PODS)  # core/scenario/template_pods.py
_ARRIVAL = ("at", "count", "runFor", "pod", "job")


def _parse(data: object, file: str, forced: Profile | None, flags: ProfileFlags | None) -> Scenario:
    if not isinstance(data, dict):
        raise FieldError("", f"expected a {KIND} document (a map) at the top level, got {type_name(data)}")
    doc = expect_map(sanitize(data), "")
    check_fields(doc, "", _TOP, required=_TOP)
    if expect_str(doc["apiVersion"], "apiVersion") != API_VERSION:
        raise FieldError("apiVersion", f"expected `{API_VERSION}`, got `{doc['apiVersion']}`")
    if expect_str(doc["kind"], "kind") != KIND:
        raise FieldError("kind", f"expected `{KIND}`, got `{doc['kind']}`")
    meta = expect_map(doc["metadata"], "metadata")
    check_fields(meta, "metadata", _METADATA, required=("name",))
    name = expect_str(meta["name"], "metadata.name")
    error = dns1123_subdomain_error(name)
    if error is not None:
        raise FieldError("metadata.name", error)
    for field in ("labels", "annotations"):
        if meta.get(field) is not None:
            for key, value in expect_map(meta[field], f"metadata.{field}").items():
                expect_str(value, f"metadata.{field}.{key}")

    spec = expect_map(doc["spec"], "spec")
    check_fields(spec, "spec", _SPEC, required=("duration", "nodeGroups"))
    seed = None if spec.get("seed") is None else expect_int(spec["seed"], "spec.seed", minimum=0,
                                                                      maximum=MAX_SEED)
    duration_ms = expect_duration(spec["duration"], "spec.duration", positive=True)
    policy = _policy(spec.get("policy"))
    scheduler = _scheduler(spec.get("scheduler"))
    own, profile, scheduler_gates = check_kubernetes(spec.get("kubernetes"), scheduler.feature_gates,
                                                     profile=forced, flags=flags)
    if scheduler_gates != scheduler.feature_gates:  # a flag overrode a gate of spec.scheduler.featureGates
        scheduler = SchedulerSettings(score=scheduler.score, gang_timeout_ms=scheduler.gang_timeout_ms,
                                      feature_gates=scheduler_gates, config=scheduler.config)
    autoscaler = with_scale_down_flags(spec.get("autoscaler"), _autoscaler(spec.get("autoscaler")), own,
                                       spec["nodeGroups"])
    groups = _node_groups(spec["nodeGroups"])
    for g, group in enumerate(spec["nodeGroups"]):
        gated.check_group(group, index("spec.nodeGroups", g), profile)
    nodes = _initial_nodes(spec.get("nodes"), {g.name: g for g in groups})
    raw_objects: list[Any] = spec["objects"] if isinstance(spec.get("objects"), list) else []
    objects = check_objects(spec.get("objects"), "spec.objects", profile)  # the release's API versions too
    gated.check_objects(raw_objects, "spec.objects", profile)
    gated.check_workload_gangs(raw_objects, "spec.objects", profile)
    kueue = broker_config(objects) is not None
    check_kueue_release(objects, profile)  # core/scenario/kueue_release.py: the Kueue release's own refusals
    classes = [o for o in objects if o.get("kind") == "PriorityClass"]  # priority admission (kube/priority.py)
    workload = _workload(spec.get("workload"), duration_ms, profile, kueue=kueue, classes=classes)
    changes = check_object_changes(spec.get("workload"), duration_ms, profile, objects, starting_nodes(nodes))
    faults = check_faults(spec.get("faults"), duration_ms)
    gated.check_faults(spec.get("faults") or [], "spec.faults", profile)
    return Scenario(
        name=name,
        seed=seed,
        duration_ms=duration_ms,
        policy=policy,
        scheduler=scheduler,
        autoscaler=autoscaler,
        node_groups=groups,
        nodes=nodes,
        workload=workload,
        source=file,
        objects=objects,
        faults=faults,
        kubernetes=own,
        object_changes=changes,
    )


def _optional_map(value: object, path: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if value is None:
        return {}
    mapping = expect_map(value, path)
    check_fields(mapping, path, allowed)
    return mapping


def _policy(value: object) -> Policy:
    m = _optional_map(value, "spec.policy", ("autoscaler",))
    if m.get("autoscaler") is None:
        return Policy()
    policy = expect_enum(m["autoscaler"], "spec.policy.autoscaler", AUTOSCALER_POLICIES)
    return Policy(autoscaler=cast(AutoscalerPolicy, policy))


def _scheduler(value: object) -> SchedulerSettings:
    m = _optional_map(value, "spec.scheduler", ("score", "gangTimeout", "featureGates", "config"))
    score = None if m.get("score") is None else expect_enum(m["score"], "spec.scheduler.score", SCORE_STRATEGIES)
    config = None if m.get("config") is None else expect_map(m["config"], "spec.scheduler.config")
    if config is not None and score is not None:
        raise FieldError("spec.scheduler.score", "set either score (dralab's single score policy) or config (a "
                         "KubeSchedulerConfiguration: NodeResourcesFit's scoringStrategy there), not both")
    timeout = (DEFAULT_GANG_TIMEOUT_MS if m.get("gangTimeout") is None
               else expect_duration(m["gangTimeout"], "spec.scheduler.gangTimeout", positive=True))
    gates: dict[str, bool] = {}
    if m.get("featureGates") is not None:
        g_path = "spec.scheduler.featureGates"
        given = expect_map(m["featureGates"], g_path)  # names checked against the release: kubernetes.py
        gates = {k: expect_bool(v, join(g_path, k)) for k, v in given.items()}
    return SchedulerSettings(score=cast(ScoreStrategy | None, score), gang_timeout_ms=timeout, feature_gates=gates,
                             config=config)


def _duration_or(m: dict[str, Any], key: str, path: str, default: int, *, positive: bool = True) -> int:
    return default if m.get(key) is None else expect_duration(m[key], join(path, key), positive=positive)


def _autoscaler(value: object) -> AutoscalerSettings:
    path = "spec.autoscaler"
    m = _optional_map(value, path, ("scanInterval", "maxNodeProvisionTime", "maxNodeStartupTime", "expander",
                                    "scaleDown", "capacityRevoked", "reserveBookings", "provisioningRequestClaims",
                                    *SCALE_DOWN_FLAGS, *FLAG_FIELDS))
    default = AutoscalerSettings()
    return AutoscalerSettings(
        scan_interval_ms=_duration_or(m, "scanInterval", path, default.scan_interval_ms),
        max_node_provision_time_ms=_duration_or(m, "maxNodeProvisionTime", path, default.max_node_provision_time_ms),
        max_node_startup_time_ms=_duration_or(m, "maxNodeStartupTime", path, default.max_node_startup_time_ms),
        expander=parse_expander(m.get("expander"), join(path, "expander"), default.expander),
        scale_down=_scale_down(m.get("scaleDown")),
        capacity_revoked=False if m.get("capacityRevoked") is None
        else expect_bool(m["capacityRevoked"], join(path, "capacityRevoked")),
        reserve_bookings=False if m.get("reserveBookings") is None
        else expect_bool(m["reserveBookings"], join(path, "reserveBookings")),
        provisioning_request_claims=default.provisioning_request_claims
        if m.get("provisioningRequestClaims") is None
        else expect_enum(m["provisioningRequestClaims"], join(path, "provisioningRequestClaims"),
                         ("materialize", "unresolved")),
        provisioning_request_claims_given=m.get("provisioningRequestClaims") is not None,
        **parse_flags(m, path),  # cluster-autoscaler's scale-up flags (core/scenario/autoscaler_flags.py)
    )


def _scale_down(value: object) -> ScaleDownSettings:
    path = "spec.autoscaler.scaleDown"
    m = _optional_map(value, path, ("enabled", "utilizationThreshold", "unneededTime", "delayAfterAdd",
                                    "deleteDelayAfterTaint", "recheckBeforeDelete"))
    default = ScaleDownSettings()
    threshold = default.utilization_threshold
    if m.get("utilizationThreshold") is not None:
        threshold = expect_number(m["utilizationThreshold"], join(path, "utilizationThreshold"), minimum=0)
        if threshold > 1:
            raise FieldError(join(path, "utilizationThreshold"), f"must be <= 1, got {threshold}")
    return ScaleDownSettings(
        enabled=default.enabled if m.get("enabled") is None else expect_bool(m["enabled"], join(path, "enabled")),
        utilization_threshold=threshold,
        unneeded_time_ms=_duration_or(m, "unneededTime", path, default.unneeded_time_ms, positive=False),
        delay_after_add_ms=_duration_or(m, "delayAfterAdd", path, default.delay_after_add_ms, positive=False),
        delete_delay_after_taint_ms=_duration_or(m, "deleteDelayAfterTaint", path,
                                                 default.delete_delay_after_taint_ms, positive=False),
        recheck_before_delete=default.recheck_before_delete if m.get("recheckBeforeDelete") is None
        else expect_bool(m["recheckBeforeDelete"], join(path, "recheckBeforeDelete")),
    )


def _node_groups(value: object) -> list[NodeGroup]:
    path = "spec.nodeGroups"
    items = expect_list(value, path)
    if not items:
        raise FieldError(path, "expected at least one node group")
    groups: list[NodeGroup] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(items):
        g_path = index(path, i)
        m = expect_map(item, g_path)
        check_fields(m, g_path, _GROUP_FIELDS, required=("name", "max", "template"))
        name = expect_str(m["name"], join(g_path, "name"))
        error = dns1123_label_error(name)
        if error is not None:
            raise FieldError(join(g_path, "name"), error)
        if name in seen:
            raise FieldError(join(g_path, "name"), f"duplicate node group name `{name}` (also {seen[name]})")
        seen[name] = g_path
        low = 0 if m.get("min") is None else expect_int(m["min"], join(g_path, "min"), minimum=0,
                                                        maximum=MAX_NODE_COUNT)
        high = expect_int(m["max"], join(g_path, "max"), minimum=0, maximum=MAX_NODE_COUNT)
        if high < low:
            raise FieldError(join(g_path, "max"), f"must be >= min ({low}), got {high}")
        cost = (
            0.0
            if m.get("costPerHour") is None
            else expect_number(m["costPerHour"], join(g_path, "costPerHour"), minimum=0)
        )
        template = _check_node(m["template"], join(g_path, "template"))
        slices = check_slice_templates(m.get("resourceSlices"), join(g_path, "resourceSlices"), name)
        cloud = check_cloud(m, g_path, slices, provision_delay)
        groups.append(
            NodeGroup(
                name=name,
                min=low,
                max=high,
                provision_delay_ms=provision_delay(m.get("provisionDelay"), join(g_path, "provisionDelay")),
                cost_per_hour=cost,
                template=template,
                resource_slices=slices,
                zones=cloud.zones,
                quota=cloud.quota,
                stock=cloud.stock,
                failure_rate=cloud.failure_rate,
                not_ready_ms=cloud.not_ready_ms,
                drivers=cloud.drivers,
                binding=cloud.binding,
                daemon_set_pods=check_daemon_set_pods(m.get(DAEMON_SET_PODS), join(g_path, DAEMON_SET_PODS)),
                cloud_ops=cloud.ops,
            )
        )
    return groups


def _initial_nodes(value: object, groups: dict[str, NodeGroup]) -> list[InitialNodes]:
    path = "spec.nodes"
    if value is None:
        return []
    out: list[InitialNodes] = []
    totals: dict[str, int] = {}
    for i, item in enumerate(expect_list(value, path)):
        n_path = index(path, i)
        m = expect_map(item, n_path)
        check_fields(m, n_path, ("group", "count"), required=("group",))
        group = expect_str(m["group"], join(n_path, "group"))
        if group not in groups:
            defined = ", ".join(f"`{g}`" for g in groups)
            raise FieldError(join(n_path, "group"), f"unknown node group `{group}`; defined groups: {defined}")
        count = 1 if m.get("count") is None else expect_int(m["count"], join(n_path, "count"), minimum=1)
        limit = groups[group].max
        totals[group] = totals.get(group, 0) + count
        if sum(totals.values()) > MAX_NODE_COUNT:
            raise FieldError(join(n_path, "count"), f"at most {MAX_NODE_COUNT} starting nodes in all, got "
                                                    f"{sum(totals.values())} with earlier entries")
        if totals[group] > limit:
            what = f"{count}" if totals[group] == count else f"{count} (with earlier entries, {totals[group]})"
            raise FieldError(join(n_path, "count"), f"must be <= the max of node group `{group}` ({limit}), got {what}")
        out.append(InitialNodes(group=group, count=count))
    return out


def _workload(value: object, duration_ms: int, profile: Profile, *, kueue: bool = False,
              classes: list[dict[str, Any]] | None = None) -> list[Arrival]:
    """The arrivals, in time order. With Kueue in the scenario (an AdmissionCheck), a pod labelled with a
    queue gets Kueue's admission gate, as Kueue's pod webhook does (core/kube/kueue.py)."""
    path = "spec.workload"
    if value is None:
        return []
    arrivals: list[Arrival] = []
    checked: dict[int, dict[str, Any]] = {}
    names = _Names()
    jobs: dict[tuple[str, str], str] = {}
    pods = 0
    for i, item in enumerate(expect_list(value, path)):
        if is_object_change(item):
            continue  # an object created, changed or deleted: object_changes.py
        a_path = index(path, i)
        m = expect_map(item, a_path)
        check_fields(m, a_path, _ARRIVAL[:-1] if "pod" in m and "job" not in m else _ARRIVAL, required=("at",))
        if m.get("pod") is None and m.get("job") is None:
            raise FieldError(join(a_path, "pod"), "missing required field")
        if m.get("pod") is not None and m.get("job") is not None:
            raise FieldError(join(a_path, "job"), "set `pod` or `job`, not both")
        if m.get("job") is not None and m.get("count") is not None:
            raise FieldError(join(a_path, "count"), "a `job` arrival is one Job: its pods are spec.parallelism")
        at_ms = expect_duration(m["at"], join(a_path, "at"))
        if at_ms > duration_ms:
            raise FieldError(
                join(a_path, "at"),
                f"must be <= spec.duration ({format_duration(duration_ms)}), got {format_duration(at_ms)}",
            )
        count = (
            1
            if m.get("count") is None
            else expect_int(m["count"], join(a_path, "count"), minimum=1, maximum=MAX_ARRIVAL_COUNT)
        )
        job: dict[str, Any] | None = None
        if m.get("job") is not None:
            job, template_pod = check_job_arrival(m["job"], join(a_path, "job"), profile, jobs)
            admit_pod(job["spec"]["template"]["spec"], join(a_path, "job.spec.template.spec"), classes or ())
            admit_pod(template_pod["spec"], join(a_path, "job.spec.template.spec"), classes or ())
            count = job["spec"]["parallelism"]
        pods += count
        if pods > MAX_POD_COUNT:
            raise FieldError(join(a_path, "count"), f"at most {MAX_POD_COUNT} pods in all arrivals, got {pods} "
                                                    "with earlier arrivals")
        run_for = (
            None if m.get("runFor") is None else expect_duration(m["runFor"], join(a_path, "runFor"), positive=True)
        )
        if job is not None:
            arrivals.append(Arrival(at_ms=at_ms, count=count, pod=template_pod, run_for_ms=run_for, job=job))
            continue
        raw = m["pod"]
        pod = checked.get(id(raw))
        if pod is None:  # a pod reached through several YAML aliases is checked once
            pod = _check_pod(raw, join(a_path, "pod"), profile=profile)
            check_pod_claims(pod, join(a_path, "pod"))
            admit_pod(pod["spec"], join(a_path, "pod.spec"), classes or ())
            gated.check_pod(pod, join(a_path, "pod"), profile)
            check_scheduling_gates(pod, join(a_path, "pod"))
            if kueue and is_queued(pod):
                check_pod_group(pod, join(a_path, "pod"))
                pod = gate_pod(pod)
            checked[id(raw)] = pod
        names.claim(pod, count, a_path)
        arrivals.append(Arrival(at_ms=at_ms, count=count, pod=pod, run_for_ms=run_for))
    arrivals.sort(key=lambda a: a.at_ms)  # stable: arrivals at the same time keep their file order
    return arrivals


def _numbered(name: str) -> tuple[str, int] | None:
    """``("train", 3)`` for ``train-3``: a name that an arrival of several pods named ``train`` makes."""
    base, dash, number = name.rpartition("-")
    if dash and number.isascii() and number.isdigit() and str(int(number)) == number:
        return base, int(number)
    return None


class _Names:
    """The pod names of the arrivals seen so far, to refuse two pods with one name."""

    def __init__(self) -> None:
        self.singles: dict[tuple[str, str], str] = {}  # (namespace, name) -> path, arrivals of one pod
        self.numbered: dict[tuple[str, str], tuple[int, str]] = {}  # (namespace, base) -> lowest n of base-n
        self.bases: dict[tuple[str, str], tuple[int, str]] = {}  # (namespace, base) -> (count, path)

    def claim(self, pod: dict[str, Any], count: int, path: str) -> None:
        """Record the names of arrival ``path``; refuse them if an earlier arrival has one of them."""
        namespace: str = pod["metadata"]["namespace"]
        name: str = pod["metadata"]["name"]
        clash: str | None = None
        if count == 1:
            numbered = _numbered(name)
            if (namespace, name) in self.singles:
                clash = self.singles[(namespace, name)]
            elif numbered is not None:
                several = self.bases.get((namespace, numbered[0]))
                if several is not None and numbered[1] < several[0]:
                    clash = several[1]
            self.singles.setdefault((namespace, name), path)
            if numbered is not None:
                low = self.numbered.get((namespace, numbered[0]))
                if low is None or numbered[1] < low[0]:
                    self.numbered[(namespace, numbered[0])] = (numbered[1], path)
        else:
            last = replica_name(name, count, count - 1)
            if len(last) > 253:
                raise FieldError(
                    join(path, "pod.metadata.name"), f"too long for {count} pods: `{last}` would exceed 253 characters"
                )
            if (namespace, name) in self.bases:
                clash = self.bases[(namespace, name)][1]
            else:
                low = self.numbered.get((namespace, name))
                if low is not None and low[0] < count:
                    clash = low[1]
            self.bases.setdefault((namespace, name), (count, path))
        if clash is not None:
            raise FieldError(
                join(path, "pod.metadata.name"),
                f"pod `{namespace}/{name}` gives a pod the same name as {clash} (every pod needs its own name; "
                "an arrival of N > 1 pods names them `<name>-0` .. `<name>-<N-1>`)",
            )

"""The scheduler configuration (upstream's KubeSchedulerConfiguration, v1) of a release, and a scenario's
override of it (`spec.scheduler.config`), checked as upstream checks it and reduced to what dralab scores with.

Why: kube-scheduler scores a node with several plugins, each weighted (pkg/scheduler/apis/config/v1/
default_plugins.go, getDefaultPlugins: TaintToleration 3, NodeAffinity 2, NodeResourcesFit 1,
PodTopologySpread 2, InterPodAffinity 2, NodeResourcesBalancedAllocation 1, ImageLocality 1; the same list in
1.34 to 1.37, DynamicResources added by applyFeatureGates without a weight: it has no Score there), with
arguments defaulted in pkg/scheduler/apis/config/v1/defaults.go (NodeResourcesFit: LeastAllocated over cpu 1,
memory 1; NodeResourcesBalancedAllocation: cpu 1, memory 1; percentageOfNodesToScore unset: adaptive). What a
run scores with is this module's `effective` form, plain data recorded in the run configuration
(core/run/config.py `scheduler.config`), so that a replay scores the same; a log without it scores as dralab
did before (the `score` policy alone).

The override is merged as upstream merges a profile's plugins with the defaults (mergePluginSet: the default
order kept, a re-configured plugin updated in place, `disabled` names or `*` taken out, others appended),
multiPoint first, then the Score point; a plugin's weight is the Score point's if it is enabled there, else
multiPoint's, and a weight of 0 means 1 (pkg/scheduler/framework/runtime/framework.go). What dralab does not
model is refused with the field named: other extension points, disabling a plugin that filters, another
scheduler name, more than one profile, extenders, other backoffs, args that change what dralab cannot.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ..kube.fields import FieldError, check_fields, expect_int, expect_list, expect_map, expect_str, index, join
from .plugins import dra_binding, inter_pod_affinity, pod_topology_spread

API_VERSION = "kubescheduler.config.k8s.io/v1"
NOT_MODELLED = "not modelled by dralab"
MAX_NODE_SCORE = 100  # framework.MaxNodeScore
MAX_CUSTOM_PRIORITY_SCORE = 10  # RequestedToCapacityRatio's shape scores (config.MaxCustomPriorityScore)
MAX_WEIGHT = 100  # a resource's weight in a scoring strategy (config.MaxWeight... validation: [1, 100])

# The default profile's plugins at multiPoint, in upstream's order, with their Score weights (None: the
# plugin has no Score). The same in 1.34-1.37 (default_plugins.go; DynamicResources inserted before
# DefaultPreemption by applyFeatureGates, DRA being GA since 1.34).
_DEFAULT_MULTI_POINT: tuple[tuple[str, int | None], ...] = (
    ("SchedulingGates", None), ("PrioritySort", None), ("NodeUnschedulable", None), ("NodeName", None),
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", None), ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None), ("NodeVolumeLimits", None), ("VolumeBinding", None), ("VolumeZone", None),
    ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("DynamicResources", None), ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("DefaultBinder", None),
)
SCORE_PLUGINS = frozenset(name for name, weight in _DEFAULT_MULTI_POINT if weight is not None)
KNOWN_PLUGINS = frozenset(name for name, _ in _DEFAULT_MULTI_POINT)
_SCORE_ONLY = frozenset({"NodeResourcesBalancedAllocation", "ImageLocality"})  # no other extension point
VERSIONS = ("1.34", "1.35", "1.36", "1.37")

_CPU_MEMORY = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
# v1 defaults of the args dralab reads (defaults.go: SetDefaults_NodeResourcesFitArgs, ...BalancedAllocationArgs)
_DEFAULT_ARGS: dict[str, dict[str, Any]] = {
    "NodeResourcesFit": {"scoringStrategy": {"type": "LeastAllocated", "resources": _CPU_MEMORY}},
    "NodeResourcesBalancedAllocation": {"resources": _CPU_MEMORY},
    "NodeAffinity": {},
}

ArgCheck = Callable[[dict[str, Any], str], object]


def default_config(version: str) -> dict[str, Any]:
    """The release's default profile as dralab scores with it (the `effective` form)."""
    if version not in VERSIONS:
        raise ValueError(f"no scheduler configuration for release {version!r}; expected one of {list(VERSIONS)}")
    return {
        "score": {name: weight for name, weight in _DEFAULT_MULTI_POINT if weight is not None},
        "args": copy.deepcopy(_DEFAULT_ARGS),
        "percentageOfNodesToScore": 0,
    }


def with_strategy(config: dict[str, Any], strategy: str) -> dict[str, Any]:
    """`spec.scheduler.score: most-allocated|least-allocated` on top of a configuration: NodeResourcesFit's
    scoring strategy type, its resources kept."""
    out = copy.deepcopy(config)
    fit = out["args"].setdefault("NodeResourcesFit", {})
    fit.setdefault("scoringStrategy", {"resources": _CPU_MEMORY})["type"] = strategy
    return out


# --- plugin args, as pkg/scheduler/apis/config/validation/validation_pluginargs.go ---------------------------

def _named(value: object, path: str, fields: tuple[str, ...], what: str) -> list[tuple[str, dict[str, Any], str]]:
    """The items of a list of maps, each with a `name` given once: (item's path, item, name)."""
    out: list[tuple[str, dict[str, Any], str]] = []
    seen: set[str] = set()
    for i, item in enumerate(expect_list(value or [], path)):
        p = index(path, i)
        m = expect_map(item, p)
        check_fields(m, p, fields, ("name",))
        name = expect_str(m["name"], join(p, "name"), nonempty=True)
        if name in seen:
            raise FieldError(join(p, "name"), f"{what} {name!r} given twice")
        seen.add(name)
        out.append((p, m, name))
    return out


def _resources(value: object, path: str, *, weight_one: bool = False) -> list[dict[str, Any]]:
    """ResourceSpec list: names once each, weights in [1, 100] (validateResources), or exactly 1 for
    NodeResourcesBalancedAllocation (ValidateNodeResourcesBalancedAllocationArgs)."""
    out: list[dict[str, Any]] = []
    expect_list(value, path)
    for p, m, name in _named(value, path, ("name", "weight"), "resource"):
        weight = expect_int(m.get("weight", 1 if weight_one else 0), join(p, "weight"))
        if weight_one and weight != 1:
            raise FieldError(join(p, "weight"), f"resource weight of {name} should be 1, got {weight}")
        if not weight_one and not 1 <= weight <= MAX_WEIGHT:
            raise FieldError(join(p, "weight"), f"resource weight of {name} not in valid range [1, {MAX_WEIGHT}]")
        out.append({"name": name, "weight": weight})
    return out


def _shape(value: object, path: str) -> list[dict[str, int]]:
    """RequestedToCapacityRatio's shape: at least one point, utilization in [0, 100] strictly increasing,
    score in [0, 10] (validateFunctionShape)."""
    points = expect_list(value, path)
    if not points:
        raise FieldError(path, "at least one point must be specified")
    out: list[dict[str, int]] = []
    for i, item in enumerate(points):
        p = index(path, i)
        m = expect_map(item, p)
        check_fields(m, p, ("utilization", "score"), ("utilization", "score"))
        u = expect_int(m["utilization"], join(p, "utilization"), minimum=0, maximum=100)
        s = expect_int(m["score"], join(p, "score"), minimum=0, maximum=MAX_CUSTOM_PRIORITY_SCORE)
        if out and u <= out[-1]["utilization"]:
            raise FieldError(join(p, "utilization"), "utilization values must be sorted in increasing order")
        out.append({"utilization": u, "score": s})
    return out


def check_fit_args(args: dict[str, Any], path: str) -> dict[str, Any]:
    """NodeResourcesFitArgs: the scoring strategy; ignoredResources(Groups) change the Filter: refused."""
    check_fields(args, path, ("apiVersion", "kind", "scoringStrategy", "ignoredResources", "ignoredResourceGroups"))
    for key in ("ignoredResources", "ignoredResourceGroups"):
        if args.get(key):
            raise FieldError(join(path, key), f"ignored resources change NodeResourcesFit's Filter: {NOT_MODELLED}")
    s_path = join(path, "scoringStrategy")
    given = expect_map(args.get("scoringStrategy") or {}, s_path)
    check_fields(given, s_path, ("type", "resources", "requestedToCapacityRatio"))
    kind = given.get("type", "LeastAllocated")
    if kind not in STRATEGIES:
        raise FieldError(join(s_path, "type"), f"invalid scoring strategy {kind!r}; expected one of {list(STRATEGIES)}")
    resources = _CPU_MEMORY if given.get("resources") is None else _resources(given["resources"],
                                                                              join(s_path, "resources"))
    strategy: dict[str, Any] = {"type": kind, "resources": copy.deepcopy(resources)}
    r_path = join(s_path, "requestedToCapacityRatio")
    if kind == "RequestedToCapacityRatio":
        ratio = expect_map(given.get("requestedToCapacityRatio"), r_path)
        check_fields(ratio, r_path, ("shape",), ("shape",))
        strategy["requestedToCapacityRatio"] = {"shape": _shape(ratio["shape"], join(r_path, "shape"))}
    elif given.get("requestedToCapacityRatio") is not None:
        raise FieldError(r_path, f"only with type RequestedToCapacityRatio, not {kind}")
    return {"scoringStrategy": strategy}


def check_balanced_args(args: dict[str, Any], path: str) -> dict[str, Any]:
    """NodeResourcesBalancedAllocationArgs: resources, each of weight 1."""
    check_fields(args, path, ("apiVersion", "kind", "resources"))
    given = args.get("resources")
    resources = _CPU_MEMORY if given is None else _resources(given, join(path, "resources"), weight_one=True)
    return {"resources": copy.deepcopy(resources)}


def check_node_affinity_args(args: dict[str, Any], path: str) -> dict[str, Any]:
    """NodeAffinityArgs: addedAffinity's preferred terms score; its required terms would filter: refused."""
    check_fields(args, path, ("apiVersion", "kind", "addedAffinity"))
    a_path = join(path, "addedAffinity")
    added = expect_map(args.get("addedAffinity") or {}, a_path)
    check_fields(added, a_path, ("requiredDuringSchedulingIgnoredDuringExecution",
                                 "preferredDuringSchedulingIgnoredDuringExecution"))
    if added.get("requiredDuringSchedulingIgnoredDuringExecution"):
        raise FieldError(join(a_path, "requiredDuringSchedulingIgnoredDuringExecution"),
                         f"addedAffinity's required terms change NodeAffinity's Filter: {NOT_MODELLED}")
    p_path = join(a_path, "preferredDuringSchedulingIgnoredDuringExecution")
    preferred = expect_list(added.get("preferredDuringSchedulingIgnoredDuringExecution") or [], p_path)
    for i, term in enumerate(preferred):
        t = expect_map(term, index(p_path, i))
        check_fields(t, index(p_path, i), ("weight", "preference"), ("weight", "preference"))
        expect_int(t["weight"], join(index(p_path, i), "weight"), minimum=1, maximum=100)
        expect_map(t["preference"], join(index(p_path, i), "preference"))
    return {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": copy.deepcopy(preferred)}} \
        if preferred else {}


def _check_dynamic_resources_args(args: dict[str, Any], path: str) -> None:
    """DynamicResourcesArgs (plugins/dra_binding.py checks them); kept as written, so that a recorded
    configuration checks again (the scheduler reads `bindingTimeout` from it: Scheduler.__post_init__)."""
    dra_binding.check_args(args, path)


# Each plugin's args check: (args, path) -> the args as the effective configuration keeps them (None: as given).
ARG_CHECKS: dict[str, ArgCheck] = {
    "NodeResourcesFit": check_fit_args,
    "NodeResourcesBalancedAllocation": check_balanced_args,
    "NodeAffinity": check_node_affinity_args,
    "PodTopologySpread": pod_topology_spread.check_args,
    "InterPodAffinity": inter_pod_affinity.check_args,
    "DynamicResources": _check_dynamic_resources_args,
}


# --- the document -------------------------------------------------------------------------------------------

# Fields of the document that do not change a scheduling decision (how the process runs): accepted.
_OPERATIONAL = ("parallelism", "leaderElection", "clientConnection", "healthzBindAddress", "metricsBindAddress",
                "enableProfiling", "enableContentionProfiling", "delayCacheUntilActive")
# Fields dralab models only at upstream's default value (queue.py's backoff is upstream's 1s..10s).
_ONLY_DEFAULT = {"podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 10}
_POINTS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve",
           "permit", "preBind", "bind", "postBind", "multiPoint")


def _plugin_set(value: object, path: str) -> tuple[list[tuple[str, int]], list[str]]:
    """A PluginSet: (enabled as (name, weight)), disabled names). Unknown plugins are refused (upstream:
    the registry has no such plugin); a plugin enabled twice is refused (the framework's 'already registered')."""
    m = expect_map(value or {}, path)
    check_fields(m, path, ("enabled", "disabled"))
    enabled: list[tuple[str, int]] = []
    for p, e, name in _named(m.get("enabled"), join(path, "enabled"), ("name", "weight"), "plugin"):
        if name not in KNOWN_PLUGINS:
            raise FieldError(join(p, "name"), f"plugin {name!r} does not exist in dralab's registry ({NOT_MODELLED})")
        weight = expect_int(e.get("weight", 0), join(p, "weight"), minimum=0)
        enabled.append((name, weight))
    disabled: list[str] = []
    for i, item in enumerate(expect_list(m.get("disabled") or [], join(path, "disabled"))):
        p = index(join(path, "disabled"), i)
        d = expect_map(item, p)
        check_fields(d, p, ("name",), ("name",))
        name = expect_str(d["name"], join(p, "name"), nonempty=True)
        if name != "*" and name not in KNOWN_PLUGINS:
            raise FieldError(join(p, "name"), f"plugin {name!r} does not exist in dralab's registry ({NOT_MODELLED})")
        disabled.append(name)
    return enabled, disabled


def _merge(default: list[tuple[str, int]], enabled: list[tuple[str, int]], disabled: list[str]
           ) -> list[tuple[str, int]]:
    """mergePluginSet: the defaults in their order unless disabled (or `*`), a re-configured one replaced
    in place, the other custom ones appended."""
    custom = dict(enabled)
    out = [] if "*" in disabled else [(n, custom.get(n, w)) for n, w in default if n not in disabled]
    kept = {n for n, _ in out}
    return out + [(n, w) for n, w in enabled if n not in kept]


def _scoring(plugins: object, path: str) -> dict[str, int]:
    """The Score plugins and their weights after merging the profile's `plugins` with the defaults."""
    m = expect_map(plugins or {}, path)
    check_fields(m, path, _POINTS)
    for point in _POINTS:
        if point in ("multiPoint", "score") or m.get(point) is None:
            continue
        enabled, disabled = _plugin_set(m[point], join(path, point))
        if enabled or disabled:
            raise FieldError(join(path, point), f"plugins at {point} other than the defaults: {NOT_MODELLED} "
                             "(set weights under plugins.score or plugins.multiPoint)")
    mp_path = join(path, "multiPoint")
    mp_enabled, mp_disabled = _plugin_set(m.get("multiPoint"), mp_path)
    for name in mp_disabled:
        if name not in _SCORE_ONLY:
            raise FieldError(join(mp_path, "disabled"), f"disabling {name!r} at multiPoint takes it out of every "
                             f"point, its Filter too: {NOT_MODELLED} (disable it under plugins.score)")
    multi = _merge([(n, w or 0) for n, w in _DEFAULT_MULTI_POINT], mp_enabled, mp_disabled)
    multi_points = [(n, w) for n, w in multi if n in SCORE_PLUGINS]
    if any(n not in SCORE_PLUGINS and w for n, w in mp_enabled):
        name = next(n for n, w in mp_enabled if n not in SCORE_PLUGINS and w)
        raise FieldError(mp_path, f"plugin {name!r} has no Score extension: a weight is meaningless")
    s_path = join(path, "score")
    s_enabled, s_disabled = _plugin_set(m.get("score"), s_path)
    for name, _ in s_enabled:
        if name not in SCORE_PLUGINS:
            raise FieldError(s_path, f"plugin {name!r} has no Score extension")
    # The framework's expansion of multiPoint: a point's own set first, then multiPoint's plugins that the
    # point does not disable (pkg/scheduler/framework/runtime/framework.go, expandMultiPointPlugins).
    out: dict[str, int] = {}
    for name, weight in s_enabled:
        out[name] = weight or 1
    if "*" not in s_disabled:
        for name, weight in multi_points:
            if name not in s_disabled and name not in out:
                out[name] = weight or 1
    return out


def _plugin_config(value: object, path: str) -> dict[str, dict[str, Any]]:
    """pluginConfig: each plugin's args at most once, checked by ARG_CHECKS; args of a plugin dralab has no
    check for are refused (its arguments are not modelled)."""
    args = copy.deepcopy(_DEFAULT_ARGS)
    for p, m, name in _named(value, path, ("name", "args"), "pluginConfig for"):
        given = expect_map(m.get("args") or {}, join(p, "args"))
        check = ARG_CHECKS.get(name)
        if check is None:
            raise FieldError(join(p, "args"), f"args of {name}: {NOT_MODELLED}")
        kept = check(given, join(p, "args"))
        args[name] = kept if isinstance(kept, dict) else dict(given)
    return args


def _percentage(value: object, path: str) -> int:
    return 0 if value is None else expect_int(value, path, minimum=0, maximum=100)


def parse_config(value: object, path: str, version: str) -> dict[str, Any]:
    """A KubeSchedulerConfiguration document (one profile, for the default scheduler) merged with the
    release's defaults: the `effective` form. FieldError names the field of anything wrong or not modelled."""
    default_config(version)  # the release is known
    doc = expect_map(value, path)
    check_fields(doc, path, ("apiVersion", "kind", "profiles", "percentageOfNodesToScore", "extenders",
                             *_OPERATIONAL, *_ONLY_DEFAULT))
    if doc.get("apiVersion", API_VERSION) != API_VERSION:
        raise FieldError(join(path, "apiVersion"), f"expected {API_VERSION}, got {doc.get('apiVersion')!r}")
    if doc.get("kind", "KubeSchedulerConfiguration") != "KubeSchedulerConfiguration":
        raise FieldError(join(path, "kind"), f"expected KubeSchedulerConfiguration, got {doc.get('kind')!r}")
    if doc.get("extenders"):
        raise FieldError(join(path, "extenders"), f"scheduler extenders: {NOT_MODELLED}")
    for key, default in _ONLY_DEFAULT.items():
        if doc.get(key) is not None and expect_int(doc[key], join(path, key), minimum=1) != default:
            raise FieldError(join(path, key), f"a value other than upstream's default {default}: {NOT_MODELLED}")
    percentage = _percentage(doc.get("percentageOfNodesToScore"), join(path, "percentageOfNodesToScore"))
    profiles = expect_list(doc.get("profiles") or [{}], join(path, "profiles"))
    if len(profiles) != 1:
        raise FieldError(join(path, "profiles"), f"{len(profiles)} profiles: more than one profile is {NOT_MODELLED}")
    p_path = index(join(path, "profiles"), 0)
    profile = expect_map(profiles[0], p_path)
    check_fields(profile, p_path, ("schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"))
    name = profile.get("schedulerName", "default-scheduler")
    if name != "default-scheduler":
        raise FieldError(join(p_path, "schedulerName"), f"a profile for {name!r}: profiles other than "
                         f"default-scheduler's are {NOT_MODELLED}")
    if profile.get("percentageOfNodesToScore") is not None:  # the profile's wins (numFeasibleNodesToFind)
        percentage = _percentage(profile["percentageOfNodesToScore"], join(p_path, "percentageOfNodesToScore"))
    scored = _scoring(profile.get("plugins"), join(p_path, "plugins"))
    args = _plugin_config(profile.get("pluginConfig"), join(p_path, "pluginConfig"))
    return {"score": scored, "args": args, "percentageOfNodesToScore": percentage}


def check_effective(config: object) -> dict[str, Any]:
    """A recorded (effective) configuration read back (a log's `scheduler.config`, a replay's --with): the
    same checks as the document's, FieldError naming the field under `config`."""
    m = expect_map(config, "config")
    check_fields(m, "config", ("score", "args", "percentageOfNodesToScore"), ("score", "args"))
    for name, weight in expect_map(m["score"], "config.score").items():
        if name not in SCORE_PLUGINS:
            raise FieldError(join("config.score", name), f"not a Score plugin of dralab's registry ({NOT_MODELLED})")
        expect_int(weight, join("config.score", name), minimum=1)
    for name, args in expect_map(m["args"], "config.args").items():
        check = ARG_CHECKS.get(name)
        if check is None:
            raise FieldError(join("config.args", name), f"args of {name}: {NOT_MODELLED}")
        check(expect_map(args, join("config.args", name)), join("config.args", name))
    _percentage(m.get("percentageOfNodesToScore"), "config.percentageOfNodesToScore")
    return m


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """numFeasibleNodesToFind (pkg/scheduler/schedule_one.go): all nodes below 100; the percentage given,
    or when 0 the adaptive 50% - nodes/125 (at least 5%); at least 100 nodes."""
    if num_all_nodes < 100:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, 5)
    return max(num_all_nodes * percentage // 100, 100)

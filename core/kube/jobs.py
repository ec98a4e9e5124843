"""batch/v1 Jobs as dralab models them: checked as the API server checks them on create, and compiled into the
Workload and PodGroup the 1.36/1.37 Job controller creates for them (KEP-5547, KEP-6089, gate WorkloadWithJob).

Why here (core/kube) and not in the controller: the scenario loader compiles every Job once when it loads it, so
that a Job whose Workload or PodGroup the release could not accept is refused up front with the Job's own field
path, and the Job controller reactor (core/controllers/jobs.py) compiles the same objects with the same code.

What the controller does, per release (sources: KEP-5547's README in kubernetes/enhancements, both its 1.36 text
and its 1.37 rewrite; pkg/controller/job's workload code of 1.36, `shouldManageWorkloadForJob`,
`buildPodGroupTemplates`, `computeWorkloadName`, `computePodGroupName`):

- gate WorkloadWithJob off (or a release without it, 1.34/1.35): pods only, pod by pod, as before.
- 1.36: only a Job with parallelism > 1, `completionMode: Indexed` and completions == parallelism gets a Workload
  (one template, gang with minCount = parallelism) and a PodGroup; any other Job gets pods only.
- 1.37 (KEP-6089 rewrite of KEP-5547): every eligible Job gets a Workload and a PodGroup; the policy comes from
  `spec.scheduling` (absent, or without `policy`: basic; `gang` without minCount: minCount = parallelism), and
  its constraints, disruptionMode and resourceClaims are copied into the template and the group.
- both: a Job whose pod template already names a group (`spec.template.spec.schedulingGroup`) gets no objects
  (1.36's opt-out; 1.37's "BYO PodGroup").

Names (KEP-5547 "Naming Conventions", 1.36 code): Workload `<job>-<hash>` (fnv-32a of the Job's UID, encoded as
apimachinery's SafeEncodeString does), template `<job>-pgt-0`, PodGroup `<workload>-<template>-<hash>` (fnv-32a
of workload and template names). The 1.37 template name comes from the workloadbuilder library, which the index
does not have: the 1.36 name is kept (an assumption, said in docs/versions.md). dralab has no UIDs: a Job without
`metadata.uid` gets a stable one derived from its namespace and name (a SHA-1 of them shaped as a UUID), so runs
are reproducible.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from .defaults import JOB_BACKOFF_LIMIT
from .fields import (
    FieldError,
    check_fields,
    check_metadata,
    expect_enum,
    expect_int,
    expect_map,
    expect_str,
    join,
)
from .limits import MAX_POD_COUNT
from .manifests import _check_pod
from .podgroup_fields import check_disruption_mode, check_resource_claims, check_scheduling_constraints, union
from .podgroups import check_scheduling_object
from .versions import Profile

__all__ = ["JOB_API_VERSION", "JOB_KIND", "JOB_NAME_LABEL", "check_job", "job_objects", "job_pod", "pod_prefix",
           "SAFE_ALPHABET"]

JOB_API_VERSION = "batch/v1"
JOB_KIND = "Job"
GATE = "WorkloadWithJob"
COMPLETION_MODES = ("NonIndexed", "Indexed")
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"  # and the legacy `job-name`, both set by the Job controller
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # annotation and (PodIndexLabel, GA) label
MAX_JOB_NAME = 63  # the name is a label value on the pods: ValidateJob limits it to 63 characters
MAX_GENERATED_PREFIX = 58  # names.SimpleNameGenerator: 63 - 5 random characters
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery/pkg/util/rand alphanums (generateName, SafeEncodeString)
# the version of scheduling.k8s.io the release's Job controller writes (1.36: v1alpha2; 1.37: v1alpha3, KEP-6089)
WRITTEN_VERSION = {"1.36": "scheduling.k8s.io/v1alpha2", "1.37": "scheduling.k8s.io/v1alpha3"}

_SPEC = ("parallelism", "completions", "completionMode", "template", "scheduling")
# Job fields that change what the Job controller does and that dralab does not model: refused, named
_NOT_MODELLED = {
    "backoffLimit": f"dralab's Job controller stops replacing failed pods after the default {JOB_BACKOFF_LIMIT}",
    "backoffLimitPerIndex": "per-index backoff is not modelled",
    "maxFailedIndexes": "per-index backoff is not modelled",
    "podFailurePolicy": "failure policies are not modelled",
    "successPolicy": "success policies are not modelled",
    "activeDeadlineSeconds": "Job deadlines are not modelled",
    "suspend": "suspended Jobs are not modelled",
    "podReplacementPolicy": "dralab replaces a pod once it failed (the default, TerminatingOrFailed, for pods "
                            "that terminate at once)",
    "manualSelector": "dralab's Job owns the pods it creates, by owner reference",
    "selector": "dralab's Job owns the pods it creates, by owner reference",
    "managedBy": "only the built-in Job controller is modelled",
    "ttlSecondsAfterFinished": "finished Jobs are not deleted in dralab",
}
_SCHEDULING = ("policy", "constraints", "disruptionMode", "resourceClaims")


def check_job(obj: object, path: str, profile: Profile) -> dict[str, Any]:
    """A checked copy of a batch/v1 Job: apiVersion/kind, namespace and uid filled, parallelism and completionMode
    defaulted, `spec.scheduling` normalised. Raises FieldError naming the field."""
    job = copy.deepcopy(expect_map(obj, path))
    for field, value in (("apiVersion", JOB_API_VERSION), ("kind", JOB_KIND)):
        if job.get(field) is None:
            job[field] = value
        elif expect_str(job[field], join(path, field)) != value:
            raise FieldError(join(path, field), f"expected `{value}`, got `{job[field]}`")
    check_fields(job, path, ("apiVersion", "kind", "metadata", "spec"), required=("metadata", "spec"))
    meta_path = join(path, "metadata")
    meta = expect_map(job["metadata"], meta_path)
    check_fields(meta, meta_path, ("name", "namespace", "uid", "labels", "annotations", "ownerReferences"))
    check_metadata(meta, meta_path, namespaced=True, name_required=True)
    if len(meta["name"]) > MAX_JOB_NAME:
        raise FieldError(join(meta_path, "name"), f"must be no more than {MAX_JOB_NAME} characters (a Job's name is "
                                                  "a label value on its pods)")
    if meta.get("ownerReferences"):
        raise FieldError(join(meta_path, "ownerReferences"),
                         "dralab models standalone Jobs only: the Job controller leaves the Workload of a Job owned by "
                         "a parent (JobSet, TrainJob) to that parent (KEP-5547), which dralab does not run")
    meta.pop("ownerReferences", None)
    if meta.get("uid") is None:
        meta["uid"] = _uid("job", meta["namespace"], meta["name"])
    else:
        expect_str(meta["uid"], join(meta_path, "uid"), nonempty=True)
    spec_path = join(path, "spec")
    spec = expect_map(job["spec"], spec_path)
    if spec.get("backoffLimit") == JOB_BACKOFF_LIMIT:  # the default, which dralab's replacements follow
        del spec["backoffLimit"]
    for field, why in _NOT_MODELLED.items():
        if spec.get(field) is not None:
            raise FieldError(join(spec_path, field), f"not modelled by dralab ({why}); remove it")
    check_fields(spec, spec_path, _SPEC, required=("template",))
    parallelism = 1 if spec.get("parallelism") is None else expect_int(
        spec["parallelism"], join(spec_path, "parallelism"), minimum=1, maximum=MAX_POD_COUNT)
    mode = "NonIndexed" if spec.get("completionMode") is None else expect_enum(
        spec["completionMode"], join(spec_path, "completionMode"), COMPLETION_MODES)
    c_path = join(spec_path, "completions")
    if spec.get("completions") is None:
        if mode == "Indexed":
            raise FieldError(c_path, "missing required field: an Indexed Job needs completions")
    elif expect_int(spec["completions"], c_path, minimum=0) != parallelism:
        raise FieldError(c_path, f"dralab runs a Job's `parallelism` pods once: completions must equal parallelism "
                                 f"({parallelism}), got {spec['completions']}")
    spec["parallelism"] = parallelism
    spec["completionMode"] = mode
    _check_template(spec, join(spec_path, "template"), meta, profile)
    if spec.get("scheduling") is not None:
        spec["scheduling"] = _check_scheduling(spec["scheduling"], join(spec_path, "scheduling"), parallelism,
                                               profile)
    job["metadata"], job["spec"] = meta, spec
    return job


def _check_template(spec: dict[str, Any], path: str, job_meta: dict[str, Any], profile: Profile) -> None:
    """The pod template, checked as a pod of the Job would be (under the Job's name), and its restartPolicy:
    a Job's pods must say Never or OnFailure (ValidateJob). dralab's pods never fail by themselves, so the two
    differ only in what dralab does not model (a container restarted in place)."""
    template = expect_map(spec["template"], path)
    check_fields(template, path, ("metadata", "spec"), required=("spec",))
    t_meta = expect_map(template.get("metadata") or {}, join(path, "metadata"))
    check_fields(t_meta, join(path, "metadata"), ("labels", "annotations"))
    pod_spec = expect_map(template["spec"], join(path, "spec"))
    policy_path = join(path, "spec.restartPolicy")
    if pod_spec.get("restartPolicy") is None:
        raise FieldError(policy_path, "missing required field: a Job's pods need `Never` or `OnFailure`")
    expect_enum(pod_spec["restartPolicy"], policy_path, ("Never", "OnFailure"))
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {**copy.deepcopy(t_meta), "name": job_meta["name"], "namespace": job_meta["namespace"]},
           "spec": copy.deepcopy(pod_spec)}
    _check_pod(pod, path, profile)


def _check_scheduling(value: object, path: str, parallelism: int, profile: Profile) -> dict[str, Any]:
    """`spec.scheduling` (KEP-6089's JobSchedulingConfiguration, 1.37, gate WorkloadWithJob): the policy union
    (gang.minCount optional, 1..parallelism), the constraints, disruption mode and claims as a PodGroup's, with
    the gates a PodGroup's fields need. CONFLICT: KEP-6089's example writes `constraints.topology[].level` and
    `disruption`; the code's building blocks name them `topology[].key` and `disruptionMode` (followed)."""
    if profile.version == "1.36":
        raise FieldError(path, "Kubernetes 1.36's Job has no `scheduling` (KEP-6089 added it in 1.37; 1.36's "
                               "Job controller infers a gang from the Job's shape)")
    profile.require(GATE, path, "a Job's `scheduling`")
    body = expect_map(value, path)
    check_fields(body, path, _SCHEDULING)
    out: dict[str, Any] = {}
    if body.get("policy") is not None:
        p_path = join(path, "policy")
        policy = expect_map(body["policy"], p_path)
        check_fields(policy, p_path, ("basic", "gang"))
        member = union(policy, p_path, ("basic", "gang"))
        m_path = join(p_path, member)
        inner = expect_map(policy[member], m_path)
        check_fields(inner, m_path, ("minCount",) if member == "gang" else ())
        if member == "gang" and inner.get("minCount") is not None:
            expect_int(inner["minCount"], join(m_path, "minCount"), minimum=1, maximum=parallelism)
        out["policy"] = {member: dict(inner)}
    if body.get("constraints") is not None:
        c_path = join(path, "constraints")
        constraints = expect_map(body["constraints"], c_path)
        for i, item in enumerate(constraints.get("topology") or []):
            if isinstance(item, dict) and "level" in item:
                raise FieldError(join(c_path, f"topology[{i}].level"), "KEP-6089's example name; the 1.37 API reads "
                                                                        "`key`")
        profile.require("TopologyAwareWorkloadScheduling", c_path, "`constraints`")
        out["constraints"] = check_scheduling_constraints(constraints, c_path)
    if body.get("resourceClaims") is not None:
        r_path = join(path, "resourceClaims")
        profile.require("DRAWorkloadResourceClaims", r_path, "`resourceClaims`")
        out["resourceClaims"] = check_resource_claims(body["resourceClaims"], r_path)
    if body.get("disruptionMode") is not None:
        d_path = join(path, "disruptionMode")
        out["disruptionMode"] = check_disruption_mode(body["disruptionMode"], d_path)
        if "all" in out["disruptionMode"] and "gang" not in out.get("policy", {}):
            raise FieldError(d_path, "the `all` disruption mode needs the `gang` policy (KEP-5710): a basic group's "
                                     "pods are placed one by one")
    return out


# --- what the Job controller creates ----------------------------------------------------------------------


def _safe_hash(*parts: str) -> str:
    """fnv-32a over the parts, its decimal digits mapped as apimachinery's rand.SafeEncodeString maps them."""
    h = 0x811C9DC5
    for part in parts:
        for byte in part.encode():
            h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(SAFE_ALPHABET[ord(c) % len(SAFE_ALPHABET)] for c in str(h))


def _names(job: dict[str, Any]) -> tuple[str, str, str]:
    """(Workload, template, PodGroup) names, truncated to fit as computeWorkloadName/computePodGroupName do."""
    meta = job["metadata"]
    digest = _safe_hash(meta["uid"])
    workload = f"{meta['name'][:253 - len(digest) - 1]}-{digest}"
    template = f"{meta['name'][:63 - len('-pgt-0')]}-pgt-0"  # a template name is a DNS label
    digest = _safe_hash(workload, template)
    room = 253 - len(digest) - 2
    wl, tpl = workload, template
    if len(wl) + len(tpl) > room:  # the template name is at most 63: only the workload part is cut
        wl = wl[:room - len(tpl)]
    return workload, template, f"{wl}-{tpl}-{digest}"


def _policy(job: dict[str, Any], version: str) -> dict[str, Any] | None:
    """The group's policy the Job controller of release `version` compiles for `job`, or None: pods only."""
    spec = job["spec"]
    if spec["template"]["spec"].get("schedulingGroup") is not None or version not in WRITTEN_VERSION:
        return None
    parallelism = spec["parallelism"]
    if version == "1.36":  # inferred from the Job's shape (KEP-5547 alpha, 1.36)
        if parallelism > 1 and spec["completionMode"] == "Indexed" and spec.get("completions") == parallelism:
            return {"gang": {"minCount": parallelism}}
        return None
    policy = (spec.get("scheduling") or {}).get("policy") or {"basic": {}}  # 1.37 defaulting rules
    if "gang" in policy:
        return {"gang": {"minCount": policy["gang"].get("minCount", parallelism)}}
    return {"basic": {}}


def job_objects(job: dict[str, Any], profile: Profile) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The Workload and PodGroup (hub shape, core/kube/podgroups.py) the Job controller of `profile` creates for
    the checked `job`, or None when it creates none (gate off, a Job that does not qualify, a template naming
    its own group). Checked as the API server checks them, so a release that cannot take them refuses here."""
    if not profile.enabled(GATE):
        return None
    policy = _policy(job, profile.version)
    if policy is None:
        return None
    api_version = WRITTEN_VERSION[profile.version]
    meta = job["metadata"]
    namespace, uid = meta["namespace"], meta["uid"]
    workload_name, template_name, group_name = _names(job)
    job_ref = {"apiVersion": JOB_API_VERSION, "kind": JOB_KIND, "name": meta["name"], "uid": uid,
               "controller": True, "blockOwnerDeletion": True}
    group_fields: dict[str, Any] = {"schedulingPolicy": policy}
    scheduling = job["spec"].get("scheduling") or {}
    if scheduling.get("constraints"):
        group_fields["schedulingConstraints"] = copy.deepcopy(scheduling["constraints"])
    if scheduling.get("resourceClaims"):
        group_fields["resourceClaims"] = copy.deepcopy(scheduling["resourceClaims"])
    if scheduling.get("disruptionMode"):
        group_fields["disruptionMode"] = copy.deepcopy(scheduling["disruptionMode"])
    workload: dict[str, Any] = {"apiVersion": api_version, "kind": "Workload",
                "metadata": {"name": workload_name, "namespace": namespace, "ownerReferences": [job_ref],
                             "uid": _uid("workload", namespace, workload_name)},
                "spec": {"controllerRef": {"apiGroup": "batch", "kind": JOB_KIND, "name": meta["name"]},
                         "podGroupTemplates": [{"name": template_name, **copy.deepcopy(group_fields)}]}}
    ref_field: dict[str, Any]
    if api_version.endswith("v1alpha2"):
        ref_field = {"podGroupTemplateRef": {"workload": {"workloadName": workload_name,
                                                          "podGroupTemplateName": template_name}}}
    else:
        ref_field = {"workloadRef": {"workloadName": workload_name, "templateName": template_name}}
    group: dict[str, Any] = {"apiVersion": api_version, "kind": "PodGroup",
             "metadata": {"name": group_name, "namespace": namespace,
                          "uid": _uid("podgroup", namespace, group_name),
                          "ownerReferences": [dict(job_ref), {"apiVersion": api_version, "kind": "Workload",
                                                              "name": workload_name,
                                                              "uid": workload["metadata"]["uid"]}]},
             "spec": {**ref_field, **group_fields}}
    where = f"the Workload and PodGroup of Job {namespace}/{meta['name']}"
    return (check_scheduling_object(workload, where, profile), check_scheduling_object(group, where, profile))


def _uid(kind: str, namespace: str, name: str) -> str:
    """A stable UID for an object dralab names (no clock, no randomness): a UUID-shaped SHA-1 of its identity."""
    h = hashlib.sha1(f"dralab/{kind}/{namespace}/{name}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def pod_prefix(job: dict[str, Any], index: int | None) -> str:
    """The generateName of a Job's pod: `<job>-<index>-` for an Indexed Job, else `<job>-`, the Job's name cut so
    that the prefix leaves room for five random characters (podGenerateNameWithIndex, SimpleNameGenerator)."""
    name = job["metadata"]["name"]
    tail = "-" if index is None else f"-{index}-"
    return f"{name[:MAX_GENERATED_PREFIX - len(tail)]}{tail}"


def job_pod(job: dict[str, Any], index: int | None, name: str, group: dict[str, Any] | None = None,
            release: str = "") -> dict[str, Any]:
    """A pod of `job` as its controller creates it: the template's labels and annotations with the Job's (and the
    completion index of an Indexed Job), owned by the Job (and by its PodGroup), `spec.schedulingGroup` naming
    the group when it has one."""
    meta = job["metadata"]
    template = job["spec"]["template"]
    t_meta = template.get("metadata") or {}
    labels = {**(t_meta.get("labels") or {}), "job-name": meta["name"], JOB_NAME_LABEL: meta["name"],
              "controller-uid": meta["uid"], "batch.kubernetes.io/controller-uid": meta["uid"]}
    annotations = dict(t_meta.get("annotations") or {})
    spec = copy.deepcopy(template["spec"])
    if index is not None:
        labels[COMPLETION_INDEX] = annotations[COMPLETION_INDEX] = str(index)
        spec.setdefault("hostname", f"{meta['name']}-{index}")
    owners: list[dict[str, Any]] = [{"apiVersion": JOB_API_VERSION, "kind": JOB_KIND, "name": meta["name"],
                                     "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]
    if group is not None:
        g_meta = group["metadata"]
        owners.append({"apiVersion": WRITTEN_VERSION.get(release, group["apiVersion"]), "kind": "PodGroup",
                       "name": g_meta["name"],
                       "uid": g_meta.get("uid", "")})
        spec["schedulingGroup"] = {"podGroupName": g_meta["name"]}
    pod_meta: dict[str, Any] = {"name": name, "generateName": name[:-5], "namespace": meta["namespace"],
                                "labels": labels}
    if annotations:
        pod_meta["annotations"] = annotations
    pod_meta["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}

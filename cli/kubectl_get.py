"""Reading a live cluster through `kubectl`: which kinds it serves, then one `kubectl get ... -A -o yaml`.

The kubectl plugin (cli/kubectl_plugin.py) needs the current context's objects as the dump `dralab audit -f` reads.
kubectl does the talking (auth plugins, kubeconfig, proxies are its business); this module only runs it: as a list
of arguments (no shell), with a timeout, and turns every way it can fail (not installed, exit status, a timeout,
output that is not a YAML List) into one InputError that says which command failed and why (exit 2).

Kinds a server does not serve are left out, not refused: an older cluster has no DeviceTaintRules, one without the
scheduler-plugins CRD no `podgroups.scheduling.x-k8s.io`. `kubectl api-resources -o name` says what is served
(`--verbs=list`: what `get -A` can list); a kind requested by its full name (`resourceslices.resource.k8s.io`)
cannot be confused with another group's (`workloads.kueue.x-k8s.io` is not `workloads.scheduling.k8s.io`).
api-resources exits 1 when an aggregated API is down ("unable to retrieve the complete list of server APIs:
metrics.k8s.io/v1beta1: ..."), having printed the groups it could read: kubernetes/kubernetes
staging/src/k8s.io/kubectl/pkg/cmd/apiresources/apiresources.go, RunAPIResources prints what
ServerPreferredResources returned and then returns its error. That is a warning here, not an error. A kind that
disappears between the two calls (`error: the server doesn't have a resource type "x"`) is dropped and the get
retried once per such kind.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .inputs import InputError

# (resource plural, API group): what each command reads. A core kind has group "".
DRA = (("resourceslices", "resource.k8s.io"), ("resourceclaims", "resource.k8s.io"),
       ("deviceclasses", "resource.k8s.io"))
ALLOCATE_KINDS = (("nodes", ""), *DRA)
CLUSTER_KINDS = (
    ("nodes", ""), ("pods", ""), *DRA,
    ("resourceclaimtemplates", "resource.k8s.io"), ("devicetaintrules", "resource.k8s.io"),
    ("workloads", "scheduling.k8s.io"), ("podgroups", "scheduling.k8s.io"),
    ("compositepodgroups", "scheduling.k8s.io"), ("podgroups", "scheduling.x-k8s.io"),
    ("priorityclasses", "scheduling.k8s.io"), ("poddisruptionbudgets", "policy"),
)
# the kinds without which no command can say anything: an error when the server does not serve them
REQUIRED = frozenset({"nodes", "resourceslices.resource.k8s.io", "deviceclasses.resource.k8s.io"})
DEFAULT_TIMEOUT_S = 120.0
_PARTIAL = "unable to retrieve the complete list of server APIs"
_NO_TYPE = re.compile(r"""the server doesn't have a resource type "([^"]+)\"""")


def resource_name(plural: str, group: str) -> str:
    """How kubectl names a kind unambiguously: `nodes`, `resourceslices.resource.k8s.io`."""
    return f"{plural}.{group}" if group else plural


@dataclass
class Kubectl:
    """How to run kubectl: the binary, and the connection flags every call carries (--context, --kubeconfig)."""

    binary: str = "kubectl"
    context: str | None = None
    kubeconfig: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    warnings: list[str] = field(default_factory=list)

    def flags(self) -> list[str]:
        out = [f"--context={self.context}"] if self.context else []
        return out + ([f"--kubeconfig={self.kubeconfig}"] if self.kubeconfig else [])

    def shown(self, args: Sequence[str]) -> str:
        """The command line as run (for messages)."""
        return " ".join([self.binary, *args, *self.flags()])

    def run(self, args: Sequence[str], out: str | None = None) -> subprocess.CompletedProcess[str]:
        """`kubectl ARGS` with the connection flags, its stderr (and stdout, or into the file `out`: a large
        cluster's List is not held here twice) captured; InputError when it cannot run."""
        argv = [self.binary, *args, *self.flags()]
        shown = self.shown(args)
        try:
            if out is None:
                return subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s, check=False,
                                      stdin=subprocess.DEVNULL)
            with open(out, "wb") as sink:
                return subprocess.run(argv, stdout=sink, stderr=subprocess.PIPE, text=True, timeout=self.timeout_s,
                                      check=False, stdin=subprocess.DEVNULL)
        except FileNotFoundError as exc:
            if out is not None and exc.filename == out:
                raise InputError(f"{out}: cannot write the cluster's objects: {exc.strerror}") from None
            raise InputError(f"{self.binary}: not found (is kubectl installed and on PATH? --kubectl names "
                             "another binary)") from None
        except PermissionError as exc:
            if out is not None and exc.filename == out:
                raise InputError(f"{out}: cannot write the cluster's objects: {exc.strerror}") from None
            raise InputError(f"{self.binary}: cannot be run (permission denied)") from None
        except subprocess.TimeoutExpired:
            raise InputError(f"`{shown}` did not finish within {self.timeout_s:g}s (--kubectl-timeout)") from None
        except OSError as exc:
            raise InputError(f"{self.binary}: cannot be run: {exc.strerror or exc}") from None

    def served(self) -> set[str]:
        """The resource names the server serves for listing (`kubectl api-resources -o name --verbs=list`)."""
        command = ["api-resources", "-o", "name", "--verbs=list"]
        done = self.run(command)
        names = {line.strip() for line in done.stdout.splitlines() if line.strip()}
        if done.returncode != 0:
            if not (names and _PARTIAL in done.stderr):
                raise InputError(_failed(self.shown(command), done))
            self.warnings.append(f"kubectl api-resources: {_last(done.stderr)} (the kinds it could list are read)")
        return names

    def get(self, names: Sequence[str], out: str) -> dict[str, Any]:
        """`kubectl get NAMES -A -o yaml` into the file `out`, and the List it holds; InputError when kubectl fails
        or prints no List."""
        wanted = list(names)
        while True:
            command = ["get", ",".join(wanted), "--all-namespaces", "-o", "yaml"]
            done = self.run(command, out)
            gone = _NO_TYPE.search(done.stderr) if done.returncode != 0 else None
            if gone and gone.group(1) in wanted and gone.group(1) not in REQUIRED and len(wanted) > 1:
                wanted.remove(gone.group(1))  # withdrawn since api-resources: left out, said
                self.warnings.append(f"kubectl get: the server does not serve {gone.group(1)}: left out")
                continue
            if done.returncode != 0:
                raise InputError(_failed(self.shown(command), done))
            return parse_list(out, self.shown(command))


def _last(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else "(nothing on stderr)"


def _failed(command: str, done: subprocess.CompletedProcess[str]) -> str:
    """What a failed kubectl call said: its exit status and its stderr's last lines (kubectl puts the reason
    last: `error: You must be logged in to the server (Unauthorized)`)."""
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()][-3:]
    said = "; ".join(lines) if lines else "nothing on stderr"
    return f"`{command}` failed with exit status {done.returncode}: {said}"


def parse_list(path: str, what: str) -> dict[str, Any]:
    """kubectl's `-o yaml` output for several kinds, in the file at `path`: one `kind: List` with `items`, read
    as every manifest is (core/kube/yaml_files.py: Kubernetes' YAML, timestamps kept as strings, dralab's file
    size limit for dumps); InputError naming `what` and the line when it is not."""
    from dralab.core.dra.api import MAX_FILE_BYTES
    from dralab.core.kube.yaml_files import YamlError, load_yaml_file

    size = os.path.getsize(path)
    if size > MAX_FILE_BYTES:
        raise InputError(f"`{what}` printed {size} bytes, over the {MAX_FILE_BYTES >> 20} MiB dralab reads from one "
                         "dump (core/dra/api.py MAX_FILE_BYTES)")
    try:
        doc = load_yaml_file(path, max_bytes=MAX_FILE_BYTES)
    except YamlError as exc:
        where = f" at line {exc.line}, column {exc.column}" if exc.line is not None else ""
        raise InputError(f"`{what}` printed output that is not YAML dralab reads{where}: {exc.message}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "List" or not isinstance(doc.get("items", []), list):
        got = f"kind {doc.get('kind')!r}" if isinstance(doc, dict) else type(doc).__name__
        raise InputError(f"`{what}` printed {got}, expected a `kind: List` with `items`")
    return doc


def read_cluster(kubectl: Kubectl, kinds: Sequence[tuple[str, str]], out: str) -> dict[str, Any]:
    """The cluster's objects of `kinds` that the server serves, written to the file `out` as kubectl printed them;
    the List they make."""
    served = kubectl.served()
    names = [resource_name(p, g) for p, g in kinds]
    missing = [n for n in names if n in REQUIRED and n not in served]
    if missing:
        raise InputError(f"the cluster does not serve {', '.join(missing)} (kubectl api-resources): dralab reads "
                         "DRA's resource.k8s.io API (Kubernetes 1.34 or later, or DynamicResourceAllocation on)")
    present = [n for n in names if n in served]
    skipped = [n for n in names if n not in served]
    if skipped:
        kubectl.warnings.append(f"not served by the cluster, left out: {', '.join(skipped)}")
    return kubectl.get(present, out)


def warn(lines: Sequence[str]) -> None:
    for line in lines:
        sys.stderr.write(f"kubectl-dralab: warning: {line}\n")

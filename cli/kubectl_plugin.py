"""`kubectl dralab audit|schedule|whatif|allocate`: dralab's dump commands on the current context's cluster.

Installed with the package as the console script `kubectl-dralab`; kubectl runs any `kubectl-<name>` on PATH as
`kubectl <name>` (https://kubernetes.io/docs/tasks/extend-kubectl/kubectl-plugins/), passing the arguments after
the plugin's name. kubectl refuses global flags before a plugin's name (`kubectl --context x dralab` is "flags
cannot be placed before plugin name": kubernetes/kubernetes staging/src/k8s.io/kubectl/pkg/cmd/cmd.go,
HandlePluginCommand), so `--context`, `--kubeconfig` and `-n` come after the command here, and this plugin hands
them to every kubectl call it makes.

What it does: `kubectl api-resources`, then one `kubectl get <kinds> --all-namespaces -o yaml`
(cli/kubectl_get.py), written to a file (a temporary one, or `--save-dump FILE` to keep it), then the same code as
`dralab COMMAND -f FILE [the other options]`. Every other option is the dralab command's (`-o json`,
`--node-groups`, `--node`, `--kubernetes-version`, more `-f` files laid over the cluster's objects).

The cluster's state is read from every namespace whatever `-n` says: a device allocated to a claim in another
namespace is not free, and a node's room is what every namespace's pods leave. `-n NS` narrows what is asked
about: the pending pods (audit, schedule, whatif) and the unallocated claims (allocate) of other namespaces are
left out of the dump. Exit status: the dralab command's; 2 when kubectl cannot be run, fails, or prints
something that is not a List (the command and its message said).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from . import __version__
from .inputs import InputError, output_file
from .kubectl_get import ALLOCATE_KINDS, CLUSTER_KINDS, DEFAULT_TIMEOUT_S, Kubectl, read_cluster, warn

COMMANDS = ("audit", "schedule", "whatif", "allocate")
EXIT_INPUT = 2
PROG = "kubectl dralab"


def plugin_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"{PROG} COMMAND", allow_abbrev=False, add_help=False,
        description="Run `dralab COMMAND` on the objects of the current kubectl context (COMMAND: "
                    f"{', '.join(COMMANDS)}). Options not listed here are the dralab command's "
                    "(`dralab COMMAND --help`); its `-f` files are laid over the cluster's objects.",
        epilog="Exit status: the dralab command's; 2 when kubectl fails or prints no List. See docs/cli.md.")
    p.add_argument("--context", help="the kubeconfig context to use (default: the current one)")
    p.add_argument("--kubeconfig", help="the kubeconfig file (default: kubectl's: $KUBECONFIG, ~/.kube/config)")
    ns = p.add_mutually_exclusive_group()
    ns.add_argument("-n", "--namespace", help="ask about this namespace's pending pods (allocate: unallocated "
                                              "claims) only; the cluster's state is read from every namespace")
    ns.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace (the default)")
    p.add_argument("--kubectl", default="kubectl", metavar="BINARY", help="the kubectl to run (default: kubectl "
                                                                           "on PATH)")
    p.add_argument("--kubectl-timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help=f"give up on a kubectl call after this long (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--save-dump", metavar="FILE", help="keep the objects read in FILE (YAML, a List): "
                                                       "`dralab COMMAND -f FILE` reads it again offline")
    p.add_argument("-h", "--help", action="store_true", help="this help, then the dralab command's")
    return p


def _usage() -> str:
    return (f"usage: {PROG} COMMAND [--context NAME] [--kubeconfig FILE] [-n NS | -A] [--save-dump FILE] "
            f"[options of dralab COMMAND]\n  COMMAND: {', '.join(COMMANDS)}\n")


def only_namespace(doc: dict[str, Any], namespace: str, command: str) -> tuple[dict[str, Any], int]:
    """`doc` without what `-n namespace` leaves out: other namespaces' pending pods (no spec.nodeName), for
    allocate their unallocated claims; bound pods and allocated claims stay, they hold nodes and devices."""

    def part(item: dict[str, Any], key: str) -> dict[str, Any]:
        value = item.get(key)
        return value if isinstance(value, dict) else {}

    def elsewhere(item: Any) -> bool:
        if not isinstance(item, dict):
            return False
        if part(item, "metadata").get("namespace", "default") == namespace:
            return False
        spec, status = part(item, "spec"), part(item, "status")
        if command == "allocate":
            return bool(item.get("kind") == "ResourceClaim" and not status.get("allocation"))
        return bool(item.get("kind") == "Pod" and item.get("apiVersion") == "v1" and not spec.get("nodeName"))

    kept = [item for item in doc["items"] if not elsewhere(item)]
    return {**doc, "items": kept}, len(doc["items"]) - len(kept)


def _write_dump(doc: dict[str, Any], path: str) -> None:
    """`doc` (the List narrowed to a namespace) over kubectl's text at `path`."""
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    try:
        with open(path, "w", encoding="utf-8") as f:
            yaml.dump(doc, f, Dumper=dumper, sort_keys=False)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the cluster's objects: {exc.strerror or exc}") from None


def fetch(opts: argparse.Namespace, command: str, path: str) -> None:
    """The cluster's objects for `command`, written to `path` (the namespace filter applied)."""
    kubectl = Kubectl(opts.kubectl, opts.context, opts.kubeconfig, opts.kubectl_timeout)
    try:
        doc = read_cluster(kubectl, ALLOCATE_KINDS if command == "allocate" else CLUSTER_KINDS, path)
        if opts.namespace:
            doc, dropped = only_namespace(doc, opts.namespace, command)
            if dropped:
                _write_dump(doc, path)
                what = "unallocated claims" if command == "allocate" else "pending pods"
                kubectl.warnings.append(f"-n {opts.namespace}: {dropped} {what} of other namespaces left out")
    finally:
        warn(kubectl.warnings)


def _save(dump: str, path: str) -> None:
    import shutil

    try:
        shutil.copyfile(dump, path)
    except OSError as exc:
        raise InputError(f"--save-dump {path}: cannot write: {exc.strerror or exc}") from None


_PLACEHOLDER = "<the cluster's objects>"


def command_args(command: str, rest: Sequence[str]) -> argparse.Namespace:
    """The dralab command's options, checked before kubectl runs (argparse exits 2 on a bad one); the first
    `-f` is a placeholder for the cluster's objects (set by run_command)."""
    from .cli import build_parser

    return build_parser().parse_args([command, "-f", _PLACEHOLDER, *rest])


def run_command(args: argparse.Namespace, dump: str, shown: str) -> int:
    """`dralab COMMAND -f dump ...`, as `dralab` runs it; an error naming `dump` names `shown` instead."""
    from dralab.actors.logs import configure
    from dralab.replay.logs.output_files import OutputPathError

    from .cli import COMMANDS as RUN

    args.files[0] = dump
    configure(args.log_format, args.log_level)
    try:
        return int(RUN[args.command](args))
    except (InputError, OutputPathError) as exc:
        sys.stderr.write(f"kubectl-dralab: error: {str(exc).replace(dump, shown)}\n")
        return EXIT_INPUT


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        sys.stderr.write(_usage() + "kubectl-dralab: error: a command is required\n")
        return EXIT_INPUT
    if argv[0] in ("-h", "--help"):
        sys.stdout.write(_usage())
        plugin_parser().print_help()
        return 0
    if argv[0] == "--version":
        sys.stdout.write(f"kubectl-dralab {__version__}\n")
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        sys.stderr.write(_usage() + f"kubectl-dralab: error: unknown command {command!r} "
                                    f"(choose from {', '.join(COMMANDS)})\n")
        return EXIT_INPUT
    try:
        opts, passed = plugin_parser().parse_known_args(rest)
    except SystemExit:  # argparse said what is wrong
        return EXIT_INPUT
    if opts.help:
        plugin_parser().print_help()
        sys.stdout.write(f"\nOptions of `dralab {command}` (its -f files are laid over the cluster's):\n")
        from .cli import build_parser

        with contextlib.suppress(SystemExit):
            build_parser().parse_args([command, "--help"])
        return 0
    try:
        if opts.kubectl_timeout <= 0:
            raise InputError(f"--kubectl-timeout: must be > 0, got {opts.kubectl_timeout:g}")
        output_file(opts.save_dump, "--save-dump")  # before kubectl runs
        try:
            args = command_args(command, passed)
        except SystemExit as exc:  # argparse said what is wrong (or printed help: exit 0)
            return int(exc.code or 0)
        with tempfile.TemporaryDirectory(prefix="kubectl-dralab-") as tmp:
            dump = os.path.join(tmp, "cluster.yaml")
            fetch(opts, command, dump)
            if opts.save_dump:  # written once kubectl succeeded: a failed read leaves FILE as it was
                _save(dump, opts.save_dump)
                return run_command(args, opts.save_dump, opts.save_dump)
            return run_command(args, dump, "the cluster's objects (kubectl get; keep them with --save-dump FILE)")
    except InputError as exc:
        sys.stderr.write(f"kubectl-dralab: error: {exc}\n")
        return EXIT_INPUT
    except KeyboardInterrupt:
        sys.stderr.write("kubectl-dralab: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""What the subcommands share about user input: the error that means exit 2, reading manifests, and checking
where output goes (`-o` is a format everywhere; files and folders are checked before any work)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import yaml


class InputError(Exception):
    """Bad input from the user; the message names what and where. The CLI prints it and exits 2."""


def load_inventory(files: Sequence[str], profile: Any = None) -> Any:
    """Kubernetes manifests (multi-document YAML or kind: List) as a DRA Inventory, or InputError; with a
    release `profile`, its scheduling.k8s.io objects (1.36/1.37 Workloads, PodGroups) are read too."""
    from dralab.core.dra.api import ManifestError, load_objects

    try:
        return load_objects(files, profile=profile)
    except ManifestError as exc:
        raise InputError(str(exc)) from None
    except OSError as exc:
        raise InputError(f"{getattr(exc, 'filename', '') or ''}: cannot read: {exc.strerror or exc}") from None


def add_profile_flags(p: Any, *, dump: bool = False) -> None:
    """`--kubernetes-version`, `--feature-gates`, `--runtime-config` (kube-apiserver's spelling): the release
    emulated (docs/versions.md). For a scenario they override its spec.kubernetes entry by entry; for a dump
    they override what its objects' API versions imply."""
    what = "the dump's release (default: the only release serving its objects' API versions, else 1.37)" if dump \
        else "override the scenario's spec.kubernetes.version (default 1.37)"
    p.add_argument("--kubernetes-version", metavar="VERSION", choices=["1.34", "1.35", "1.36", "1.37"],
                   help=f"Kubernetes release to emulate, 1.34 to 1.37: {what}")
    p.add_argument("--feature-gates", metavar="GATES", default="",
                   help="feature gates, as kube-apiserver takes them: Name=true,Other=false (docs/versions.md)")
    p.add_argument("--runtime-config", metavar="APIS", default="",
                   help="alpha/beta API versions to serve: scheduling.k8s.io/v1alpha1=true,...")
    p.add_argument("--bugs", metavar="BUGS", default="",
                   help="upstream-bug switches: autoscaler#3886=true,... (default: as the release has them; "
                        "docs/upstream-bugs.md)")
    p.add_argument("--kueue-version", metavar="VERSION", choices=["0.14", "0.15", "0.16", "0.17", "0.18", "0.19"],
                   help="Kueue release to emulate, 0.14 to 0.19 (default 0.19)")


def profile_flags(args: Any) -> Any:
    """The ProfileFlags of `args` (add_profile_flags), or InputError naming the flag."""
    from dralab.core.kube.fields import FieldError
    from dralab.core.kube.versions import ProfileFlags, parse_bugs, parse_feature_gates, parse_runtime_config

    try:
        return ProfileFlags(getattr(args, "kubernetes_version", None),
                            parse_feature_gates(getattr(args, "feature_gates", "") or ""),
                            parse_runtime_config(getattr(args, "runtime_config", "") or ""),
                            parse_bugs(getattr(args, "bugs", "") or ""),
                            getattr(args, "kueue_version", None))
    except FieldError as exc:
        raise InputError(str(exc)) from None


def load_scenario_input(path: str, autoscaler: str | None = None, flags: Any = None) -> Any:
    """A scenario file (with `--autoscaler` and the profile flags applied, if given), or InputError naming the
    file and field."""
    import msgspec

    from dralab.core.run.config import scheduler_config
    from dralab.core.scenario.load import Policy, ScenarioError, load_scenario

    try:
        scenario = load_scenario(path, flags=flags)
        scheduler_config(scenario)  # spec.scheduler.config against its release (the scheduler layer's check)
    except ScenarioError as exc:
        raise InputError(str(exc)) from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read scenario: {exc.strerror or exc}") from None
    if autoscaler is not None:  # --autoscaler: recorded in RunStarted's config like the scenario's own
        scenario = msgspec.structs.replace(scenario, policy=Policy(autoscaler=autoscaler))  # type: ignore[arg-type]
    return scenario


def read_log_file(path: str) -> Any:
    """A `.dralog` file whole (replay.logfile.read_log), or InputError saying what is wrong with it."""
    from dralab.replay.logs.logfile import read_log

    with reading(path):
        return read_log(path)


def stream_log_file(path: str) -> Any:
    """A `.dralog` file as a stream (replay.logfile.LogStream: its header read and checked now, its records
    one block at a time when iterated, so memory is a block, not the file), or InputError saying what is
    wrong with it. Iterate it inside `reading(path)`."""
    from dralab.replay.logs.logfile import LogStream

    with reading(path):
        return LogStream(path)


@contextmanager
def reading(path: str) -> Iterator[None]:
    """Where a log is iterated: a record that does not decode, a file refused on the way (its budget) or
    one that cannot be read any more is InputError naming the file (exit 2), not a traceback."""
    from dralab.core.log.events import LogDecodeError
    from dralab.replay.logs.logfile import LogFileError

    try:
        yield
    except LogFileError as exc:
        raise InputError(str(exc)) from None
    except LogDecodeError as exc:
        raise InputError(f"{path}: {exc}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def emit(report: dict[str, Any], fmt: str) -> None:
    """One machine-readable object on stdout, as JSON or YAML."""
    if fmt == "yaml":
        sys.stdout.write(yaml.safe_dump(report, sort_keys=False))
    else:
        sys.stdout.write(json.dumps(report) + "\n")


def output_file(path: str | None, option: str) -> None:
    """Refuse, before any work, an output file dralab would not write (replay/output_files.check_file)."""
    from dralab.replay.logs.output_files import check_file

    _checked(check_file, path, option)


def output_dir(path: str | None, option: str) -> None:
    """Refuse, before any work, an output folder dralab would not write into (created later if missing)."""
    from dralab.replay.logs.output_files import check_dir

    _checked(check_dir, path, option)


def _checked(check: Any, path: str | None, option: str) -> None:
    from dralab.replay.logs.output_files import OutputPathError

    if path is not None:
        try:
            check(path, option)
        except OutputPathError as exc:
            raise InputError(str(exc)) from None


def add_output_format(p: Any, formats: Sequence[str] = ("text", "json"), *, legacy_file: str | None = None) -> None:
    """`-o/--output FORMAT`, one meaning in every command: the format of what goes to stdout. Where `-o`
    named a file before (report, shrink, record), `legacy_file` is the option that names it now; an `-o`
    value that is not a format is still taken as that file, with a warning (see resolve_output)."""
    text = ", ".join(formats)
    extra = f" (a file is named with {legacy_file})" if legacy_file else ""
    p.add_argument("-o", "--output", metavar="FORMAT", default=None,
                   help=f"what goes to stdout: {text} (default {formats[0]}){extra}")


def resolve_output(args: Any, formats: Sequence[str] = ("text", "json"), *, file_attr: str | None = None,
                   file_option: str = "--log", alias_attr: str | None = None) -> str:
    """The output format of `args` (set back into `args.output`). An old-style `-o FILE` (a value that is
    not a format) fills `file_attr` when that is empty, with a deprecation warning; `alias_attr` is an older
    format option (`--summary`) that `-o` overrides when both are given."""
    value = args.output
    alias = getattr(args, alias_attr) if alias_attr else None
    if value is None:
        fmt = alias or formats[0]
    elif value in formats:
        if alias and alias != value:
            raise InputError(f"-o {value} and --{alias_attr} {alias} disagree: give one of them")
        fmt = value
    elif file_attr is not None and not getattr(args, file_attr):
        setattr(args, file_attr, value)
        sys.stderr.write(f"dralab: warning: -o {value}: -o is the output format ({', '.join(formats)}) in every "
                         f"command; taking {value!r} as the file for {file_option}, as older versions did: "
                         f"write {file_option} {value}\n")
        fmt = alias or formats[0]
    else:
        where = f"; the file is named with {file_option}" if file_attr else ""
        raise InputError(f"-o: {value!r} is not an output format (choose from {', '.join(formats)}){where}")
    args.output = fmt
    return fmt

"""What the subcommands share about user input: the error that means exit 2, and reading manifests."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import yaml


class InputError(Exception):
    """Bad input from the user; the message names what and where. The CLI prints it and exits 2."""


def load_inventory(files: Sequence[str]) -> Any:
    """Kubernetes manifests (multi-document YAML or kind: List) as a DRA Inventory, or InputError."""
    from dralab.core.dra.api import ManifestError, load_objects

    try:
        return load_objects(files)
    except ManifestError as exc:
        raise InputError(str(exc)) from None
    except OSError as exc:
        raise InputError(f"{getattr(exc, 'filename', '') or ''}: cannot read: {exc.strerror or exc}") from None


def load_scenario_input(path: str, autoscaler: str | None = None) -> Any:
    """A scenario file (with `--autoscaler` applied, if given), or InputError naming the file and field."""
    import msgspec

    from dralab.core.scenario import Policy, ScenarioError, load_scenario

    try:
        scenario = load_scenario(path)
    except ScenarioError as exc:
        raise InputError(str(exc)) from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read scenario: {exc.strerror or exc}") from None
    if autoscaler is not None:  # --autoscaler: recorded in RunStarted's config like the scenario's own
        scenario = msgspec.structs.replace(scenario, policy=Policy(autoscaler=autoscaler))  # type: ignore[arg-type]
    return scenario


def read_log_file(path: str) -> Any:
    """A `.dralog` file whole (replay.logfile.read_log), or InputError saying what is wrong with it."""
    from dralab.replay.logfile import read_log

    with reading(path):
        return read_log(path)


def stream_log_file(path: str) -> Any:
    """A `.dralog` file as a stream (replay.logfile.LogStream: its header read and checked now, its records
    one block at a time when iterated, so memory is a block, not the file), or InputError saying what is
    wrong with it. Iterate it inside `reading(path)`."""
    from dralab.replay.logfile import LogStream

    with reading(path):
        return LogStream(path)


@contextmanager
def reading(path: str) -> Iterator[None]:
    """Where a log is iterated: a record that does not decode, a file refused on the way (its budget) or
    one that cannot be read any more is InputError naming the file (exit 2), not a traceback."""
    from dralab.core.events import LogDecodeError
    from dralab.replay.logfile import LogFileError

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

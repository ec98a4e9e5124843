"""The error of input a user gave: a scenario file or a manifest refused before any work, naming the file
and the field path. Every loader raises it (or a subclass: dra/api.py's ManifestError); the CLI turns it
into exit status 2. Apart from the scenario loader so that the layers below it (manifests, DRA objects)
can raise it without importing the loader."""

from __future__ import annotations


class ScenarioError(Exception):
    """A scenario refused before the run. ``str()`` is ``file: path: message`` (``file: message`` when the
    whole file is at fault), or ``file:line:col: message`` for a YAML syntax error."""

    def __init__(self, file: str, path: str, message: str, *, line: int | None = None, column: int | None = None):
        self.file = file
        self.path = path
        self.message = message
        self.line = line
        self.column = column
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.line is not None:
            return f"{self.file}:{self.line}:{self.column}: {self.message}"
        if self.path:
            return f"{self.file}: {self.path}: {self.message}"
        return f"{self.file}: {self.message}"

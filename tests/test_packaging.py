"""Every code folder is packaged: a sub-package missing from pyproject installs fine in editable
mode and breaks only in a real install (it happened once: `dralab.core.reactors`)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"cli": "dralab", "core": "dralab.core", "actors": "dralab.actors", "replay": "dralab.replay"}


def test_every_package_folder_is_declared() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    declared = set(setuptools["packages"])
    package_dir = setuptools["package-dir"]
    for folder, dotted in FOLDERS.items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT / folder)
            name = ".".join([dotted, *rel.parts])
            assert name in declared, f"{init.parent} is not in [tool.setuptools] packages"
            assert package_dir.get(name, "").rstrip("/") in ("", str(init.parent.relative_to(ROOT))), name


def test_console_script_points_at_the_cli() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["dralab"] == "dralab.cli:main"

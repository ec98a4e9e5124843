"""docker-compose.yml, Dockerfile, .dockerignore and docker/: checked without a Docker engine.

`docker-compose config` (Compose v1, Debian's `docker-compose`; or the v2 plugin, `docker compose`)
validates and renders the file with variables substituted, and needs no engine. The rendered file is
then checked for what a working, safe Ray + Redis cluster needs, and the dralab command it runs is
given to the real CLI parser.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.actors.redis_bus import redact_url
from dralab.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
COMPOSE_FILE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
DOCKER_DIR = REPO / "docker"
DEPLOY_DOC = REPO / "docs" / "deploy.md"

SERVICES = {"redis", "ray-head", "ray-worker", "dralab"}
RAY_SERVICES = {"ray-head", "ray-worker", "dralab"}  # every process of the Ray cluster
RAY_GCS = "ray-head:6380"
SECRETS = {"REDIS_PASSWORD": "pw-FOR-compose-test-7f3a9c", "RAY_AUTH_TOKEN": "tok-FOR-compose-test-51be02"}


def _compose_cmd() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, check=False)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return None


COMPOSE = _compose_cmd()
needs_compose = pytest.mark.skipif(
    COMPOSE is None,
    reason="neither docker-compose (Debian package docker-compose) nor the docker compose plugin is installed",
)


def compose_config(tmp_path_factory: pytest.TempPathFactory, **env: str) -> subprocess.CompletedProcess[str]:
    """`docker-compose config` with a clean environment plus `env` (a developer's ./.env ignored)."""
    assert COMPOSE is not None
    empty_env_file = tmp_path_factory.mktemp("compose") / "empty.env"
    empty_env_file.write_text("")
    clean = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(empty_env_file.parent), **env}
    return subprocess.run(
        [*COMPOSE, "--env-file", str(empty_env_file), "-f", str(COMPOSE_FILE), "config"],
        capture_output=True, text=True, env=clean, cwd=REPO, check=False, timeout=120,
    )


def render(tmp_path_factory: pytest.TempPathFactory, **env: str) -> dict[str, Any]:
    """`docker-compose config` with a clean environment plus `env`; the rendered file, parsed."""
    proc = compose_config(tmp_path_factory, **env)
    assert proc.returncode == 0, f"docker-compose config failed:\n{proc.stderr}"
    config = yaml.safe_load(proc.stdout)
    assert isinstance(config, dict) and "services" in config
    return config


@pytest.fixture(scope="module")
def cfg(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The compose file rendered with the secrets set, as a user should run it."""
    if COMPOSE is None:
        pytest.skip("neither docker-compose nor the docker compose plugin is installed")
    return render(tmp_path_factory, **SECRETS)


# ----------------------------------------------------------------------------------------- helpers

def env_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # KEY=VALUE form
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def argv_of(value: Any) -> list[str]:
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def size_bytes(value: Any) -> int:
    """Compose sizes: an int (bytes) or "2gb", "512m", "1g"."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?", str(value).strip().lower())
    assert m, f"not a size: {value!r}"
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " "))


def flag(argv: list[str], name: str) -> str | None:
    """Value of `--name=value` or `--name value` in argv."""
    for i, arg in enumerate(argv):
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
    return None


def published_host_ips(port: Any) -> list[str | None]:
    """Host IP of a published port, short ("127.0.0.1:16379:6379/tcp") or long syntax; None if it
    is published on every interface; [] if it is not published at all."""
    if isinstance(port, dict):
        if port.get("published") in (None, ""):
            return []
        return [port.get("host_ip") or None]
    spec = str(port).rsplit("/", 1)[0]
    if spec.startswith("["):  # [::1]:8080:80
        host, _, rest = spec[1:].partition("]:")
        return [host] if ":" in rest else [None]
    parts = spec.split(":")
    if len(parts) == 1:  # "6379": a random host port on every interface
        return [None]
    if len(parts) == 2:  # "16379:6379": every interface
        return [None]
    return [":".join(parts[:-2]) or None]


def compose_text() -> str:
    return COMPOSE_FILE.read_text()


# --------------------------------------------------------------------------------- compose config

@needs_compose
@pytest.mark.parametrize("given", [(), ("REDIS_PASSWORD",), ("RAY_AUTH_TOKEN",)], ids=["none", "redis", "ray"])
def test_config_refuses_to_start_without_its_secrets(given: tuple[str, ...],
                                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    # Before: a missing secret fell back silently to a fixed password and token written in this file.
    proc = compose_config(tmp_path_factory, **{name: SECRETS[name] for name in given})
    assert proc.returncode != 0
    missing = sorted(set(SECRETS) - set(given))
    assert any(f"set {name}" in proc.stderr for name in missing), proc.stderr
    assert "docs/deploy.md" in proc.stderr


def test_no_default_secret_is_written_in_the_file() -> None:
    text = compose_text()
    for name in SECRETS:
        uses = re.findall(r"\$\{" + name + r"([^}]*)\}", text)
        assert uses, f"{name} is not used"
        for rest in uses:
            assert rest.startswith(":?"), f"${{{name}{rest}}}: a secret must be required (:?), never defaulted"
    for old in ("dralab-dev-password", "dralab-dev-token"):
        assert old not in text


def test_services_exist(cfg: dict[str, Any]) -> None:
    missing = SERVICES - set(cfg["services"])
    assert not missing, f"services missing from docker-compose.yml: {sorted(missing)}"


def test_every_ray_container_has_the_same_token(cfg: dict[str, Any]) -> None:
    config = cfg
    services = config["services"]
    built_here = {name for name, svc in services.items() if "build" in svc}  # our image runs Ray
    tokens = {}
    for name in sorted(RAY_SERVICES | built_here):
        env = env_of(services[name])
        assert env.get("RAY_AUTH_MODE") == "token", f"{name}: RAY_AUTH_MODE must be 'token'"
        assert env.get("RAY_AUTH_TOKEN"), f"{name}: RAY_AUTH_TOKEN is not set"
        tokens[name] = env["RAY_AUTH_TOKEN"]
    assert len(set(tokens.values())) == 1, f"Ray containers disagree on RAY_AUTH_TOKEN: {sorted(tokens)}"
    assert set(tokens.values()) == {SECRETS["RAY_AUTH_TOKEN"]}, "RAY_AUTH_TOKEN from the environment is ignored"


def test_ray_containers_share_one_image(cfg: dict[str, Any]) -> None:
    services = cfg["services"]
    images = {services[name].get("image") for name in RAY_SERVICES}
    assert len(images) == 1 and None not in images, f"Ray containers must run one image: {images}"
    for name in RAY_SERVICES:
        build = services[name].get("build")
        assert build, f"{name}: no build section; `docker compose up` could not build the image"
        context = build["context"] if isinstance(build, dict) else build
        assert Path(context).resolve() == REPO


def test_ray_topology(cfg: dict[str, Any]) -> None:
    services = cfg["services"]
    head = argv_of(services["ray-head"]["command"])
    assert head[:3] == ["ray", "start", "--head"] and "--block" in head
    assert flag(head, "--port") == RAY_GCS.split(":")[1], "Ray GCS must listen on 6380 (6379 is Redis)"
    assert flag(head, "--dashboard-host") in (None, "127.0.0.1", "localhost")
    assert flag(head, "--num-cpus") is not None
    worker = argv_of(services["ray-worker"]["command"])
    assert worker[:2] == ["ray", "start"] and "--head" not in worker and "--block" in worker
    assert flag(worker, "--address") == RAY_GCS
    assert env_of(services["dralab"]).get("RAY_ADDRESS") == RAY_GCS
    health = argv_of(services["ray-head"]["healthcheck"]["test"])
    assert "ray" in health and "status" in health


@pytest.mark.parametrize("name", sorted(RAY_SERVICES))
def test_shm_size_holds_the_object_store(cfg: dict[str, Any], name: str) -> None:
    svc = cfg["services"][name]
    assert "shm_size" in svc, f"{name}: no shm_size (Docker's default /dev/shm is 64 MB; Ray needs more)"
    shm = size_bytes(svc["shm_size"])
    assert shm >= 1024**3, f"{name}: shm_size {svc['shm_size']} is too small for Ray"
    store = flag(argv_of(svc.get("command")), "--object-store-memory") or env_of(svc).get(
        "DRALAB_OBJECT_STORE_MEMORY")
    if store:
        assert int(store) < shm, f"{name}: object store {store} B does not fit in /dev/shm ({shm} B)"


def test_redis_requires_a_password_and_keeps_an_aof(cfg: dict[str, Any]) -> None:
    redis = cfg["services"]["redis"]
    argv = argv_of(redis["command"])
    assert flag(argv, "--requirepass") == SECRETS["REDIS_PASSWORD"], "redis must require REDIS_PASSWORD"
    assert flag(argv, "--appendonly") == "yes"
    assert flag(argv, "--appendfsync") == "everysec"
    assert env_of(redis).get("REDISCLI_AUTH") == SECRETS["REDIS_PASSWORD"]
    health = " ".join(argv_of(redis["healthcheck"]["test"]))
    assert "redis-cli" in health
    assert SECRETS["REDIS_PASSWORD"] not in health and " -a " not in f" {health} ", \
        "the healthcheck must take the password from REDISCLI_AUTH, not its command line"


def test_no_port_is_published_beyond_loopback(cfg: dict[str, Any]) -> None:
    for name, svc in cfg["services"].items():
        assert svc.get("network_mode") != "host", f"{name}: network_mode host publishes every port"
        for port in svc.get("ports") or []:
            for ip in published_host_ips(port):
                assert ip in ("127.0.0.1", "::1", "localhost"), \
                    f"{name}: port {port!r} is published on {ip or 'every interface'}; bind it to 127.0.0.1"


def test_ray_worker_scales(cfg: dict[str, Any]) -> None:
    worker = cfg["services"]["ray-worker"]
    assert "container_name" not in worker, "container_name prevents --scale ray-worker=N"
    assert not worker.get("ports"), "a fixed host port prevents --scale ray-worker=N"


def test_published_ports_in_the_source_are_loopback() -> None:
    """Also in the raw file, in case a variable could turn a port public."""
    raw = yaml.safe_load(compose_text())
    for name, svc in raw["services"].items():
        for port in svc.get("ports") or []:
            assert str(port).startswith("127.0.0.1:") or (isinstance(port, dict) and
                                                           port.get("host_ip") == "127.0.0.1"), (name, port)


# ------------------------------------------------------------------------------- the dralab command

def check_dralab_argv(argv: list[str], where: str) -> Any:
    assert argv and argv[0] == "dralab", f"{where}: not a dralab command: {argv}"
    try:
        return build_parser().parse_args(argv[1:])
    except SystemExit as exc:  # argparse said no
        raise AssertionError(f"{where}: the CLI rejects {shlex.join(argv)}") from exc


def test_dralab_service_command_is_accepted_by_the_cli(cfg: dict[str, Any]) -> None:
    svc = cfg["services"]["dralab"]
    ns = check_dralab_argv(argv_of(svc["command"]), "docker-compose.yml dralab.command")
    assert ns.command == "run"
    assert ns.ray == RAY_GCS
    # The Redis URL travels in the environment (DRALAB_REDIS_URL), never on the command line.
    assert ns.redis is None and "--redis" not in argv_of(svc["command"])
    assert svc["environment"]["DRALAB_REDIS_URL"] == f"redis://:{SECRETS['REDIS_PASSWORD']}@redis:6379/0"
    assert not ns.embedded
    scenario = REPO / ns.scenario
    assert not Path(ns.scenario).is_absolute() and ns.scenario.startswith("scenarios/")
    assert scenario.is_file(), f"the scenario the dralab service runs does not exist: {ns.scenario}"
    # the log goes to the named volume, so it outlives the container
    assert ns.log_file and ns.log_file.startswith("/data/")
    mounts = [v if isinstance(v, str) else f"{v.get('source')}:{v.get('target')}" for v in svc.get("volumes", [])]
    assert any(m.split(":")[1] == "/data" for m in mounts), f"/data is not a volume: {mounts}"
    # the driver joins the cluster first (a Ray driver needs a local raylet)
    assert argv_of(svc.get("entrypoint")) == ["dralab-driver-entrypoint"]


def test_scenario_is_chosen_with_dralab_scenario(tmp_path_factory: pytest.TempPathFactory) -> None:
    if COMPOSE is None:
        pytest.skip("neither docker-compose nor the docker compose plugin is installed")
    config = render(tmp_path_factory, **SECRETS, DRALAB_SCENARIO="scenarios/other.yaml")
    ns = check_dralab_argv(argv_of(config["services"]["dralab"]["command"]), "dralab.command")
    assert ns.scenario == "scenarios/other.yaml"


_DRALAB_CMD = re.compile(r"(?<![\w/.-])dralab\s+(?:sim|run|replay)\b[^\n|;&>`]*")


def _expand_defaults(text: str) -> str:
    """Shell/compose `${VAR:-default}` -> default, `${VAR}` / `$VAR` -> VAR (a placeholder)."""
    text = re.sub(r"\$\{(\w+):?[-?][^}]*?\}", lambda m: _default(m.group(0), m.group(1)), text)
    return re.sub(r"\$\{?(\w+)\}?", r"\1", text)


def _default(expr: str, var: str) -> str:
    m = re.match(r"\$\{\w+:?-(.*)\}$", expr)
    return m.group(1) if m else var


def dralab_commands_in(path: Path) -> list[list[str]]:
    """`dralab sim|run|replay ...` commands: in shell scripts outside comments, in Markdown inside
    fenced code blocks (prose may name a subcommand without its arguments)."""
    out = []
    in_fence = False
    for line in re.sub(r"\\\n\s*", " ", path.read_text()).splitlines():  # join continued lines
        if path.suffix == ".md":
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
                continue
            if not in_fence:
                continue
        elif line.lstrip().startswith("#"):
            continue
        for m in _DRALAB_CMD.finditer(line):
            cmd = m.group(0).strip().rstrip("`")
            out.append(shlex.split(_expand_defaults(cmd)))
    return out


def test_dralab_commands_in_scripts_and_docs_are_accepted() -> None:
    files = sorted(DOCKER_DIR.glob("*.sh")) + [COMPOSE_FILE, DEPLOY_DOC]
    seen = 0
    for path in files:
        if not path.exists():
            continue
        for argv in dralab_commands_in(path):
            ns = check_dralab_argv(argv, str(path.relative_to(REPO)))
            scenario = getattr(ns, "scenario", None)
            if scenario and not Path(scenario).is_absolute():  # a path in the image, i.e. in the repo
                assert (REPO / scenario).is_file(), f"{path.name}: no such scenario {scenario}"
            seen += 1
    assert seen >= 3, "expected dralab commands in docker-compose.yml and docs/deploy.md"


# ---------------------------------------------------------------------------- docker/ entrypoints

@pytest.mark.parametrize("script", sorted(p.name for p in DOCKER_DIR.glob("*.sh")))
def test_entrypoint_scripts_are_valid_posix_sh(script: str) -> None:
    path = DOCKER_DIR / script
    assert path.read_text().startswith("#!/bin/sh\n")
    assert path.stat().st_mode & stat.S_IXUSR, f"{script} is not executable"
    sh = shutil.which("sh") or pytest.skip("no sh")
    proc = subprocess.run([sh, "-n", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_driver_entrypoint_joins_runs_leaves_and_keeps_the_status(tmp_path: Path) -> None:
    """With a stub `ray` on PATH: `ray start --address`, the command, `ray stop`, the command's status."""
    calls = tmp_path / "calls"
    stub = tmp_path / "bin" / "ray"
    stub.parent.mkdir()
    stub.write_text(f'#!/bin/sh\necho "$*" >> {shlex.quote(str(calls))}\n')
    stub.chmod(0o755)
    env = {"PATH": f"{stub.parent}:/usr/bin:/bin", "RAY_ADDRESS": RAY_GCS, "DRALAB_OBJECT_STORE_MEMORY": "123"}
    script = str(DOCKER_DIR / "driver-entrypoint.sh")
    proc = subprocess.run(["sh", script, "sh", "-c", "echo ran; exit 3"], env=env, capture_output=True,
                          text=True, check=False, timeout=30)
    assert proc.returncode == 3 and proc.stdout == "ran\n"
    lines = calls.read_text().splitlines()
    assert lines[0].split()[:2] == ["start", f"--address={RAY_GCS}"] and "--num-cpus=0" in lines[0]
    assert "--object-store-memory=123" in lines[0]
    assert lines[-1].split()[0] == "stop"
    # no RAY_ADDRESS: fail before doing anything
    env.pop("RAY_ADDRESS")
    calls.unlink()
    proc = subprocess.run(["sh", script, "true"], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "RAY_ADDRESS" in proc.stderr and not calls.exists()


# ---------------------------------------------------------------------------------------- Dockerfile

def dockerfile_instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def test_dockerfile_base_image_is_python_3_11() -> None:
    froms = [rest for op, rest in dockerfile_instructions() if op == "FROM"]
    assert froms, "Dockerfile has no FROM"
    image = froms[-1].split()[0]
    assert re.fullmatch(r"python:3\.11\.\d+(-slim(-\w+)?)?", image), \
        f"base image {image}: want python:3.11.<patch>[-slim] (a pinned patch: every Ray process needs the same)"


def test_dockerfile_installs_the_project_as_non_root() -> None:
    ins = dockerfile_instructions()
    runs = " ".join(rest for op, rest in ins if op == "RUN")
    assert re.search(r"pip install\b[^&;]*\s\.(\s|$)", runs), "the Dockerfile must `pip install .`"
    copied = [rest.split()[:-1] for op, rest in ins if op == "COPY"]
    sources = {Path(src).as_posix().rstrip("/") for srcs in copied for src in srcs if not src.startswith("--")}
    for needed in ("pyproject.toml", "README.md", "cli", "core", "actors", "replay", "scenarios"):
        assert needed in sources, f"the Dockerfile does not COPY {needed}"
    for src in sorted(sources):
        assert (REPO / src).exists(), f"the Dockerfile copies {src}, which is not in the repository"
    users = [rest for op, rest in ins if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "the image must run as a non-root user"


def test_dockerignore_keeps_junk_out() -> None:
    patterns = {line.strip().rstrip("/") for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    for junk in (".git", ".venv", "**/__pycache__", ".pytest_cache", "*.dralog"):
        assert junk in patterns, f".dockerignore should exclude {junk}"
    for kept in ("pyproject.toml", "cli", "core", "actors", "replay", "scenarios", "README.md", "docker"):
        assert kept not in patterns and f"/{kept}" not in patterns, f".dockerignore excludes {kept}"


def test_images_are_pinned_exactly(cfg: dict[str, Any]) -> None:
    # Before: redis:7-alpine, a tag that moves to every new 7.x release.
    for name, svc in cfg["services"].items():
        if "build" in svc:
            continue
        image = str(svc.get("image"))
        repo, _, tag = image.partition(":")
        assert re.match(r"\d+\.\d+\.\d+(-|$)", tag) or "@sha256:" in image, \
            f"{name}: image {image} is not pinned to an exact version (major.minor.patch or a digest)"
    base = [rest for op, rest in dockerfile_instructions() if op == "FROM"][-1].split()[0]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-(bookworm|trixie|bullseye)", base), \
        f"base image {base}: name the Python patch and the Debian release, or the tag floats"


def _required_distributions() -> dict[str, str]:
    """Every distribution `pip install .` installs (dralab's requirements without its extras, and theirs,
    with the extras asked for), read from this venv's metadata: normalized name -> who needs it."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    needed: dict[str, str] = {}
    todo: list[tuple[str, frozenset[str], str]] = [("dralab", frozenset(), "")]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras, parent = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        if parent:
            needed.setdefault(name, parent)
        for text in importlib.metadata.requires(name) or []:
            req = Requirement(text)
            if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
                continue
            todo.append((canonicalize_name(req.name), frozenset(req.extras), name))
    return needed


def test_constraints_pin_every_distribution_pip_install_installs() -> None:
    # Before: 25 of them (numpy, matplotlib and its stack, pydantic, ...) were not pinned at all.
    from packaging.utils import canonicalize_name

    pins = {canonicalize_name(name): version for name, version in
            (line.split("==", 1) for line in (DOCKER_DIR / "constraints.txt").read_text().splitlines()
             if "==" in line and not line.startswith("#"))}
    needed = _required_distributions()
    assert {"ray", "redis", "hiredis", "numpy", "matplotlib"} <= set(needed)
    missing = {name: parent for name, parent in needed.items() if name not in pins}
    assert not missing, f"docker/constraints.txt does not pin (name: needed by): {missing}"
    lines = [line for line in (DOCKER_DIR / "constraints.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert all(re.fullmatch(r"[a-z0-9-]+==[\w.]+", line) for line in lines), "one `name==version` a line"


def test_image_pins_the_ray_we_test_with() -> None:
    """The image's Ray must be the Ray of our machines (a host driver or tool must match it)."""
    pins = dict(line.split("==", 1) for line in (DOCKER_DIR / "constraints.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert "ray" in pins
    try:
        installed = importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("ray is not installed here")
    assert pins["ray"] == installed, f"docker/constraints.txt pins ray {pins['ray']}, this venv has {installed}"


# ----------------------------------------------------------------------------------------- secrets

def test_redis_password_is_redacted_from_the_url(cfg: dict[str, Any]) -> None:
    shown = redact_url(cfg["services"]["dralab"]["environment"]["DRALAB_REDIS_URL"])
    assert SECRETS["REDIS_PASSWORD"] not in shown
    assert "redis:6379" in shown


@pytest.mark.parametrize("url", [
    "redis://:{pw}@redis:6379/0",
    "redis://default:{pw}@redis:6379/0",
    "rediss://user:{pw}@redis.example.com:6380/1",
    "redis://redis:6379/0?password={pw}",
    "redis://{pw}@redis:6379",
])
def test_redact_url_never_shows_the_password(url: str) -> None:
    pw = SECRETS["REDIS_PASSWORD"]
    assert pw not in redact_url(url.format(pw=pw))


def test_no_secret_in_healthchecks_or_dockerfile(cfg: dict[str, Any]) -> None:
    """Healthcheck commands show up in `docker inspect` and events; the image must not bake secrets in."""
    for name, svc in cfg["services"].items():
        health = " ".join(argv_of((svc.get("healthcheck") or {}).get("test")))
        for secret in SECRETS.values():
            assert secret not in health, f"{name}: a secret in the healthcheck"
    docker_text = DOCKERFILE.read_text() + "".join(p.read_text() for p in DOCKER_DIR.glob("*.sh"))
    for word in ("REDIS_PASSWORD=", "RAY_AUTH_TOKEN=", "requirepass"):
        assert word not in docker_text, f"{word!r} in the Dockerfile or docker/ scripts"

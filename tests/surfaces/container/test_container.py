"""The container: the Dockerfile's image, and compose.yaml's service beside PostgreSQL.

No Docker daemon runs here or in CI, so the image is checked by its own commands: the
Dockerfile is read, its stages' RUN lines run in a fresh directory standing for the
image's file system (the wheel built, then ``docker/install.sh`` into a fresh virtual
environment), and the container's entry point and health check run as the image would
run them, with the image's environment: the first start makes a key, the service
listens on every interface with keys required, the health check passes, an
authenticated add and search work and an unauthenticated request is refused.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"


# The Dockerfile, read ----------------------------------------------------------------------
@dataclass
class Stage:
    base: str
    name: str | None
    steps: list[tuple[str, str]] = field(default_factory=list)

    def all(self, instruction: str) -> list[str]:
        return [args for name, args in self.steps if name == instruction]

    def last(self, instruction: str) -> str:
        found = self.all(instruction)
        assert found, f"the Dockerfile's final stage has no {instruction}"
        return found[-1]


def read_dockerfile(text: str) -> list[Stage]:
    """The stages of ``text``, each with its (INSTRUCTION, arguments) in order; lines
    continued with a backslash are joined, comments and parser directives dropped."""
    logical, pending = [], ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    stages: list[Stage] = []
    for line in logical:
        instruction, _, args = line.strip().partition(" ")
        instruction, args = instruction.upper(), " ".join(args.split())
        if instruction == "FROM":
            base, _, alias = args.partition(" AS ") if " AS " in args else args.partition(" as ")
            stages.append(Stage(base.strip(), alias.strip() or None))
        else:
            assert stages, f"{instruction} before FROM"
            stages[-1].steps.append((instruction, args))
    return stages


def exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), f"not the exec form: {args}"
    return value


def env_pairs(args: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in shlex.split(args))


STAGES = read_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))
FINAL = STAGES[-1]
HEALTHCHECK = FINAL.last("HEALTHCHECK")
HEALTH_CMD = exec_form(HEALTHCHECK.split(" CMD ", 1)[1])
ENTRYPOINT = exec_form(FINAL.last("ENTRYPOINT"))
CMD = exec_form(FINAL.last("CMD"))
IMAGE_ENV = {k: v for args in FINAL.all("ENV") for k, v in env_pairs(args).items()}


def test_the_image_is_slim_python_311() -> None:
    assert len(STAGES) >= 1
    for stage in STAGES:
        assert stage.base == "python:3.11-slim", stage.base


def test_the_service_runs_as_a_user_of_its_own() -> None:
    users = FINAL.all("USER")
    assert users, "no USER: the service would run as root"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0 and gid.isdigit() and int(gid) > 0, f"USER {users[-1]}: a numeric non-root uid:gid"
    names = [name for name, _ in FINAL.steps]
    assert names.index("USER") < names.index("ENTRYPOINT")
    made = " ".join(FINAL.all("RUN"))
    assert f"useradd --system --uid {uid} --gid {gid}" in made and f"groupadd --system --gid {gid}" in made
    assert f"chown {uid}:{gid} /data" in made


def test_hadolint_and_shellcheck_find_nothing() -> None:
    """The Dockerfile and the container's scripts, linted (both tools are in the dev
    extra, as wheels carrying their binaries)."""
    bin_dir = Path(sys.executable).parent
    for argv in ([str(bin_dir / "hadolint"), "Dockerfile"],
                 [str(bin_dir / "shellcheck"), *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docker").glob("*.sh"))]):
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_store_is_a_volume_and_the_service_has_a_health_check() -> None:
    volume = FINAL.last("VOLUME")
    assert "/data" in (json.loads(volume) if volume.startswith("[") else volume.split())
    assert IMAGE_ENV["MEMORIST_DB"].startswith("/data/")
    assert FINAL.last("EXPOSE") == "6060"
    assert HEALTH_CMD[-1].endswith(":6060/healthz")
    assert re.search(r"--interval=\S+ .*--retries=\d+", HEALTHCHECK), HEALTHCHECK
    assert ENTRYPOINT == ["/opt/memorist/docker/start.sh"] and CMD == ["serve"]


def test_the_build_context_holds_what_the_dockerfile_copies() -> None:
    """Every COPY source exists and .dockerignore lets it through (it lets only what
    it names through); every script the image runs is one of docker/'s."""
    ignore = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert ignore[0] == "*", "the .dockerignore should name what goes in, not what stays out"
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for stage in STAGES:
        for args in stage.all("COPY"):
            if args.startswith("--from="):
                continue
            *sources, _dest = args.split()
            for source in sources:
                assert (ROOT / source).exists(), source
                assert source.rstrip("/") in allowed, f"{source} is copied but .dockerignore keeps it out"
    used = re.findall(r"/opt/memorist/docker/([\w.-]+)", DOCKERFILE.read_text(encoding="utf-8"))
    assert used and all((ROOT / "docker" / name).is_file() for name in used), used


# The image's commands, run --------------------------------------------------------------
_IMAGE_PATHS = re.compile(r"(?<![\w./-])(/opt/memorist|/tmp/wheels|/wheels|/data|/src)(?=[/\s\"']|$)")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
           and not k.startswith("MEMORIST_")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if sys.prefix not in p)
    return env


@dataclass
class Image:
    """The image's file system under ``root``: its absolute paths map below it."""

    root: Path
    env: dict[str, str]

    def path(self, text: str) -> str:
        return _IMAGE_PATHS.sub(lambda m: str(self.root) + m.group(1), text)

    def argv(self, args: list[str]) -> list[str]:
        return [self.path(a) for a in args]


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    """The Dockerfile's stages, run in a fresh directory: each COPY copied, each RUN
    run (with the image's paths under that directory), the final ENV kept."""
    root = tmp_path_factory.mktemp("image")
    env = {**_clean_env(), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    img = Image(root, env)
    for stage in STAGES:
        workdir = root
        for instruction, args in stage.steps:
            if instruction == "WORKDIR":
                workdir = Path(img.path(args))
                workdir.mkdir(parents=True, exist_ok=True)
            elif instruction == "COPY":
                *sources, dest = args.split()
                if sources[0].startswith("--from="):
                    sources = sources[1:]
                    base = root
                else:
                    base = ROOT
                target = Path(img.path(dest)) if dest.startswith("/") else workdir / dest
                for source in sources:
                    # Docker's rules: a folder's contents go into the destination; a file
                    # goes into it when it ends with "/" (or there are several), else to it.
                    origin = Path(img.path(source)) if base is root else ROOT / source
                    if origin.is_dir():
                        shutil.copytree(origin, target, dirs_exist_ok=True,
                                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
                    elif dest.endswith("/") or len(sources) > 1:
                        target.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(origin, target / origin.name)
                    else:
                        target.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(origin, target)
            elif instruction == "ENV" and stage is FINAL:
                for key, value in env_pairs(args).items():
                    img.env[key] = img.path(value).replace("$PATH", img.env.get("PATH", ""))
            elif instruction == "RUN":
                if "useradd" in args:
                    # Making a system user is the image's; here the store's folder is made.
                    (root / "data").mkdir(exist_ok=True)
                    continue
                run_env = dict(img.env)
                done = subprocess.run(["sh", "-c", img.path(args)], cwd=workdir, env=run_env,
                                      capture_output=True, text=True, timeout=900)
                assert done.returncode == 0, f"RUN {args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert (root / "opt/memorist/venv/bin/memorist").is_file()
    return img


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Container:
    process: subprocess.Popen
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def health(image: Image, port: int) -> subprocess.CompletedProcess:
    argv = image.argv(HEALTH_CMD)
    argv[-1] = argv[-1].replace(":6060/", f":{port}/")
    return subprocess.run(argv, env=image.env, capture_output=True, text=True, timeout=30)


@pytest.fixture
def start(image: Image, tmp_path: Path) -> Iterator:
    """Starts the container's entry point with its command, as ``docker run`` would
    (another port than 6060: several test runs share this machine), and waits until
    the image's health check passes."""
    started: list[Container] = []

    def run(env: dict[str, str] | None = None) -> Container:
        port = free_port()
        log = tmp_path / f"container-{len(started)}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(image.argv(ENTRYPOINT) + CMD + ["--port", str(port), "--no-access-log"],
                                       cwd=image.root / "data", env={**image.env, **(env or {})},
                                       stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        container = Container(process, port, log)
        started.append(container)
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"the container stopped (exit {process.returncode}):\n{container.output()}")
            if health(image, port).returncode == 0:
                return container
            if time.monotonic() > deadline:
                pytest.fail(f"the health check never passed:\n{container.output()}")
            time.sleep(0.3)

    yield run
    for container in started:
        stop(container)


def stop(container: Container) -> None:
    if container.process.poll() is None:
        os.killpg(container.process.pid, signal.SIGTERM)
        try:
            container.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(container.process.pid, signal.SIGKILL)
            container.process.wait(timeout=30)


def memorist(image: Image, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """A command given to ``docker run IMAGE ...``: the entry point passes it to memorist."""
    return subprocess.run(image.argv(ENTRYPOINT) + list(args), cwd=image.root / "data", env={**image.env, **(env or {})},
                          capture_output=True, text=True, timeout=300)


def check_keys_required(container: Container, key: str) -> None:
    with httpx.Client(base_url=container.url, timeout=30, trust_env=False) as client:
        assert client.get("/api/memories/", params={"user_id": "alex"}).status_code == 401
        assert client.get("/api/memories/", params={"user_id": "alex"},
                          headers={"Authorization": "Bearer not-a-key"}).status_code == 401
        auth = {"Authorization": f"Bearer {key}"}
        added = client.post("/api/memories/", json={"messages": "I'm a vegetarian and I live in Lisbon.", "user_id": "alex"},
                            headers=auth)
        assert added.status_code == 200, added.text
        assert any("vegetarian" in r["memory"].lower() for r in added.json()["results"]), added.text
        found = client.post("/api/memories/search/", json={"query": "vegetarian food", "user_id": "alex"}, headers=auth)
        assert found.status_code == 200, found.text
        assert any("vegetarian" in r["memory"].lower() for r in found.json()["results"]), found.text


@pytest.mark.packaging
def test_the_first_start_makes_a_key_and_serves_with_keys_required(image: Image, start, tmp_path: Path) -> None:
    store = image.root / "data"
    for leftover in ("memorist.db", "api-key"):
        (store / leftover).unlink(missing_ok=True)
    container = start()
    key_file = Path(image.env["MEMORIST_KEY_FILE"])
    assert key_file.parent == store
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600, "the key file is readable by others"
    key = key_file.read_text().strip()
    assert key and len(key.split()) == 1
    output = container.output()
    assert "API keys required: 1 active key" in output, output
    assert f"written to {key_file}" in output and key not in output, "the key reached the log"
    assert f"http://0.0.0.0:{container.port}" in output, "not listening on every interface"
    check_keys_required(container, key)

    # A restart keeps the key: no second one is made, and the first still works.
    stop(container)
    again = start()
    assert key_file.read_text().strip() == key
    listed = memorist(image, "keys", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [k["tenant_id"] for k in json.loads(listed.stdout)] == ["default"]
    with httpx.Client(base_url=again.url, timeout=30, trust_env=False) as client:
        found = client.post("/api/memories/search/", json={"query": "vegetarian", "user_id": "alex"},
                            headers={"X-API-Key": key})
        assert found.status_code == 200 and found.json()["results"], found.text


@pytest.mark.packaging
def test_keys_made_before_the_first_start_are_the_only_ones(image: Image, start, tmp_path: Path) -> None:
    env = {"MEMORIST_DB": str(tmp_path / "own.db"), "MEMORIST_KEY_FILE": str(tmp_path / "api-key")}
    made = memorist(image, "keys", "create", "--tenant", "acme", env=env)
    assert made.returncode == 0, made.stderr
    container = start(env)
    assert not Path(env["MEMORIST_KEY_FILE"]).exists()
    check_keys_required(container, made.stdout.strip())
    listed = json.loads(memorist(image, "keys", "list", "--json", env=env).stdout)
    assert [k["tenant_id"] for k in listed] == ["acme"]


@pytest.mark.packaging
def test_the_first_start_on_postgresql(image: Image, start, tmp_path: Path, pg_url: str) -> None:
    """compose.yaml's service: the store is a PostgreSQL database."""
    env = {"MEMORIST_DB": pg_url, "MEMORIST_KEY_FILE": str(tmp_path / "api-key"), "MEMORIST_FIRST_TENANT": "team"}
    container = start(env)
    check_keys_required(container, Path(env["MEMORIST_KEY_FILE"]).read_text().strip())
    listed = json.loads(memorist(image, "keys", "list", "--json", env=env).stdout)
    assert [k["tenant_id"] for k in listed] == ["team"]


@pytest.mark.packaging
def test_a_damaged_store_is_not_given_a_key(image: Image, tmp_path: Path) -> None:
    """Only a missing store is a first start: a file that is not a store stops the
    container with memorist's error, and nothing is written into it."""
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a SQLite database" * 100)
    before = bad.read_bytes()
    done = subprocess.run(image.argv(ENTRYPOINT) + CMD + ["--port", str(free_port())], cwd=image.root / "data",
                          env={**image.env, "MEMORIST_DB": str(bad), "MEMORIST_KEY_FILE": str(tmp_path / "k")},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "error" in done.stderr.lower(), done.stderr
    assert bad.read_bytes() == before and not (tmp_path / "k").exists()


@pytest.mark.packaging
def test_without_a_key_memorist_refuses_to_serve_beyond_loopback(image: Image, tmp_path: Path) -> None:
    """What the entry point relies on: serve itself never runs open on 0.0.0.0."""
    done = subprocess.run([str(image.root / "opt/memorist/venv/bin/memorist"), "--db", str(tmp_path / "open.db"), "serve",
                           "--create", "--host", "0.0.0.0", "--port", str(free_port())],
                          env=image.env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "refusing to serve on 0.0.0.0" in done.stderr, done.stderr


@pytest.mark.packaging
def test_the_health_check_fails_when_nothing_answers(image: Image) -> None:
    assert health(image, free_port()).returncode == 1


# compose.yaml -----------------------------------------------------------------------------
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))


def _read_by_memorist() -> set[str]:
    """The MEMORIST_ variables memorist reads (memorist.config is the only reader of the
    environment) and those the container's entry point reads."""
    config = (ROOT / "src/memorist/config.py").read_text(encoding="utf-8")
    names = set(re.findall(r"\"(MEMORIST_[A-Z_]+)\"", config))
    names |= set(re.findall(r"\$\{(MEMORIST_[A-Z_]+)", (ROOT / "docker/start.sh").read_text(encoding="utf-8")))
    return names


def test_compose_runs_the_image_beside_postgresql_with_pgvector() -> None:
    services = COMPOSE["services"]
    assert set(services) == {"postgres", "memorist"}
    postgres, service = services["postgres"], services["memorist"]
    assert postgres["image"] == "pgvector/pgvector:pg16"
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert "ports" not in postgres, "the database should be reachable from the service only"
    assert service["build"] in (".", {"context": "."})
    assert service["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert service["healthcheck"]["test"] == ["CMD", *HEALTH_CMD]
    assert service["ports"] == ["6060:6060"]
    named = {v.split(":")[0] for s in services.values() for v in s.get("volumes", [])}
    assert named <= set(COMPOSE["volumes"]), "a named volume is not declared"
    assert any(v.endswith(":/data") for v in service["volumes"])


def test_compose_gives_the_service_only_variables_memorist_reads() -> None:
    env = COMPOSE["services"]["memorist"]["environment"]
    read = _read_by_memorist()
    assert {"MEMORIST_DB", "MEMORIST_TENANT", "MEMORIST_FIRST_TENANT", "MEMORIST_KEY_FILE"} <= read
    assert set(env) <= read, f"variables memorist never reads: {set(env) - read}"


def test_compose_points_the_service_at_its_database() -> None:
    from urllib.parse import urlsplit

    from memorist.store import store_kind

    pg = COMPOSE["services"]["postgres"]["environment"]
    url = COMPOSE["services"]["memorist"]["environment"]["MEMORIST_DB"]
    expanded = re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: m.group(2), url)
    assert store_kind(expanded) == "postgresql"
    parts = urlsplit(expanded)
    assert parts.hostname == "postgres" and parts.port == 5432
    assert parts.username == pg["POSTGRES_USER"] and parts.path == "/" + pg["POSTGRES_DB"]
    assert url.split("@")[0].endswith(":" + pg["POSTGRES_PASSWORD"]), "the service and the database disagree on the password"

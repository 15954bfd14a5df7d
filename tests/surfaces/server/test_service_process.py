"""`memorist serve` as a real process: spec 004's curl commands against it, its
start-up banner, and its refusal to open a keyless server to the network."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from memorist.cli import cli
from memorist.server import KeyStore

# Spec 004, "Testing with cURL", verbatim (checked against the spec below when it is beside us).
SPEC_CURL = """\
# Add memories
curl -X POST http://localhost:8000/api/memories/ \\
  -H "Content-Type: application/json" \\
  -d '{
    "messages": [
      {"role": "user", "content": "I am Alex and I love hiking"},
      {"role": "assistant", "content": "Nice to meet you Alex!"}
    ],
    "user_id": "alex"
  }'

# Search memories
curl -X POST http://localhost:8000/api/memories/search/ \\
  -H "Content-Type: application/json" \\
  -d '{
    "query": "outdoor activities",
    "user_id": "alex",
    "limit": 3
  }'

# Get all memories
curl http://localhost:8000/api/memories/alex/

# Delete a memory
curl -X DELETE "http://localhost:8000/api/memories/mem_1/?user_id=alex"
"""
SPEC = Path(__file__).resolve().parents[4] / "shared" / "spec" / "004_c5195bedc5842f87.txt"
CURL = shutil.which("curl")


def spec_commands() -> dict[str, list[str]]:
    """The spec's commands by their comment, as argument lists."""
    commands: dict[str, list[str]] = {}
    for block in SPEC_CURL.strip().split("\n\n"):
        comment, _, command = block.partition("\n")
        commands[comment.lstrip("# ")] = shlex.split(command.replace("\\\n", " "))
    return commands


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memorist(*args: str) -> list[str]:
    return [sys.executable, "-m", "memorist", *args]


def start(db: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    proc = subprocess.Popen(
        memorist("--db", db, "--embedder", "hashing", "serve", "--create", "--port", str(port), "--no-access-log", *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("MEMORIST_", "MEMORY_"))},
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"memorist serve exited with {proc.returncode}: {proc.stdout.read() if proc.stdout else ''}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.1)
    stop(proc)
    pytest.fail("memorist serve did not answer /healthz within 60 s")


def stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


def call(argv: list[str], port: int) -> tuple[int, object]:
    """Run a spec command against ``port``: with curl when installed, else its httpx equivalent."""
    argv = [a.replace("localhost:8000", f"localhost:{port}") for a in argv]
    if CURL:
        done = subprocess.run([CURL, "-sS", "-w", "\n%{http_code}", *argv[1:]], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        body, _, status = done.stdout.rpartition("\n")
        return int(status), json.loads(body)
    method, headers, data, url = "GET", {}, None, None
    args = iter(argv[1:])
    for arg in args:
        if arg == "-X":
            method = next(args)
        elif arg == "-H":
            name, _, value = next(args).partition(":")
            headers[name.strip()] = value.strip()
        elif arg == "-d":
            data, method = next(args), method if method != "GET" else "POST"
        else:
            url = arg
    r = httpx.request(method, url, headers=headers, content=data, timeout=30)
    return r.status_code, r.json()


def test_the_embedded_commands_are_the_specs() -> None:
    if not SPEC.is_file():
        pytest.skip("../shared/spec is not beside this checkout")
    assert SPEC_CURL in SPEC.read_text(encoding="utf-8")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc, base = start(str(tmp_path / "served.db"))
    try:
        yield proc, base
    finally:
        stop(proc)


def test_spec_curl_commands_against_memorist_serve(served) -> None:
    proc, base = served
    port = int(base.rsplit(":", 1)[1])
    cmds = spec_commands()

    status, added = call(cmds["Add memories"], port)
    assert status == 200
    assert {r["memory"] for r in added["results"]} == {"Name is Alex", "Loves hiking"}
    assert added["message"] == "Added 2 memories successfully"

    status, found = call(cmds["Search memories"], port)
    assert status == 200 and 1 <= len(found["results"]) <= 3
    assert {"id", "memory", "user_id", "created_at", "updated_at", "metadata"} <= set(found["results"][0])

    status, listed = call(cmds["Get all memories"], port)
    assert status == 200 and {r["id"] for r in listed["results"]} == {r["id"] for r in added["results"]}

    # Memorist's ids are not the spec's "mem_1": that one is unknown...
    status, missing = call(cmds["Delete a memory"], port)
    assert status == 404 and missing["error"]["type"] == "not_found"
    # ...and the same command with a real id deletes it.
    target = added["results"][0]["id"]
    status, deleted = call([a.replace("mem_1", target) for a in cmds["Delete a memory"]], port)
    assert status == 200 and deleted["event"] == "DELETE" and deleted["id"] == target
    _, listed = call(cmds["Get all memories"], port)
    assert target not in {r["id"] for r in listed["results"]}

    out = stop(proc)
    assert "Development mode" in out and base in out and "/docs" in out


def test_a_server_with_keys_requires_them(tmp_path: Path) -> None:
    db = str(tmp_path / "keyed.db")
    with KeyStore(db) as keys:
        key, _ = keys.create("acme", user_id="alex")
    proc, base = start(db)
    try:
        assert httpx.get(f"{base}/api/memories/alex/").status_code == 401
        r = httpx.post(f"{base}/api/memories", json={"messages": "I love hiking", "infer": False}, headers={"X-API-Key": key})
        assert r.status_code == 200
        assert httpx.get(f"{base}/api/memories/alex", headers={"Authorization": f"Bearer {key}"}).json()["results"][0]["memory"] == "I love hiking"
    finally:
        out = stop(proc)
    assert "API keys required: 1 active key" in out


def test_no_keys_and_a_public_host_is_refused_before_binding(tmp_path: Path) -> None:
    port = free_port()
    done = subprocess.run(
        memorist("--db", str(tmp_path / "open.db"), "serve", "--create", "--host", "0.0.0.0", "--port", str(port)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "refusing to serve on 0.0.0.0" in done.stderr and "memorist keys create" in done.stderr
    assert "Uvicorn running" not in done.stdout + done.stderr
    # The command it suggests, run as written, puts the key in the store served (the
    # store named by --db, not the default one).
    suggested = re.search(r"`memorist (keys create [^`]+)`", " ".join(done.stderr.split())).group(1)
    made = subprocess.run(memorist(*shlex.split(suggested.replace("NAME", "acme"))), capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    listed = subprocess.run(memorist("--db", str(tmp_path / "open.db"), "--json", "keys", "list"), capture_output=True, text=True, timeout=60)
    assert [k["tenant_id"] for k in json.loads(listed.stdout)] == ["acme"]


def test_the_refusal_never_reaches_uvicorn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    calls: list[dict] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(kw))
    db = str(tmp_path / "s.db")
    for host in ("0.0.0.0", "192.168.1.10", "example.com", "::"):
        r = CliRunner().invoke(cli, ["--db", db, "--embedder", "hashing", "serve", "--create", "--host", host])
        assert r.exit_code == 1 and "refusing to serve" in r.stderr, r.output
    assert calls == []
    # loopback in development mode, or any host once a key exists, starts
    r = CliRunner().invoke(cli, ["--db", db, "--embedder", "hashing", "serve", "--create", "--host", "::1", "--port", "7000"])
    assert r.exit_code == 0 and "Development mode" in r.stdout and "http://[::1]:7000" in r.stdout
    with KeyStore(db) as keys:
        keys.create("acme")
    r = CliRunner().invoke(cli, ["--db", db, "--embedder", "hashing", "serve", "--host", "0.0.0.0", "--rate-limit", "10/s"])
    assert r.exit_code == 0 and "API keys required" in r.stdout and "600 requests/min" in r.stdout
    assert [(c["host"], c["port"]) for c in calls] == [("::1", 7000), ("0.0.0.0", 6060)]
    r = CliRunner().invoke(cli, ["--db", db, "serve", "--rate-limit", "lots"])
    assert r.exit_code == 2 and "--rate-limit" in r.stderr


def test_a_missing_or_empty_store_is_not_served_unless_told_to_create_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    calls: list[dict] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(kw))
    typo = tmp_path / "memoris.db"
    r = CliRunner().invoke(cli, ["--db", str(typo), "--embedder", "hashing", "serve"])
    assert r.exit_code == 1 and "no store at" in r.stderr and "--create" in r.stderr, r.output
    assert not typo.exists()
    empty = tmp_path / "empty.db"
    empty.touch()
    r = CliRunner().invoke(cli, ["--db", str(empty), "--embedder", "hashing", "serve"])
    assert r.exit_code == 1 and "empty file, not a store" in r.stderr, r.output
    assert empty.stat().st_size == 0 and calls == []
    r = CliRunner().invoke(cli, ["--db", str(typo), "--embedder", "hashing", "serve", "--create"])
    assert r.exit_code == 0 and len(calls) == 1, r.output


def test_head_answers_as_get_through_the_served_http_stack(served) -> None:
    _, base = served
    for path in ("/", "/healthz", "/api/memories/?user_id=alex", "/openapi.json"):
        got, head = httpx.get(base + path, timeout=30), httpx.head(base + path, timeout=30)
        assert (head.status_code, head.content) == (got.status_code, b""), path
        assert head.headers["content-length"] == str(len(got.content)), path

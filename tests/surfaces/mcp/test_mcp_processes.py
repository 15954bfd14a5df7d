"""``memorist mcp`` as a host runs it: a real process, driven by the SDK's own client
session over stdio (``stdio_client``) and over streamable HTTP
(``streamable_http_client``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

pytest.importorskip("mcp.server.mcpserver")

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from memorist.cli import cli  # noqa: E402
from memorist.mcp_server import TOOLS  # noqa: E402

ENV = {"MEMORIST_EMBEDDER": "hashing"}


def memorist_mcp(db: str, *args: str) -> list[str]:
    # `python -m memorist` is the `memorist` console script (src/memorist/__main__.py).
    return ["-m", "memorist", "--db", db, "mcp", *args]


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def error(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result
    return result.content[0].text


def over_stdio(db: str, user: str, errlog: Path, body: Callable[[ClientSession], Awaitable[None]]) -> None:
    params = StdioServerParameters(command=sys.executable, args=memorist_mcp(db, "--user", user), env=ENV)

    async def main() -> None:
        with errlog.open("a") as log, anyio.fail_after(60):
            await drive(stdio_client(params, errlog=log), body)

    anyio.run(main)


async def drive(transport: AbstractAsyncContextManager[Any], body: Callable[[ClientSession], Awaitable[None]]) -> None:
    async with transport as (read, write), ClientSession(read, write) as session:
        info = await session.initialize()
        assert info.server_info.name == "memorist"
        assert "search_memories" in (info.instructions or "")
        await body(session)


def test_stdio_add_search_list_get_update_history_delete(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    errlog = tmp_path / "stderr.log"
    ids: dict[str, str] = {}

    async def alex(session: ClientSession) -> None:
        tools = {t.name for t in (await session.list_tools()).tools}
        # The memory tools, consolidation and sharing: every tool of the module but the energy policy's.
        assert tools >= {"add_memory", "search_memories", "list_memories", "get_memory", "update_memory", "delete_memory", "memory_history"}
        assert tools == {fn.__name__ for fn, hints in TOOLS if not hints.energy}
        added = await call(
            session,
            "add_memory",
            messages=[
                {"role": "user", "content": "Hi, I'm Alex. I'm a vegetarian and allergic to nuts."},
                {"role": "assistant", "content": "Hello Alex! I'll remember that."},
            ],
            metadata={"session_id": "s1"},
        )
        assert [r["memory"] for r in added["results"]] == ["Name is Alex", "Is vegetarian", "Allergic to nuts"]
        ids.update({r["memory"]: r["id"] for r in added["results"]})
        found = await call(session, "search_memories", query="Is vegetarian", limit=1)
        assert [r["id"] for r in found["results"]] == [ids["Is vegetarian"]]
        listed = await call(session, "list_memories")
        assert {r["id"] for r in listed["results"]} == set(ids.values())
        nuts = ids["Allergic to nuts"]
        got = await call(session, "get_memory", memory_id=nuts)
        assert got["user_id"] == "alex" and got["metadata"] == {"session_id": "s1"}
        await call(session, "update_memory", memory_id=nuts, text="Allergic to peanuts")
        assert (await call(session, "get_memory", memory_id=nuts))["memory"] == "Allergic to peanuts"
        deleted = await call(session, "delete_memory", memory_id=ids["Name is Alex"])
        assert deleted["event"] == "DELETE"
        history = (await call(session, "memory_history", memory_id=nuts))["results"]
        assert [(e["event"], e["new_memory"]) for e in history] == [
            ("ADD", "Allergic to nuts"),
            ("UPDATE", "Allergic to peanuts"),
        ]
        # Engine errors come back as tool errors naming the field or the id.
        assert "limit: must be > 0" in await error(session, "search_memories", query="food", limit=0)
        assert "memory not found: 'no-such-id'" in await error(session, "get_memory", memory_id="no-such-id")
        assert "memory not found" in await error(session, "get_memory", memory_id=ids["Name is Alex"])
        assert "messages: give messages" in await error(session, "add_memory")
        assert len((await call(session, "list_memories"))["results"]) == 2  # still serving

    async def bob(session: ClientSession) -> None:
        assert (await call(session, "list_memories"))["results"] == []
        assert "user_id" in await error(session, "search_memories", query="vegetarian nuts", user_id="alex")  # not an argument
        assert (await call(session, "search_memories", query="vegetarian nuts"))["results"] == []
        for memory_id in ids.values():
            assert "memory not found" in await error(session, "get_memory", memory_id=memory_id)
            assert "memory not found" in await error(session, "memory_history", memory_id=memory_id)
        nuts = ids["Allergic to nuts"]
        assert "memory not found" in await error(session, "update_memory", memory_id=nuts, text="pwned")
        assert "memory not found" in await error(session, "delete_memory", memory_id=nuts)
        await call(session, "add_memory", text="Likes jazz", infer=False)

    over_stdio(db, "alex", errlog, alex)
    over_stdio(db, "bob", errlog, bob)

    async def alex_again(session: ClientSession) -> None:
        memories = sorted(r["memory"] for r in (await call(session, "list_memories"))["results"])
        assert memories == ["Allergic to peanuts", "Is vegetarian"]

    over_stdio(db, "alex", errlog, alex_again)
    assert "Traceback" not in errlog.read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"memorist mcp exited with {process.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"memorist mcp did not listen on port {port} within {timeout} s")


def test_streamable_http_transport(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    port = _free_port()
    errlog = (tmp_path / "stderr.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, *memorist_mcp(db, "--user", "alex", "--transport", "http", "--port", str(port))],
        env={**os.environ, **ENV},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=errlog,
    )
    try:
        _wait_for_port(port, process)

        async def body(session: ClientSession) -> None:
            added = await call(session, "add_memory", text="I love hiking in the Alps.")
            assert added["results"]
            found = await call(session, "search_memories", query="hiking")
            assert found["results"][0]["user_id"] == "alex"
            assert "memory not found" in await error(session, "delete_memory", memory_id="nope")

        async def main() -> None:
            with anyio.fail_after(30):
                await drive(streamable_http_client(f"http://127.0.0.1:{port}/mcp"), body)

        anyio.run(main)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        errlog.close()
    log = (tmp_path / "stderr.log").read_text()
    assert f"http://127.0.0.1:{port}/mcp" in log and "Traceback" not in log


def test_the_command_refuses_what_it_cannot_serve_safely(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", db, "mcp"])
    assert result.exit_code == 2 and "--user, --agent or --run" in result.output
    result = runner.invoke(cli, ["--db", db, "mcp", "--user", "alex", "--transport", "http", "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "--allow-remote" in result.output
    result = runner.invoke(cli, ["--db", db, "mcp", "--user", "a\x00b"])
    assert result.exit_code == 1 and "--user" in result.output
    assert not os.path.exists(db)  # refused before a store was created

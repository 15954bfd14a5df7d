"""Every surface serves the declared calls (memorist.api) with the declared parameters.

A parameter added to a declaration fails here until Memory, AsyncMemory, both clients,
the REST route, the MCP tool and the CLI command take it (or the call's surface entry
says, with a reason, that this surface does not); a call added to MemoryAPI fails until
it is placed on every surface. Renamed and omitted parameters are read from the
declarations, never assumed here.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from memorist import AsyncClient, AsyncMemory, Client, Memory
from memorist.api import CALLS, CAPABILITY_CALLS, SCOPE_IDS, Call, MemoryAPI, Scoped, parameters

IDS = [c.name for c in CALLS]
EVERY = CALLS + CAPABILITY_CALLS
REST = [c for c in EVERY if c.rest]
MCP = [c for c in EVERY if c.mcp]
CLI = [c for c in EVERY if c.cli]
# The options every command takes, before or after its name.
COMMON = {"db", "json", "embedder", "decay_days", "policy"}


def _declared_names(call: Call) -> list[str]:
    """The declaration's public parameters (a leading underscore: the library's own plumbing)."""
    return [name for name, _, _ in parameters(call.declared) if not name.startswith("_")]


def _expected(call: Call, surface: Any) -> set[str]:
    """The parameter names the surface must have: the declaration's, renamed, minus the omitted, plus its own."""
    names: set[str] = set()
    for name in _declared_names(call):
        if name in surface.omitted:
            continue
        names.update(surface.renamed.get(name, name).split("|"))
    return names | set(surface.extra)


def test_every_declared_call_is_placed_on_the_surfaces() -> None:
    declared = {n for n, v in vars(MemoryAPI).items() if callable(v) and not n.startswith("_")}
    assert declared == {c.name for c in CALLS}
    from memorist.capabilities import LEARNING_CALLS, Minutes, Tiers
    from memorist.relations import Relations

    every = {("learning", n) for n in LEARNING_CALLS} | {("tiers", n) for n in Tiers.CALLS} | {("minutes", n) for n in Minutes.CALLS}
    every |= {("relations", n) for n in Relations.CALLS}
    assert {(c.capability, c.name) for c in CAPABILITY_CALLS} == every, "every capability call is placed (None: on purpose)"
    for call in EVERY:
        for surface in (call.rest, call.mcp, call.cli):
            if surface is None:
                continue
            unknown = (set(surface.renamed) | set(surface.omitted)) - set(_declared_names(call))
            assert not unknown, f"{call.qualname}: {surface.name} renames or omits parameters the call does not have: {unknown}"
            assert all(reason.strip() for reason in surface.omitted.values()), f"{call.qualname}: say why {surface.name} omits it"


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_memory_implements_the_declaration(call: Call) -> None:
    method = getattr(Memory, call.name)
    assert parameters(method) == parameters(call.declared), f"Memory.{call.name} differs from its declaration"
    assert method.__doc__ == call.declared.__doc__, f"Memory.{call.name} must take its docstring from the declaration"


@pytest.mark.parametrize("cls", [AsyncMemory, Client, AsyncClient])
@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_the_async_memory_and_the_clients_take_the_declared_arguments(call: Call, cls: type) -> None:
    method = getattr(cls, call.name)
    assert parameters(method) == parameters(call.declared), f"{cls.__name__}.{call.name} differs from its declaration"
    assert inspect.iscoroutinefunction(method) == (cls is not Client)
    assert method.__doc__ == call.declared.__doc__


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_the_clients_build_each_request_from_every_declared_argument(call: Call) -> None:
    from memorist.client import _Calls

    assert [p[0] for p in parameters(getattr(_Calls, call.name))] == _declared_names(call)


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_the_scoped_handle_takes_the_declared_arguments_but_the_ids(call: Call) -> None:
    expected = [p for p in parameters(call.declared) if p[0] not in SCOPE_IDS]
    assert parameters(getattr(Scoped, call.name)) == expected


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    from memorist.server import create_app

    app = create_app(":memory:", embedder="hashing")
    try:
        return app.openapi()
    finally:
        app.state.service.close()


def _rest_parameters(spec: dict[str, Any], method: str, path: str) -> set[str]:
    operation = spec["paths"][path][method.lower()]
    names = {p["name"] for p in operation.get("parameters", [])}
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body is not None:
        ref = body["$ref"].rsplit("/", 1)[1]
        names |= set(spec["components"]["schemas"][ref]["properties"])
    return names


@pytest.mark.parametrize("call", REST, ids=[c.qualname for c in REST])
def test_the_rest_route_takes_the_declared_parameters(call: Call, openapi: dict[str, Any]) -> None:
    method, path = call.rest.name.split(" ", 1)
    assert path in openapi["paths"] and method.lower() in openapi["paths"][path], f"no route {call.rest.name}"
    assert _rest_parameters(openapi, method, path) == _expected(call, call.rest)


def _served_type(result: str) -> str | None:
    """The memorist.model type a call's result is served as: itself, or for ``list[X]``
    the type whose ``results`` is that list (None: a plain value the route wraps)."""
    import typing

    from typing_extensions import is_typeddict  # the model's TypedDicts are typing_extensions'

    from memorist import model

    if not result.startswith("list["):
        return result if is_typeddict(getattr(model, result, None)) else None
    item = result[len("list["):-1]
    for name, value in vars(model).items():
        hints = typing.get_type_hints(value) if is_typeddict(value) else {}
        if set(hints) == {"results"} and getattr(hints["results"], "__args__", (None,))[0] is getattr(model, item, object()):
            return name
    return None


@pytest.mark.parametrize("call", REST, ids=[c.qualname for c in REST])
def test_the_rest_route_answers_the_declared_result_type(call: Call, openapi: dict[str, Any]) -> None:
    method, path = call.rest.name.split(" ", 1)
    responses = openapi["paths"][path][method.lower()]["responses"]
    schema = next(r for code, r in responses.items() if code.startswith("2"))["content"]["application/json"]["schema"]
    wanted = _served_type(inspect.signature(call.declared).return_annotation)
    if call.capability is None or wanted is not None:
        assert wanted is not None, f"{call.qualname} returns no memorist.model type"
        assert schema == {"$ref": f"#/components/schemas/{wanted}"}, f"{call.rest.name} does not answer memorist.model.{wanted}"


@pytest.fixture(scope="module")
def mcp_tools() -> dict[str, set[str]]:
    from memorist.mcp_server import create_server

    memory = Memory(":memory:", embedder="hashing", policy="energy")  # with the energy tiers' tool too
    try:
        tools = asyncio.run(create_server(memory, user_id="u").list_tools())
    finally:
        memory.close()
    return {t.name: set(t.input_schema["properties"]) for t in tools}


def test_every_mcp_tool_is_a_declared_call(mcp_tools: dict[str, set[str]]) -> None:
    assert set(mcp_tools) == {c.mcp.name for c in MCP}


@pytest.mark.parametrize("call", MCP, ids=[c.qualname for c in MCP])
def test_the_mcp_tool_takes_the_declared_parameters(call: Call, mcp_tools: dict[str, set[str]]) -> None:
    assert call.mcp.name in mcp_tools, f"no MCP tool {call.mcp.name}"
    assert mcp_tools[call.mcp.name] == _expected(call, call.mcp)


@pytest.mark.parametrize("call", CLI, ids=[c.qualname for c in CLI])
def test_the_cli_command_takes_the_declared_parameters(call: Call) -> None:
    from memorist.cli import cli

    command: Any = cli
    for word in call.cli.name.split():
        command = command.commands.get(word) if hasattr(command, "commands") else None
        assert command is not None, f"no command `memorist {call.cli.name}`"
    assert {p.name for p in command.params} - COMMON == _expected(call, call.cli)


def _numeric_defaults(call: Call, surface: Any) -> dict[str, float]:
    """The declaration's numeric defaults (limits, thresholds, windows) by the names
    ``surface`` serves them under: a surface that takes such a parameter must default
    it alike, or the same call returns another number of results by where it is made."""
    defaults: dict[str, float] = {}
    for name, _, default in parameters(call.declared):
        if name.startswith("_") or name in surface.omitted:
            continue
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            for served in surface.renamed.get(name, name).split("|"):
                defaults[served] = default
    return defaults


@pytest.mark.parametrize("call", CLI, ids=[c.qualname for c in CLI])
def test_the_cli_command_defaults_the_declared_numbers_alike(call: Call) -> None:
    from memorist.cli import cli

    command: Any = cli
    for word in call.cli.name.split():
        command = command.commands[word]
    served = {p.name: p.default for p in command.params}
    for name, default in _numeric_defaults(call, call.cli).items():
        assert served.get(name) == default, f"`memorist {call.cli.name}` --{name} defaults to {served.get(name)!r}, the call to {default!r}"


@pytest.mark.parametrize("call", REST, ids=[c.qualname for c in REST])
def test_the_rest_route_defaults_the_declared_numbers_alike(call: Call, openapi: dict[str, Any]) -> None:
    method, path = call.rest.name.split(" ", 1)
    operation = openapi["paths"][path][method.lower()]
    served = {p["name"]: p.get("schema", {}).get("default") for p in operation.get("parameters", [])}
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body is not None:
        properties = openapi["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]["properties"]
        served |= {name: schema.get("default") for name, schema in properties.items()}
    for name, default in _numeric_defaults(call, call.rest).items():
        assert served.get(name) == default, f"{call.rest.name} {name} defaults to {served.get(name)!r}, the call to {default!r}"


@pytest.fixture(scope="module")
def mcp_defaults() -> dict[str, dict[str, Any]]:
    from memorist.mcp_server import create_server

    memory = Memory(":memory:", embedder="hashing", policy="energy")
    try:
        tools = asyncio.run(create_server(memory, user_id="u").list_tools())
    finally:
        memory.close()
    return {t.name: {n: p.get("default") for n, p in t.input_schema["properties"].items()} for t in tools}


@pytest.mark.parametrize("call", MCP, ids=[c.qualname for c in MCP])
def test_the_mcp_tool_defaults_the_declared_numbers_alike(call: Call, mcp_defaults: dict[str, dict[str, Any]]) -> None:
    served = mcp_defaults[call.mcp.name]
    for name, default in _numeric_defaults(call, call.mcp).items():
        assert served.get(name) == default, f"MCP tool {call.mcp.name} {name} defaults to {served.get(name)!r}, the call to {default!r}"


def test_the_user_s_list_route_takes_what_the_list_route_takes(openapi: dict[str, Any]) -> None:
    # GET /api/memories/{id}/ is GET /api/memories/?user_id= by another path: the same
    # parameters (the user in the path) and the same defaults.
    def parameters(path: str) -> dict[str, Any]:
        return {p["name"]: p.get("schema", {}).get("default") for p in openapi["paths"][path]["get"]["parameters"]}

    by_user, listed = parameters("/api/memories/{id}/"), parameters("/api/memories/")
    assert by_user.pop("id", "missing") is None and listed.pop("user_id", "missing") is None
    assert by_user == listed


# A narrow core: the memory calls, the lifecycle, and one attribute per capability. ----------
CORE = {
    # the memory calls (mem0's) and the scoped handle
    "add", "search", "get", "get_all", "update", "delete", "delete_all", "erase", "history", "reset", "scope",
    # undoing a merge or a reconciliation
    "rollback",
    # the lifecycle: the log, counts, transfer, indexes, integrity, configuration
    "events", "stats", "export", "import_", "reindex", "check", "backup", "close", "from_config", "set_policy",
    # a handle acting as a user or agent, checked against the relation tuples
    "as_subject",
    # add's turns whose LLM extraction failed, and what the models cost
    "pending", "reprocess", "llm_usage",
    # the CLI's id prefixes
    "resolve_id",
    # settings read or assigned
    "energy", "ranking", "learning_config",
}
CAPABILITIES = {"playbooks", "learning", "tiers", "minutes", "relations"}


def test_memory_s_own_names_are_the_core_and_one_attribute_per_capability() -> None:
    assert {n for n in dir(Memory) if not n.startswith("_")} == CORE | CAPABILITIES


@pytest.mark.parametrize("capability", ["learning", "tiers", "minutes", "relations"])
def test_async_memory_awaits_every_call_of_each_capability(capability: str, tmp_path) -> None:
    from memorist.capabilities import LEARNING_CALLS, Minutes, Tiers
    from memorist.relations import Relations

    names = {"learning": LEARNING_CALLS, "tiers": Tiers.CALLS, "minutes": Minutes.CALLS, "relations": Relations.CALLS}[capability]
    with Memory(str(tmp_path / "c.db"), embedder="hashing") as memory:
        sync = getattr(memory, capability)
        public = {n for n in dir(sync) if not n.startswith("_") and callable(getattr(sync, n))} - {"engine"}
        assert public >= set(names)
        asynchronous = getattr(AsyncMemory, capability).fget(object.__new__(AsyncMemory))
        for name in names:
            method = getattr(type(asynchronous), name)
            assert inspect.iscoroutinefunction(method), f"AsyncMemory.{capability}.{name}"
            assert parameters(method) == parameters(getattr(type(sync), name)), f"AsyncMemory.{capability}.{name}"

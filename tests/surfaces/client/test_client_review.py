"""memorist.Client against a live service, where an outside review found it answering
otherwise than the embedded Memory: a refused write, filters that are not Memory's,
rollback's argument, an update of a missing memory with a text that is no string, a
request naming no ids under a bound key, and a scoped handle's capabilities."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import pytest
from client_live import free_port, live_server

import memorist
from memorist import Client, Memory, NotFoundError, PermissionDeniedError, ValidationError
from memorist.client import AuthenticationError


def _same_error(served_url: str, tmp_path: Any, call: str, *args: Any, **kwargs: Any) -> memorist.MemoristError:
    with Memory(str(tmp_path / "local.db"), embedder="hashing") as memory, pytest.raises(memorist.MemoristError) as local:
        getattr(memory, call)(*args, **kwargs)
    with Client(served_url) as client, pytest.raises(memorist.MemoristError) as remote:
        getattr(client, call)(*args, **kwargs)
    assert type(remote.value) is type(local.value), (remote.value, local.value)
    assert str(remote.value) == str(local.value)
    if isinstance(local.value, ValidationError):
        assert remote.value.field == local.value.field
    return remote.value


@pytest.fixture
def keyed(tmp_path):
    """A service with keys of tenant "acme": the tenant's, and keys bound to users "bob" and "carol"."""
    from memorist.server.keys import KeyStore

    db = str(tmp_path / "keyed.db")
    with KeyStore(db) as keys:
        made = {name: keys.create("acme", user_id=user)[0] for name, user in (("tenant", None), ("bob", "bob"), ("carol", "carol"))}
    with live_server(db) as server:
        yield server, made


def test_a_refused_write_is_a_permission_denied_error_as_in_memory(keyed):
    server, keys = keyed
    with Client(server.url, api_key=keys["bob"]) as bob:
        mine = bob.add("Likes rock", user_id="bob", infer=False)["results"][0]["id"]
    import httpx  # the client has no relations call: the route is used

    grant = {"subject": "user:carol", "relation": "viewer", "object": "scope:user:bob"}
    r = httpx.post(f"{server.url}/api/relations/", json=grant, headers={"Authorization": f"Bearer {keys['tenant']}"})
    assert r.status_code == 200, r.text
    with Client(server.url, api_key=keys["carol"]) as carol:
        assert carol.get(mine, user_id="bob")["memory"] == "Likes rock"  # a viewer reads
        for write in (lambda: carol.update(mine, "Likes jazz", user_id="bob"), lambda: carol.add("x", user_id="bob", infer=False)):
            with pytest.raises(PermissionDeniedError) as info:
                write()
            assert isinstance(info.value, PermissionError)
            assert not isinstance(info.value, AuthenticationError)
    with Client(server.url, api_key="ek_unknown0_" + "x" * 43) as stranger, pytest.raises(AuthenticationError):
        stranger.get_all(user_id="bob")  # 401 stays an authentication error


def test_filters_are_judged_by_memory_s_check_before_sending(served, tmp_path):
    with Client(served.url) as client:
        client.add("Owns a bike", user_id="u", infer=False)
    for call, args in (("get_all", ()), ("search", ("bike",))):
        error = _same_error(served.url, tmp_path, call, *args, user_id="u", filters={"created_at": {"lt": date(2021, 1, 1)}})
        assert error.field == "filters.created_at.lt" and "got date" in str(error)
        error = _same_error(served.url, tmp_path, call, *args, user_id="u", filters={"when": {"eq": datetime(2024, 1, 1)}})
        assert error.field == "filters.when.eq" and "JSON data" in str(error)


@pytest.mark.parametrize("target", [-1, 0, 2**70, " 5 ", "", "  ", 5.0, None])
def test_rollback_reads_its_argument_as_memory_does(served, tmp_path, target):
    _same_error(served.url, tmp_path, "rollback", target, user_id="u")


def test_rollback_refuses_a_bad_seq_before_any_request():
    with Client(f"http://127.0.0.1:{free_port()}") as client:  # nothing listens: a request would be a StoreError
        for target in (-1, 2**70, " 0 "):
            with pytest.raises(ValidationError, match="an event's seq number is from 1 to 9,223,372,036,854,775,807"):
                client.rollback(target, user_id="u")


def test_an_update_with_a_text_that_is_no_string_finds_the_memory_first(served, tmp_path):
    error = _same_error(served.url, tmp_path, "update", "no-such-id", None, user_id="u")
    assert isinstance(error, NotFoundError)
    with Client(served.url) as client:
        mid = client.add("Owns a bike", user_id="u2", infer=False)["results"][0]["id"]
        with pytest.raises(ValidationError) as info:
            client.update(mid, None, user_id="u2")
        assert info.value.field == "text" and str(info.value) == "text: must be a string, got NoneType"
        assert client.get(mid, user_id="u2")["memory"] == "Owns a bike"  # nothing changed
        with pytest.raises(NotFoundError):
            client.update(mid, 42, user_id="someone-else")


@pytest.mark.parametrize("metadata", [{"a": float("nan")}, "s", {1: 2}, {"deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}])
def test_an_update_with_bad_metadata_finds_the_memory_first(served, tmp_path, metadata):
    error = _same_error(served.url, tmp_path, "update", "no-such-id", "x", metadata=metadata, user_id="u")
    assert isinstance(error, NotFoundError)
    with Memory(str(tmp_path / "local.db"), embedder="hashing") as memory, Client(served.url) as client:
        for surface in (memory, client):
            mid = surface.add("Owns a bike", user_id="u3", infer=False)["results"][0]["id"]
            with pytest.raises(ValidationError) as info:
                surface.update(mid, "Owns two bikes", metadata=metadata, user_id="u3")
            assert info.value.field.startswith("metadata"), info.value
            with pytest.raises(ValidationError) as info:  # a bad text is judged first, as Memory judges it
                surface.update(mid, "   ", metadata=metadata, user_id="u3")
            assert info.value.field == "text"
            assert surface.get(mid, user_id="u3")["memory"] == "Owns a bike"  # nothing changed


def test_a_request_naming_no_ids_is_the_service_s_to_judge(keyed, tmp_path):
    server, keys = keyed
    with Client(server.url, api_key=keys["bob"]) as bob:  # bound to bob: acts as bob
        bob.add("Bob is a teacher", infer=False)
        assert [m["memory"] for m in bob.search("teacher")["results"]] == ["Bob is a teacher"]
        assert [m["memory"] for m in bob.get_all()["results"]] == ["Bob is a teacher"]
        assert bob.get_all()["results"][0]["user_id"] == "bob"
    with Memory(str(tmp_path / "local.db"), embedder="hashing") as memory, pytest.raises(ValidationError) as local:
        memory.search("teacher")
    with Client(server.url, api_key=keys["tenant"]) as tenant:  # not bound: the engine's refusal
        for call in (lambda: tenant.search("teacher"), lambda: tenant.get_all(), lambda: tenant.delete_all()):
            with pytest.raises(ValidationError) as remote:
                call()
            assert str(remote.value) == str(local.value) and remote.value.field == local.value.field


def test_a_client_s_scoped_handle_says_it_has_no_capabilities():
    handle = Client(f"http://127.0.0.1:{free_port()}").scope(user_id="x")
    for name in ("learning", "tiers", "minutes"):
        with pytest.raises(AttributeError, match=f"scoped handle has no '{name}'.*REST routes"):
            getattr(handle, name)
        assert not hasattr(handle, name)
    assert callable(handle.search)


def test_the_docs_say_which_calls_the_client_has():
    from pathlib import Path

    from memorist.api import CALLS

    root = Path(__file__).resolve().parents[3]
    core = [c.name for c in CALLS if c.capability is None]
    assert len(core) == 11 and all(callable(getattr(Client, name)) for name in core)
    for page in ("README.md", "docs/service.md", "docs/concepts/facts.md"):
        text = " ".join((root / page).read_text(encoding="utf-8").split())
        assert "makes the same calls as `Memory`" not in text and "`memorist.Client` calls them" not in text, page
        spans = [text[i : i + 400] for i in range(len(text)) if text.startswith("core memory calls", i)]
        assert any(all(f"{name}," in span or f"{name})" in span or f"{name}`" in span for name in core) for span in spans), page


@pytest.mark.parametrize("suffix", ["/wrong", "/api", "/memorist/v1"])  # (".../api/memories" is taken: the service contract names it)
def test_a_client_given_another_url_than_the_service_s_root_says_so(served, suffix):
    with Client(served.url + suffix) as client, pytest.raises(memorist.ConfigurationError) as refused:
        client.search("hiking", user_id="alex")
    message = str(refused.value)
    assert f"has no route POST {suffix}/api/memories/search/" in message
    assert "root URL" in message and " not found: " not in message
    with Client(served.url) as client, pytest.raises(NotFoundError, match="memory not found"):  # a missing memory is still one
        client.get("no-such-memory", user_id="alex")


def test_text_beyond_the_basic_plane_is_sent_as_utf8_as_memory_takes_it(tmp_path):
    """Before, every emoji went as a 12-byte escape: 99,999 of them, within Memory's
    100,000 characters, made a body past the service's 1 MiB and were refused."""
    text = "\U0001F600" * 99_999
    with Memory(str(tmp_path / "local.db"), embedder="hashing") as memory:
        assert memory.add(text, user_id="u", infer=False)["results"][0]["event"] == "ADD"
    with live_server(str(tmp_path / "served.db")) as server, Client(server.url) as client:
        added = client.add(text, user_id="u", infer=False)["results"][0]
        assert client.get(added["id"], user_id="u")["memory"] == text
        with pytest.raises(ValidationError) as info:  # a lone surrogate is refused as Memory refuses it
            client.add("half \ud83d of it", user_id="u", infer=False)
        assert info.value.field == "messages"


def test_a_closed_client_says_so_as_a_closed_memory_does(tmp_path):
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as memory:
        pass
    with pytest.raises(memorist.StoreError, match="is closed"):
        memory.search("x", user_id="u")
    client = Client(f"http://127.0.0.1:{free_port()}")
    client.close()
    with pytest.raises(memorist.StoreError, match="is closed"):
        client.search("x", user_id="u")

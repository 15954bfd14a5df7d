"""memorist.Client against live services with keys and limits, and without a service."""

from __future__ import annotations

import asyncio

import pytest
from client_live import free_port, live_server

from memorist import (
    AsyncClient,
    Client,
    ConfigurationError,
    NotFoundError,
    StoreError,
    TransientProviderError,
    ValidationError,
)
from memorist.client import AuthenticationError, RateLimitError


def test_a_key_is_sent_as_a_bearer_token_and_a_refused_one_is_an_authentication_error(keyed):
    server, keys = keyed
    with Client(server.url, api_key=keys["tenant"]) as client:
        added = client.add("Lives in Lyon", user_id="alice", infer=False)["results"][0]
        item = client.get(added["id"], user_id="alice")
        assert item["memory"] == "Lives in Lyon"
        assert item["tenant_id"] == "acme"
    for key in (None, keys["revoked"], "ek_unknown0_" + "x" * 43, "not-a-key"):
        with Client(server.url, api_key=key) as client, pytest.raises(AuthenticationError) as info:
            client.get_all(user_id="alice")
        assert isinstance(info.value, ConfigurationError)
        assert server.url in str(info.value)
        assert ("pass api_key=" in str(info.value)) == (key is None)


def test_a_user_bound_key_sees_its_user_only(keyed):
    server, keys = keyed
    with Client(server.url, api_key=keys["tenant"]) as client:
        alice = client.add("Likes jazz", user_id="alice", infer=False)["results"][0]["id"]
    with Client(server.url, api_key=keys["bob"]) as bob:
        mine = bob.add("Likes rock", user_id="bob", infer=False)["results"][0]["id"]
        assert bob.get(mine, user_id="bob")["memory"] == "Likes rock"
        with pytest.raises(NotFoundError) as info:
            bob.get(alice, user_id="alice")
        assert str(info.value) == f"memory not found: {alice!r}"
        with pytest.raises(NotFoundError):
            bob.delete(alice, user_id="bob")


def test_the_rate_limit_is_a_rate_limit_error_with_the_wait(tmp_path):
    from memorist.server.limits import ServerLimits

    limits = ServerLimits(rate_per_minute=1, burst=2)
    with live_server(str(tmp_path / "rl.db"), limits=limits) as server, Client(server.url) as client:
        client.get_all(user_id="u")
        client.get_all(user_id="u")
        with pytest.raises(RateLimitError) as info:
            client.get_all(user_id="u")
    assert isinstance(info.value, TransientProviderError)
    assert info.value.status == 429
    assert info.value.retry_after is not None and 1 <= info.value.retry_after <= 60


def test_a_request_over_the_service_limits_is_a_validation_error(tmp_path):
    from memorist.server.limits import ServerLimits

    limits = ServerLimits(max_messages=2, max_body_bytes=2_000, max_text_chars=50, rate_per_minute=0)
    with live_server(str(tmp_path / "small.db"), limits=limits) as server, Client(server.url) as client:
        too_many = [{"role": "user", "content": f"fact {i}"} for i in range(3)]
        with pytest.raises(ValidationError) as info:
            client.add(too_many, user_id="u")
        assert info.value.field == "messages"
        with pytest.raises(ValidationError) as info:
            client.add("y" * 51, user_id="u")
        assert info.value.field == "messages"
        with pytest.raises(ValidationError) as info:
            client.add("fine", user_id="u", metadata={"blob": "z" * 3_000})
        assert info.value.field in ("messages", "body", "request")


def test_no_service_is_a_store_error_naming_the_url():
    url = f"http://127.0.0.1:{free_port()}"
    with Client(url, timeout=5) as client, pytest.raises(StoreError) as info:
        client.get_all(user_id="u")
    assert f"cannot reach the Memorist service at {url}" in str(info.value)

    async def run() -> None:
        async with AsyncClient(url + "/api/memories", timeout=5) as client:
            await client.search("q", user_id="u")

    with pytest.raises(StoreError) as info:
        asyncio.run(run())
    assert f"cannot reach the Memorist service at {url}" in str(info.value)


def test_what_the_routes_cannot_carry_fails_before_any_request():
    # Nothing listens there: any request would be a StoreError, not these.
    with Client(f"http://127.0.0.1:{free_port()}") as client:
        for call in (client.get, client.history):
            with pytest.raises(ValidationError) as info:
                call("a/b", agent_id="helper")
            assert info.value.field == "memory_id"
        with pytest.raises(StoreError):
            client.events()  # sent as it is, as every call naming no id (a user-bound key reads its user's)
        with pytest.raises(ValidationError) as info:
            client.get_all(user_id="u", filters={"when": object()})  # not JSON: refused before sending
        assert info.value.field == "filters.when.eq"  # the part Memory names
        with pytest.raises(ValidationError) as info:
            client.delete("a/b", user_id="u")
        assert info.value.field == "memory_id"
        with pytest.raises(ValidationError) as info:
            client.search("q", user_id="u", filters={"when": object()})
        assert info.value.field == "filters.when.eq"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"base_url": "localhost:6060"}, "base_url"),
        ({"base_url": 6060}, "base_url"),
        ({"api_key": ""}, "api_key"),
        ({"api_key": "ek_a b"}, "api_key"),
        ({"timeout": 0}, "timeout"),
    ],
)
def test_bad_settings_are_validation_errors(kwargs, field):
    with pytest.raises(ValidationError) as info:
        Client(**kwargs)
    assert info.value.field == field


# answers no Memorist service gives, decoded all the same -------------------------------------
def _client(handler) -> Client:
    import httpx

    return Client("http://memorist.test", transport=httpx.MockTransport(handler))


def test_answers_that_are_not_memorist_errors_are_store_errors_with_the_status():
    import httpx

    cases = [
        (httpx.Response(502, text="<html>Bad Gateway</html>"), "answered 502 Bad Gateway: <html>Bad Gateway</html>"),
        (httpx.Response(500, json={"error": {"type": "internal", "message": "boom", "field": None}}), "answered 500 (internal): boom"),
        (httpx.Response(404, json={"detail": "Not Found"}), "answered 404 Not Found"),
        (httpx.Response(200, text="hello"), "but not with JSON"),
        (httpx.Response(200, json=[1, 2]), 'but not with {"results": [...]}'),
    ]
    for response, message in cases:
        with _client(lambda request, r=response: r) as client, pytest.raises(StoreError) as info:
            client.get_all(user_id="u")
        assert message in str(info.value)


def test_a_retry_after_date_is_read_as_seconds():
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == "Bearer ek_abcdefgh_secret"
        body = {"error": {"type": "rate_limited", "message": "slow down", "field": None}}
        return httpx.Response(429, json=body, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})

    client = Client("http://memorist.test", api_key="ek_abcdefgh_secret", transport=httpx.MockTransport(handler))
    with client, pytest.raises(RateLimitError) as info:
        client.get_all(user_id="u")
    assert info.value.retry_after == 0.0  # a date in the past: retry now

"""The isolation matrix: two tenants, two users each (the same user ids in both),
a tenant key and a user key of each; every route, every key, every memory.

A key sees a memory exactly when the memory is of the key's tenant and, for a
user key, of its user. Anything else answers as a missing memory would: the same
404 body (by-id routes), an empty list (reads of a tenant key), or 404 for a
user key naming another user. Writes through a key that cannot see a memory
change nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from service_helpers import bearer

TENANTS = ("acme", "globex")
USERS = ("alice", "bob")


@dataclass(frozen=True)
class Key:
    name: str
    token: str
    tenant: str
    user: str | None

    @property
    def headers(self) -> dict[str, str]:
        return bearer(self.token)

    def sees(self, m: Mem) -> bool:
        return self.tenant == m.tenant and self.user in (None, m.user)


@dataclass(frozen=True)
class Mem:
    tenant: str
    user: str
    id: str
    text: str


@pytest.fixture
def world(make_app, new_key):
    keys = [Key(f"{t}:*", new_key(t), t, None) for t in TENANTS]
    keys += [Key(f"{t}:{u}", new_key(t, u), t, u) for t in TENANTS for u in USERS]
    by_tenant = {k.tenant: k for k in keys if k.user is None}
    app = make_app()
    with TestClient(app) as client:
        mems = []
        for t in TENANTS:
            for u in USERS:
                text = f"Secret of {u} at {t}: likes {t} {u} pancakes"
                r = client.post(
                    "/api/memories/", json={"messages": text, "user_id": u, "infer": False}, headers=by_tenant[t].headers
                )
                assert r.status_code == 200, r.text
                mems.append(Mem(t, u, r.json()["results"][0]["id"], text))
        yield client, keys, mems


def missing(client: TestClient, key: Key, memory_id: str) -> dict:
    """What a memory that does not exist answers (the body every hidden one must match)."""
    return {"error": {"type": "not_found", "message": f"memory not found: {memory_id!r}", "field": None}}


def ids(response) -> set[str]:
    assert response.status_code == 200, response.text
    return {i.get("id") or i.get("memory_id") for i in response.json()["results"]}


def test_reads_never_cross(world) -> None:
    client, keys, mems = world
    for key in keys:
        h = key.headers
        for m in mems:
            visible = key.sees(m)
            names_other_user = key.user is not None and key.user != m.user
            # by-id routes: the memory, or exactly the body of a missing one
            for path in (f"/api/memories/{m.user}/{m.id}/", f"/api/memories/{m.user}/{m.id}/history/"):
                r = client.get(path, headers=h)
                if visible:
                    assert r.status_code == 200, (key.name, path)
                else:
                    assert r.status_code == 404 and r.json() == missing(client, key, m.id), (key.name, path, r.text)
            if key.user is not None and not visible:  # the key's own user named, another's memory
                r = client.get(f"/api/memories/{key.user}/{m.id}/", headers=h)
                assert r.status_code == 404 and r.json() == missing(client, key, m.id)
            # list routes naming the memory's user
            lists = [
                client.get(f"/api/memories/{m.user}/", headers=h),
                client.get(f"/api/memories/?user_id={m.user}", headers=h),
                client.post("/api/memories/search/", json={"query": f"{m.tenant} {m.user} pancakes", "user_id": m.user, "limit": 10}, headers=h),
                client.get(f"/api/memories/{m.user}/events/", headers=h),
            ]
            for r in lists:
                if names_other_user:
                    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found", (key.name, r.text)
                    assert r.json()["error"]["message"] == f"user not found: {m.user!r}"
                else:
                    assert (m.id in ids(r)) is visible, (key.name, m, r.text)
            # the text of a memory never appears in an answer to a key that cannot see it
            if not visible:
                assert all(m.text not in r.text for r in lists)
        # a user key's reads without user_id act as its user
        if key.user is not None:
            own = {m.id for m in mems if key.sees(m)}
            assert ids(client.get("/api/memories/", headers=h)) == own
            found = client.post("/api/memories/search/", json={"query": "pancakes", "limit": 10}, headers=h)
            assert ids(found) == own
        # users of the tenant: only the key's tenant, only its user for a user key
        users = client.get("/api/users/", headers=h).json()["results"]
        expected = [key.user] if key.user else sorted(USERS)
        assert [u["user_id"] for u in users] == expected and all(u["memories"] == 1 for u in users)


def test_writes_never_cross(world) -> None:
    client, keys, mems = world
    for key in keys:
        h = key.headers
        for m in mems:
            if key.sees(m):
                continue
            for query in (f"?user_id={m.user}", ""):
                r = client.put(f"/api/memories/{m.id}/{query}", json={"text": "overwritten"}, headers=h)
                assert r.status_code == 404 and r.json() == missing(client, key, m.id), (key.name, r.text)
                r = client.delete(f"/api/memories/{m.id}/{query}", headers=h)
                assert r.status_code == 404 and r.json() == missing(client, key, m.id), (key.name, r.text)
            if key.user is not None and key.user != m.user:
                assert client.delete(f"/api/memories/?user_id={m.user}", headers=h).status_code == 404
            # adding as another user of the tenant is refused for a user key
            if key.user is not None and key.user != m.user and key.tenant == m.tenant:
                r = client.post("/api/memories/", json={"messages": "x y z", "user_id": m.user, "infer": False}, headers=h)
                assert r.status_code == 404
    # every memory is still there, unchanged, for its owner
    for m in mems:
        owner = next(k for k in keys if k.tenant == m.tenant and k.user == m.user)
        r = client.get(f"/api/memories/{m.user}/{m.id}/", headers=owner.headers)
        assert r.status_code == 200 and r.json()["memory"] == m.text
        assert [e["event"] for e in client.get(f"/api/memories/{m.user}/{m.id}/history/", headers=owner.headers).json()["results"]] == ["ADD"]
    # delete-all of a user id reaches only the key's own tenant
    first, second = ({k.tenant: k for k in keys if k.user is None}[t] for t in TENANTS)
    r = client.delete("/api/memories/?user_id=alice", headers=first.headers)
    assert r.json() == {"deleted": 1, "message": "Deleted 1 memory"}
    survivor = next(m for m in mems if m.tenant == second.tenant and m.user == "alice")
    assert client.get(f"/api/memories/alice/{survivor.id}/", headers=second.headers).json()["memory"] == survivor.text


def test_own_data_works_for_every_key(world) -> None:
    client, keys, mems = world
    for key in keys:
        h = key.headers
        mine = [m for m in mems if key.sees(m)]
        for m in mine:
            r = client.put(f"/api/memories/{m.id}/?user_id={m.user}", json={"text": f"{m.text} ({key.name})"}, headers=h)
            assert r.status_code == 200 and r.json()["previous_memory"].startswith(m.text), r.text
    # a user key deletes its own memory and adds new ones as its user
    for key in (k for k in keys if k.user):
        h = key.headers
        own = next(m for m in mems if key.sees(m))
        assert client.delete(f"/api/memories/{own.id}/", headers=h).status_code == 200
        r = client.post("/api/memories/", json={"messages": "Plays the cello", "infer": False}, headers=h)
        assert r.status_code == 200
        listed = client.get(f"/api/memories/{key.user}/", headers=h).json()["results"]
        assert [(i["memory"], i["user_id"], i.get("tenant_id")) for i in listed] == [("Plays the cello", key.user, key.tenant)]
        r = client.delete("/api/memories/", headers=h)
        assert r.json()["deleted"] == 1
    # a tenant key sees its whole tenant's users; the other tenant is untouched
    for key in (k for k in keys if k.user is None):
        users = client.get("/api/users/", headers=key.headers).json()["results"]
        assert users == [{"user_id": u, "memories": 0} for u in USERS]


def test_the_same_memory_id_through_the_wrong_path_user(world) -> None:
    """A tenant key may name any user of its tenant, but the memory must be that user's."""
    client, keys, mems = world
    key = next(k for k in keys if k.tenant == "acme" and k.user is None)
    alice = next(m for m in mems if m.tenant == "acme" and m.user == "alice")
    r = client.get(f"/api/memories/bob/{alice.id}/", headers=key.headers)
    assert r.status_code == 404 and r.json() == missing(client, key, alice.id)
    r = client.delete(f"/api/memories/{alice.id}/?user_id=bob", headers=key.headers)
    assert r.status_code == 404
    assert client.get(f"/api/memories/alice/{alice.id}/", headers=key.headers).status_code == 200

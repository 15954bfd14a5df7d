"""The tenant setting: an explicit tenant_id beats MEMORIST_TENANT ("" included), and
a tenant that is not "" follows the rules of any other id (never blank)."""

from __future__ import annotations

import pytest

from memorist import ConfigurationError, Memory, MemoryConfig


@pytest.fixture(autouse=True)
def _no_tenant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORIST_TENANT", raising=False)


def tenant(**kwargs) -> str:
    with Memory(":memory:", embedder="hashing", **kwargs) as memory:
        return memory.config.tenant_id


def test_an_explicit_empty_tenant_beats_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORIST_TENANT", "acme")
    assert tenant() == "acme"
    assert tenant(tenant_id="") == ""
    assert tenant(tenant_id="other") == "other"
    assert tenant(config=MemoryConfig(tenant_id="")) == ""
    assert Memory.from_config({"path": ":memory:", "embedder": "hashing", "tenant_id": ""}).config.tenant_id == ""


def test_the_async_memory_still_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from memorist.aio import AsyncMemory

    monkeypatch.setenv("MEMORIST_TENANT", "acme")
    assert AsyncMemory(":memory:", embedder="hashing").memory.config.tenant_id == "acme"


@pytest.mark.parametrize("value", [" ", "   ", "\t", "\u200b"])
def test_a_blank_tenant_id_is_refused(value: str) -> None:
    with pytest.raises(ConfigurationError, match="tenant_id"):
        tenant(tenant_id=value)


@pytest.mark.parametrize("value", [" ", "\t\n"])
def test_a_blank_memorist_tenant_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("MEMORIST_TENANT", value)
    with pytest.raises(ConfigurationError, match="MEMORIST_TENANT"):
        tenant()


def test_an_empty_memorist_tenant_is_the_default_tenant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORIST_TENANT", "")
    assert tenant() == ""


def test_a_tenant_keeps_its_spaces_as_user_ids_do() -> None:
    assert tenant(tenant_id=" acme ") == " acme "
    with pytest.raises(ConfigurationError, match="tenant_id"):
        tenant(tenant_id="ac\x00me")

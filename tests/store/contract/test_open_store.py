"""``open_store``: what a user writes (a path or a URL) becomes a store, or a clear error.

A URL Memorist cannot serve is an error naming its scheme, with any password hidden,
never a local folder named after it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from memorist import ConfigurationError, Memory, ValidationError
from memorist.cli import cli
from memorist.store import open_store, redact, sqlite_path, store_kind
from memorist.store.base import Store
from memorist.store.sqlite import SQLiteStore


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current directory, to see what an open leaves behind."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def opens_sqlite_at(target: object, expected: Path | str) -> None:
    store = open_store(target)  # type: ignore[arg-type]
    try:
        assert isinstance(store, SQLiteStore)
        if expected == ":memory:":
            assert store.path == ":memory:"
        else:
            assert Path(store.path).resolve() == Path(expected).resolve()
        assert store.events() == []
    finally:
        store.close()
    if expected != ":memory:":
        assert Path(expected).is_file()


# SQLite targets -------------------------------------------------------------------------


def test_a_path_opens_sqlite(tmp_path: Path) -> None:
    opens_sqlite_at(str(tmp_path / "a.db"), tmp_path / "a.db")


def test_a_path_object_opens_sqlite(tmp_path: Path) -> None:
    opens_sqlite_at(tmp_path / "b.db", tmp_path / "b.db")


def test_bytes_open_sqlite(tmp_path: Path) -> None:
    opens_sqlite_at(os.fsencode(tmp_path / "c.db"), tmp_path / "c.db")


def test_a_relative_sqlite_url_is_relative_to_the_working_directory(workdir: Path) -> None:
    opens_sqlite_at("sqlite:///rel.db", workdir / "rel.db")
    opens_sqlite_at("sqlite:///sub/rel.db", workdir / "sub" / "rel.db")


def test_an_absolute_sqlite_url(tmp_path: Path, workdir: Path) -> None:
    target = tmp_path / "abs.db"
    assert str(target).startswith("/")
    opens_sqlite_at(f"sqlite:///{target}", target)  # sqlite:////tmp/...
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize("target", [":memory:", "sqlite:///:memory:"])
def test_in_memory_targets(target: str, workdir: Path) -> None:
    opens_sqlite_at(target, ":memory:")
    assert list(workdir.iterdir()) == []


def test_sqlite_url_forms() -> None:
    assert sqlite_path("sqlite:///x.db") == "x.db"
    assert sqlite_path("sqlite:////abs/x.db") == "/abs/x.db"
    assert sqlite_path("SQLITE:///x.db") == "x.db"
    assert sqlite_path("/plain/path.db") == "/plain/path.db"
    for bad in ("sqlite://x.db", "sqlite://", "sqlite:///"):
        with pytest.raises(ConfigurationError, match="sqlite:///"):
            sqlite_path(bad)


def test_a_sqlite_url_without_a_path_is_refused(workdir: Path) -> None:
    with pytest.raises(ConfigurationError, match="sqlite:///"):
        open_store("sqlite://host.db")
    assert list(workdir.iterdir()) == []


def test_postgres_options_are_refused_for_sqlite(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="pool_size"):
        open_store(str(tmp_path / "x.db"), pool_size=4)
    assert not (tmp_path / "x.db").exists()


# PostgreSQL targets ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    ["postgresql://u@h/db", "postgres://u@h/db", "postgresql+psycopg://u@h/db", "PostgreSQL://u:pw@h:5433/db?sslmode=require"],
)
def test_postgres_urls_are_recognised(target: str) -> None:
    assert store_kind(target) == "postgresql"


@pytest.mark.parametrize("target", ["x.db", "dir/x.db", ":memory:", "sqlite:///x.db", "C:\\data\\x.db", Path("p.db")])
def test_everything_else_that_is_no_url_names_sqlite(target: object) -> None:
    assert store_kind(target) == "sqlite"  # type: ignore[arg-type]


def test_a_postgresql_url_opens_a_postgres_store(request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("pg_url")
    from memorist.store.postgres import PostgresStore

    store = open_store(url)
    try:
        assert isinstance(store, PostgresStore)
        assert isinstance(store, Store)
        assert store.events() == []
    finally:
        store.close()


# errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["mysql://x", "mysql://root@db.example/app", "redis://localhost:6379/0", "file:///tmp/x.db"])
def test_an_unknown_scheme_is_a_configuration_error_naming_it(target: str, workdir: Path) -> None:
    scheme = target.split("://")[0]
    with pytest.raises(ConfigurationError, match=f"'{scheme}'") as info:
        open_store(target)
    assert "postgresql://" in str(info.value) and "sqlite:///" in str(info.value)  # what would work
    assert list(workdir.iterdir()) == []


def test_a_password_never_shows_in_the_message(workdir: Path) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_store("mysql://bob:s3cr3t-pw@db.example:3306/app")
    assert "s3cr3t-pw" not in str(info.value)
    assert "mysql://bob:***@db.example:3306/app" in str(info.value)
    assert redact("postgresql://bob:pw@h/db") == "postgresql://bob:***@h/db"
    assert redact("postgresql://bob@h/db") == "postgresql://bob@h/db"
    assert redact("/plain/path.db") == "/plain/path.db"


@pytest.mark.parametrize("target", [123, 1.5, None, ["x.db"], object()])
def test_a_target_that_is_no_path_is_a_validation_error(target: object) -> None:
    with pytest.raises(ValidationError, match="path"):
        open_store(target)  # type: ignore[arg-type]


@pytest.mark.parametrize("target", ["a\x00b.db", b"a\x00b.db", Path("a\x00b.db"), "sqlite:///a\x00b.db", "postgresql://u@h/d\x00b"])
def test_a_nul_in_the_path_is_a_validation_error_naming_it(target: object, workdir: Path) -> None:
    with pytest.raises(ValidationError, match=r"^path: holds a NUL character \(U\+0000\) at position \d+"):
        open_store(target)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="^path: holds a NUL"):
        Memory(target, embedder="hashing")  # type: ignore[arg-type]
    assert list(workdir.iterdir()) == []


def test_memory_with_an_unknown_scheme_raises_and_creates_nothing(workdir: Path) -> None:
    with pytest.raises(ConfigurationError, match="'mysql'") as info:
        Memory("mysql://bob:s3cr3t@db.example/app", embedder="hashing")
    assert "s3cr3t" not in str(info.value)
    assert list(workdir.iterdir()) == []


def test_memory_with_a_target_that_is_no_path(workdir: Path) -> None:
    with pytest.raises(ValidationError, match="path"):
        Memory(123, embedder="hashing")  # type: ignore[arg-type]
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize("args", [["list", "--user", "alex"], ["add", "--user", "alex", "--no-infer", "hi"], ["stats"]])
def test_the_cli_names_an_unknown_scheme_clearly(args: list[str], workdir: Path) -> None:
    result = CliRunner().invoke(cli, ["--db", "mysql://bob:s3cr3t@x/db", "--embedder", "hashing", *args])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert result.stderr.startswith("error: ") and "'mysql'" in result.stderr
    assert "s3cr3t" not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert list(workdir.iterdir()) == []


def test_the_cli_takes_a_sqlite_url(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    runner = CliRunner()
    added = runner.invoke(cli, ["--db", f"sqlite:///{db}", "--embedder", "hashing", "add", "--user", "alex", "--no-infer", "Likes sushi"])
    assert added.exit_code == 0, added.output
    listed = runner.invoke(cli, ["--db", f"sqlite:///{db}", "--embedder", "hashing", "--json", "list", "--user", "alex"])
    assert listed.exit_code == 0, listed.output
    assert "Likes sushi" in listed.stdout
    assert db.is_file()

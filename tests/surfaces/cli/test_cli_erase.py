"""``memorist erase``: asks first, counts with --dry-run, erases with --yes."""

from __future__ import annotations

import json

from click.testing import CliRunner

from memorist import Memory
from memorist.cli import cli


def _run(db: str, *args: str, code: int = 0, input: str | None = None):
    result = CliRunner().invoke(cli, ["--db", db, "--embedder", "hashing", *args], input=input, catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def test_erase_asks_counts_and_erases(tmp_path) -> None:
    db = str(tmp_path / "m.db")
    with Memory(db, embedder="hashing") as m:
        m.add("Zed's code word is Fumblorx", user_id="zed", infer=False)
        m.add("Amy's code word is Trellaz", user_id="amy", infer=False)
        m.learning.update_playbook([{"pattern": "Zed learns by Wozzleplan"}], "study", user_id="zed")

    _run(db, "erase", "--user", "zed", input="n\n", code=1)  # asked, refused
    preview = json.loads(_run(db, "--json", "erase", "--user", "zed", "--dry-run").output)
    assert preview["dry_run"] is True and preview["erased"]["facts"] == 1 and preview["erased"]["playbook_bullets"] == 1
    shown = _run(db, "erase", "--user", "zed", "--yes").output
    assert "Erased 4 memories" in shown  # the fact, the strategy, the playbook and its version
    assert "one of --user, --agent or --run is required" in _run(db, "erase", code=1).output

    with Memory(db, embedder="hashing") as m:
        assert m.get_all(user_id="zed")["results"] == []
        assert [r["memory"] for r in m.get_all(user_id="amy")["results"]] == ["Amy's code word is Trellaz"]
    with open(db, "rb") as handle:
        data = handle.read()
    assert b"Fumblorx" not in data and b"Wozzleplan" not in data and b"Trellaz" in data

"""What an outside review of ``memorist`` found, fixed: each test is a behaviour a user
relies on (a clear one-line error and a non-zero exit, never a traceback; nothing
stored lost; help texts that say what the command does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memorist import Memory
from memorist.cli import cli, main

ENV_VARS = ("MEMORIST_DB", "MEMORIST_EMBEDDER", "MEMORIST_DECAY_DAYS", "MEMORY_DECAY_DAYS", "MEMORIST_TENANT", "MEMORIST_POLICY")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "m.db")
    with Memory(path, embedder="hashing") as m:
        m.add("Alex likes tea", user_id="alex", infer=False)
    return path


def run(db: str, *args: str, code: int = 0, input: str | None = None) -> Result:
    """``memorist --db DB --embedder hashing ARGS``, its exit code checked; a failure is
    one ``error:`` line (or a usage error), never a traceback."""
    result = CliRunner().invoke(cli, ["--db", db, "--embedder", "hashing", *args], input=input)
    assert result.exit_code == code, f"exit {result.exit_code} != {code}\n{result.output}\n{result.exception!r}"
    if code:
        assert isinstance(result.exception, SystemExit), result.exception
        assert "Traceback" not in result.output
    return result


def memories(db: str, user: str = "alex") -> list[str]:
    with Memory(db, embedder="hashing") as m:
        return sorted(r["memory"] for r in m.get_all(user_id=user)["results"])


def error_line_of(result: Result) -> str:
    """The one line a failure writes last on stderr."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines, result.output
    return lines[-1]


# 1. a closed stdin, stdout or stderr -----------------------------------------------------
def _main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str, closed: str = "stdin") -> tuple[int, str]:
    """``memorist ARGS`` as the console script runs it, started with ``closed`` closed
    (Python then makes it None); the exit code and what went to stderr."""
    monkeypatch.setattr(sys, closed, None)
    with pytest.raises(SystemExit) as ended:
        main(list(args))
    assert getattr(sys, closed) is None  # the stand-in is gone once the command ends
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return ended.value.code, err


@pytest.mark.parametrize(
    "args",
    [
        ["add", "--user", "alex", "--no-infer", "-"],
        ["trajectory", "start", "--agent", "ag1", "-"],
        ["import", "-"],
        ["playbook", "update", "--agent", "ag1", "pbx", "--file", "-"],
        ["pair", "--task", "t", "--criteria", "c", "--output-file", "-"],
        ["analyze", "interactive"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_reading_a_closed_stdin_is_an_error_saying_so(
    db: str, args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _main(monkeypatch, capsys, "--db", db, "--embedder", "hashing", *args)
    assert code == 1
    assert err.strip().splitlines()[-1].startswith("error: stdin is closed"), err
    assert memories(db) == ["Alex likes tea"]


@pytest.mark.parametrize(
    "args",
    [["delete-all", "--user", "alex"], ["erase", "--user", "alex"], ["reset"]],
    ids=lambda args: args[0],
)
def test_a_question_on_a_closed_stdin_counts_as_no(
    db: str, args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _main(monkeypatch, capsys, "--db", db, "--embedder", "hashing", *args)
    assert code == 1 and err.startswith("error: ") and "--yes" in err, err
    assert memories(db) == ["Alex likes tea"]  # nothing deleted


def test_a_closed_stdout_is_an_error_and_what_was_stored_stays(
    db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _main(monkeypatch, capsys, "--db", db, "--embedder", "hashing", "add", "--user", "alex", "--no-infer", "Alex owns a cat", closed="stdout")
    assert code == 1 and err.startswith("error: stdout is closed") and "kept" in err, err
    assert memories(db) == ["Alex likes tea", "Alex owns a cat"]
    code, err = _main(monkeypatch, capsys, "--db", db, "--json", "list", "--user", "alex", closed="stdout")
    assert code == 1 and err.startswith("error: stdout is closed"), err


def test_a_closed_stderr_still_exits_with_the_error_s_code(
    db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = _main(monkeypatch, capsys, "--db", db, "get", "nonexist", closed="stderr")
    assert code == 1


def test_the_console_script_started_with_stdin_closed(db: str) -> None:
    """The real thing: a shell's ``<&-``."""
    command = [sys.executable, "-m", "memorist", "--db", db, "--embedder", "hashing", "add", "--user", "alex", "--no-infer", "-"]
    ran = subprocess.run(["sh", "-c", 'exec "$@" <&-', "sh", *command], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "MEMORIST_DB": ""})
    assert ran.returncode == 1, ran.stderr
    assert ran.stderr.startswith("error: stdin is closed") and len(ran.stderr.strip().splitlines()) == 1, ran.stderr


# 11. Ctrl-C ------------------------------------------------------------------------------
def test_ctrl_c_during_a_re_embedding_exits_130_and_leaves_the_store_as_it_was(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import memorist.embed as embed

    real = embed.resolve_embedder

    def interrupted_one(spec: object) -> object:
        new = real(spec)
        calls = []

        def embed_then_ctrl_c(texts: list[str]) -> object:
            calls.append(texts)
            if len(calls) > 1:
                raise KeyboardInterrupt
            return type(new).embed(new, texts)

        monkeypatch.setattr(new, "embed", embed_then_ctrl_c)
        return new

    with Memory(db, embedder="hashing") as m:
        for i in range(300):  # two batches of vectors: the second is interrupted
            m.add(f"Fact number {i} about alex", user_id="alex", infer=False)
    before = json.loads(run(db, "--json", "stats").stdout)["embedder"]
    monkeypatch.setattr(embed, "resolve_embedder", interrupted_one)
    result = run(db, "reindex", "--embedder", "hashing:64", code=130)
    assert error_line_of(result) == (
        "interrupted: `memorist reindex` stopped before it finished; the store is unchanged "
        "(its vectors are rewritten in one transaction, undone by the interruption)"
    )
    monkeypatch.setattr(embed, "resolve_embedder", real)
    assert json.loads(run(db, "--json", "stats").stdout)["embedder"] == before  # still the old embedder
    assert run(db, "--json", "search", "--user", "alex", "Alex likes tea").stdout.count("Alex likes tea") >= 1


def test_ctrl_c_during_a_backup_exits_130_and_writes_no_file(db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import memorist.store.sqlite.check as check

    def ctrl_c(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(check, "backup_store", ctrl_c)
    dest = tmp_path / "copy.db"
    result = run(db, "backup", str(dest), code=130)
    assert error_line_of(result).startswith("interrupted: `memorist backup` stopped before it finished; DEST was not written")
    assert not dest.exists()


def test_ctrl_c_during_a_benchmark_exits_130(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import memorist.benchmarks.learn as learn

    def ctrl_c(**kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(learn, "run", ctrl_c)
    result = run(str(tmp_path / "unused.db"), "bench", "learn", "--episodes", "1", code=130)
    assert error_line_of(result).startswith("interrupted: `memorist bench learn` stopped before it finished")
    assert "Aborted!" not in result.output


# 3, 4. serve and chat: a rate of 0, port 0 -------------------------------------------------
@pytest.mark.parametrize("rate", ["0/min", "0", "0.0/s"])
@pytest.mark.parametrize("command", ["serve", "chat"])
def test_a_rate_limit_of_0_is_refused_naming_off(db: str, command: str, rate: str) -> None:
    result = run(db, command, "--rate-limit", rate, code=2)
    line = error_line_of(result)
    assert "--rate-limit" in line and "a rate of 0 would turn rate limiting off: give 'off'" in line, line


def test_a_rate_limit_of_0_from_the_environment_names_the_variable(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORIST_RATE_LIMIT", "0/h")
    line = error_line_of(run(db, "serve", code=2))
    assert "MEMORIST_RATE_LIMIT" in line and "give 'off'" in line, line


@pytest.mark.parametrize("command", [["serve"], ["chat"], ["mcp", "--transport", "http", "--user", "alex"]])
def test_port_0_is_refused_as_mcp_refuses_it(db: str, command: list[str]) -> None:
    line = error_line_of(run(db, *command, "--port", "0", code=2))
    assert line == "Error: Invalid value for '--port': 0 is not in the range 1<=x<=65535.", line


# 2. rollback: what is reversible ----------------------------------------------------------
def test_rollback_of_a_direct_update_or_delete_says_it_was_a_direct_call(db: str) -> None:
    with Memory(db, embedder="hashing") as m:
        memory_id = m.get_all(user_id="alex")["results"][0]["id"]
        m.update(memory_id, "Alex likes green tea")
        m.delete(memory_id)
        seqs = {e["event"]: e["seq"] for e in m.events(user_id="alex")}
    for op in ("UPDATE", "DELETE"):
        line = error_line_of(run(db, "rollback", str(seqs[op]), code=1))
        assert line.startswith(f"error: event {seqs[op]} ({op}) was a direct call, which cannot be rolled back: only a consolidation run"), line
        assert f"memorist history {memory_id}" in line
    line = error_line_of(run(db, "rollback", str(seqs["ADD"]), "--user", "alex", code=1))
    assert line.startswith(f"error: event {seqs['ADD']} (ADD) cannot be rolled back: only a consolidation run"), line
    assert error_line_of(run(db, "rollback", "999", code=1)) == "error: reversible operation not found: '999'"
    # another user's event is not described to a caller scoped to bob
    assert error_line_of(run(db, "rollback", str(seqs["DELETE"]), "--user", "bob", code=1)).startswith("error: reversible operation not found")


def test_rollback_help_says_what_is_reversible_and_what_is_not(db: str) -> None:
    text = " ".join(run(db, "rollback", "--help").output.split())
    assert "UPDATE or DELETE that `memorist add` made when it reconciled new facts" in text
    assert "A direct `memorist update` or `memorist delete` cannot be rolled back" in text


# 5, 8. help texts that say what the command does ---------------------------------------
def test_minutes_record_at_offers_only_past_offsets_and_they_work(db: str) -> None:
    text = " ".join(run(db, "minutes", "record", "--help").output.split())
    assert "an offset into the past: -30m, -10h, -2d" in text and "+10h" not in text
    for offset in ("-30m", "-10h", "-2d"):
        run(db, "minutes", "record", "--agent", "a1", "--project", "p1", "decision", f"--at={offset}")
    line = error_line_of(run(db, "minutes", "record", "--agent", "a1", "--project", "p1", "decision", "--at=+10h", code=1))
    assert line.startswith("error: --at: '+10h' is in the future"), line


def test_analyze_help_says_it_covers_the_learners_playbooks_not_the_agents(db: str) -> None:
    with Memory(db, embedder="hashing") as m:
        m.learning.update_playbook([{"pattern": "Retry on 429 with backoff"}], "pbx", agent_id="ag1")
    text = " ".join(run(db, "analyze", "--help").output.split())
    assert "every learner's playbook; agents' playbooks (`memorist playbook`) are not included" in text
    assert "every playbook]" not in text
    assert json.loads(run(db, "--json", "analyze").stdout)["total_bullets"] == 0  # the agent's strategy is not counted


# 6, 7, 9. inputs that do nothing useful are refused ----------------------------------------
@pytest.mark.parametrize("criteria", [";", " ; ; ", "-\n;\n"])
def test_pair_criteria_of_separators_only_are_refused_as_empty_ones_are(db: str, criteria: str) -> None:
    empty = error_line_of(run(db, "pair", "--task", "t", "--criteria", "", "--output", "o", code=1))
    assert empty.startswith("error: --criteria: must not be empty"), empty
    line = error_line_of(run(db, "pair", "--task", "t", "--criteria", criteria, "--output", "o", code=1))
    assert line.startswith("error: --criteria: ") and "holds no criterion, only separators" in line, line
    assert "Score 0 / 100" in run(db, "pair", "--task", "t", "--criteria", "tea; coffee", "--output", "o").stdout


@pytest.mark.parametrize("flags", [["--pair", "--tiers"], ["--tiers", "--agent"], ["--pair", "--tiers", "--agent"]])
def test_demo_refuses_two_demos_at_once(db: str, flags: list[str]) -> None:
    result = run(db, "demo", *flags, code=2)
    assert " and ".join(flags) + " are different demos: give one of them" in error_line_of(result)


def test_playbook_get_of_a_playbook_that_does_not_exist_says_so_as_delete_does(db: str) -> None:
    with Memory(db, embedder="hashing") as m:
        m.learning.update_playbook([{"pattern": "Retry on 429 with backoff"}], "pbx", agent_id="ag1")
    assert json.loads(run(db, "--json", "playbook", "get", "--agent", "ag1", "pbx").stdout)["size"] == 1
    line = error_line_of(run(db, "playbook", "get", "--agent", "ag1", "nonexist", code=1))
    assert line == (
        "error: playbook not found: 'nonexist': none of that name exists yet for --agent ag1 "
        "(`memorist playbook list --agent ag1` lists those that do)"
    ), line
    assert run(db, "--json", "playbook", "get", "--agent", "ag1", "nonexist", code=1).stdout == ""
    assert error_line_of(run(db, "playbook", "delete", "--agent", "ag1", "nonexist", "--yes", code=1)) == "error: playbook not found: 'nonexist'"
    with Memory(db, embedder="hashing") as m:  # the library still answers an empty playbook
        assert m.learning.get_playbook("nonexist", "ag1")["version"] == 0


# 10. errors name the flags and arguments a user typed --------------------------------------
def _trajectory(db: str) -> str:
    return json.loads(run(db, "--json", "trajectory", "start", "--agent", "ag1", "Fetch users").stdout)["trajectory_id"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["minutes", "recent", "-n", "99999999999999999999"], "error: -n: must be at most 1,000,000"),
        (["minutes", "history", "--project", ""], "error: --project: must not be empty"),
        (["export", "--all", "--user", "u1"], "error: --all: exports every scope; do not pass --user, --agent or --run with it"),
        (["consolidate", "--type", "bogus", "--user", "alex"], "error: --type: must be one of fact, preference"),
        (["trajectory", "list", "--since", "garbage", "--agent", "ag1"], "error: --since: not an ISO-8601 date: 'garbage'"),
        (["trajectory", "log", "--agent", "ag1", "nonexist", "action", "x"], "error: trajectory not found: 'nonexist'"),
        (["trajectory", "show", "--agent", "ag1", ""], "error: ID: must not be empty"),
        (["trajectory", "start", "--agent", "ag1", "--parent", "nonexist", "x"], "error: trajectory not found: 'nonexist'"),
        (["reflect", "nonexist"], "error: trajectory not found: 'nonexist'"),
        (["playbook", "curate", "--agent", "ag1", "pbx", "nonexist"], "error: reflection not found: 'nonexist'"),
        (["minutes", "show", "zzzz"], "error: minute not found: 'zzzz'"),
        (["minutes", "record", "--agent", "a1", "--ref", "zzzz", "decision"], "error: minute not found: 'zzzz'"),
        (["get", "nonexist"], "error: memory not found: 'nonexist'"),
    ],
    ids=lambda v: " ".join(v[:2]) if isinstance(v, list) else None,
)
def test_errors_name_the_flag_or_argument_and_the_thing(db: str, args: list[str], expected: str) -> None:
    line = error_line_of(run(db, *args, code=1))
    assert line.startswith(expected), line
    assert not re_python_name(line), line


def re_python_name(line: str) -> list[str]:
    """The Python argument names a message shows at its start (``memory_id:``)."""
    import re

    return re.findall(r"^error: ([a-z]+_[a-z_]+|n|since|project_id|all_scopes|memory_type|metrics):", line)


def test_an_id_prefix_of_several_minutes_is_named_as_the_argument(db: str) -> None:
    for _ in range(40):  # 40 ids: two of them share their first character
        run(db, "minutes", "record", "--agent", "a1", "decision")
    with Memory(db, embedder="hashing") as m:
        ids = [r["id"] for r in m.minutes.recent(n=40)]
    first = next(i[0] for i in ids if sum(j[0] == i[0] for j in ids) > 1)
    line = error_line_of(run(db, "minutes", "show", first, code=1))
    assert line.startswith(f"error: ID: '{first}' is the start of several ids"), line


def test_metrics_that_are_not_finite_name_the_flag(db: str) -> None:
    line = error_line_of(run(db, "trajectory", "complete", "--agent", "ag1", _trajectory(db), "--status", "success",
                             "--metrics", '{"tokens": 1e400}', code=1))
    assert line.startswith("error: --metrics: "), line


def test_a_test_memory_on_a_default_store_names_the_cli_way_to_switch(db: str) -> None:
    line = error_line_of(run(db, "add", "--user", "alex", "--test", "a test memory", code=1))
    assert line.startswith("error: --test: a test memory belongs to the energy tiers"), line
    assert "`memorist config set policy energy`" in line and "Memory.set_policy" not in line, line
    line = error_line_of(run(db, "tiers", "test-memory", "--user", "alex", "x", code=1))
    assert "`memorist config set policy energy`" in line and "Memory.set_policy" not in line, line
    line = error_line_of(run(db, "--policy", "energy", "list", "--user", "alex", code=1))
    assert "`memorist config set policy energy`" in line and "Memory.set_policy" not in line, line


# a tier command on a missing store -------------------------------------------------------
def test_a_test_memory_on_a_missing_store_needs_the_energy_policy_and_makes_no_store(tmp_path: Path) -> None:
    """Before, the store was made under the default policy, then refused: the file
    stayed, and the same command with --policy energy was refused too."""
    path = tmp_path / "new.db"
    done = run(str(path), "tiers", "test-memory", "Stretch at noon", "--user", "alex", code=1)
    assert "add --policy energy" in error_line_of(done) and not path.exists()
    made = run(str(path), "--policy", "energy", "tiers", "test-memory", "Stretch at noon", "--user", "alex")
    assert "Stretch at noon" in made.output


# deleting test memories asks first -------------------------------------------------------
def test_deleting_every_users_test_memories_asks_first(tmp_path: Path) -> None:
    """`tiers tests --delete` with no scope deleted every user's test memories, without
    a word; it asks, as the other commands that delete do, and --yes answers."""
    path = str(tmp_path / "tiers.db")
    for user in ("alice", "bob"):
        run(path, "--policy", "energy", "tiers", "test-memory", f"{user} test", "--user", user)
    asked = run(path, "tiers", "tests", "--delete", code=1, input="n\n")
    assert "Delete the test memories of every user" in asked.output
    assert "alice test" in run(path, "tiers", "tests").output
    assert "Deleted 1 test memories" in run(path, "tiers", "tests", "--delete", "--user", "bob", input="y\n").output
    assert "Deleted 1 test memories" in run(path, "tiers", "tests", "--delete", "--yes").output
    assert "No test memories" in run(path, "tiers", "tests").output

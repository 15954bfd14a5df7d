"""The LoCoMo retrieval benchmark: the metric, the runner and ``memorist bench locomo``.

The metric is checked by hand against a small made-up conversation in LoCoMo's
format (two sessions, a photo turn, observations, summaries, five questions in the
five categories, one malformed evidence string and one question without evidence).
Every evidence turn holds rare words of its question, so the hashing embedder with
BM25 ranks it first and the expected recall can be worked out by hand.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memorist.benchmarks.locomo import (
    format_table,
    load,
    parse_evidence,
    question_recall,
    retrieved_keys,
    run,
)
from memorist.cli import cli

CATEGORY_NAMES = {"single_hop", "multi_hop", "temporal", "open_domain", "adversarial"}

CONVERSATION: dict[str, Any] = {
    "sample_id": "conv-test",
    "conversation": {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! Guess what, I adopted a greyhound and named her Zephyrine."},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "Congrats! Over here I started theremin lessons, spooky sounds everywhere."},
            {"speaker": "Caroline", "dia_id": "D1:3", "text": "Ha, that sounds like a lot of fun. How are the kids doing these days?"},
        ],
        "session_2_date_time": "7:30 pm on 25 May, 2023",
        "session_2": [
            {"speaker": "Melanie", "dia_id": "D2:1", "text": "We just got back from Reykjavik, it was our anniversary trip."},
            {"speaker": "Caroline", "dia_id": "D2:2", "text": "Lovely! Meanwhile I volunteered at the lighthouse museum on Saturday."},
            {
                "speaker": "Melanie",
                "dia_id": "D2:3",
                "text": "Look what my son made in the garage over spring break, he worked on it every single afternoon with his grandpa!",
                "img_url": ["https://example.invalid/kayak.jpg"],
                "blip_caption": "a plywood kayak on a workbench",
            },
        ],
        # Date keys can outnumber sessions (data README): this one has no turns.
        "session_3_date_time": "9:00 am on 2 June, 2023",
    },
    "observation": {
        "session_1_observation": {
            "Caroline": [["Caroline adopted a greyhound named Zephyrine.", "D1:1"]],
            "Melanie": [["Melanie started taking theremin lessons.", "D1:2"]],
        },
        "session_2_observation": {
            "Melanie": [
                ["Melanie travelled to Reykjavik for an anniversary trip.", "D2:1"],
                ["Melanie's son built a plywood kayak.", "D2:3"],
            ],
            "Caroline": [["Caroline volunteered at the lighthouse museum.", "D2:2"]],
        },
    },
    "session_summary": {
        "session_1_summary": "Caroline told Melanie she adopted a greyhound called Zephyrine; Melanie started theremin lessons.",
        "session_2_summary": (
            "Melanie came back from an anniversary trip to Reykjavik, Caroline volunteered at the "
            "lighthouse museum, and Melanie's son built a plywood kayak."
        ),
    },
    "qa": [
        # single-hop: one turn
        {"question": "What did Caroline name her greyhound?", "answer": "Zephyrine", "evidence": ["D1:1"], "category": 4},
        # multi-hop: two turns in two sessions, given as one malformed-but-parseable string
        {
            "question": "When did Melanie start theremin lessons, and when did she fly to Reykjavik?",
            "answer": "Early May 2023; late May 2023",
            "evidence": ["D1:2; D2:1"],
            "category": 1,
        },
        # temporal: leading zero in the turn number ("D2:02" is D2:2)
        {
            "question": "When did Caroline volunteer at the lighthouse museum?",
            "answer": "The Saturday before 25 May 2023",
            "evidence": ["D2:02"],
            "category": 2,
        },
        # open-domain: the answer is only in the photo caption; one evidence entry is malformed
        {
            "question": "What did Melanie's son build out of plywood?",
            "answer": "A kayak",
            "evidence": ["D2:3", "D:11:26"],
            "category": 3,
        },
        # adversarial: no evidence at all (counts 1), adversarial_answer instead of answer
        {"question": "What colour is Caroline's kayak?", "adversarial_answer": "Red", "evidence": [], "category": 5},
    ],
}

# Worked out by hand, per question: (single, multi, temporal, open, adversarial)
#   k=1: D1:1 first -> 1; one of two -> 1/2; D2:2 first -> 1; D2:3 found, "D:11:26" missed -> 1/2; none -> 1
#   k=3: 1; both -> 1; 1; 1/2; 1
EXPECTED = {
    "1": {"single_hop": 1.0, "multi_hop": 0.5, "temporal": 1.0, "open_domain": 0.5, "adversarial": 1.0, "overall": 4.0 / 5},
    "3": {"single_hop": 1.0, "multi_hop": 1.0, "temporal": 1.0, "open_domain": 0.5, "adversarial": 1.0, "overall": 4.5 / 5},
}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "locomo_test.json"
    path.write_text(json.dumps([CONVERSATION]), encoding="utf-8")
    return path


# parse_evidence --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "ids", "bad"),
    [
        (["D1:3"], ["D1:3"], 0),
        (["D8:6; D9:17"], ["D8:6", "D9:17"], 0),
        (["D"], [], 1),
        (["D:11:26"], [], 1),
        (["D30:05"], ["D30:5"], 0),
        (["D2:1 D2:2"], ["D2:1", "D2:2"], 0),
        (["D1:3", "D", "D4:10"], ["D1:3", "D4:10"], 1),
        (["D1:3", "D1:3"], ["D1:3"], 0),  # a repeated turn is one piece of evidence
        ([], [], 0),
    ],
)
def test_parse_evidence(raw: list[str], ids: list[str], bad: int) -> None:
    assert parse_evidence(raw) == (ids, bad)


# question_recall -------------------------------------------------------------------------
def test_recall_is_the_share_of_evidence_found() -> None:
    assert question_recall(["D1:1"], ["D1:1", "D2:2"]) == 1.0
    assert question_recall(["D1:1", "D2:3"], ["D2:3", "D1:9"]) == 0.5
    assert question_recall(["D1:1", "D2:3", "D3:4"], ["D3:4"]) == pytest.approx(1 / 3)
    assert question_recall(["D1:1"], ["D1:2", "D2:1"]) == 0.0
    assert question_recall(["D1:1"], []) == 0.0


def test_recall_counts_a_retrieved_turn_once() -> None:
    assert question_recall(["D1:1", "D2:3"], ["D1:1", "D1:1", "D1:1"]) == 0.5


def test_a_question_without_evidence_counts_one() -> None:
    assert question_recall([], []) == 1.0
    assert question_recall([], ["D1:1", "D1:2"]) == 1.0
    assert question_recall([], ["1"], unit="summary") == 1.0


def test_malformed_evidence_counts_as_missed() -> None:
    ids, bad = parse_evidence(["D2:3", "D:11:26"])
    assert question_recall(ids, ["D2:3"], bad=bad) == 0.5
    # Only malformed evidence: nothing can be found, and it is not "no evidence".
    ids, bad = parse_evidence(["D"])
    assert question_recall(ids, ["D1:1", "D2:3"], bad=bad) == 0.0


def test_summary_recall_matches_sessions() -> None:
    assert question_recall(["D1:3", "D2:5"], ["2"], unit="summary") == 0.5
    assert question_recall(["D1:3", "D2:5"], ["1", "2"], unit="summary") == 1.0
    assert question_recall(["D1:3", "D1:7"], ["1"], unit="summary") == 1.0
    assert question_recall(["D1:3"], ["2", "3"], unit="summary") == 0.0
    assert question_recall(["D10:3"], ["1"], unit="summary") == 0.0  # session 10 is not session 1
    assert question_recall(["D2:3"], ["2"], bad=1, unit="summary") == 0.5


# load ------------------------------------------------------------------------------------
def test_load_reads_sessions_observations_summaries_and_questions(data: Path) -> None:
    (conv,) = load(data)
    assert conv.sample_id == "conv-test"
    assert conv.speakers == ("Caroline", "Melanie")
    assert [n for n, _, _ in conv.sessions] == [1, 2]  # session 3 has a date but no turns
    first = conv.sessions[0][1]
    assert (first.year, first.month, first.day, first.hour, first.minute) == (2023, 5, 8, 13, 56)
    assert [sources for *_, sources in conv.observations] == [("D1:1",), ("D1:2",), ("D2:1",), ("D2:3",), ("D2:2",)]
    assert [n for n, _ in conv.summaries] == [1, 2]
    assert len(conv.questions) == 5
    assert "plywood kayak" in conv.full_text()  # photo captions are part of the conversation


def test_an_observation_from_several_turns_finds_each_of_them(tmp_path: Path) -> None:
    # LoCoMo gives a few facts a list of source turns (and ids may carry leading zeros):
    # such a fact, retrieved, retrieves every turn it was drawn from.
    two = copy.deepcopy(CONVERSATION)
    two["observation"] = {
        "session_2_observation": {"Melanie": [["Melanie's son built a plywood kayak on her trip.", ["D2:01", "D2:3"]]]}
    }
    two["qa"] = [{"question": "What did Melanie's son build?", "answer": "a kayak", "evidence": ["D2:1", "D2:3"], "category": 4}]
    path = tmp_path / "two-sources.json"
    path.write_text(json.dumps([two]), encoding="utf-8")
    (conv,) = load(path)
    assert [sources for *_, sources in conv.observations] == [("D2:1", "D2:3")]
    result = run(path, unit="observation", ks=(1,), embedder="hashing")
    assert result["recall"]["1"]["single_hop"] == 1.0  # both turns, from the one fact
    assert retrieved_keys([{"metadata": {"dia_id": "D2:1", "dia_ids": ["D2:1", "D2:3"]}}, {"metadata": {"dia_id": "D1:2"}}], "observation") == [
        "D2:1",
        "D2:3",
        "D1:2",
    ]
    assert retrieved_keys([{"metadata": {"session": 2, "dia_id": "D2:1"}}], "summary") == ["2"]


# run -------------------------------------------------------------------------------------
def check_shape(result: dict[str, Any], unit: str, ks: tuple[str, ...] = ("1", "3")) -> None:
    assert result["unit"] == unit
    assert result["questions"] == 5
    assert set(result["recall"]) == set(ks)
    assert set(result["context_tokens"]) == set(ks)
    for k in ks:
        row = result["recall"][k]
        assert CATEGORY_NAMES | {"overall"} <= set(row), row
        assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in row.values()), row
        assert result["context_tokens"][k] > 0
    assert result["full_tokens"] > 0
    # Overall recall per conversation and on each half of every conversation's
    # questions (even- and odd-numbered), the halves weighted by their questions.
    assert set(result["halves"]) == {"A", "B"}
    for k in ks:
        overall = result["recall"][k]["overall"]
        assert result["by_conversation"]["conv-test"][k] == pytest.approx(overall)
        assert (3 * result["halves"]["A"][k] + 2 * result["halves"]["B"][k]) / 5 == pytest.approx(overall)
    json.dumps(result)  # JSON-ready


def assert_recall(result: dict[str, Any], expected: dict[str, dict[str, float]]) -> None:
    for k, row in expected.items():
        got = {name: result["recall"][k][name] for name in row}
        assert got == pytest.approx(row), (k, got)


@pytest.mark.parametrize("unit", ["dialog", "observation", "summary"])
def test_run_gives_the_recall_worked_out_by_hand(data: Path, unit: str) -> None:
    result = run(data, unit=unit, ks=(1, 3), embedder="hashing")
    check_shape(result, unit)
    # Summary: two sessions, so at k=3 every session is retrieved; at k=1 the right
    # session ranks first for the single-session questions. The numbers match dialog.
    assert_recall(result, EXPECTED)


def test_run_context_tokens_grow_with_k_and_stay_below_the_conversation(data: Path) -> None:
    results = {unit: run(data, unit=unit, ks=(1, 3), embedder="hashing") for unit in ("dialog", "observation", "summary")}
    dialog = results["dialog"]
    assert 0 < dialog["context_tokens"]["1"] < dialog["context_tokens"]["3"] < dialog["full_tokens"]
    # The whole conversation is the same whatever the unit.
    assert {r["full_tokens"] for r in results.values()} == {dialog["full_tokens"]}
    # Roughly a token per word: the six turns and the caption hold about 90 words.
    words = sum(len(t["text"].split()) for n in (1, 2) for t in CONVERSATION["conversation"][f"session_{n}"])
    assert words <= dialog["full_tokens"] <= 3 * words


def test_run_keeps_each_conversation_in_its_own_space(tmp_path: Path) -> None:
    # Another conversation holds turns that match two questions better than their
    # own evidence does; they must never be retrieved for this conversation.
    other = copy.deepcopy(CONVERSATION)
    other["sample_id"] = "conv-other"
    other["conversation"]["session_1"] = [
        {"speaker": "Jon", "dia_id": "D1:7", "text": "Did Caroline name her greyhound Zephyrine? What did Caroline name her greyhound?"},
    ]
    other["conversation"]["session_2"] = [
        {"speaker": "Gina", "dia_id": "D2:9", "text": "When did Caroline volunteer at the lighthouse museum? Caroline volunteered at the lighthouse museum."},
    ]
    other["observation"] = {}
    other["session_summary"] = {}
    other["qa"] = []
    path = tmp_path / "two.json"
    # The other conversation first: its turns are stored when the first one's
    # questions are asked.
    path.write_text(json.dumps([other, CONVERSATION]), encoding="utf-8")
    result = run(path, unit="dialog", ks=(1, 3), embedder="hashing")
    assert result["questions"] == 5
    assert_recall(result, EXPECTED)
    assert list(result["by_conversation"]) == ["conv-test"]  # the other asks nothing


def test_run_reports_progress(data: Path) -> None:
    seen: list[tuple[int, int]] = []
    run(data, unit="dialog", ks=(1,), embedder="hashing", progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 5) for i in range(1, 6)]


def test_run_rejects_bad_arguments(data: Path) -> None:
    with pytest.raises(ValueError):
        run(data, unit="paragraph", ks=(1,), embedder="hashing")
    with pytest.raises(ValueError):
        run(data, unit="dialog", ks=(0, 3), embedder="hashing")
    with pytest.raises(ValueError):
        run(data, unit="dialog", ks=(), embedder="hashing")


def test_run_leaves_no_store_behind(data: Path, tmp_path: Path) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    run(data, unit="dialog", ks=(1,), embedder="hashing")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


# the command line ------------------------------------------------------------------------
def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize(
    "argv",
    [
        ["--embedder", "hashing", "bench", "locomo", "--data", "{data}", "--unit", "dialog", "--k", "1,3", "--json"],
        ["--json", "--embedder", "hashing", "bench", "locomo", "--data", "{data}", "--unit", "dialog", "--k", "1,3"],
    ],
    ids=["json-after", "json-before"],
)
def test_cli_prints_one_json_object(data: Path, argv: list[str]) -> None:
    result = invoke(*[a.format(data=data) for a in argv])
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    payload = json.loads(result.stdout)  # exactly one JSON document on stdout
    assert isinstance(payload, dict)
    check_shape(payload, "dialog")
    assert_recall(payload, EXPECTED)


def test_cli_observation_unit(data: Path) -> None:
    result = invoke("--embedder", "hashing", "bench", "locomo", "--data", str(data), "--unit", "observation", "--k", "3", "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    payload = json.loads(result.stdout)
    check_shape(payload, "observation", ks=("3",))
    assert payload["recall"]["3"]["overall"] == pytest.approx(0.9)


def test_cli_prints_a_table_without_json(data: Path) -> None:
    result = invoke("--embedder", "hashing", "bench", "locomo", "--data", str(data), "--k", "1,3")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    out = result.stdout
    for name in (*CATEGORY_NAMES, "overall"):
        assert name in out
    rows = [line for line in out.splitlines() if line.startswith(("| 1 |", "| 3 |"))]
    assert len(rows) == 4, out  # per category, then per half and conversation
    assert "80.0" in rows[0] and "90.0" in rows[1], rows  # overall R@1 and R@3 in percent
    assert "| k | half A | half B | conv-test |" in out
    # Half A: questions 1, 3, 5 (all found at 1); half B: 2 and 4.
    assert rows[2:] == ["| 1 | 100.0 | 50.0 | 80.0 |", "| 3 | 100.0 | 75.0 | 90.0 |"], rows


@pytest.mark.parametrize("k", ["0", "a", "1,x", "-5", ""])
def test_cli_rejects_bad_k(data: Path, k: str) -> None:
    result = invoke("--embedder", "hashing", "bench", "locomo", "--data", str(data), "--k", k, "--json")
    assert result.exit_code == 2, (k, result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stdout.strip() == ""


def test_cli_rejects_a_missing_data_file(tmp_path: Path) -> None:
    result = invoke("--embedder", "hashing", "bench", "locomo", "--data", str(tmp_path / "nope.json"), "--json")
    assert result.exit_code == 2


def test_cli_reports_a_malformed_data_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"sample_id": "x", "conversation": {"session_1": [], "session_1_date_time": "not a date"}}]))
    result = invoke("--embedder", "hashing", "bench", "locomo", "--data", str(bad), "--json")
    # An error message naming the file, not a traceback.
    assert result.exit_code == 1, (result.exit_code, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    assert "bad.json" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"a": 1}', "it holds an object, not a list of conversations"),
        ("[]", "it holds no conversation"),
        ("", "the file is empty"),
        ('[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "qa": []}]', "it holds no question to measure recall with"),
        ('[{"sample_id": "x", "conversation": {"session_1": [{"speaker": "A", "text": "hi"}]}, "qa": [{"question": "q?"}]}]',
         "conversation 1's session_1 has no session_1_date_time such as '1:56 pm on 8 May, 2023'"),
        ('[{"sample_id": "x", "conversation": {}, "qa": [{"question": "q?", "category": "one"}]}]',
         "conversation 1's question 1 has an 'evidence' that is not a list or a 'category' that is not a number"),
        ('[{"sample_id": "x", "conversation": {}, "qa": [{"question": "q?"}]}, {"sample_id": "y", "conversation": {}}, '
         '{"sample_id": "x", "conversation": {}, "qa": [{"question": "p?"}]}]',
         "conversations 1 and 3 have the same sample_id 'x'"),
    ],
)
def test_cli_names_the_data_file_and_what_is_wrong_with_it(tmp_path: Path, content: str, problem: str) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(content)
    result = invoke("--embedder", "hashing", "bench", "locomo", "--data", str(data), "--json")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (result.exit_code, result.exception)
    assert result.stderr.splitlines()[-1] == f"error: {data} is not LoCoMo data: {problem}"
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_a_half_without_questions_is_not_reported_as_nothing_found(tmp_path: Path) -> None:
    """One question: half B holds none. It is null in JSON and a dash in the table, not
    a measured 0 %; a conversation id with a "|" keeps the table's columns."""
    one = copy.deepcopy(CONVERSATION)
    one["sample_id"] = "conv|one"
    one["qa"] = one["qa"][:1]
    path = tmp_path / "one.json"
    path.write_text(json.dumps([one]), encoding="utf-8")
    result = run(path, unit="dialog", ks=(1,), embedder="hashing")
    assert result["halves"] == {"A": {"1": 1.0}, "B": {"1": None}}
    assert result["by_conversation"] == {"conv|one": {"1": 1.0}}
    table = format_table(result)
    assert "| k | half A | half B | conv\\|one |" in table
    assert "| 1 | 100.0 | – | 100.0 |" in table

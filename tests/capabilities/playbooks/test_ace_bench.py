"""``memorist bench evolve``: the shipped stream, the JSON shape, LoCoMo parsing, and
(with the real MiniLM model) LTMBSE beating the baseline on the tutoring stream."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memorist import HashingEmbedder
from memorist.benchmarks import evolve as bench
from memorist.benchmarks import tutoring
from memorist.cli import cli

ROOT = Path(__file__).resolve().parents[3]
KEYS = {"bullets", "capacity", "near_duplicate_pct", "near_duplicate_pct_at_0_8", "max_new_in_turn", "capacity_exceeded", "recall_at_5", "recall_at_10"}


def test_the_shipped_stream_is_the_seeded_generator_output():
    shipped = tutoring.load()
    assert shipped == json.loads(json.dumps(tutoring.generate(tutoring.SEED)))
    assert len(shipped["learners"]) == 6 and len(shipped["turns"]) == 180
    forms = {x["form"] for t in shipped["turns"] for x in t["lessons"]}
    assert forms == {"canonical", "trivial", "minor", "paraphrase"}
    assert {t["outcome"] for t in shipped["turns"]} == {"success", "failure"}
    assert all(q["relevant"] for q in shipped["queries"])


TINY_LOCOMO = [{
    "sample_id": "conv-x",
    "conversation": {"speaker_a": "Ada", "speaker_b": "Bo", "session_1": [], "session_2": [],
                     "session_1_date_time": "1 May 2023", "session_2_date_time": "2 May 2023", "session_3_date_time": "x"},
    "observation": {
        "session_2_observation": {"Ada": [["Ada adopted a puppy named Rex.", "D2:4"]]},
        "session_1_observation": {
            "Ada": [["Ada started learning the violin.", "D1:3"], ["Ada practises the violin every morning.", "D1:3"],
                    ["Ada is afraid of heights.", "D1:5"]],
            "Bo": [["Bo works as a nurse in Lisbon.", "D1:2"], ["Bo ran a marathon in the spring.", ["D1:6", "D1:7"]]],
        },
    },
    "qa": [
        {"question": "What instrument is Ada learning?", "answer": "violin", "evidence": ["D1:3"], "category": 1},
        {"question": "Where does Bo work?", "answer": "Lisbon", "evidence": ["D1:2; D1:9"], "category": 4},
        {"question": "What is the puppy called?", "answer": "Rex", "evidence": ["D2:4", "D"], "category": 4},
        {"question": "Anything else?", "answer": "-", "evidence": [], "category": 5},
    ],
}]


def test_locomo_turns_follow_session_and_dialog_order():
    turns = bench._locomo_turns(TINY_LOCOMO[0])
    assert [(s, sess, [f for f, _ in facts]) for s, sess, facts in turns] == [
        ("Bo", "session_1", ["Bo works as a nurse in Lisbon."]),
        ("Ada", "session_1", ["Ada started learning the violin.", "Ada practises the violin every morning."]),
        ("Ada", "session_1", ["Ada is afraid of heights."]),
        ("Bo", "session_1", ["Bo ran a marathon in the spring."]),
        ("Ada", "session_2", ["Ada adopted a puppy named Rex."]),
    ]
    assert bench._evidence(["D1:3", "D8:6; D9:17", "D", "D30:05"]) == ["D1:3", "D8:6", "D9:17", None, "D30:5"]
    assert bench._recall(["D1:3", None], [{"D1:3"}], 5) == 0.5
    assert bench._recall([], [], 5) == 1.0


@pytest.mark.sqlite_only("the benchmark makes its own SQLite files in a folder")
def test_evolve_json_shape_through_the_cli(tmp_path):
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_LOCOMO))
    result = CliRunner().invoke(cli, ["bench", "evolve", "--json", "--embedder", "hashing", "--stream", "locomo", "--data", str(data)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert list(out) == ["streams"] and list(out["streams"]) == ["locomo"]
    assert set(out["streams"]["locomo"]) == {"baseline", "per-learner", "baseline@equal-capacity"}
    for figures in out["streams"]["locomo"].values():
        assert set(figures) == KEYS
        assert isinstance(figures["capacity_exceeded"], bool) and 0 <= figures["near_duplicate_pct"] <= 100
        assert 0.0 <= figures["recall_at_5"] <= figures["recall_at_10"] <= 1.0
    lt = out["streams"]["locomo"]["per-learner"]
    assert lt["bullets"] == 6 and lt["max_new_in_turn"] == 2
    # The baseline again, with the room of every learner's playbook together (two speakers).
    assert out["streams"]["locomo"]["baseline@equal-capacity"]["capacity"] == 2 * out["streams"]["locomo"]["baseline"]["capacity"] == 200
    for figures in out["streams"]["locomo"].values():  # the looser threshold finds at least as many pairs
        assert figures["near_duplicate_pct_at_0_8"] >= figures["near_duplicate_pct"]
    human = CliRunner().invoke(cli, ["bench", "evolve", "--embedder", "hashing", "--stream", "locomo", "--data", str(data)])
    assert "| locomo | per-learner | 100 | 6 |" in human.stdout
    missing = CliRunner().invoke(cli, ["bench", "evolve", "--stream", "locomo", "--embedder", "hashing", "--data", str(tmp_path / "no.json")])
    assert missing.exit_code == 2 and "--data" in missing.output


BAD_DATA = [
    ("", "the file is empty"),
    ("{not json", "not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
    ('{"a": 1}', "it holds an object, not a list of conversations"),
    ("[]", "it holds no conversation"),
    ('[{"conversation": 5}]', "conversation 1 has no 'sample_id'"),
    ('[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "qa": []}]', "conversation 1 has no 'observation'"),
    ('[{"sample_id": "x", "conversation": [], "observation": {}}]', "conversation 1's 'conversation' is a list, not an object"),
    ('[{"sample_id": "x", "conversation": {"speaker_a": "A"}, "observation": {}}]', "conversation 1's conversation has no 'speaker_b' (a name)"),
    ('[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "observation": {"session_1_observation": {"A": ["fact"]}}}]',
     "conversation 1's session_1_observation of 'A' is not a list of [fact, turn id] pairs"),
    ('[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "observation": {}, "qa": [{"q": 1}]}]',
     "conversation 1's question 1 is not an object with a 'question'"),
    ('[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "observation": {}, "qa": []}]',
     "it holds no question to measure recall with"),
    ('[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "observation": {}, "qa": [{"question": "q?"}]}]',
     "it holds no observation to learn from"),
]


@pytest.mark.sqlite_only("the benchmark makes its own SQLite files in a folder")
@pytest.mark.parametrize(("content", "problem"), BAD_DATA)
def test_evolve_names_the_data_file_and_what_is_wrong_with_it(tmp_path, content, problem):
    data = tmp_path / "locomo.json"
    data.write_text(content)
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "x.db"), "bench", "evolve", "--stream", "locomo", "--embedder", "hashing", "--data", str(data)])
    assert result.exit_code == 1 and result.stdout == ""
    assert isinstance(result.exception, SystemExit)  # an error message, no traceback
    assert result.stderr.splitlines()[-1] == f"error: {data} is not LoCoMo data: {problem}"
    assert "Traceback" not in result.stderr


@pytest.mark.sqlite_only("the benchmark makes its own SQLite files in a folder")
def test_tutoring_run_on_a_small_stream(tmp_path):
    stream = tutoring.generate(3, conversations=1, turns_per_conversation=4)
    emb = bench.CachingEmbedder(HashingEmbedder())
    figures = {p: bench.run_tutoring(p, emb, str(tmp_path / p), max_bullets=100, stream=stream) for p in bench.PRESETS}
    assert set(figures["per-learner"]) == KEYS
    assert figures["per-learner"]["max_new_in_turn"] <= 2
    assert figures["per-learner"]["capacity_exceeded"] is False


@pytest.fixture(scope="module")
def tutoring_with_minilm() -> dict:
    """``memorist bench evolve --stream tutoring`` with its default embedder (about 10 s)."""
    from memorist.embed import resolve_embedder

    return bench.run(streams=("tutoring",), embedder=resolve_embedder("sentence-transformers"))["streams"]["tutoring"]


@pytest.mark.sqlite_only("the benchmark makes its own SQLite files in a folder")
@pytest.mark.model
def test_ltmbse_beats_the_baseline_on_the_tutoring_stream(tutoring_with_minilm):
    base, lt = tutoring_with_minilm["baseline"], tutoring_with_minilm["per-learner"]
    assert lt["near_duplicate_pct"] <= 1.0 < base["near_duplicate_pct"]
    assert lt["recall_at_5"] > base["recall_at_5"] and lt["recall_at_10"] > base["recall_at_10"]
    assert lt["max_new_in_turn"] <= 2 and not lt["capacity_exceeded"]


@pytest.mark.sqlite_only("the benchmark makes its own SQLite files in a folder")
@pytest.mark.model
def test_the_docs_quote_the_figures_it_prints(tutoring_with_minilm):
    base, lt = tutoring_with_minilm["baseline"], tutoring_with_minilm["per-learner"]
    recall = f"{lt['recall_at_10']:.2f} against {base['recall_at_10']:.2f}"
    duplicates = f"{base['near_duplicate_pct']:.1f} %"
    guide = (ROOT / "docs" / "guides" / "playbooks.md").read_text(encoding="utf-8")
    assert f"(recall@10 {recall})" in guide and f"(the baseline: {duplicates} of its bullets)" in guide
    assert f"| none against {duplicates}; {recall} | `memorist bench evolve` |" in (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")


@pytest.mark.sqlite_only("the benchmark makes its own SQLite files in a folder")
def test_evolve_on_an_install_without_the_dev_data_runs_the_tutoring_stream(tmp_path, monkeypatch):
    """On an installed wheel the LoCoMo split is not beside the package: the default
    run failed ("LoCoMo data not found") instead of running what it can."""
    from memorist.benchmarks import evolve

    monkeypatch.setattr(evolve, "default_data_path", lambda: tmp_path / "nowhere" / "locomo_dev.json")
    result = CliRunner().invoke(cli, ["bench", "evolve", "--json", "--embedder", "hashing"])
    assert result.exit_code == 0, result.output
    assert list(json.loads(result.stdout)["streams"]) == ["tutoring"]
    assert "tutoring stream only" in result.stderr

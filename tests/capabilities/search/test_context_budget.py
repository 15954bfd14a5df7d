"""A context within a token budget: format_context(max_tokens=...), pack_context, and
``memorist bench locomo --budget``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memorist import Memory, format_context
from memorist.benchmarks.locomo import budget_contexts, evidence_inside, run
from memorist.cli import cli
from memorist.embed.tokens import estimate_tokens, token_counter
from memorist.errors import ValidationError
from memorist.pipelines.context import pack_context

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "facts"))
from test_locomo_bench import CONVERSATION  # noqa: E402


def words(text: str) -> int:
    return len(text.split())


def item(text: str, *, name: str = "Caroline", day: str = "2023-05-08", hour: int = 12, score: float = 0.5) -> dict:
    at = f"{day}T{hour:02d}:00:00+00:00"
    return {"memory": text, "metadata": {"name": name}, "created_at": at, "updated_at": at, "score": score}


def test_the_context_never_exceeds_the_budget_and_holds_whole_memories_only():
    results = [item(f"memory number {i} " + "word " * (i % 7), hour=i % 24) for i in range(40)]
    for budget in (5, 12, 30, 60, 200):
        packed = pack_context(results, max_tokens=budget, count_tokens=words)
        assert packed.tokens == words(packed.text) <= budget
        for r in packed.kept:
            assert f"Caroline: {' '.join(r['memory'].split())}" in packed.text
        for r in packed.cut:
            assert r["memory"].strip() not in packed.text
        assert len(packed.kept) + len(packed.cut) == len(results)


def test_a_long_memory_that_does_not_fit_leaves_room_for_shorter_ones():
    results = [item("short first"), item("long " * 50, score=0.4), item("short third", score=0.3)]
    packed = pack_context(results, max_tokens=20, count_tokens=words)
    assert [r["memory"] for r in packed.kept] == ["short first", "short third"]
    assert [r["memory"] for r in packed.cut] == [results[1]["memory"]]


def test_near_duplicates_of_one_speaker_appear_once():
    results = [
        item("I adopted a greyhound and named her Zephyrine"),
        item("I adopted a greyhound, and named her Zephyrine!"),  # the same words
        item("I adopted a greyhound and named her Zephyrine", name="Melanie"),  # someone else said it
    ]
    packed = pack_context(results, max_tokens=200, count_tokens=words)
    assert len(packed.kept) == 2 and len(packed.duplicates) == 1
    assert {r["metadata"]["name"] for r in packed.kept} == {"Caroline", "Melanie"}
    assert len(pack_context(results, max_tokens=200, count_tokens=words, dedupe=False).kept) == 3


def test_dates_head_their_memories_once_in_the_order_they_happened():
    results = [
        item("third thing", day="2023-06-01"),
        item("first thing", day="2023-05-08", hour=9, name="Melanie"),
        item("second thing", day="2023-05-08", hour=10),
    ]
    text = format_context(results, max_tokens=100, count_tokens=words)
    assert text.splitlines() == [
        "## Relevant memories about the user",
        "[2023-05-08]",
        "- Melanie: first thing",
        "- Caroline: second thing",
        "[2023-06-01]",
        "- Caroline: third thing",
    ]
    # Without a budget: as before, best first, a date on every line.
    assert format_context(results).splitlines()[1] == "- third thing (2023-06-01)"


def test_without_bullets_a_turn_is_a_transcript_line_and_costs_less():
    results = [item("first thing", hour=9, name="Melanie"), item("a fact of nobody", hour=10, name="")]
    packed = pack_context(results, max_tokens=100, count_tokens=words, bullets=False)
    assert packed.text.splitlines() == ["## Relevant memories about the user", "[2023-05-08]", "Melanie: first thing", "- a fact of nobody"]
    assert packed.tokens == pack_context(results, max_tokens=100, count_tokens=words).tokens - 1


def test_value_order_lets_a_short_memory_pass_a_long_one_of_nearly_the_same_score():
    results = [item("long " * 30, score=0.50), item("short one", score=0.49)]
    assert pack_context(results, max_tokens=200, count_tokens=words, order="value").kept[0]["memory"] == "long " * 30
    packed = pack_context(results, max_tokens=20, count_tokens=words, order="value")
    assert [r["memory"] for r in packed.kept] == ["short one"]


def test_bad_budgets_and_orders_are_refused_by_name():
    for bad in (0, -5, 2.5, True, "100"):
        with pytest.raises(ValidationError, match="max_tokens"):
            pack_context([item("x")], max_tokens=bad, count_tokens=words)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="order"):
        pack_context([item("x")], max_tokens=10, count_tokens=words, order="random")
    assert pack_context([], max_tokens=10, count_tokens=words).text == ""
    assert format_context([item("x")], max_tokens=1, count_tokens=words) == ""  # not even the title fits



def test_the_whole_search_result_is_taken_and_anything_else_is_refused_by_name():
    """Before, format_context(memory.search(...)), the dict, raised AttributeError:
    'str' object has no attribute 'get'."""
    results = [item("I adopted a greyhound"), item("I started theremin lessons", day="2023-05-09")]
    whole = {"results": results}
    assert format_context(whole) == format_context(results) != ""
    assert format_context(whole, max_tokens=50, count_tokens=words) == format_context(results, max_tokens=50, count_tokens=words) != ""
    assert pack_context(whole, max_tokens=50, count_tokens=words).kept == pack_context(results, max_tokens=50, count_tokens=words).kept
    assert format_context({"results": []}) == "" == format_context(None)  # type: ignore[arg-type]
    for bad, field in (
        (item("a memory, not the results"), "results"),
        ({"hits": results}, "results"),
        ("- a text", "results"),
        (3, "results"),
        ([results[0], "x"], "results[1]"),
        ([{"text": "no memory key"}], "results[0]"),
    ):
        for call in (lambda b: format_context(b), lambda b: format_context(b, max_tokens=50, count_tokens=words),
                     lambda b: pack_context(b, max_tokens=50, count_tokens=words)):
            with pytest.raises(ValidationError) as info:
                call(bad)
            assert info.value.field == field


@pytest.mark.parametrize("budget", [1, 3, 5, 8, 12, 20])
def test_every_bench_context_holds_at_most_its_budget(budget: int):
    """Before, the plain top-k context always held its title line (7 tokens with the
    real tokenizer), over budgets 1 and 5."""
    count = token_counter(required=True)
    hits = [item("I adopted a greyhound"), item("I started theremin lessons", day="2023-05-09")]
    for way, text in budget_contexts(hits, budget, count).items():
        assert count(text) <= budget, (way, text)
    assert budget_contexts(hits, 1, count)["top_k"] == ""
    wide = budget_contexts(hits, 400, count)["top_k"]
    assert "greyhound" in wide and "theremin" in wide

def test_the_bundled_tokenizer_counts_real_tokens():
    count = token_counter(required=True)
    assert count.name == "all-MiniLM-L6-v2 tokenizer"
    text = "Caroline: I went to the LGBTQ support group yesterday"
    assert count(text) != estimate_tokens(text)  # WordPiece splits "LGBTQ"
    assert count("word " * 2000) == 2000  # counted whole: not truncated at the model's 256
    assert count("") == 0


def test_search_results_packed_with_the_real_tokenizer(tmp_path):
    memory = Memory(tmp_path / "m.db", embedder="hashing")
    memory.add(
        [{"role": "user", "content": f"Caroline talked about topic {i} at length " + "and more " * (i % 5), "name": "Caroline"} for i in range(60)],
        user_id="u",
        infer=False,
    )
    hits = memory.search("topic 7", user_id="u", limit=60)["results"]
    count = token_counter(required=True)
    for budget in (50, 200, 800):
        text = format_context(hits, max_tokens=budget)
        assert 0 < count(text) <= budget
    memory.close()


def test_evidence_counts_only_when_every_turn_is_whole_inside():
    texts = {"D1:1": "I adopted a greyhound", "D1:2": "I started theremin lessons"}
    context = "- Caroline: I adopted a greyhound\n- Melanie: I started theremin"
    assert evidence_inside(["D1:1"], 0, texts, context) == (True, 1.0)
    assert evidence_inside(["D1:1", "D1:2"], 0, texts, context) == (False, 0.5)  # a fragment is not the turn
    assert evidence_inside([], 0, texts, context) == (True, 1.0)
    assert evidence_inside(["D1:1"], 1, texts, context) == (False, 0.5)  # malformed evidence is missed


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "locomo_test.json"
    path.write_text(json.dumps([CONVERSATION]), encoding="utf-8")
    return path


def test_bench_budget_mode_on_a_small_conversation(data: Path):
    result = run(data, ks=[1], embedder="hashing", budgets=[15, 400])
    small, large = result["budget"]["15"], result["budget"]["400"]
    # 400 tokens hold the whole (tiny) conversation: every question whose evidence
    # parses is answered; the open-domain one has malformed evidence and never is.
    assert large["packed"]["all_evidence"]["overall"] == pytest.approx(4 / 5)
    assert large["packed"]["all_evidence"]["open_domain"] == 0.0
    assert small["packed"]["all_evidence"]["overall"] < large["packed"]["all_evidence"]["overall"]
    for budget, ways in result["budget"].items():
        for row in ways.values():
            assert row["tokens"] <= int(budget)
    assert result["replay"]["all_evidence"] == pytest.approx(4 / 5)
    assert result["replay"]["tokens"] > 15
    with pytest.raises(ValueError, match="dialog"):
        run(data, unit="observation", embedder="hashing", budgets=[100])


def test_cli_budget_prints_the_budget_table(data: Path):
    out = CliRunner().invoke(cli, ["--embedder", "hashing", "bench", "locomo", "--data", str(data), "--k", "1", "--budget", "50,400"])
    assert out.exit_code == 0, out.output
    assert "Recall per token" in out.output and "| 400 | packed |" in out.output and "whole conversation replayed" in out.output
    bad = CliRunner().invoke(cli, ["--embedder", "hashing", "bench", "locomo", "--data", str(data), "--budget", "0"])
    assert bad.exit_code != 0 and "budgets must be positive" in bad.output

"""Text normalisation, content hashes, query terms and full-text-safe tokens."""

from __future__ import annotations

import re
import sqlite3

import pytest

from memorist.policies.text import (
    content_hash,
    index_terms,
    named_speakers,
    normalize,
    query_terms,
    stable_token,
    words,
)


def test_normalize_folds_case_space_width_and_trailing_punctuation():
    assert normalize("  Likes   Sushi!  ") == "likes sushi"
    assert normalize("LIKES\tsushi\n.") == "likes sushi"
    assert normalize("ＬＩＫＥＳ sushi") == "likes sushi"  # full-width letters (NFKC)
    assert normalize("Straße") == normalize("STRASSE")  # casefold, not lower
    assert normalize("likes sushi?!;:") == "likes sushi"


def test_normalize_keeps_inner_punctuation():
    assert normalize("Dr. Who likes tea.") == "dr. who likes tea"


@pytest.mark.parametrize("variant", ["likes sushi", "Likes Sushi", "  likes  sushi ", "Likes sushi.", "LIKES SUSHI!!"])
def test_content_hash_equal_for_trivial_variants(variant):
    assert content_hash(variant) == content_hash("Likes sushi")


def test_content_hash_differs_for_different_text():
    assert content_hash("Likes sushi") != content_hash("Likes ramen")
    assert content_hash("Is vegetarian") != content_hash("Is not vegetarian")


def test_content_hash_is_stable_hex():
    h = content_hash("Likes sushi")
    assert re.fullmatch(r"[0-9a-f]{32}", h)
    assert h == content_hash("Likes sushi")


def test_words_lowercase_unicode():
    assert words("Alex's café, Zürich!") == ["alex", "s", "café", "zürich"]


def test_query_terms_drop_stop_words_and_duplicates_in_order():
    assert query_terms("What are my favourite foods and my favourite drinks?") == ["favourite", "foods", "drinks"]
    assert query_terms("Was ist mein Lieblingsessen?") == ["lieblingsessen"]


def test_a_query_of_stop_words_only_has_no_terms_as_no_index_holds_them():
    # Once it fell back to the stop words, which only SQLite's FTS5 table (a scope of
    # several spaces) held: the same search then matched there and nowhere else.
    assert query_terms("who am I") == [] == index_terms("who am I")


def test_query_terms_of_punctuation_is_empty():
    assert query_terms("?!...") == []


def test_stable_token_is_letter_then_digits_and_deterministic():
    for value in ["", "alex", "Bob Smith", "user@example.com", "ünïcödé", "x" * 300]:
        tok = stable_token("u", value)
        assert re.fullmatch(r"u[0-9]+", tok), tok
        assert tok == stable_token("u", value)
    assert stable_token("u", "alex") != stable_token("u", "bob")
    assert stable_token("u", "alex") != stable_token("a", "alex")


def test_stable_token_survives_fts5_porter_unicode61_tokenisation():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
    tokens = [stable_token(p, v) for p, v in (("u", "alex"), ("a", "agent-1"), ("r", "run/2"), ("t", ""))]
    conn.execute("INSERT INTO t (x) VALUES (?)", (" ".join(tokens),))
    indexed = {row[0] for row in conn.execute("SELECT term FROM v")}
    assert indexed == set(tokens)
    for tok in tokens:
        assert conn.execute("SELECT count(*) FROM t WHERE t MATCH ?", (f'"{tok}"',)).fetchone()[0] == 1
    conn.close()


def test_index_terms_lowercase_stem_and_drop_stop_words():
    from memorist.policies.text import index_terms

    assert index_terms("I prefer my PREFERENCES") == ["prefer", "prefer"]
    assert index_terms("the and of is") == []
    assert index_terms("Running runs") == ["run", "run"]


def test_many_index_terms_gives_index_terms_of_each_text():
    from memorist.policies.text import index_terms, many_index_terms

    texts = [
        "",
        "the and are",  # stop words only
        "Preferences PREFER preferring, preferred.",
        "İstanbul Straße ÉCOLE naïve ﬁne café 2024-05-03 x_y",
        "Ich bin nicht in München, aber das Wetter ist gut",
        "running runs ran runner " * 3,
    ]
    assert many_index_terms(texts) == [index_terms(t) for t in texts]
    assert many_index_terms(texts[::-1]) == [index_terms(t) for t in texts[::-1]]  # stems remembered: same



SPEAKERS = {"ann lee", "joann leeds", "caroline", "mel", "o'brien"}


@pytest.mark.parametrize(
    "query, named",
    [
        ("What did Joann Leeds start?", ["joann leeds"]),  # not "ann lee", inside it
        ("What did Ann Lee adopt?", ["ann lee"]),
        ("Did ann  LEE, and Caroline, meet?", ["ann lee", "caroline"]),
        ("Did Annie Leeds come?", []),
        ("What did Melanie paint?", []),  # "mel" is not a word of it
        ("What did Mel paint?", ["mel"]),
        ("What did O'Brien say?", ["o'brien"]),
        ("What did Ann say to Lee?", []),  # the words of a name in a row
    ],
)
def test_speakers_are_named_by_whole_words(query, named):
    """Before, a name of several words matched as a substring: "Joann Leeds" named "Ann Lee"."""
    assert named_speakers(query, SPEAKERS) == named

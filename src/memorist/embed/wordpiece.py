"""BERT's WordPiece tokenizer in pure Python, read from a ``tokenizer.json``.

The bundled model's tokenizer is BERT's (``BertNormalizer``, ``BertPreTokenizer``,
``WordPiece``, ``[CLS] … [SEP]``); this module reproduces what the ``tokenizers``
package computes for it, id for id (tests/unit/test_wordpiece.py compares them on
every LoCoMo turn and on Unicode edge cases), so the default install needs neither
``tokenizers`` nor the Hugging Face client it brings (~40 MB). The steps, in the
order ``tokenizers`` applies them:

1. the added tokens (``[CLS]``, ``[SEP]``, … written in the text) are split off
   verbatim and kept as their ids;
2. normalisation: control characters, NUL and U+FFFD dropped, whitespace made a
   space, spaces around CJK ideographs, accents stripped (NFD minus non-spacing
   marks) and lower case, character by character;
3. pre-tokenisation: words split on whitespace, each punctuation mark its own word;
4. WordPiece: the longest vocabulary prefix first, then ``##`` continuations; a word
   with no split, or longer than ``max_input_chars_per_word``, is ``[UNK]``;
5. truncation to ``max_length`` counting the two special tokens.

:func:`load` returns None for a ``tokenizer.json`` of another kind, whose
tokenisation this module does not know; the caller then uses ``tokenizers``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Any

# CJK ideograph blocks, as BERT (and ``tokenizers``) list them.
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK)


def _is_whitespace(ch: str) -> bool:
    # Rust's char::is_whitespace (the White_Space property); its Cc members other
    # than \t \n \r are removed as control characters before this is asked.
    return ch.isspace() and ch not in "\x1c\x1d\x1e\x1f"


def _is_control(ch: str) -> bool:
    # Cc, Cf, Co and Cs; not Cn: ``tokenizers`` keeps unassigned code points.
    return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch)[0] == "P"


@lru_cache(maxsize=4096)
def _normalize_char(ch: str, lowercase: bool, strip_accents: bool, chinese: bool) -> str:
    """What BertNormalizer makes of one character (after cleaning)."""
    out = f" {ch} " if chinese and _is_cjk(ord(ch)) else ch
    if strip_accents:
        out = "".join(c for c in unicodedata.normalize("NFD", out) if unicodedata.category(c) != "Mn")
    if lowercase:
        out = "".join(c.lower() for c in out)
    return out


class WordPieceTokenizer:
    """BERT tokenisation of one text into ids (see the module docstring)."""

    def __init__(self, spec: dict[str, Any], *, max_length: int | None = None) -> None:
        model = spec["model"]
        self.vocab: dict[str, int] = dict(model["vocab"])
        self.unk_id = self.vocab[model.get("unk_token", "[UNK]")]
        self.prefix = model.get("continuing_subword_prefix", "##")
        self.max_chars = int(model.get("max_input_chars_per_word", 100))
        norm = spec.get("normalizer") or {}
        self.clean_text = bool(norm.get("clean_text", True))
        self.chinese = bool(norm.get("handle_chinese_chars", True))
        self.lowercase = bool(norm.get("lowercase", True))
        accents = norm.get("strip_accents")
        self.strip_accents = self.lowercase if accents is None else bool(accents)
        post = spec.get("post_processor") or {}
        if post.get("type") == "TemplateProcessing":
            single = post["single"]
            ids = {name: tok["ids"] for name, tok in post["special_tokens"].items()}
            self.head = [i for part in single[:1] if "SpecialToken" in part for i in ids[part["SpecialToken"]["id"]]]
            self.tail = [i for part in single[2:] if "SpecialToken" in part for i in ids[part["SpecialToken"]["id"]]]
        else:  # BertProcessing
            self.head, self.tail = [int(post["cls"][1])], [int(post["sep"][1])]
        added = sorted((t for t in spec.get("added_tokens") or []), key=lambda t: -len(t["content"]))
        self.added = {t["content"]: int(t["id"]) for t in added}
        self._added_re = re.compile("|".join(re.escape(t["content"]) for t in added)) if added else None
        self.max_length = max_length

    def _normalize(self, text: str) -> str:
        parts = []
        for ch in text:
            if self.clean_text:
                if ch == "\x00" or ch == "\ufffd" or _is_control(ch):
                    continue
                if _is_whitespace(ch):
                    parts.append(" ")
                    continue
            parts.append(_normalize_char(ch, self.lowercase, self.strip_accents, self.chinese))
        return "".join(parts)

    def _words(self, text: str) -> list[str]:
        words: list[str] = []
        current: list[str] = []
        for ch in text:
            if _is_whitespace(ch):
                if current:
                    words.append("".join(current))
                    current = []
            elif _is_punctuation(ch):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(ch)
            else:
                current.append(ch)
        if current:
            words.append("".join(current))
        return words

    def _wordpiece(self, word: str, out: list[int]) -> None:
        if len(word) > self.max_chars:
            out.append(self.unk_id)
            return
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                out.append(self.unk_id)
                return
            pieces.append(found)
            start = end
        out.extend(pieces)

    def tokens(self, text: str) -> list[int]:
        """The ids of ``text``, without special tokens and without truncation."""
        ids: list[int] = []
        chunks: list[tuple[str, bool]] = []
        if self._added_re is not None:
            last = 0
            for match in self._added_re.finditer(text):
                chunks.append((text[last : match.start()], False))
                chunks.append((match.group(), True))
                last = match.end()
            chunks.append((text[last:], False))
        else:
            chunks.append((text, False))
        for chunk, special in chunks:
            if special:
                ids.append(self.added[chunk])
            elif chunk:
                for word in self._words(self._normalize(chunk)):
                    self._wordpiece(word, ids)
        return ids

    def encode(self, text: str) -> list[int]:
        """The ids the model reads: ``[CLS] … [SEP]``, cut to ``max_length``."""
        ids = self.tokens(text)
        if self.max_length is not None:
            room = max(self.max_length - len(self.head) - len(self.tail), 0)
            ids = ids[:room]
        return [*self.head, *ids, *self.tail]


def supports(spec: dict[str, Any]) -> bool:
    """Whether ``spec`` (a parsed tokenizer.json) is a BERT WordPiece tokenizer this
    module reproduces."""
    model = spec.get("model") or {}
    post = spec.get("post_processor") or {}
    if post.get("type") == "TemplateProcessing":
        single = post.get("single") or []
        shape_ok = (
            len(single) == 3
            and "SpecialToken" in single[0]
            and "Sequence" in single[1]
            and "SpecialToken" in single[2]
        )
    else:
        shape_ok = post.get("type") == "BertProcessing"
    return (
        model.get("type") == "WordPiece"
        and (spec.get("normalizer") or {}).get("type") == "BertNormalizer"
        and (spec.get("pre_tokenizer") or {}).get("type") == "BertPreTokenizer"
        and shape_ok
        and not any(t.get("lstrip") or t.get("rstrip") or t.get("single_word") or t.get("normalized") for t in spec.get("added_tokens") or [])
    )


def load(path: str | Path, *, max_length: int | None = None) -> WordPieceTokenizer | None:
    """The tokenizer of the ``tokenizer.json`` at ``path``, or None if it is not BERT's."""
    spec = json.loads(Path(path).read_text(encoding="utf-8"))
    return WordPieceTokenizer(spec, max_length=max_length) if supports(spec) else None


__all__ = ["WordPieceTokenizer", "load", "supports"]

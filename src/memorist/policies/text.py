"""Text normalisation shared by hashing, full-text queries and the embedders, and
the one shortening rule of log lines (:func:`preview`)."""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from typing import Any

_WORD = re.compile(r"\w+", re.UNICODE)
_SPACE = re.compile(r"\s+")

# Words that carry no retrieval signal, English and German. Kept small on purpose:
# BM25's idf already discounts common words; this list only stops questions like
# "what are my ..." from matching every memory that contains "are".
STOPWORDS = frozenset(
    """
    a an and are as at be been being but by can could did do does doing for from had has
    have having he her hers him his how i i'm if in into is it its itself me my myself no
    nor not of off on once only or our ours out over own same she should so some such than
    that the their theirs them then there these they this those to too under until up very
    was we were what when where which while who whom why will with would you your yours
    yourself am any about again all also just more most other s t don
    der die das ein eine einen einem eines und oder ist sind war bin bist mein meine meinen
    ich du er sie es wir ihr nicht zu mit von im in auf für dem den des was wie wer wo
    """.split()
)


def normalize(text: str) -> str:
    """Case-, width- and whitespace-insensitive form used for content hashes."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _SPACE.sub(" ", text).strip()
    return text.rstrip(" .!?;:")


def content_hash(text: str) -> str:
    """A stable hash of the normalised text: equal for trivially different copies."""
    return hashlib.blake2b(normalize(text).encode("utf-8"), digest_size=16).hexdigest()


def words(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return [w.casefold() for w in _WORD.findall(unicodedata.normalize("NFKC", text))]


def query_terms(text: str) -> list[str]:
    """The distinct content words of a query, in order, stop words removed.

    A query made only of stop words ("who am I") has none: no index holds stop words
    (:func:`index_terms`), so every text ranking, on every backend and whatever the
    scope spans, finds nothing for it and the vector ranking alone ranks.
    """
    return list(dict.fromkeys(t for t in words(text) if t not in STOPWORDS))


def stable_token(prefix: str, value: str) -> str:
    """A full-text-safe token naming ``value``: a letter then digits.

    Digits only after the prefix, so neither the unicode61 tokenizer (which splits
    on punctuation) nor the porter stemmer (which only strips letter suffixes) can
    alter it.
    """
    digest = hashlib.blake2b(value.encode("utf-8"), digest_size=8).digest()
    return f"{prefix}{int.from_bytes(digest, 'big')}"


@functools.lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _stemmer().stemWord(word)


@functools.lru_cache(maxsize=1)
def _stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


def index_terms(text: str) -> list[str]:
    """The BM25 terms of a text: lower-cased words, stop words dropped, stemmed.

    "preferences" and "prefer" meet; "I", "the" and "are" never count.
    """
    return [_stem(w) for w in words(text) if w not in STOPWORDS]


def many_index_terms(texts: list[str]) -> list[list[str]]:
    """:func:`index_terms` of each of ``texts`` (the same terms), at a lower cost per
    text: a batch of writes tokenises every text it indexes, on the write path."""
    nfkc = unicodedata.normalize
    findall = _WORD.findall
    stops = STOPWORDS
    stems = _STEMS
    stem = _stem
    out = []
    for text in texts:
        terms = []
        for word in findall(nfkc("NFKC", text)):
            word = word.casefold()
            if word not in stops:
                stemmed = stems.get(word)
                if stemmed is None:
                    stemmed = stem(word)
                    if len(stems) < _STEMS_KEPT:
                        stems[word] = stemmed
                terms.append(stemmed)
        out.append(terms)
    return out


# Stems of words seen, for many_index_terms (a dict lookup costs less than a call).
_STEMS: dict[str, str] = {}
_STEMS_KEPT = 200_000


def preview(text: Any, limit: int = 120) -> str:
    """``text`` shortened for a log line: ``prefix… [len=N]`` (the ACE log format).

    The one definition: the LLM layer, the roles, the learning pipeline and the
    CLI all log through it, so every shortened line reads the same. ``limit`` is
    the prefix's length; callers pass a larger one where more context pays (an
    error, a model's raw reply).
    """
    text = str(text)
    shown = text if text.isprintable() else _escaped(text)
    if len(text) <= limit and shown is text:
        return text
    if len(text) <= limit:
        return shown
    return f"{shown[:limit]}… [len={len(text)}]"


def _escaped(text: str) -> str:
    """``text`` with its line breaks and other control characters escaped (``\\n``):
    a logged text is one line, so what a user wrote cannot forge a log line of its own."""
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii") for c in text)


#: Words that make a query about asking ("What did I ask about the trip?"): the
#: memories that ask are then what it looks for.
_ASKING_WORDS = frozenset(
    "ask asks asked asking question questions questioned wonder wonders wondered wondering "
    "inquire inquired inquiry enquire enquired enquiry".split()
)


def about_asking(query: str) -> bool:
    """Whether ``query`` asks about asking (names asking, a question or wondering as a
    word): then a memory that asks is not ranked lower for it (see
    ``retrieval.question_discount``)."""
    folded = query.casefold()
    # Most queries hold none of the words' stems: no need to split them into words.
    if not any(stem in folded for stem in ("ask", "question", "wonder", "quir")):
        return False
    return any(w in _ASKING_WORDS for w in words(folded))


def named_speakers(query: str, speakers: set[str]) -> list[str]:
    """The known (casefolded) speaker names that the query mentions as whole words:
    a name of several words as those words in a row ("Joann Leeds" does not name
    "Ann Lee")."""
    if not speakers:
        return []
    # The query's words between spaces: a name's words in a row are " a b " inside it.
    spaced = f" {' '.join(words(query))} "
    found = []
    for name in speakers:
        parts = words(name)
        if parts and f" {' '.join(parts)} " in spaced:
            found.append(name)
    return sorted(found)


# Question marks of other scripts, which count anywhere (no space follows them in
# Chinese or Japanese).
_OTHER_QUESTION_MARKS = ("？", "؟", "﹖", "⁇")


def asks(text: str) -> bool:
    """Whether ``text`` asks a question: a run of ``?`` and ``!`` holding a ``?`` ends
    a sentence ("How did it go?", "Really?!", "Why?**", "Fun?😊"): it is not followed
    by a letter, a digit, ``_`` or ``=`` (as inside a word or a link:
    "/search?q=tea"). The question marks of other scripts count anywhere.

    One pass over the text (every search looks at each candidate's): each run is
    looked at once, where a backtracking pattern took seconds on a long run of "?".
    """
    if any(mark in text for mark in _OTHER_QUESTION_MARKS):
        return True
    end = len(text)
    at = text.find("?")
    while at != -1:
        after = at + 1
        while after < end and text[after] in "?!":
            after += 1
        if after == end or not (text[after].isalnum() or text[after] in "_="):
            return True
        at = text.find("?", after)
    return False

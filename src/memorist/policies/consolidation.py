"""Importance and consolidation rules. Pure.

**Importance** is a memory's weight in [0, 1]: what consolidation never merges away
(at or above the threshold) and what it may fold together (below ``min_importance``).
A memory stored without one (``infer=False``, an older store, an import that names
none) has :data:`DEFAULT_IMPORTANCE`. The heuristic extractor derives one per fact
with :func:`derive_importance`:

- a plain fact starts at 0.3;
- a preference ("Likes", "Prefers", "Hates", a favourite) adds 0.15;
- a name, a proper noun or an acronym adds 0.15;
- a date, a year, a weekday or a month adds 0.15; any other number adds 0.1;
- "always", "never", "must", "important", "critical", "remember" adds 0.3;
- health and safety (allergy, medication, diagnosis, pregnancy, emergency...) sets
  it to at least 0.9, so it is never consolidated under the default threshold.

The sum is capped at 1.

**Preservation.** :func:`key_terms` reads the details a merge must keep: numbers
(``1,500`` and ``1500`` are one), dates and times, and named entities (capitalised
words that do not start a sentence, acronyms, words with digits). :func:`missing_terms`
says which of the sources' terms a merged text dropped; a merge that drops any is
refused (the brevity-bias guard of the learning loop's consolidation).

**Grouping** (:mod:`memorist.pipelines.consolidation`): a seed takes the memories at
least :func:`default_similarity` alike to it (cosine; each member that close to the seed, not
merely chained through others), at most :data:`MAX_GROUP` per group.

>>> derive_importance("Is allergic to peanuts")
0.9
>>> derive_importance("Likes tea")
0.45
>>> sorted(key_terms("Flew to Paris on 2024-05-03 with 2 bags"))
['2', '2024-05-03', 'paris']
>>> merge_texts(["Lives in Berlin", "Lives in Berlin since 2019"])
'Lives in Berlin since 2019'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: The importance of a memory stored without one.
DEFAULT_IMPORTANCE = 0.5
#: Consolidation's defaults (the learning loop's ``consolidate``).
MIN_IMPORTANCE = 0.5
IMPORTANCE_THRESHOLD = 0.8
#: Cosine similarity at which two memories are one group's, by embedder: a semantic
#: model (all-MiniLM-L6-v2) scores different facts written alike ("Met A from X in P on
#: D" / "Met B from Y in Q on E") above 0.8, so it needs 0.9; the hashing embedder
#: scores a fact and its variant with one more detail about 0.85 (bench/RESULTS.md).
SIMILARITY = 0.9
HASHING_SIMILARITY = 0.8
#: Most memories merged into one.
MAX_GROUP = 20
#: Most characters of a merged text (a larger group is cut to fit).
MAX_MERGED_CHARS = 4000

_BASE = 0.3
_PREFERENCE = re.compile(
    r"\b(likes?|loves?|prefers?|enjoys?|hates?|dislikes?|favou?rite|wants?|would like|can't stand|cannot stand)\b", re.I
)
_EMPHASIS = re.compile(r"\b(always|never|must|important|critical|crucial|essential|remember|do not|don't|mandatory)\b", re.I)
_HEALTH = re.compile(
    r"\b(allerg\w*|anaphyla\w*|medication\w*|medicine\w*|diagnos\w*|pregnan\w*|diabet\w*|asthma\w*|epilep\w*|"
    r"emergency|blood type|insulin|epipen|seizure\w*|heart condition|disabilit\w*|intoleran\w*|celiac|coeliac)\b",
    re.I,
)
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_DATE = re.compile(
    r"\b(\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?|\d{1,2}/\d{1,2}/\d{2,4}|\d{1,2}:\d{2}(?:\s?[ap]m)?|"
    rf"(?:{_MONTHS})\.?(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?(?:,?\s+\d{{4}})?|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})(?:\s+\d{{4}})?|"
    rf"{_WEEKDAYS}|(?:1[5-9]|20)\d{{2}})\b",
    re.I,
)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?%?")
_WORD = re.compile(r"[^\W_][\w'’-]*", re.UNICODE)
_SENTENCE_START = re.compile(r"(^|[.!?;:]\s+|\n)\s*$")
# Capitalised words that name nothing: a merge may rephrase them away.
_COMMON = frozenset(
    "i i'm i've i'd i'll the a an and or but is are was were has have had it its this that these those he she they we you "
    "my your our their his her on in at of to for with by from as not no yes ok okay mr mrs ms dr".split()
)


def default_similarity(embedder_name: str) -> float:
    """The grouping threshold for an embedder (see :data:`SIMILARITY`)."""
    return HASHING_SIMILARITY if embedder_name.startswith("hashing") else SIMILARITY


def derive_importance(text: str, kind: str = "fact") -> float:
    """The importance the heuristic extractor gives a fact (the rules above)."""
    if _HEALTH.search(text):
        return 0.9 if not _EMPHASIS.search(text) else 1.0
    score = _BASE
    if kind == "preference" or _PREFERENCE.search(text):
        score += 0.15
    if _entities(text):
        score += 0.15
    if _DATE.search(text):
        score += 0.15
    elif _NUMBER.search(text):
        score += 0.1
    if _EMPHASIS.search(text):
        score += 0.3
    return round(min(1.0, score), 2)


def _number_key(token: str) -> str:
    return token.replace(",", "").lstrip("+")


def _entities(text: str) -> set[str]:
    found: set[str] = set()
    for match in _WORD.finditer(text):
        word = match.group(0).strip("'’-")
        if not word:
            continue
        starts = bool(_SENTENCE_START.search(text[: match.start()]))
        has_digit = any(c.isdigit() for c in word)
        acronym = len(word) > 1 and word.isupper() and word.isalpha()
        proper = word[0].isupper() and not starts and word.casefold() not in _COMMON
        if (has_digit and not word.isdigit()) or acronym or proper:
            found.add(word.casefold())
    return found


def key_terms(text: str) -> set[str]:
    """The details of ``text`` a merge must keep: numbers, dates and named entities
    (casefolded; numbers without thousands separators)."""
    dates = list(_DATE.finditer(text))
    terms = {m.group(0).casefold() for m in dates}
    for m in _NUMBER.finditer(text):
        # A number inside a date ("2024" of "May 3, 2024") is kept with the date.
        if not any(d.start() <= m.start() < d.end() for d in dates):
            terms.add(_number_key(m.group(0)))
    return terms | _entities(text)


def _present(term: str, text: str, numbers: set[str]) -> bool:
    if term in numbers:
        return True
    return re.search(rf"(?<![\w]){re.escape(term)}(?![\w])", text) is not None


def missing_terms(sources: Sequence[str], merged: str) -> list[str]:
    """The key terms of ``sources`` that ``merged`` does not contain, sorted."""
    low = merged.casefold()
    numbers = {_number_key(m.group(0)) for m in _NUMBER.finditer(merged)}
    wanted: set[str] = set()
    for text in sources:
        wanted |= key_terms(text)
    return sorted(t for t in wanted if not _present(t, low, numbers))


def _clauses(text: str) -> list[str]:
    parts = [p.strip(" \t\n.;") for p in re.split(r"(?<=[.!?;])\s+|\n+", text)]
    return [p for p in parts if p]


def _tokens(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


def merge_texts(texts: Sequence[str]) -> str:
    """The heuristic merge: every clause of every text, once; a clause whose words
    another clause already holds is left out (so nothing it said is lost), the
    longer clauses first. Clauses are joined with "; " in the order first seen."""
    clauses: list[str] = []
    for text in texts:
        for clause in _clauses(text):
            if clause.casefold() not in (c.casefold() for c in clauses):
                clauses.append(clause)
    kept: list[str] = []
    for clause in sorted(clauses, key=lambda c: -len(_tokens(c))):
        words = _tokens(clause)
        if any(words <= _tokens(k) for k in kept):
            continue
        kept.append(clause)
    ordered = [c for c in clauses if c in kept]
    return "; ".join(ordered)


__all__ = [
    "DEFAULT_IMPORTANCE",
    "IMPORTANCE_THRESHOLD",
    "MAX_GROUP",
    "MAX_MERGED_CHARS",
    "MIN_IMPORTANCE",
    "SIMILARITY",
    "HASHING_SIMILARITY",
    "default_similarity",
    "derive_importance",
    "key_terms",
    "merge_texts",
    "missing_terms",
]

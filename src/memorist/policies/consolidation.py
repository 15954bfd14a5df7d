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
with their sign (``1,500`` and ``1500`` are one; ``-5`` is not ``5``; ``72,5`` is not
``725``) and numbers written as words (``three`` is ``3``), dates and times, and
named entities: capitalised words that do not start a sentence (a title such as
``Dr.`` ends no sentence), acronyms, words with digits or with a capital inside
(``iPhone``), words of a script without capitals inside a text that has them
(``王伟 lives in Lisbon``), and a capitalised word starting a sentence when it is
the subject of a verb (``Maria lives``, ``Maria's``, ``Maria Lopez``) or is written
capitalised elsewhere. :func:`missing_terms` says which of the sources' terms a
merged text dropped; a merge that drops any is refused (the brevity-bias guard of
the learning loop's consolidation).

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
# A number with its sign (not the "-" of "5-10"), never ending in a comma ("5, 6").
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d(?:[\d,]*\d)?(?:\.\d+)?%?")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?%?")
_WORD = re.compile(r"[^\W_][\w'’-]*", re.UNICODE)
# What merge_texts compares clauses by: signed numbers and words, in order.
_TOKEN = re.compile(rf"{_NUMBER.pattern}|[^\W_][\w'’-]*", re.UNICODE)
# A full stop that ends no sentence: a title or common abbreviation ("Dr.", "St.",
# "etc.") or initials ("J.", "a.m.", "e.g.", "U.S.").
_ABBREVIATIONS = (
    "dr|mr|mrs|ms|mx|prof|st|jr|sr|mt|ft|rev|gen|col|capt|lt|sgt|no|vs|etc|inc|ltd|co|corp|dept|est|approx|fig|ave|rd|blvd"
)
_ABBREVIATION = re.compile(rf"(?:{_ABBREVIATIONS}|[^\W\d_](?:\.[^\W\d_])*)\.", re.I)
# Capitalised words that name nothing: a merge may rephrase them away.
_COMMON = frozenset(
    "i i'm i've i'd i'll the a an and or but is are was were has have had it its this that these those he she they we you "
    "my your our their his her on in at of to for with by from as not no yes ok okay mr mrs ms dr".split()
)
# A capitalised word starting a sentence names someone or something when it is the
# subject of what follows ("Maria lives in Lisbon"): followed by one of these, by a
# verb in -s or -ed, by a capitalised word, or written with a possessive.
_AUXILIARIES = frozenset(
    "is was are were has had have will would can could should shall may might must does did do isn't wasn't aren't "
    "weren't hasn't hadn't haven't won't wouldn't can't couldn't doesn't didn't and".split()
)
# Words that start a sentence but never as a name: a fact's verb (the subject left
# out: "Bought a car"), pronouns, quantifiers, question words.
_NEVER_SUBJECTS = frozenset(
    "went bought took got made saw met had did said told gave found thought knew came left felt kept began ran wrote "
    "read drove flew ate drank paid sold sent spent built lost won wore taught caught brought chose grew heard held led "
    "meant rode sang sat slept spoke stood swam threw understood woke broke forgot fell fought hid hurt let put quit set "
    "shut cut hit became moved started stopped used wants needs plans hopes tries also then still often usually never "
    "always once later now today yesterday tomorrow recently "
    "there here everyone everybody everything nothing nobody nowhere someone somebody something anyone anybody "
    "anything what who whom whose which when where why how all both each every some many most none few several "
    "another other such if so yet just only even maybe perhaps tonight".split()
)
_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
_TENS = {w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
# Numbers written as words ("three children" is "3 children"); "one" is as often a
# pronoun ("the one she liked") and is left out.
_NUMBER_WORDS = {w: i for i, w in enumerate(_UNITS) if w != "one"} | _TENS


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
    """A number as a merge must keep it: thousands separators and a plus sign dropped
    ("1,500" is "1500"), a decimal comma and a minus sign kept ("72,5", "-5")."""
    token = token.lstrip("+")
    return token.replace(",", "") if _THOUSANDS.fullmatch(token) else token


def _word_number(word: str) -> int | None:
    """The value of a number written as a word ("seven", "twenty-five"), else None."""
    word = word.casefold()
    if word in _NUMBER_WORDS:
        return _NUMBER_WORDS[word]
    tens, _, unit = word.partition("-")
    if tens in _TENS and unit in _UNITS[1:10]:
        return _TENS[tens] + _UNITS.index(unit)
    return None


def _word_numbers(text: str) -> set[str]:
    """The numbers ``text`` writes as words ("three" is "3")."""
    return {str(v) for w in _WORD.findall(text) if (v := _word_number(w.strip("'’-"))) is not None}


def _numbers(text: str) -> set[str]:
    """The numbers of ``text`` (digits or words), as :func:`_number_key` writes them."""
    return {_number_key(m.group(0)) for m in _NUMBER.finditer(text)} | _word_numbers(text)


def _abbreviation_before(text: str, end: int) -> bool:
    """Whether the full stop at ``end - 1`` is a title's or initials' ("Dr.", "a.m."):
    the word it ends, read back to the space before it (a few characters)."""
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return _ABBREVIATION.fullmatch(text[start:end].lstrip("(\"'“‘[")) is not None


def _starts_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` starts a sentence: the text's first, or after a
    line break, or after an end mark (. ! ? ; :) and a space, unless that full stop
    is a title's or initials'. Reads back only over the spaces and the word before."""
    i = start
    while i > 0 and text[i - 1].isspace():
        if text[i - 1] == "\n":
            return True
        i -= 1
    if i == 0:
        return True
    if i == start or text[i - 1] not in ".!?;:":
        return False
    return not (text[i - 1] == "." and _abbreviation_before(text, i))


def _entities(text: str, *, subjects: bool = False) -> set[str]:
    """The named entities of ``text`` (see the module's docstring), casefolded, without
    a possessive "'s". With ``subjects``, also the capitalised words starting a
    sentence as the subject of a verb (what a merge must keep; importance counts
    only the names that are clear without it)."""
    found: set[str] = set()
    words = list(_WORD.finditer(text))
    # A word of a script without capitals is a name inside a text mostly in one with
    # them ("王伟 lives in Lisbon"), not in a text of its own script.
    cased_words = sum(1 for w in words if any(c.isupper() or c.islower() for c in w.group(0)))
    cased = 2 * cased_words > len(words)
    for i, match in enumerate(words):
        word = match.group(0).strip("'’-")
        if not word:
            continue
        if word[-2:] in ("'s", "’s") and len(word) > 2:
            word, possessive = word[:-2], True
        else:
            possessive = False
        folded = word.casefold()
        starts = _starts_sentence(text, match.start())
        has_digit = any(c.isdigit() for c in word)
        acronym = len(word) > 1 and word.isupper() and word.isalpha()
        proper = word[0].isupper() and not starts and folded not in _COMMON
        inner_capital = word[0].islower() and any(c.isupper() for c in word[1:])  # iPhone, eBay
        caseless = cased and any(c.isalpha() for c in word) and not any(c.isupper() or c.islower() for c in word)
        subject = subjects and starts and word[0].isupper() and folded not in _COMMON and folded not in _NEVER_SUBJECTS and (
            possessive or _before_a_verb(folded, words[i + 1].group(0) if i + 1 < len(words) else "")
        )
        if (has_digit and not word.isdigit()) or acronym or proper or inner_capital or caseless or subject:
            found.add(folded)
    return found


def _before_a_verb(word: str, following: str) -> bool:
    """Whether ``word`` (a sentence's first, casefolded) reads as the subject of
    ``following``: an auxiliary, a capitalised word (a name of two words), or, when
    ``word`` does not itself look like a verb (-s, -ed, -ing), a verb in -s or -ed."""
    if not following:
        return False
    low = following.casefold()
    if low in _AUXILIARIES or (following[0].isupper() and low not in _COMMON):
        return True
    if word.endswith(("s", "ed", "ing")):
        return False
    return low.endswith(("ed", "es")) or (low.endswith("s") and not low.endswith(("ss", "us", "is")))


def key_terms(text: str) -> set[str]:
    """The details of ``text`` a merge must keep: numbers (digits or words), dates and
    named entities (casefolded; numbers as :func:`_number_key` writes them)."""
    dates = list(_DATE.finditer(text))
    terms = {m.group(0).casefold() for m in dates}
    for m in _NUMBER.finditer(text):
        # A number inside a date ("2024" of "May 3, 2024") is kept with the date.
        if not any(d.start() <= m.start() < d.end() for d in dates):
            terms.add(_number_key(m.group(0)))
    return terms | _word_numbers(text) | _entities(text, subjects=True)


def _present(term: str, text: str, numbers: set[str]) -> bool:
    if _NUMBER.fullmatch(term):
        return term in numbers  # "5" is not found inside "-5" or "1.5"
    return re.search(rf"(?<![\w]){re.escape(term)}(?![\w])", text) is not None


def missing_terms(sources: Sequence[str], merged: str) -> list[str]:
    """The key terms of ``sources`` that ``merged`` does not contain, sorted."""
    low = merged.casefold()
    numbers = _numbers(merged)
    wanted: set[str] = set()
    for text in sources:
        wanted |= key_terms(text)
    return sorted(t for t in wanted if not _present(t, low, numbers))


_CLAUSE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


def _clauses(text: str) -> list[str]:
    """The sentences and ";"-separated clauses of ``text``, without their end marks
    (a full stop after a title or initials ends none: "Dr. Smith", "9 a.m.")."""
    parts: list[str] = []
    start = 0
    for found in _CLAUSE_END.finditer(text):
        if text[found.start() - 1 : found.start()] == "." and _abbreviation_before(text, found.start()):
            continue
        parts.append(text[start : found.start()])
        start = found.end()
    parts.append(text[start:])
    out = []
    for part in parts:
        part = part.strip(" \t\n;").lstrip(".")
        if part.endswith(".") and not _abbreviation_before(part, len(part)):
            part = part.rstrip(".")
        if part := part.strip():
            out.append(part)
    return out


def _token_key(text: str) -> str:
    """The words and signed numbers of ``text``, casefolded, each between NULs: one
    clause holds another word for word, in order, when its key is inside the other's."""
    return "\0" + "\0".join(t.casefold() for t in _TOKEN.findall(text)) + "\0"


# Words that turn a statement around or narrow it: a clause another holds with one of
# them added ("Wants to move abroad no longer", "Eats meat only on Fridays"), or a
# denial another holds with anything added ("Does not eat meat on Fridays"), says
# something else, and is kept beside it.
_TURNING = frozenset(
    "not no never nor neither none nothing nobody longer anymore without only except unless but "
    "if when sometimes occasionally rarely seldom until once formerly previously used".split()
)


def _turns(clause: str, other: str) -> bool:
    """Whether ``other`` (which holds ``clause`` word for word) says something else."""
    words = {t.casefold() for t in _TOKEN.findall(clause)}
    added = {t.casefold() for t in _TOKEN.findall(other)} - words

    def turning(terms: set[str]) -> bool:
        return any(t in _TURNING or t.endswith(("n't", "n’t")) for t in terms)

    return turning(added) or (bool(added) and turning(words))


def merge_texts(texts: Sequence[str]) -> str:
    """The heuristic merge: every clause of every text, once; a clause that another
    clause holds word for word, in order, is left out (so nothing it said is lost:
    "Lives in Berlin" is inside "Lives in Berlin since 2019", but "Bob owes Alice"
    is not inside "Alice owes Bob", nor "5 degrees" inside "-5 degrees"), the longer
    clauses first; unless the other adds a word that turns it around or narrows it
    ("no longer", "only", "except"), or it is a denial ("Does not eat meat" is not
    what "Does not eat meat on Fridays" says). Clauses are joined with "; " in the
    order first seen."""
    clauses: dict[str, str] = {}  # casefolded -> as first seen
    for text in texts:
        for clause in _clauses(text):
            clauses.setdefault(clause.casefold(), clause)
    keys = {clause: _token_key(clause) for clause in clauses.values()}
    kept: set[str] = set()
    kept_clauses: list[str] = []
    for clause in sorted(keys, key=lambda c: -keys[c].count("\0")):
        key = keys[clause]
        if any(key in keys[other] and not _turns(clause, other) for other in kept_clauses):
            continue
        kept.add(clause)
        kept_clauses.append(clause)
    return "; ".join(c for c in clauses.values() if c in kept)


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

"""Deterministic reconciliation: ADD / UPDATE / DELETE / NONE without an LLM.

:class:`HeuristicReconciler` compares each new fact with the stored memories it
is shown and decides, in this order:

1. NONE when the fact is already captured: the same normalized text (case,
   whitespace, punctuation and articles ignored), the same content words (with
   the same leading word, or a similarity score of at least 0.97), or all of
   its content words inside a memory that starts with the same word ("Name is
   John" is captured by "Name is John Smith"). A fact equal to or covered by an
   earlier fact of the same call is NONE as well.
2. DELETE (plus ADD of the new fact, or NONE when it is already stored) when
   the fact clearly contradicts a memory: one of them is negated ("no longer",
   "not", "n't", "never", "stopped", "quit", "anymore", "gave up", "nicht",
   "kein...") and they share object words (light stemming: pizza/pizzas) and
   a related predicate ("Loves pizza" vs "No longer eats pizza"). The negated
   one must say nothing the other does not: "Does not like pineapple on pizza"
   or "Does not drink coffee after 6pm" narrows what it denies, and leaves
   "Loves pizza" and "Drinks coffee" standing.
3. UPDATE when the fact fills a single-valued slot with a new value (name,
   lives in, age, works as/at, job, born in/on, birthday, favourite X, X's
   name, "<attribute> is ...", German "Name ist", "Wohnt in", "Lieblings... ist",
   "Arbeitet als"), or refines a memory with the same leading word whose
   content words are a strict subset of its own ("Drinks coffee" ->
   "Drinks coffee with oat milk").
4. ADD otherwise; multi-valued predicates (likes, allergic to, has) simply
   accumulate.

Each fact is compared with its own candidates (the memories found for it), and
with the candidates of other facts that hold its very text or the slot it fills;
with the call's earlier facts through an index. So a call costs in proportion to
its facts, not to their square.

Scores are only a tie-breaker for near-identical texts: the text and slot rules
work the same with the semantic and the hashing embedder.
"""

from __future__ import annotations

import re
import unicodedata
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memorist.model import Action, Decision, Existing, Fact
from memorist.roles.base import Reconciler


def _ws(words: str) -> frozenset[str]:
    return frozenset(words.split())


_ARTICLES = _ws("a an the der die das den dem des ein eine einen einem einer eines")
_STOP = _ARTICLES | _ws("is am are was were be been being do does did to of in on at for with from by about "
                        "as into and or but that this these those it its so very really just also too up now "
                        "still ist bin sind war im am an auf mit von zu zum zur für bei aus als dass es sehr "
                        "auch und oder aber mehr longer")
_NEGATION = re.compile(r"n't\b|\b(?:not|no|never|cannot|any ?more|stopped|quit|gave up|given up|nicht|nie|"
                       r"niemals|kein\w*|aufgehört)\b")
_NEGATION_WORDS = _ws("not no never cannot anymore any more stopped quit gave given nicht nie niemals kein "
                      "keine keinen keinem keiner keines aufgehört")
_NOT_A_SUBJECT = _STOP | _NEGATION_WORDS
# Words that open a predicate but are not the predicate itself ("Does not like" -> "like").
_PREDICATE_SKIP = _NEGATION_WORDS | _ws("is am are was were does do did has been longer still really also "
                                        "always ist bin war hat nicht mehr")
_LEMMAS = {"has": "have", "had": "have", "ate": "eat", "drank": "drink", "became": "become", "went": "go",
           "liebt": "lieben", "liebe": "lieben", "isst": "essen", "esse": "essen", "trinkt": "trinken",
           "trinke": "trinken", "hat": "haben", "habe": "haben"}


def _fold(text: str) -> str:
    """Casefold and strip accents, so "Nüsse" and "nusse" compare equal."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    return "".join(c for c in text if not unicodedata.combining(c))


def _stem(word: str) -> str:
    """Very light stemming, applied identically to both sides of every comparison."""
    word = _LEMMAS.get(word, word)
    word = word.removesuffix("'s")
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 4 and word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif (len(word) > 4 and word.endswith("ed")) or (len(word) > 5 and word.endswith("en")):
        word = word[:-2]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


_VERBS = frozenset(_stem(w) for w in _ws(
    "like love enjoy adore prefer hate dislike want need eat drink have use play live work go become get make "
    "take start stop own keep do mag mochte lieben essen trinken haben wohnt lebt arbeitet spielt nutzt"))
# Predicates about consuming or liking something: negating one contradicts another ("Loves pizza" vs
# "No longer eats pizza").
_PREFERENCE_FAMILY = frozenset(_stem(w) for w in _ws(
    "like love enjoy adore prefer eat drink have use play own want fan mag mochte lieben essen trinken haben "
    "nutzt spielt"))
# Entities rather than attributes: "Sister is a doctor" and "Sister is married" are two facts, not one slot.
_ENTITY_NOUNS = _ws("sister brother mother father mom mum dad wife husband partner son daughter friend boss "
                    "child kid kids dog cat parents family schwester bruder mutter vater frau mann freund "
                    "freundin sohn tochter hund katze chef")

_SLOT_PATTERNS = [(re.compile(p), key) for p, key in (
    (r"(?:name (?:is|ist)|name's|hei(?:ß|ss)t) (?P<v>.+)", "name"),
    (r"(?:lives|wohnt|lebt) in (?P<v>.+)", "lives in"),
    (r"(?:is|ist) (?P<v>\d{1,3})(?: years old| jahre alt)?", "age"),
    (r"(?:age|alter) (?:is|ist) (?P<v>.+)", "age"),
    (r"(?:works as|arbeitet als) (?:an? |eine? )?(?P<v>.+)", "works as"),
    (r"(?:works (?:at|for)|arbeitet (?:bei|für)) (?P<v>.+)", "works at"),
    (r"(?:job|occupation|profession|beruf) (?:is|ist) (?P<v>.+)", "job"),
    (r"(?:was )?born (?:in|on) (?P<v>(?:\w+ )?\d[\w ,]*)", "born on"),
    (r"(?:was )?born in (?P<v>.+)|(?:wurde )?in (?P<v2>.+) geboren", "born in"),
    (r"(?:birthday|geburtstag) (?:is|ist) (?P<v>.+)", "birthday"),
    (r"(?:favou?rite|lieblings) ?(?P<k>[\w ]{1,30}?) (?:is|ist|are|sind) (?P<v>.+)", "favorite {k}"),
    (r"(?P<k>\w+(?: \w+)?)'s name (?:is|ist) (?P<v>.+)", "{k}'s name"),
    (r"(?P<k>\w+(?: \w+){0,2}) (?:is|ist) (?P<v>.+)", "{k}"),
)]


@dataclass(frozen=True, slots=True)
class _Text:
    """The features of one fact or memory text that the decision rules look at."""

    text: str
    norm: str
    head: str
    tokens: frozenset[str]
    negative: bool
    predicates: frozenset[str]
    objects: frozenset[str]
    slot: tuple[str, str] | None
    #: The content words of each negated clause ("Became vegan, no longer eats
    #: pizza": one, {pizza}): what the text denies.
    denials: tuple[frozenset[str], ...] = ()


def _words(folded: str) -> list[str]:
    return re.findall(r"[^\W_]+(?:['/.][^\W_]+)*", folded)


def _slot(norm: str) -> tuple[str, str] | None:
    for pattern, key in _SLOT_PATTERNS:
        m = pattern.fullmatch(norm)
        if not m:
            continue
        groups = m.groupdict()
        subject = groups.get("k") or ""
        first, last = subject.split()[:1] or [""], subject.split()[-1:] or [""]
        if key == "{k}" and (first[0] in _NOT_A_SUBJECT or _stem(first[0]) in _VERBS or last[0] in _ENTITY_NOUNS):
            continue  # "Is ...", "Does not ...", "Sister is ...": not an attribute slot
        value = groups.get("v") or groups.get("v2") or ""
        return key.format(k=subject), value
    return None


def _analyze(text: str) -> _Text:
    folded = _fold(text).replace("can't", "can").replace("won't", "will").replace("n't", " not")
    words = _words(folded)
    norm = " ".join(w for w in words if w not in _ARTICLES)
    tokens = frozenset(_stem(w) for w in words if w not in _STOP and w not in _NEGATION_WORDS)
    predicates = set()
    segments = re.split(r"[,;]| and | but | und | aber ", folded)
    for segment in segments:
        for word in _words(segment):
            if word not in _PREDICATE_SKIP and word not in _ARTICLES:
                predicates.add(_stem(word))
                break
    denials = []
    for segment in segments:
        if _NEGATION.search(segment):
            said = {_stem(w) for w in _words(segment) if w not in _STOP and w not in _NEGATION_WORDS}
            denials.append(frozenset(t for t in said if t not in predicates and t not in _VERBS) or frozenset(said))
    return _Text(
        text=text, norm=norm, head=_stem(norm.split()[0]) if norm else "", tokens=tokens,
        negative=bool(_NEGATION.search(folded)), predicates=frozenset(predicates),
        objects=frozenset(t for t in tokens if t not in predicates and t not in _VERBS),
        slot=_slot(norm), denials=tuple(denials))


def _captured_by(new: _Text, old: _Text, score: float) -> str | None:
    """Why ``old`` already holds ``new``, or None."""
    if new.norm == old.norm:
        return "same text"
    if new.negative != old.negative or not new.tokens:
        return None
    if new.tokens == old.tokens and (new.head == old.head or score >= 0.97):
        return "same content words"
    if new.head == old.head and new.tokens <= old.tokens:
        return "already contained"
    return None


def _contradicts(new: _Text, old: _Text) -> bool:
    """True only for a clear contradiction: opposite polarity, shared object, related
    predicate, and a negated side that adds no object or qualifier of its own (it
    would deny less than the other states: "Does not drink coffee after 6pm")."""
    if new.negative == old.negative:
        return False
    denied, stated = (new, old) if new.negative else (old, new)
    said = stated.objects or stated.tokens
    if not any(denial <= said for denial in denied.denials or (denied.objects or denied.tokens,)):
        return False
    if not (new.objects or new.tokens) & (old.objects or old.tokens):
        return False
    if new.predicates & old.predicates:
        return True
    # A negated consumption/liking predicate contradicts a positive one ("eats" vs "loves"); the reverse
    # direction (a positive fact against a negative memory) needs the same predicate.
    family = _PREFERENCE_FAMILY
    return new.negative and bool(new.predicates & family) and bool(old.predicates & family)


def _update_reason(new: _Text, old: _Text) -> str | None:
    if new.negative or old.negative:
        return None
    if new.slot and old.slot and new.slot[0] == old.slot[0] and new.slot[1] != old.slot[1]:
        return f"same slot '{new.slot[0]}' with a new value"
    if new.head == old.head and old.tokens and old.tokens < new.tokens:
        return f"refines '{old.text}' with more detail"
    return None


class _Kept:
    """The texts stored or confirmed by earlier decisions of one call, indexed so that
    a fact is checked against them without a scan: what :func:`_captured_by` says
    with no score (the same text, or all of the fact's words in a text of the same
    polarity and leading word)."""

    def __init__(self) -> None:
        self._norms: set[str] = set()
        self._holding: dict[tuple[bool, str, str], set[int]] = {}  # (negative, head, word) -> texts
        self._count = 0

    def add(self, text: _Text) -> None:
        self._norms.add(text.norm)
        for token in text.tokens:
            self._holding.setdefault((text.negative, text.head, token), set()).add(self._count)
        self._count += 1

    def covers(self, new: _Text) -> bool:
        if new.norm in self._norms:
            return True
        if not new.tokens:
            return False
        holding = sorted((self._holding.get((new.negative, new.head, t), set()) for t in new.tokens), key=len)
        return bool(holding[0].intersection(*holding[1:]))


class HeuristicReconciler(Reconciler):
    """Rule-based reconciler implementing the memory-update decision logic.

    Pure and deterministic. Each stored memory is the target of at most one
    decision per call (the first fact wins), decisions only target ids listed in
    ``existing``, and decisions come out in the order of the facts. A fact is
    compared with its own candidates (``existing[i]``) and with the candidates of
    other facts that hold its very text or its slot.
    """

    local = True

    def reconcile(self, facts: Sequence[Fact], existing: Sequence[Sequence[Existing]]) -> list[Decision]:
        """Return the ADD / UPDATE / DELETE / NONE decisions for ``facts``."""
        cache: dict[str, _Text] = {}

        def analyze(text: str) -> _Text:
            if text not in cache:
                cache[text] = _analyze(text)
            return cache[text]

        decisions: list[Decision] = []
        targeted: set[str] = set()
        kept = _Kept()
        # The call's candidates by normalised text and by slot, whichever fact's search
        # found them: a fact stored word for word is found there, and so is the slot
        # it gives a new value ("Lives in Munich" updates "Lives in Berlin").
        by_norm: dict[str, dict[str, Existing]] = {}
        by_slot: dict[str, dict[str, Existing]] = {}
        for group in existing:
            for memory in group:
                text = analyze(memory.text)
                by_norm.setdefault(text.norm, {}).setdefault(memory.id, memory)
                if text.slot is not None:
                    by_slot.setdefault(text.slot[0], {}).setdefault(memory.id, memory)
        free_in_slot = {key: deque(found.values()) for key, found in by_slot.items()}

        def first_free(key: str) -> list[Existing]:
            # Targeted memories leave their slot's queue for good: each is skipped once.
            queue = free_in_slot.get(key)
            while queue and queue[0].id in targeted:
                queue.popleft()
            return [queue[0]] if queue else []

        for index, fact in enumerate(facts):
            new = analyze(fact.text)
            if kept.covers(new):
                decisions.append(Decision(Action.NONE, fact.text, fact=fact,
                                          reason="already covered by an earlier fact in this call"))
                continue
            own = list(existing[index]) if index < len(existing) else []
            same_text = list(by_norm.get(new.norm, {}).values())
            same_slot = first_free(new.slot[0]) if new.slot is not None else []
            candidates: dict[str, Existing] = {}
            for memory in own + same_text + same_slot:  # the fact's own neighbours first, best first
                if memory.id not in targeted and memory.id not in candidates:
                    candidates[memory.id] = memory
            decisions.extend(self._decide(fact, new, list(candidates.values()), analyze, targeted, kept))
        return decisions

    @staticmethod
    def _decide(fact: Fact, new: _Text, candidates: list[Existing], analyze: Callable[[str], _Text],
                targeted: set[str], kept: _Kept) -> list[Decision]:
        """Decide for one fact; ``targeted`` and ``kept`` carry what earlier facts of the call did."""
        captured = next(((m, why) for m in candidates if (why := _captured_by(new, analyze(m.text), m.score))),
                        None)
        contradicted = next((m for m in candidates if (not captured or m.id != captured[0].id)
                             and _contradicts(new, analyze(m.text))), None)
        out: list[Decision] = []
        if contradicted is not None:
            targeted.add(contradicted.id)
            out.append(Decision(Action.DELETE, contradicted.text, target_id=contradicted.id,
                                old_text=contradicted.text, fact=fact,
                                reason=f"contradicted by '{fact.text}'"))
        if captured is not None:
            memory, why = captured
            targeted.add(memory.id)
            kept.add(analyze(memory.text))
            out.append(Decision(Action.NONE, memory.text, target_id=memory.id, fact=fact,
                                reason=f"already stored ({why}): '{memory.text}'"))
            return out
        if contradicted is None:
            for memory in candidates:
                if why := _update_reason(new, analyze(memory.text)):
                    targeted.add(memory.id)
                    kept.add(new)
                    return [Decision(Action.UPDATE, fact.text, target_id=memory.id, old_text=memory.text,
                                     fact=fact, reason=why)]
        kept.add(new)
        reason = "novel information" if contradicted is None else "replaces a contradicted memory"
        out.append(Decision(Action.ADD, fact.text, fact=fact, reason=reason))
        return out

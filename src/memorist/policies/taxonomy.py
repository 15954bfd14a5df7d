"""Playbook taxonomy: tags, sections, memory types, topics and concepts. Pure.

Every bullet has exactly one memory class. Its tags are snake_case, free of class
keywords, and end with the one class tag (``semantic``, ``episodic`` or
``procedural``), so a tag filter and the class always agree.

>>> normalize_tags(["Common Denominator", "procedural", "fractions!", "episodic"], memory_class="episodic")
['common_denominator', 'fractions', 'episodic']
>>> infer_topic("I keep messing up 1/2 + 1/3")
'fractions'
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from ..model import Kind, MemoryClass

CLASS_KEYWORDS: frozenset[str] = frozenset(c.value for c in MemoryClass)

# The sections a playbook is grouped by in the prompt (ACE style).
SECTION_STRATEGIES = "strategies_and_hard_rules"
SECTION_MISTAKES = "common_mistakes"
SECTION_LEARNER = "learner_profile"
SECTION_CONCEPTS = "domain_concepts"
SECTIONS: tuple[str, ...] = (SECTION_STRATEGIES, SECTION_MISTAKES, SECTION_LEARNER, SECTION_CONCEPTS)

#: Lesson types (what a reflector says a lesson is) and the memory kind each becomes.
LESSON_KINDS: dict[str, Kind] = {
    "strategy": Kind.STRATEGY,
    "success": Kind.STRATEGY,
    "tool": Kind.STRATEGY,
    "anti_pattern": Kind.ANTI_PATTERN,
    "failure": Kind.ANTI_PATTERN,
    "mistake": Kind.ANTI_PATTERN,
    "observation": Kind.OBSERVATION,
    "experience": Kind.EXPERIENCE,
    "struggle": Kind.EXPERIENCE,
    "preference": Kind.PREFERENCE,
    "fact": Kind.FACT,
    "domain": Kind.FACT,
    "reflection": Kind.REFLECTION,
}

_SECTION_OF_KIND: dict[Kind, str] = {
    Kind.STRATEGY: SECTION_STRATEGIES,
    Kind.ANTI_PATTERN: SECTION_MISTAKES,
    Kind.EXPERIENCE: SECTION_LEARNER,
    Kind.PREFERENCE: SECTION_LEARNER,
    Kind.REFLECTION: SECTION_LEARNER,
    Kind.OBSERVATION: SECTION_CONCEPTS,
    Kind.FACT: SECTION_CONCEPTS,
    Kind.CONSOLIDATED: SECTION_CONCEPTS,
    Kind.TURN: SECTION_LEARNER,
}

_NON_WORD = re.compile(r"[^0-9a-z]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def snake_case(text: str) -> str:
    """``"Common Denominator"``, ``"common-denominator"``, ``"commonDenominator"`` → ``"common_denominator"``."""
    text = unicodedata.normalize("NFKD", _CAMEL.sub("_", str(text)))
    text = text.encode("ascii", "ignore").decode("ascii").lower()
    return _NON_WORD.sub("_", text).strip("_")


def normalize_tags(tags: Iterable[str], *, memory_class: str | None = None) -> list[str]:
    """Snake_case, de-duplicated (first wins), class keywords removed; then, when
    ``memory_class`` is given, that one class tag appended."""
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            continue
        t = snake_case(tag)
        if t and t not in CLASS_KEYWORDS and t not in out:
            out.append(t)
    if memory_class:
        out.append(MemoryClass(memory_class).value)
    return out


def lesson_kind(lesson_type: str | None) -> Kind:
    """The memory kind of a lesson type (unknown types: a strategy)."""
    key = snake_case(lesson_type or "")
    if key in LESSON_KINDS:
        return LESSON_KINDS[key]
    if key in Kind._value2member_map_:
        return Kind(key)
    return Kind.STRATEGY


def section_for(kind: Kind) -> str:
    return _SECTION_OF_KIND.get(kind, SECTION_STRATEGIES)


_PROCEDURAL_WORDS = re.compile(
    r"\b(step|steps|first|then|next|convert|rewrite|remind|always|never|before|after|check|use|show|start|"
    r"draw|write|explain|ask|avoid|do not|don't)\b",
    re.I,
)
_EPISODIC_WORDS = re.compile(
    r"\b(learner|student|user|prefers?|likes?|asked|requested|frustrat\w*|struggl\w*|confus\w*|"
    r"misconception|keeps?|history|yesterday|last time|mistake|forgot|forgets)\b",
    re.I,
)


def infer_memory_type(content: str, kind: Kind | None = None, tags: Sequence[str] = ()) -> str:
    """The one memory class of a new bullet.

    Strategies and anti-patterns are how-to knowledge (procedural); experiences and
    preferences are about the learner (episodic); facts and observations are
    semantic. An untyped lesson is classified by its words.
    """
    if kind in (Kind.STRATEGY, Kind.ANTI_PATTERN):
        return MemoryClass.PROCEDURAL.value
    if kind in (Kind.EXPERIENCE, Kind.PREFERENCE, Kind.REFLECTION, Kind.TURN):
        return MemoryClass.EPISODIC.value
    if kind in (Kind.FACT, Kind.OBSERVATION, Kind.CONSOLIDATED):
        return MemoryClass.SEMANTIC.value
    lowered = {snake_case(t) for t in tags}
    for cls in (MemoryClass.PROCEDURAL, MemoryClass.EPISODIC, MemoryClass.SEMANTIC):
        if cls.value in lowered:
            return cls.value
    if _PROCEDURAL_WORDS.search(content):
        return MemoryClass.PROCEDURAL.value
    if _EPISODIC_WORDS.search(content):
        return MemoryClass.EPISODIC.value
    return MemoryClass.SEMANTIC.value


# Topics of a tutoring playbook, checked in order; the first whose pattern matches wins.
_TOPICS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("order_of_operations", re.compile(r"\b(order of operations|pemdas|bodmas|bidmas|brackets first)\b", re.I)),
    ("percentages", re.compile(r"(\d\s*%|\bpercent\w*\b)", re.I)),
    ("decimals", re.compile(r"(\b\d*\.\d+\b|\bdecimals?\b|\bplace value\b|\btenths?\b|\bhundredths?\b)", re.I)),
    ("fractions", re.compile(r"(\b\d+\s*/\s*\d+\b|\bfractions?\b|\bdenominators?\b|\bnumerators?\b|\bhalves\b|\bthirds\b|\bsixths\b)", re.I)),
    ("negative_numbers", re.compile(r"(\bnegative\b|\bminus a\b|-\s*\(\s*-|\bbelow zero\b|\binteger rules?\b)", re.I)),
    ("algebra", re.compile(r"(\balgebra\w*\b|\bequations?\b|\bsolve for\b|\bvariables?\b|\bdistribut\w*\b|\blike terms\b|\b\d*[xy]\s*[+\-=])", re.I)),
    ("geometry", re.compile(r"\b(area|perimeter|triangle|rectangle|circle|angle|geometry|volume)s?\b", re.I)),
    ("exponents", re.compile(r"\b(exponents?|powers?|squared|cubed)\b", re.I)),
    ("multiplication", re.compile(r"(\btimes tables?\b|\bmultipl\w*\b|\b\d+\s*[x×*]\s*\d+\b)", re.I)),
    ("division", re.compile(r"(\bdivi\w*\b|\bremainders?\b|\b\d+\s*÷\s*\d+\b)", re.I)),
    ("addition_subtraction", re.compile(r"(\badd\w*\b|\bsubtract\w*\b|\bcarry\w*\b|\bborrow\w*\b|\b\d+\s*[+\-]\s*\d+\b)", re.I)),
    ("reading", re.compile(r"\b(reading|comprehension|vocabulary|spelling|phonics)\b", re.I)),
    ("writing", re.compile(r"\b(essay|paragraph|grammar|punctuation|thesis)\b", re.I)),
)
GENERAL_TOPIC = "general"

_CONCEPTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("common_denominator", re.compile(r"\b(common denominators?|different denominators?|lcd|lcm|least common|denominators?)\b", re.I)),
    ("equivalent_fractions", re.compile(r"\b(equivalent|simplif\w*|lowest terms)\b", re.I)),
    ("numerator", re.compile(r"\bnumerators?\b", re.I)),
    ("place_value", re.compile(r"\b(place value|tenths|hundredths|decimal point)\b", re.I)),
    ("sign_rules", re.compile(r"\b(negative|minus|sign rules?|signs?)\b", re.I)),
    ("distributive_property", re.compile(r"\b(distribut\w*|brackets?|parenthes\w*)\b", re.I)),
    ("like_terms", re.compile(r"\blike terms\b", re.I)),
    ("operation_order", re.compile(r"\b(pemdas|bodmas|order of operations|multiply before|before adding)\b", re.I)),
    ("percent_change", re.compile(r"\b(percent(age)? (change|increase|decrease)|discount|markup)\b", re.I)),
    ("area_perimeter", re.compile(r"\b(area|perimeter)\b", re.I)),
)


def infer_topic(text: str) -> str:
    """The topic a text is about (``"general"`` when none is recognised)."""
    for topic, pattern in _TOPICS:
        if pattern.search(text):
            return topic
    return GENERAL_TOPIC


def infer_concept(text: str) -> str:
    """The concept a lesson is about, or ``""``."""
    for concept, pattern in _CONCEPTS:
        if pattern.search(text):
            return concept
    return ""


__all__ = [
    "CLASS_KEYWORDS",
    "GENERAL_TOPIC",
    "LESSON_KINDS",
    "SECTIONS",
    "SECTION_CONCEPTS",
    "SECTION_LEARNER",
    "SECTION_MISTAKES",
    "SECTION_STRATEGIES",
    "infer_concept",
    "infer_memory_type",
    "infer_topic",
    "lesson_kind",
    "normalize_tags",
    "section_for",
    "snake_case",
]

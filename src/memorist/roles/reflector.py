"""The deterministic reflector: lessons and bullet tags from one turn, no model;
insights from task trajectories.

It reads what a learner says about themselves ("I keep messing up ...", "please
remind me that ...", "I prefer ...") in the question and the feedback, what the
feedback says helped or hurt, and the outcome. The bullets that were in the prompt
are tagged helpful after a success and harmful after a failure.

On a trajectory (spec 001) it reads the steps: the decisions of a successful run
are its ✓ successful patterns (actions only carry decisions out); in a run that failed, a decision an error directly
followed (actions between them aside) is a ✗ failure pattern — an error that
followed no decision is one itself — and the run's other decisions are ○ neutral:
taken, but not enough. An observation is an error when it says so (words such as
"error", "failed", "429") unless its metadata marks it ``ok`` or ``handled``.
Steps may carry a ``recommendation`` in their metadata. Across several trajectories it keeps
the patterns at least two of them show, each with those trajectories as evidence.

>>> from memorist.roles.learning import Trace
>>> r = HeuristicReflector().reflect(Trace(
...     question="I get confused when adding fractions with different denominators—please remind me that 1/2 becomes 3/6."))
>>> [l.content for l in r.lessons]
['Learner gets confused when adding fractions with different denominators', 'Remind the learner that 1/2 becomes 3/6']
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from ..policies.taxonomy import infer_topic
from .learning import (
    HARMFUL,
    HELPFUL,
    BulletTag,
    Insights,
    Lesson,
    Reflection,
    Reflector,
    Step,
    Trace,
    Trajectory,
)

_SUCCESS = {"success", "succeeded", "correct", "solved", "helpful", "positive", "good", "pass", "passed"}
_FAILURE = {"failure", "failed", "fail", "incorrect", "wrong", "harmful", "negative", "bad", "unsolved"}

_NEGATIVE = re.compile(
    r"\b(still (?:confused|lost|stuck|don't get it)|(?:didn't|did not|doesn't|does not|won't) (?:help|work|make sense)|"
    r"that'?s wrong|was wrong|is wrong|incorrect|not right|makes? no sense|confusing|confused me|too (?:fast|hard|long)|"
    r"i (?:still )?(?:don't|do not) (?:get|understand) (?:it|this|that)|worse|unhelpful|not helpful|useless)\b",
    re.I,
)
_POSITIVE = re.compile(
    r"\b(thanks?|thank you|helped|helps|helpful|got it|makes? sense|made sense|now i (?:get|understand|see)|"
    r"that worked|it worked|works now|perfect|great|clear now|i understand|correct|right answer|nailed it|awesome)\b",
    re.I,
)

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\s+[—–]\s*|[—–]|\n+")
_PRONOUNS = (
    (re.compile(r"\bI'm\b", re.I), "they're"),
    (re.compile(r"\bI am\b", re.I), "they are"),
    (re.compile(r"\bI've\b", re.I), "they've"),
    (re.compile(r"\bmyself\b", re.I), "themselves"),
    (re.compile(r"\bmine\b", re.I), "theirs"),
    (re.compile(r"\bmy\b", re.I), "their"),
    (re.compile(r"\bme\b", re.I), "them"),
    (re.compile(r"\bI\b"), "they"),
)

# (pattern, lesson type, template); ``x`` is the captured remainder of the sentence.
_LEARNER_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"\bremind me (?:that |to |of |how )?(?P<x>.+)", re.I), "strategy", "Remind the learner that {x}"),
    (re.compile(r"\bI(?: always| often| usually| still| sometimes)?(?: get| am|'m| feel) (?:really |so |very )?confused (?P<x>(?:when|about|by|with|if) .+)", re.I), "experience", "Learner gets confused {x}"),
    (re.compile(r"\bI(?:'m| am)? (?:always |often |still )?(?:keep )?(?:messing up|mixing up|mix up|getting wrong|forgetting|making mistakes (?:with|on|in)) (?P<x>.+)", re.I), "experience", "Learner keeps getting {x} wrong"),
    (re.compile(r"\bI (?:always |often |still )?(?:struggle|have trouble|have a hard time|find it hard) (?:with |to |when )?(?P<x>.+)", re.I), "experience", "Learner struggles with {x}"),
    (re.compile(r"\bI (?:don't|do not|can't|cannot) (?:understand|remember|get|figure out) (?P<x>(?!it\b|this\b|that\b).+)", re.I), "experience", "Learner does not understand {x}"),
    (re.compile(r"\bI (?:prefer|learn (?:best|better) (?:with|from|when)|like it when you|like (?:it )?when) (?P<x>.+)", re.I), "preference", "Learner prefers {x}"),
)
_HELPED = re.compile(
    r"^(?P<x>.+?)\s+(?:really |definitely )?(?:helped|helps|worked|made (?:it|this|that|things) (?:clear|click|easier)|made sense|was (?:clear|helpful))\b",
    re.I,
)
_HURT = re.compile(
    r"^(?P<x>.+?)\s+(?:(?:didn't|did not|doesn't|does not) (?:help|work|make sense)|was confusing|confused me|made it worse|was too (?:fast|hard))\b",
    re.I,
)
_TIP = re.compile(r"^(?:next time|tip|lesson|note|remember)\s*[:,]\s*(?P<x>.+)", re.I)
_LEAD = re.compile(r"^(?:(?:thanks?|thank you|ok(?:ay)?|yes|yeah|great|cool|wow|oh|hmm|well|so|and|but)\b[\s,!.]*)+", re.I)
_VAGUE = re.compile(r"^(?:that|this|it|the (?:answer|explanation|reply)|your (?:answer|explanation)|you)$", re.I)


def _third_person(text: str) -> str:
    for pattern, repl in _PRONOUNS:
        text = pattern.sub(repl, text)
    return text


def _tidy(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip(" \t\"'")
    text = re.sub(r"(?:\s*,?\s*(?:please|thanks?|thank you))+$", "", text, flags=re.I)
    return text.rstrip(" .!?,;:")


def _sentences(text: str | None) -> Iterator[str]:
    for part in _SENTENCE.split(text or ""):
        part = part.strip()
        if part:
            yield part


def polarity(outcome: str | None, feedback: str | None) -> int:
    """+1 success, -1 failure, 0 unknown: the outcome when given, else the feedback's tone."""
    if outcome:
        word = outcome.strip().lower()
        if word in _SUCCESS:
            return 1
        if word in _FAILURE:
            return -1
        return 0
    if not feedback:
        return 0
    if _NEGATIVE.search(feedback):
        return -1
    if _POSITIVE.search(feedback):
        return 1
    return 0


def _lower_first(text: str) -> str:
    """"The number line" → "the number line" (acronyms such as "LCD" stay)."""
    if len(text) > 1 and text[0].isupper() and not text[1].isupper():
        return text[0].lower() + text[1:]
    return text


def _first_sentence(text: str, limit: int = 200) -> str:
    first = next(_sentences(text), "")
    return first if len(first) <= limit else first[:limit].rsplit(" ", 1)[0] + "…"


class HeuristicReflector(Reflector):
    """Deterministic lessons from the learner's own words, the feedback and the
    outcome; deterministic insights from a trajectory's steps and outcome.

    >>> from memorist.roles.learning import Step, Trajectory
    >>> HeuristicReflector().reflect_trajectory(Trajectory(
    ...     task="Fetch users", status="failure",
    ...     steps=(Step("decision", "Decided to retry immediately"), Step("observation", "Error: HTTP 429 Too Many Requests")),
    ... )).failure_patterns
    ('Retry immediately',)
    """

    label = "Reflector"

    def _reflect_trajectory(self, trajectory: Trajectory) -> Insights:
        return _reflect_on_trajectory(trajectory)

    def _reflect_batch(self, trajectories: Sequence[Trajectory]) -> Insights:
        return _reflect_on_batch(trajectories)

    def _reflect(self, trace: Trace) -> Reflection:
        sign = polarity(trace.outcome, trace.feedback)
        tag = HELPFUL if sign > 0 else HARMFUL if sign < 0 else None
        bullet_tags = tuple(BulletTag(b.id, tag) for b in trace.injected) if tag else ()
        outcome = "success" if sign > 0 else "failure" if sign < 0 else None
        topic = trace.topic or infer_topic(trace.question)
        lessons = list(trace.lessons) if trace.lessons else self._lessons(trace, sign, topic)
        summary = f"{len(lessons)} lesson(s); outcome={outcome or 'unknown'}; {len(bullet_tags)} bullet(s) tagged {tag or '-'}"
        return Reflection(lessons=tuple(lessons), bullet_tags=bullet_tags, summary=summary, outcome=outcome)

    def _lessons(self, trace: Trace, sign: int, topic: str) -> list[Lesson]:
        found: list[Lesson] = []
        seen: set[str] = set()

        def keep(content: str, kind: str) -> None:
            content = (content[0].upper() + content[1:]).rstrip(" .!") if content else content
            if len(content) < 8 or content.lower() in seen:
                return
            seen.add(content.lower())
            found.append(Lesson(content=content, type=kind, topic=topic))

        for text in (trace.question, trace.feedback):
            for sentence in _sentences(text):
                for pattern, kind, template in _LEARNER_RULES:
                    m = pattern.search(sentence)
                    if m:
                        x = _tidy(_third_person(m.group("x")))
                        if x:
                            keep(template.format(x=x), kind)
                        break
        answer_is_real = bool(trace.answer) and trace.answer_mode not in ("deterministic", "none")
        for sentence in _sentences(trace.feedback):
            sentence = _LEAD.sub("", sentence)
            tip = _TIP.match(sentence)
            if tip:
                keep(_tidy(tip.group("x")), "strategy")
                continue
            hurt = _HURT.match(sentence)
            helped = None if hurt else _HELPED.match(sentence)
            m, kind = (hurt, "anti_pattern") if hurt else (helped, "strategy")
            if not m:
                continue
            x = _lower_first(_tidy(m.group("x")))
            if _VAGUE.match(x):
                # "That helped": the answer is the strategy, when there is a real one.
                if answer_is_real:
                    first = _first_sentence(trace.answer)
                    keep(f"For {topic.replace('_', ' ')}: {first}" if kind == "strategy" else f"Avoid for {topic.replace('_', ' ')}: {first}", kind)
                continue
            keep(f"Use {x}; it helped the learner" if kind == "strategy" else f"Avoid {x}; it confused the learner", kind)
        if answer_is_real and sign != 0 and not any(x.type in ("strategy", "anti_pattern") for x in found):
            first = _first_sentence(trace.answer)
            if sign > 0:
                keep(f"For {topic.replace('_', ' ')}: {first}", "strategy")
            else:
                keep(f"Avoid for {topic.replace('_', ' ')}: {first}", "anti_pattern")
        return found


_DECIDED = re.compile(r"^(?:decided to|decide to|decision:|chose to|choose to|choosing to|i will|i'll|will)\s+", re.I)
_ERRORISH = re.compile(
    r"\b(errors?|failed|fails|failure|exception|timed? ?out|timeout|refused|denied|invalid|rejected|"
    r"too many requests|rate[- ]?limit(?:ed)?|4\d\d|5\d\d)\b",
    re.I,
)
_PATTERN_STEPS = ("decision",)


def _pattern(step: Step) -> str:
    """A step as a reusable pattern: its ``strategy`` metadata, else its description
    without a leading "Decided to"."""
    given = step.metadata.get("strategy") if isinstance(step.metadata, dict) else None
    text = given if isinstance(given, str) and given.strip() else step.description
    text = _DECIDED.sub("", " ".join(text.split())).rstrip(" .")
    return text[:1].upper() + text[1:] if text else text


def is_error_step(step: Step) -> bool:
    """An observation (or action result) that reports an error."""
    meta = step.metadata if isinstance(step.metadata, dict) else {}
    if step.type == "decision" or meta.get("ok") is True or meta.get("handled") is True:
        return False
    if meta.get("error") or meta.get("ok") is False or meta.get("success") is False:
        return True
    return bool(_ERRORISH.search(step.description))


def _unique(items: Sequence[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = item.casefold()
        if item and key not in seen:
            seen.add(key)
            out.append(item)
    return tuple(out)


def trajectory_parts(t: Trajectory) -> tuple[list[str], list[str], list[str], list[str]]:
    """``(successful, failure, neutral, recommendations)`` of one trajectory, by the rules above."""
    steps = list(t.steps)
    deciding = [i for i, s in enumerate(steps) if s.type in _PATTERN_STEPS]
    recommendations = [
        str(s.metadata["recommendation"]).strip() for s in steps
        if isinstance(s.metadata, dict) and isinstance(s.metadata.get("recommendation"), str) and s.metadata["recommendation"].strip()
    ]
    if t.status == "success":
        return [_pattern(steps[i]) for i in deciding], [], [], recommendations
    culprits: list[int] = []
    failures: list[str] = []
    chosen = set(deciding)
    for i, step in enumerate(steps):
        if not is_error_step(step):
            continue
        # The culprit is the decision the error directly followed (actions between
        # them carried it out); after an observation that went well, none is.
        j = i - 1
        while j >= 0 and steps[j].type == "action" and j not in chosen:
            j -= 1
        if j >= 0 and j in chosen:
            culprits.append(j)
        else:
            failures.append(" ".join(step.description.split()).rstrip(" ."))
    if not culprits and not failures and t.error:
        failures.append(" ".join(t.error.split()).rstrip(" ."))
    culprit_set = set(culprits)
    failure = [_pattern(steps[j]) for j in dict.fromkeys(culprits)] + failures
    neutral = [_pattern(steps[j]) for j in deciding if j not in culprit_set]
    return [], failure, neutral, recommendations


def _reflect_on_trajectory(t: Trajectory) -> Insights:
    good, bad, neutral, recs = trajectory_parts(t)
    return Insights(
        successful_patterns=_unique(good),
        failure_patterns=_unique(bad),
        neutral_observations=_unique([n for n in neutral if n.casefold() not in {b.casefold() for b in bad}]),
        recommendations=_unique(recs),
        summary=f"{t.status or 'unknown'}: {len(t.steps)} step(s), {len(good)} successful, {len(bad)} failure pattern(s)",
    )


def _reflect_on_batch(trajectories: Sequence[Trajectory]) -> Insights:
    """Patterns that at least two trajectories show, with those trajectories as evidence.

    A decision is a successful pattern when some run that took it succeeded and it
    was the culprit of no more failures than it had successes (its evidence: every
    run that took it, so its success rate shows); a failure pattern when it was a
    culprit more often; neutral when it never led to a success.
    """
    seen: dict[str, str] = {}
    runs: dict[str, dict[str, list[str]]] = {}

    def note(pattern: str, role: str, tid: str) -> None:
        key = pattern.casefold()
        seen.setdefault(key, pattern)
        bucket = runs.setdefault(key, {"success": [], "culprit": [], "other": [], "recommendation": []})
        if tid not in bucket[role]:
            bucket[role].append(tid)

    for t in trajectories:
        good, bad, neutral, recs = trajectory_parts(t)
        for p in good:
            note(p, "success", t.id)
        for p in bad:
            note(p, "culprit", t.id)
        for p in neutral:
            note(p, "other", t.id)
        for p in recs:
            note(p, "recommendation", t.id)
    lists: dict[str, list[str]] = {"successful_patterns": [], "failure_patterns": [], "neutral_observations": [], "recommendations": []}
    evidence: dict[str, tuple[str, ...]] = {}
    for key, b in runs.items():
        pattern = seen[key]
        every = tuple(dict.fromkeys(b["success"] + b["culprit"] + b["other"]))
        if b["recommendation"] and len(b["recommendation"]) >= 2:
            lists["recommendations"].append(pattern)
            evidence[pattern] = tuple(b["recommendation"])
        if len(every) < 2:
            continue
        if b["success"] and len(b["culprit"]) <= len(b["success"]):
            lists["successful_patterns"].append(pattern)
        elif b["culprit"]:
            lists["failure_patterns"].append(pattern)
        else:
            lists["neutral_observations"].append(pattern)
        evidence[pattern] = every
    ok = sum(1 for t in trajectories if t.status == "success")
    return Insights(
        **{k: tuple(v) for k, v in lists.items()},
        summary=f"{len(trajectories)} trajectories, {ok} successful; {sum(len(v) for v in lists.values())} shared pattern(s)",
        evidence=evidence,
    )


__all__ = ["HeuristicReflector", "is_error_step", "polarity", "trajectory_parts"]

"""The deterministic reflector: lessons and bullet tags from one turn, no model;
insights from task trajectories.

It reads what a learner says about themselves ("I keep messing up ...", "please
remind me that ...", "I prefer ...") in the question and the feedback, what the
feedback says helped or hurt, and the outcome. The bullets that were in the prompt
are tagged helpful after a success and harmful after a failure.

On a trajectory it credits the run's decisions (its ``decision`` steps;
actions only carry them out, observations are what happened) by their association
with outcomes across the trajectories of the same task type
(:func:`~memorist.policies.learning.credit`): a decision present in failures and
absent from successes is a ✗ failure pattern, one present in successes and absent
from failures a ✓ successful pattern, one present about equally in both ○ neutral.
Those categories are ``credited``: curation moves a strategy to them. Until the runs
say (too few successes or failures, a decision seen once, a difference not yet clear)
a decision is ○, uncredited — except the decision an error directly followed
(actions between them aside) that no success ever took, which is ✗ until the runs
say. Before any run of the other outcome was seen, one run decides alone
(uncredited): a success's decisions are ✓; in a failure that culprit is ✗, the
others ○. Error text is an
observation, never a pattern: an observation is an error when it says so ("error",
"failed", "429") unless its metadata marks it ``ok`` or ``handled``. Steps may carry a
``recommendation`` in their metadata. Across a batch it keeps the patterns at least
two of its trajectories show, credited the same way, each with those trajectories as
evidence.

>>> from memorist.roles.learning import Trace
>>> r = HeuristicReflector().reflect(Trace(
...     question="I get confused when adding fractions with different denominators—please remind me that 1/2 becomes 3/6."))
>>> [l.content for l in r.lessons]
['Learner gets confused when adding fractions with different denominators', 'Remind the learner that 1/2 becomes 3/6']
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from ..policies.learning import NEUTRAL, credit
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

    With the runs before it (``(succeeded, decisions)``), a decision is credited by
    its association with outcomes:

    >>> history = [(True, ["Log every response", "Back off on 429"]), (True, ["Back off on 429"]),
    ...            (False, ["Log every response", "Retry immediately"]), (False, ["Retry immediately"])] * 2
    >>> insights = HeuristicReflector().reflect_in_context(Trajectory(
    ...     task="Fetch users", status="success",
    ...     steps=(Step("decision", "Log every response"), Step("decision", "Back off on 429"))), history)
    >>> insights.successful_patterns, insights.neutral_observations
    (('Back off on 429',), ('Log every response',))
    """

    def reflect_in_context(self, trajectory: Trajectory, history: Sequence[tuple[bool, Sequence[str]]]) -> Insights:
        """:meth:`reflect_trajectory` with the runs of the same task type before it
        (``(succeeded, decisions)``, at most :data:`~memorist.policies.learning.CREDIT_HISTORY`)."""
        return _reflect_on_trajectory(trajectory, history)

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


def decisions(t: Trajectory) -> list[str]:
    """The decisions of a trajectory, as patterns, in order (each once)."""
    return list(_unique([_pattern(s) for s in t.steps if s.type in _PATTERN_STEPS]))


def _recommendations(t: Trajectory) -> list[str]:
    return [
        str(s.metadata["recommendation"]).strip() for s in t.steps
        if isinstance(s.metadata, dict) and isinstance(s.metadata.get("recommendation"), str) and s.metadata["recommendation"].strip()
    ]


def trajectory_parts(t: Trajectory) -> tuple[list[str], list[str], list[str], list[str]]:
    """``(successful, failure, neutral, recommendations)`` of one trajectory judged
    alone (the rule used until the runs of its task type say more): a success's
    decisions are successful; in a failure, the decision an error directly followed is
    a failure pattern and the others neutral. Errors themselves are no pattern."""
    steps = list(t.steps)
    deciding = [i for i, s in enumerate(steps) if s.type in _PATTERN_STEPS]
    recommendations = _recommendations(t)
    if t.status == "success":
        return [_pattern(steps[i]) for i in deciding], [], [], recommendations
    culprits: list[int] = []
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
    culprit_set = set(culprits)
    failure = [_pattern(steps[j]) for j in dict.fromkeys(culprits)]
    neutral = [_pattern(steps[j]) for j in deciding if j not in culprit_set]
    return [], failure, neutral, recommendations


def _errors(t: Trajectory) -> list[str]:
    found = [" ".join(s.description.split()).rstrip(" .") for s in t.steps if is_error_step(s)]
    if not found and t.error and t.status != "success":
        found.append(" ".join(t.error.split()).rstrip(" ."))
    return list(_unique(found))


def _reflect_on_trajectory(t: Trajectory, history: Sequence[tuple[bool, Sequence[str]]] = ()) -> Insights:
    good, bad, neutral, recs = trajectory_parts(t)
    mine = decisions(t)
    ok = t.status == "success"
    credited: list[str] = []
    doubted: list[str] = []
    if history:
        runs = [*history, (ok, mine)]
        verdicts = credit(runs)
        # The other outcome already seen: a run alone no longer decides (what it shares
        # with runs of the other outcome is for the association to say).
        contrast = any(success != ok for success, _ in history)
        won = {x.casefold() for success, taken in history if success for x in taken}
        alone = {d.casefold(): cat for cat, items in ((HELPFUL, good), (HARMFUL, bad), (NEUTRAL, neutral)) for d in items}
        final = {}
        for d in mine:
            key = d.casefold()
            if key in verdicts:
                final[d] = verdicts[key]
                credited.append(d)
            elif contrast and not ok and alone.get(key) == HARMFUL and key not in won:
                final[d] = HARMFUL  # the step an error followed, in no success yet: ✗ until the runs say
            elif contrast:
                final[d] = NEUTRAL
                if ok:  # a success with failures seen: no longer enough to make it ✓
                    doubted.append(d)
            else:
                final[d] = alone.get(key, NEUTRAL)
        good = [d for d in mine if final[d] == HELPFUL]
        bad = [d for d in mine if final[d] == HARMFUL]
        neutral = [d for d in mine if final[d] == NEUTRAL]
    errors = _errors(t)
    seen = f"; errors seen: {'; '.join(errors[:3])}" if errors else ""
    return Insights(
        successful_patterns=_unique(good),
        failure_patterns=_unique(bad),
        neutral_observations=_unique([n for n in neutral if n.casefold() not in {b.casefold() for b in bad}]),
        recommendations=_unique(recs),
        summary=(f"{t.status or 'unknown'}: {len(t.steps)} step(s), {len(good)} successful, {len(bad)} failure pattern(s)"
                 f"{f', {len(credited)} credited across runs' if credited else ''}{seen}"),
        credited=_unique(credited),
        doubted=_unique(doubted),
    )


def _reflect_on_batch(trajectories: Sequence[Trajectory]) -> Insights:
    """Patterns that at least two trajectories show, with those trajectories as evidence.

    Each decision is credited by its association with the batch's outcomes
    (:func:`~memorist.policies.learning.credit`); where the batch is too small to
    say, a decision some success took is successful unless it was the culprit of more
    failures than it had successes, a failure pattern when it was a culprit more
    often, and neutral when it never led to a success.
    """
    seen: dict[str, str] = {}
    runs: dict[str, dict[str, list[str]]] = {}

    def note(pattern: str, role: str, tid: str) -> None:
        key = pattern.casefold()
        seen.setdefault(key, pattern)
        bucket = runs.setdefault(key, {"success": [], "culprit": [], "other": [], "recommendation": []})
        if tid not in bucket[role]:
            bucket[role].append(tid)

    outcomes = []
    for t in trajectories:
        good, bad, neutral, recs = trajectory_parts(t)
        outcomes.append((t.status == "success", decisions(t)))
        for p in good:
            note(p, "success", t.id)
        for p in bad:
            note(p, "culprit", t.id)
        for p in neutral:
            note(p, "other", t.id)
        for p in recs:
            note(p, "recommendation", t.id)
    verdicts = credit(outcomes)
    lists: dict[str, list[str]] = {"successful_patterns": [], "failure_patterns": [], "neutral_observations": [], "recommendations": []}
    evidence: dict[str, tuple[str, ...]] = {}
    credited: list[str] = []
    target = {HELPFUL: "successful_patterns", HARMFUL: "failure_patterns", NEUTRAL: "neutral_observations"}
    for key, b in runs.items():
        pattern = seen[key]
        every = tuple(dict.fromkeys(b["success"] + b["culprit"] + b["other"]))
        if b["recommendation"] and len(b["recommendation"]) >= 2:
            lists["recommendations"].append(pattern)
            evidence[pattern] = tuple(b["recommendation"])
        if len(every) < 2:
            continue
        if key in verdicts:
            lists[target[verdicts[key]]].append(pattern)
            credited.append(pattern)
        elif b["success"] and len(b["culprit"]) <= len(b["success"]):
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
        credited=tuple(credited),
    )


__all__ = ["HeuristicReflector", "decisions", "is_error_step", "polarity", "trajectory_parts"]

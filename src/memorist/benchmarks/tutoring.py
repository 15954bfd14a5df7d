"""A seeded synthetic tutoring stream for ``memorist bench evolve``.

Six learners work through maths problems over several conversations each. Every
learner has three recurring misconceptions (of eight); each misconception comes
with lessons: what the learner gets wrong (an observation), two strategies that
help, one approach that hurts. Turns pick an approach; it helps or hurts, the
feedback says so, and the turn's lessons are what a reflector would draw from it.
Lessons recur, in four surface forms: the canonical text, a trivial copy (case and
punctuation), a minor edit (a word changed; a near duplicate) and a true paraphrase.

Each lesson carries a ``key`` (``<learner>/<lesson>``) so that recall can be
measured: a query about a learner's misconception should find that learner's
lessons for it. The stream ships as ``data/tutoring_stream.json``; :func:`generate`
rebuilds it exactly from its seed.
"""

from __future__ import annotations

import json
import random
from importlib import resources
from typing import Any

SEED = 7
VERSION = 1

LEARNERS = ("Sam", "Priya", "Leo", "Mia", "Omar", "Zoe")

# key: (topic, question templates, query templates, lessons); each lesson is
# (name, type, canonical, minor edit, paraphrase). "{n}" is the learner's name.
MISCONCEPTIONS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[tuple[str, str, str, str, str], ...]]] = {
    "fraction_addition": (
        "fractions",
        ("What is {a}/{b} + {c}/{d}?", "I keep messing up {a}/{b} + {c}/{d}, can you help?", "How do I add {a}/{b} and {c}/{d}?"),
        ("How should I help {n} add fractions like 2/5 + 1/4?", "What goes wrong when {n} adds two fractions with different denominators?"),
        (
            ("observation", "experience",
             "{n} adds the denominators when adding fractions, writing 1/2 + 1/3 = 2/5",
             "{n} adds the denominators too when adding fractions, writing 1/2 + 1/3 = 2/5",
             "When {n} sums two fractions the bottoms get added as well as the tops"),
            ("common_denominator", "strategy",
             "Before adding fractions, rewrite both with a common denominator: 1/2 = 3/6 and 1/3 = 2/6",
             "Before adding fractions, first rewrite both with a common denominator: 1/2 = 3/6 and 1/3 = 2/6",
             "Turn both fractions into sixths first and only then add the numerators"),
            ("pizza_slices", "strategy",
             "Use pizza slices cut into equal pieces to show why the denominators must match",
             "Use pizza slices cut into equal-sized pieces to show why the denominators must match",
             "A pizza cut into same-size slices makes it clear that only like pieces can be added"),
            ("rule_first", "anti_pattern",
             "Do not just state the rule 'find the LCD'; {n} needs a picture first",
             "Do not only state the rule 'find the LCD'; {n} needs a picture first",
             "Quoting the least-common-denominator rule without a visual leaves {n} lost"),
        ),
    ),
    "equivalent_fractions": (
        "fractions",
        ("Is 2/4 bigger than 1/2?", "Which is larger, {a}/{b} or {c}/{d}?", "Are 3/6 and 1/2 the same?"),
        ("How do I explain to {n} that 2/4 and 1/2 are equal?", "What does {n} believe about fractions with bigger numbers?"),
        (
            ("observation", "experience",
             "{n} thinks 2/4 is bigger than 1/2 because its numbers are bigger",
             "{n} thinks 2/4 is larger than 1/2 because its numbers are bigger",
             "Bigger numerals make {n} assume a fraction is worth more"),
            ("fraction_wall", "strategy",
             "Show equivalent fractions on a fraction wall: 1/2, 2/4 and 3/6 line up exactly",
             "Show equivalent fractions on a fraction wall where 1/2, 2/4 and 3/6 line up exactly",
             "Lining up strips of halves, quarters and sixths shows they cover the same length"),
            ("scale_both", "strategy",
             "Multiply the top and the bottom by the same number to make an equivalent fraction",
             "Multiply both the top and the bottom by the same number to make an equivalent fraction",
             "Scaling numerator and denominator together never changes a fraction's value"),
            ("cross_multiply", "anti_pattern",
             "Avoid cross-multiplying to compare fractions before {n} understands equivalence",
             "Avoid cross-multiplying to compare fractions until {n} understands equivalence",
             "The cross-multiplication shortcut hides the idea of equivalence from {n}"),
        ),
    ),
    "decimal_comparison": (
        "decimals",
        ("Which is bigger, 0.{a}5 or 0.{c}?", "Is 0.45 more than 0.5?", "Put 0.3, 0.25 and 0.{a} in order."),
        ("How can {n} compare decimals like 0.45 and 0.5?", "What mistake does {n} make with decimal place value?"),
        (
            ("observation", "experience",
             "{n} believes 0.45 is larger than 0.5 because 45 is more than 5",
             "{n} believes 0.45 is bigger than 0.5 because 45 is more than 5",
             "More digits after the point make {n} think a decimal is larger"),
            ("pad_zeros", "strategy",
             "Line the decimals up and pad with zeros so 0.50 is compared with 0.45",
             "Line the decimals up and pad them with zeros so 0.50 is compared with 0.45",
             "Writing both numbers to two decimal places makes the comparison direct"),
            ("money", "strategy",
             "Use money: 50 cents against 45 cents makes the decimal comparison concrete",
             "Use money, since 50 cents against 45 cents makes the decimal comparison concrete",
             "Thinking in coins turns tenths and hundredths into amounts {n} already knows"),
            ("longer_rule", "anti_pattern",
             "Do not teach the shortcut 'longer decimals are smaller'; it misleads {n}",
             "Do not teach the shortcut that 'longer decimals are smaller'; it misleads {n}",
             "A digit-counting rule of thumb sends {n} the wrong way on decimals"),
        ),
    ),
    "negative_subtraction": (
        "negative_numbers",
        ("What is {a} - (-{c})?", "Why is 3 - (-2) equal to 5?", "I keep messing up {a} minus negative {c}."),
        ("How do I teach {n} to subtract a negative number?", "What does {n} do wrong with minus a negative?"),
        (
            ("observation", "experience",
             "{n} treats subtracting a negative as plain subtraction, so 3 - (-2) becomes 1",
             "{n} treats subtracting a negative as ordinary subtraction, so 3 - (-2) becomes 1",
             "Minus a negative number looks like an ordinary take-away to {n}"),
            ("number_line", "strategy",
             "Walk along a number line: subtracting a negative means turning around and moving up",
             "Walk along a number line, where subtracting a negative means turning around and moving up",
             "On a number line, taking away a negative is a step in the upward direction"),
            ("rewrite_plus", "strategy",
             "Rewrite 3 - (-2) as 3 + 2 once the number line picture is clear",
             "Rewrite 3 - (-2) as 3 + 2 once the number line picture is understood",
             "After the picture, the expression can be turned into an addition"),
            ("slogan", "anti_pattern",
             "Avoid the slogan 'two negatives make a positive'; {n} then applies it to addition too",
             "Avoid the slogan that 'two negatives make a positive'; {n} then applies it to addition too",
             "Rhymes about negatives get overgeneralised by {n} to sums as well"),
        ),
    ),
    "distributing_signs": (
        "algebra",
        ("Expand -(x - {a}).", "Simplify {c} - (x - {a}).", "Why is -(x - 3) equal to -x + 3?"),
        ("How can {n} expand brackets with a minus sign in front?", "What does {n} forget when distributing in algebra?"),
        (
            ("observation", "experience",
             "{n} forgets to distribute the minus sign in -(x - 3) and writes -x - 3",
             "{n} forgets to distribute the minus sign over -(x - 3) and writes -x - 3",
             "The sign in front of brackets only reaches the first term when {n} expands"),
            ("arrows", "strategy",
             "Have the learner draw arrows from the outside term to every term inside the brackets",
             "Have the learner draw an arrow from the outside term to every term inside the brackets",
             "Connecting the multiplier to each bracketed term with lines prevents missed terms"),
            ("substitute_check", "strategy",
             "Check an expansion by substituting x = 1 into both forms",
             "Check each expansion by substituting x = 1 into both forms",
             "Plugging a small value into the original and the expanded version catches errors"),
            ("skip_steps", "anti_pattern",
             "Do not let {n} skip writing each multiplication; signs get dropped when steps are skipped",
             "Do not let {n} skip writing out each multiplication; signs get dropped when steps are skipped",
             "Doing the expansion in one's head is where {n} loses minus signs"),
        ),
    ),
    "order_of_operations": (
        "order_of_operations",
        ("What is {a} + {c} × 4?", "Using the order of operations, what is 2 + 3 × 4?", "Why isn't {a} + 3 × {c} worked left to right?"),
        ("How should {n} handle the order of operations in 2 + 3 × 4?", "What does {n} do wrong with the order of operations?"),
        (
            ("observation", "experience",
             "{n} works left to right and computes 2 + 3 × 4 as 20",
             "{n} works strictly left to right and computes 2 + 3 × 4 as 20",
             "Reading an expression like a sentence leads {n} to add before multiplying"),
            ("circle_first", "strategy",
             "Circle the multiplication first, then rewrite the expression before adding",
             "Circle the multiplication first, and then rewrite the expression before adding",
             "Marking the product and rewriting it as one number makes the remaining sum easy"),
            ("repeated_addition", "strategy",
             "Explain that 3 × 4 is a bundle of repeated addition that has to be finished first",
             "Explain that 3 × 4 is a bundle of repeated addition which has to be finished first",
             "Seeing a product as a packaged group of additions shows why it goes first"),
            ("pemdas_letters", "anti_pattern",
             "Avoid teaching PEMDAS as strict letter order; {n} then adds before subtracting",
             "Avoid teaching PEMDAS as a strict letter order; {n} then adds before subtracting",
             "A letter-by-letter mnemonic makes {n} rank addition above subtraction"),
        ),
    ),
    "percent_change": (
        "percentages",
        ("A price rises 50% then falls 50%. Is it back to the start?", "What is {a}0% of {c}0?", "Increase 80 by 25 percent."),
        ("How can {n} work out percentages of an amount?", "What does {n} believe about a 50% rise and a 50% fall?"),
        (
            ("observation", "experience",
             "{n} thinks a 50% rise followed by a 50% drop returns to the start",
             "{n} thinks a 50% rise followed by a 50% fall returns to the start",
             "Equal percentage ups and downs seem to cancel out for {n}"),
            ("ten_percent", "strategy",
             "Work percentages from 10% first: find 10%, then scale to the percentage asked",
             "Work percentages from 10% first: find 10% and then scale to the percentage asked",
             "Starting from a tenth of the amount and building up makes any percentage manageable"),
            ("bar_model", "strategy",
             "Use a bar model to show the new base after a percentage increase",
             "Use a bar model to show the new base amount after a percentage increase",
             "Drawing the amount as a strip shows that the second change applies to a bigger whole"),
            ("formula_first", "anti_pattern",
             "Do not rush to the percent-change formula; {n} needs the 10% steps first",
             "Do not rush into the percent-change formula; {n} needs the 10% steps first",
             "Jumping to (new - old) / old loses {n} before the basics are secure"),
        ),
    ),
    "area_perimeter": (
        "geometry",
        ("What is the area of a {a} by {c} rectangle?", "Find the perimeter of a {a} cm by {c} cm rectangle.", "Is area the same as perimeter?"),
        ("How can I help {n} tell area and perimeter apart?", "What does {n} confuse about the area of a rectangle?"),
        (
            ("observation", "experience",
             "{n} mixes up area and perimeter and adds the sides to get the area",
             "{n} mixes up area and perimeter and adds up the sides to get the area",
             "For {n}, summing the edges is how you find how much space a shape covers"),
            ("unit_squares", "strategy",
             "Tile the rectangle with unit squares and count them to show what area is",
             "Tile the rectangle with unit squares and count them to show what the area is",
             "Covering the shape with little squares and counting makes area visible"),
            ("finger_walk", "strategy",
             "Walk a finger around the edge to show that perimeter is a distance",
             "Walk a finger around the edge to show that the perimeter is a distance",
             "Tracing the outline shows the boundary is a length you travel"),
            ("formulas_first", "anti_pattern",
             "Avoid giving the formulas l × w and 2(l + w) before {n} has counted squares",
             "Avoid giving the formulas l × w and 2(l + w) before {n} has counted the squares",
             "Handing over the two formulas early lets {n} swap them without noticing"),
        ),
    ),
}

PREFERENCES = (
    ("short_steps", "preference",
     "{n} prefers short steps with one worked example at a time",
     "{n} prefers short steps with a single worked example at a time",
     "Long explanations lose {n}; one example per step works better"),
    ("estimate_check", "preference",
     "{n} likes to check every answer by estimating first",
     "{n} likes to check each answer by estimating first",
     "A quick rough guess before the exact answer gives {n} confidence"),
)

_POSITIVE = ("Thanks, that helped!", "Oh, now I get it.", "That makes sense now, thank you.", "Got it, that worked.")
_NEGATIVE = ("I'm still confused.", "That didn't help, I still don't get it.", "That was confusing.", "Hmm, I still don't understand.")


def _variant(rng: random.Random, forms: tuple[str, str, str], first: bool) -> tuple[str, str]:
    """(form name, text): the canonical text the first time, then any surface form."""
    canonical, minor, paraphrase = forms
    if first:
        return "canonical", canonical
    roll = rng.random()
    if roll < 0.25:
        return "canonical", canonical
    if roll < 0.5:
        trivial = canonical[0].lower() + canonical[1:] + "."
        return "trivial", trivial
    if roll < 0.8:
        return "minor", minor
    return "paraphrase", paraphrase


def generate(seed: int = SEED, *, conversations: int = 5, turns_per_conversation: int = 6) -> dict[str, Any]:
    """The stream for ``seed`` (the shipped file is ``generate(SEED)``)."""
    rng = random.Random(seed)
    names = list(MISCONCEPTIONS)
    plans = []
    for name in LEARNERS:
        learner = f"learner-{name.lower()}"
        chosen = rng.sample(names, 3)
        pref = PREFERENCES[rng.randrange(len(PREFERENCES))]
        for c in range(conversations):
            plans.append((learner, name, chosen, pref, c))
    rng.shuffle(plans)
    # Each learner's conversations in their own order, interleaved with other learners'.
    counters: dict[str, int] = {}
    ordered = []
    for learner, name, chosen, pref, _ in plans:
        n = counters.get(learner, 0)
        counters[learner] = n + 1
        ordered.append((learner, name, chosen, pref, n))
    seen: set[str] = set()
    turns = []
    for learner, name, chosen, pref, conv in ordered:
        conversation = f"{learner}-c{conv + 1}"
        for _ in range(turns_per_conversation):
            misc = rng.choice(chosen)
            topic, questions, _queries, lessons = MISCONCEPTIONS[misc]
            nums = {"a": rng.randint(1, 7), "b": rng.randint(2, 9), "c": rng.randint(1, 7), "d": rng.randint(2, 9)}
            question = rng.choice(questions).format(**nums)
            observation, strat1, strat2, anti = lessons
            hurts = rng.random() < 0.35
            approach = anti if hurts else rng.choice((strat1, strat2))
            success = (not hurts) if rng.random() > 0.1 else hurts
            answer = f"Let's try this: {approach[2].format(n=name)}"
            feedback = rng.choice(_POSITIVE if success else _NEGATIVE)
            picked = [approach]
            first_time = f"{learner}/{misc}/{observation[0]}" not in seen
            if first_time or rng.random() < 0.5:
                picked.insert(0, observation)
            if rng.random() < 0.15:
                picked.append(pref)
            turn_lessons = []
            for lesson_name, kind, *forms in picked:
                key = f"{learner}/{misc}/{lesson_name}" if lesson_name != pref[0] else f"{learner}/{lesson_name}"
                form, text = _variant(rng, tuple(f.format(n=name) for f in forms), key not in seen)  # type: ignore[arg-type]
                seen.add(key)
                turn_lessons.append({"content": text, "type": kind, "key": key, "form": form, "topic": topic if lesson_name != pref[0] else "general"})
            turns.append({
                "learner_id": learner,
                "conversation_id": conversation,
                "topic": topic,
                "question": question,
                "answer": answer,
                "feedback": feedback,
                "outcome": "success" if success else "failure",
                "lessons": turn_lessons,
            })
    queries = []
    for name in LEARNERS:
        learner = f"learner-{name.lower()}"
        for misc in names:
            topic, _q, query_templates, lessons = MISCONCEPTIONS[misc]
            relevant = [f"{learner}/{misc}/{lesson[0]}" for lesson in lessons if f"{learner}/{misc}/{lesson[0]}" in seen]
            if not relevant:
                continue
            for template in query_templates:
                queries.append({"learner_id": learner, "topic": topic, "query": template.format(n=name), "relevant": relevant})
    return {"name": "tutoring", "version": VERSION, "seed": seed, "learners": [f"learner-{n.lower()}" for n in LEARNERS], "turns": turns, "queries": queries}


def load() -> dict[str, Any]:
    """The stream shipped with Memorist."""
    text = resources.files("memorist.benchmarks").joinpath("data/tutoring_stream.json").read_text(encoding="utf-8")
    return json.loads(text)


def write(path: str, seed: int = SEED) -> None:
    """Regenerate the shipped file (``python -m memorist.benchmarks.tutoring PATH``)."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(generate(seed), f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":  # pragma: no cover
    import sys

    write(sys.argv[1] if len(sys.argv) > 1 else "src/memorist/benchmarks/data/tutoring_stream.json")

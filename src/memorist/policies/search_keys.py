"""Search keys: what the indexes see of a memory, besides its text.

A conversation turn such as "I went there yesterday" means little on its own. Its
keys add who said it and, optionally, the turn it answered, so that "When did
Caroline go to the support group?" can find it. The memory's text is never changed;
only the embedding and the BM25 terms are computed from the key.
"""

from __future__ import annotations

from .text import index_terms

CONTEXT_CHARS = 200  # of the preceding turn, enough for a question it answers


def memory_key(
    text: str,
    *,
    name: str | None = None,
    previous: str | None = None,
    previous_name: str | None = None,
    facts: list[str] | None = None,
) -> str:
    """The key of a memory: ``"<name>: <text>"``, the turn before it, and its facts.

    ``facts`` are the extractor's third-person facts of the text ("Went to Rome on
    2024-05-07"); with a name they read "<name> went to Rome on 2024-05-07", so a
    question about that person in the third person meets a turn said in the first.
    Without a name a fact is mostly the text said again, so only its words whose
    terms the key lacks are added (the resolved date: "I went to Rome yesterday. |
    2024-05-07"): repeated words would count twice in BM25 and cost embedding time
    for nothing.
    """
    key = f"{name}: {text}" if name else text
    if previous:
        prev = previous if len(previous) <= CONTEXT_CHARS else previous[:CONTEXT_CHARS].rsplit(" ", 1)[0] + "…"
        key += f" (replying to {previous_name + ': ' if previous_name else ''}{prev})"
    if facts and name:
        key += " | " + "; ".join(f"{name} {f[:1].lower()}{f[1:]}" for f in facts)
    elif facts:
        seen = set(index_terms(key))
        extra = []
        for fact in facts:
            words = [w for w in fact.split() if not seen.issuperset(index_terms(w))]
            if words:
                extra.append(" ".join(words))
                seen.update(index_terms(fact))
        if extra:
            key += " | " + "; ".join(extra)
    return key

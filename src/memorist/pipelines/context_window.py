"""The bounded context window: what an agent sees of the coordination log.

:func:`build_context` gathers four sections:

1. ``recent``: the project's ``window`` (50) latest minutes in time, of every agent,
   as of ``now``;
2. ``referenced``: the minutes those reference that are not among them;
3. ``agent``: the agent's own memory: its facts in the project (added with
   ``user_id=project, agent_id=agent``) and its indexed minutes, newest first, at
   most ``agent_limit`` (10);
4. ``retrieved``: the ``retrieve_limit`` (5) indexed minutes most relevant to the
   task (none without a task); those shown count as retrievals (the evaluator's
   relevance), those already in another section do not count again.

Every section is as of ``now``: a minute or fact dated later is in none of them (a
window built for an earlier time shows what was known then), and each section's limit
counts only what it may show. Each memory appears once, in the first section that
has it. Then the window is cut to ``budget_tokens``: items are kept in that order of
priority (the newest recent minutes first, then referenced, agent memory, retrieved,
each best or newest first) while they fit, and what did not fit is reported in
``cut``. Tokens are counted by ``count_tokens``, as :func:`memorist.pipelines.context.pack_context`
counts them: by default the bundled embedding model's tokenizer
(:func:`memorist.embed.tokens.token_counter`; without it, its estimate), the header and
section headings included. The rendered block is counted whole too, and never exceeds
the budget by that count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import validate
from ..embed.tokens import token_counter
from ..errors import ValidationError
from ..model import is_fact
from ..policies.minutes import Minute, references_of, render_minute_line
from ..policies.validity import is_valid, validity_cutoff
from ..work import charge
from .minutes import Minutes, project_of, view_of

SECTIONS = ("recent", "referenced", "agent", "retrieved")
_TITLES = {
    "recent": "Recent coordination events (oldest first)",
    "referenced": "Earlier events they reference",
    "agent": "Your memory",
    "retrieved": "Past experience relevant to the task",
}
WINDOW = 50
RETRIEVE = 5
AGENT_LIMIT = 10
DEFAULT_BUDGET = 4000
_MAX_BUDGET = 1_000_000


@dataclass(slots=True)
class ContextWindow:
    """A built context: the kept items per section, the rendered ``text``, its
    ``tokens`` (by the window's token counter) and what was ``cut`` to stay within
    ``budget_tokens``."""

    agent_id: str
    project_id: str
    task: str | None
    budget_tokens: int
    sections: dict[str, list[dict[str, Any]]]
    text: str
    tokens: int
    cut: list[dict[str, Any]] = field(default_factory=list)
    full_log_available: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "project_id": self.project_id,
            "task": self.task,
            "budget_tokens": self.budget_tokens,
            "tokens": self.tokens,
            "sections": self.sections,
            "counts": {name: len(items) for name, items in self.sections.items()},
            "cut": self.cut,
            "text": self.text,
            "full_log_available": self.full_log_available,
        }

    def __str__(self) -> str:
        return self.text


def budget_of(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_BUDGET:
        raise ValidationError("budget_tokens", f"must be a whole number from 1 to {_MAX_BUDGET:,}, got {validate.show(value)}")
    return value


def _fact_line(item: dict[str, Any]) -> str:
    when = str(item.get("created_at") or "")[:10]
    return f"- {item['memory']}" + (f" ({when})" if when else "")


def _after(minute: dict[str, Any], at: float) -> bool:
    ts = minute.get("ts")
    return isinstance(ts, int | float) and ts > at


#: The most records the agent's own section reads from its space.
OWN_MEMORY_READ = 1_000


def _own_memory(minutes: Minutes, space: Any, at: float, limit: int, seen: set[str]) -> list[tuple[float, dict[str, Any], str]]:
    """The agent's facts and minutes as of ``at``, newest first, at most ``limit``,
    none of ``seen``. The store is asked for what was created up to ``at`` only; the
    space also holds records the section does not show (playbooks, learning records),
    so a page that did not yield enough is read again, four times larger, until the
    section is full, the space is read, or :data:`OWN_MEMORY_READ` records were read
    (a space of many other records shows what those held: the cost stays bounded)."""
    conf = minutes.host.config
    cutoff = validity_cutoff(at, conf.decay_days)
    page = 4 * limit + len(seen)
    while True:
        records = minutes.store.list(space, limit=page, cutoff=cutoff, now=at, until=at)
        charge(len(records))
        own: list[tuple[float, dict[str, Any], str]] = []
        for record in records:
            if record.id in seen or record.created_at > at:
                continue
            if is_fact(record) and is_valid(record.created_at, record.updated_at, record.valid_to, now=at, decay_days=conf.decay_days):
                item = {**record.to_item(), "type": "fact"}
                own.append((record.created_at, item, _fact_line(item)))
            elif record.kind.value == "minute":
                view = {**Minutes.result_view(record), "type": "minute"}
                own.append((record.created_at, view, render_minute_line(view)))
        if len(own) >= limit or len(records) < page or page >= OWN_MEMORY_READ:
            own.sort(key=lambda t: -t[0])
            return own[:limit]
        page = min(4 * page, max(OWN_MEMORY_READ, 4 * limit + len(seen)))


def build_context(
    minutes: Minutes,
    agent_id: str,
    task: str | None = None,
    *,
    budget_tokens: int = DEFAULT_BUDGET,
    project_id: str | None = None,
    now: Any = None,
    window: int = WINDOW,
    retrieve_limit: int = RETRIEVE,
    agent_limit: int = AGENT_LIMIT,
    count_tokens: Callable[[str], int] | None = None,
) -> ContextWindow:
    """The context window of one agent, bounded (see the module docstring):
    ``count_tokens(text)`` counts a text's tokens (default: :func:`~memorist.embed.tokens.token_counter`)."""
    agent = validate.scope_id("agent_id", agent_id)
    if not agent:
        raise ValidationError("agent_id", "is required: the context is built for one agent")
    project = project_of(project_id)
    budget = budget_of(budget_tokens)
    if task is not None:
        task = validate.text("task", task, max_chars=minutes.host.config.max_message_chars)
    window = validate.limit(window, name="window")
    retrieve_limit = validate.limit(retrieve_limit, name="retrieve_limit")
    agent_limit = validate.limit(agent_limit, name="agent_limit")
    if count_tokens is not None and not callable(count_tokens):
        raise ValidationError("count_tokens", f"must be a function of a text to its number of tokens, got {type(count_tokens).__name__}")
    count = count_tokens if count_tokens is not None else token_counter()
    at = minutes._now(now)

    # Every section is as of ``at``: a minute or fact dated later is in none of them.
    # The latest minutes in time as of ``at``.
    recent = [view_of(e) for e in minutes.latest(minutes.scope(project), window, until=at)]
    seen = {m["id"] for m in recent}
    wanted = [r for r in references_of(Minute.from_payload(m) for m in recent) if r not in seen]
    # Only the project's own minutes: a reference never carries another project's text
    # (nor a later minute, which an older store may hold a reference to).
    referenced = [m for m in minutes.by_ids(wanted, project_id=project) if not _after(m, at)] if wanted else []
    seen.update(m["id"] for m in referenced)

    agent_items = _own_memory(minutes, minutes.scope(project, agent), at, agent_limit, seen)
    seen.update(item["id"] for _, item, _ in agent_items)

    # The most relevant among the minutes dated up to ``at`` (a later one takes no
    # place). Counted as retrievals (the evaluator's relevance) only if they are shown: below.
    # Ranked past the ones shown elsewhere, so that the section still holds up to its limit.
    found = minutes.ranked(task, retrieve_limit + len(seen), minutes.scope(project), until=at, touch=False) if task else []
    retrieved = [m for m in found if m["id"] not in seen][:retrieve_limit]

    candidates: dict[str, list[tuple[dict[str, Any], str]]] = {
        # Priority within the section: the newest recent minute first.
        "recent": [(m, render_minute_line(m)) for m in reversed(recent)],
        "referenced": [(m, render_minute_line(m)) for m in referenced],
        "agent": [(item, line) for _, item, line in agent_items],
        "retrieved": [(m, render_minute_line(m)) for m in retrieved],
    }
    header = [f"## Coordination context for {agent} (project {project})"]
    if task:
        header.append(f"Task: {task}")
    used = sum(count(line + "\n") for line in header)
    kept: dict[str, list[tuple[dict[str, Any], str]]] = {name: [] for name in SECTIONS}
    cut: list[dict[str, Any]] = []
    header_fits = used <= budget
    titles = {name: _TITLES[name] + (f" ({agent})" if name == "agent" else "") for name in SECTIONS}
    for name in SECTIONS:
        heading = count("\n### " + titles[name] + "\n")
        for item, line in candidates[name]:
            cost = count(line + "\n") + (0 if kept[name] else heading)
            if header_fits and used + cost <= budget:
                kept[name].append((item, line))
                used += cost
            else:
                cut.append({"section": name, "id": item.get("id"), "tokens": count(line + "\n")})

    def render() -> str:
        lines = list(header) if header_fits else []
        for name in SECTIONS:
            if kept[name]:
                lines.extend(["", f"### {titles[name]}"])
                lines.extend(line for _, line in (reversed(kept[name]) if name == "recent" else kept[name]))
        return "\n".join(lines)

    text = render()
    tokens = count(text)
    # Lines are counted apart; a tokenizer that merges across line breaks may count
    # their join otherwise: then the items of least priority go until the block fits.
    while tokens > budget:
        name = next((n for n in reversed(SECTIONS) if kept[n]), None)
        if name is None:
            header_fits, text = False, ""
            tokens = 0
            break
        item, line = kept[name].pop()
        cut.append({"section": name, "id": item.get("id"), "tokens": count(line + "\n")})
        text = render()
        tokens = count(text)
    kept["recent"].reverse()  # shown oldest first, as the log reads
    shown = [item["id"] for item, _ in kept["retrieved"]]
    if shown:
        records = minutes.store.get_many(shown)
        minutes.store.touch([records[i] for i in shown if i in records], query=task or "")
    sections = {name: [item for item, _ in kept[name]] for name in SECTIONS}
    return ContextWindow(agent, project, task, budget, sections, text, tokens, cut)


__all__ = ["AGENT_LIMIT", "DEFAULT_BUDGET", "RETRIEVE", "SECTIONS", "WINDOW", "ContextWindow", "build_context"]

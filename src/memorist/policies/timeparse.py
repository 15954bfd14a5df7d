"""Time expressions in queries: "last week", "in May", "on 8 May 2023", "3 days ago".

:func:`query_window` turns the first time expression of a query into a window of
time, relative to when the question is asked, so that search can prefer what
happened then. Windows are generous on purpose (people say "last week" of something
nine days ago): a window only adds a ranking, it never hides anything.

"Last March" is the most recent March before the current month (asked in March, the
year before's); "since January" runs from the start of that month until the day of
the question. An expression whose window falls outside the dates Python can hold
("5000 years ago", "31 December 9999") gives no window: the search goes on without one.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta

DAY = 86_400.0

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
# A month name or abbreviation as a whole word: "in marathons" is not March.
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")(?![a-z])\.?"
_UNITS = {"day": 1, "week": 7, "month": 30, "year": 365}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "ten": 10}

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b", re.I), "dmy"),
    (re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I), "mdy"),
    (re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b", re.I), "my"),
    (re.compile(rf"\b(in|during|since|from|of|last)\s+{_MONTH}(?!\s*\d)", re.I), "m"),
    (re.compile(r"\b(?:in|during|of)\s+((?:19|20)\d{2})\b", re.I), "y"),
    (re.compile(r"\b(\d+|a|an|one|two|three|four|five|six|seven|ten)\s+(day|week|month|year)s?\s+ago\b", re.I), "ago"),
    (re.compile(r"\byesterday\b", re.I), "yesterday"),
    (re.compile(r"\b(?:today|tonight|this morning|this afternoon)\b", re.I), "today"),
    (re.compile(r"\b(?:last|past|previous)\s+(week(?:end)?|month|year)\b", re.I), "last"),
    (re.compile(r"\bthis\s+(week(?:end)?|month|year)\b", re.I), "this"),
]

# Every expression above holds one of these words: most queries have none, and one
# search for them is cheaper than trying each expression.
_HINT = re.compile(
    rf"\b(?:ago|yesterday|today|tonight|this|last|past|previous|(?:19|20)\d{{2}}|{_MONTH})", re.I
)


def _ts(moment: datetime) -> float:
    return moment.timestamp()


def _month_window(year: int, month: int) -> tuple[float, float]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return _ts(start), _ts(end)


def query_window(query: str, reference: float) -> tuple[float, float] | None:
    """The time window a query refers to, as ``(start, end)`` epoch seconds, or None.

    ``reference`` is when the question is asked (epoch seconds, UTC).
    """
    if not _HINT.search(query):
        return None
    try:
        ref = datetime.fromtimestamp(reference, UTC)
    except (ValueError, OverflowError, OSError):
        return None  # a moment no date can hold has no "last week"
    day_start = ref.replace(hour=0, minute=0, second=0, microsecond=0)
    for pattern, kind in _PATTERNS:
        match = pattern.search(query)
        if not match:
            continue
        try:
            if kind == "dmy":
                d, m, y = int(match.group(1)), _MONTHS[match.group(2).lower()], int(match.group(3))
                start = datetime(y, m, d, tzinfo=UTC)
                return _ts(start - timedelta(days=1)), _ts(start + timedelta(days=2))
            if kind == "mdy":
                m, d, y = _MONTHS[match.group(1).lower()], int(match.group(2)), int(match.group(3))
                start = datetime(y, m, d, tzinfo=UTC)
                return _ts(start - timedelta(days=1)), _ts(start + timedelta(days=2))
            if kind == "my":
                return _month_window(int(match.group(2)), _MONTHS[match.group(1).lower()])
            if kind == "m":
                word, month = match.group(1).lower(), _MONTHS[match.group(2).lower()]
                # A month not yet reached this year means last year's; "last March"
                # said in March means the March before this one.
                year = ref.year if month < ref.month or (month == ref.month and word != "last") else ref.year - 1
                start, end = _month_window(year, month)
                if word == "since":  # from that month until the day asked
                    return start, _ts(day_start + timedelta(days=1))
                return start, end
            if kind == "y":
                year = int(match.group(1))
                return _ts(datetime(year, 1, 1, tzinfo=UTC)), _ts(datetime(year + 1, 1, 1, tzinfo=UTC))
            if kind == "ago":
                raw = match.group(1).lower()
                n = int(raw) if raw.isdigit() else _NUMBERS[raw]
                days = n * _UNITS[match.group(2).lower()]
                centre = day_start - timedelta(days=days)
                slack = max(1.0, days * 0.5)
                return _ts(centre - timedelta(days=slack)), _ts(centre + timedelta(days=slack + 1))
            if kind == "yesterday":
                return _ts(day_start - timedelta(days=1)), _ts(day_start)
            if kind == "today":
                return _ts(day_start), _ts(day_start + timedelta(days=1))
            unit = match.group(1).lower()
            if kind == "last":
                if unit.startswith("week"):
                    return _ts(day_start - timedelta(days=14)), _ts(day_start + timedelta(days=1))
                if unit == "month":
                    first = day_start.replace(day=1)
                    prev = first - timedelta(days=1)
                    return _ts(prev.replace(day=1)), _ts(first)
                return _ts(datetime(ref.year - 1, 1, 1, tzinfo=UTC)), _ts(datetime(ref.year, 1, 1, tzinfo=UTC))
            if unit.startswith("week"):
                return _ts(day_start - timedelta(days=7)), _ts(day_start + timedelta(days=1))
            if unit == "month":
                return _ts(day_start.replace(day=1)), _ts(day_start + timedelta(days=1))
            return _ts(datetime(ref.year, 1, 1, tzinfo=UTC)), _ts(day_start + timedelta(days=1))
        except (ValueError, KeyError, OverflowError):
            # "31 February" is not a date; "5000 years ago" and "31 December 9999"
            # are dates no datetime holds (OverflowError): no window from this
            # expression, try the next one.
            continue
    return None

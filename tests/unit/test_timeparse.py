"""Time expressions in queries become windows of time (memorist.policies.timeparse).

Windows are generous on purpose (the module's docstring), so these tests check what
a window must contain and what it must clearly leave out, not its exact bounds.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memorist.policies.timeparse import query_window


def at(year: int, month: int, day: int, hour: int = 12, minute: int = 0) -> float:
    return datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()


# A Thursday, mid-afternoon, mid-year.
REF = at(2023, 6, 15, 15, 30)


def window(query: str, reference: float = REF) -> tuple[float, float]:
    found = query_window(query, reference)
    assert found is not None, f"no time window found in {query!r}"
    start, end = found
    assert start < end, f"empty window for {query!r}: {found}"
    return found


def inside(moment: float, win: tuple[float, float]) -> bool:
    return win[0] <= moment < win[1]


def check(query: str, *, contains: list[float], excludes: list[float], reference: float = REF) -> None:
    win = window(query, reference)
    for moment in contains:
        assert inside(moment, win), (
            f"{query!r}: {datetime.fromtimestamp(moment, UTC)} should be inside "
            f"[{datetime.fromtimestamp(win[0], UTC)}, {datetime.fromtimestamp(win[1], UTC)})"
        )
    for moment in excludes:
        assert not inside(moment, win), (
            f"{query!r}: {datetime.fromtimestamp(moment, UTC)} should be outside "
            f"[{datetime.fromtimestamp(win[0], UTC)}, {datetime.fromtimestamp(win[1], UTC)})"
        )


def test_yesterday_is_the_previous_calendar_day() -> None:
    check(
        "What did I eat yesterday?",
        contains=[at(2023, 6, 14, 0, 5), at(2023, 6, 14, 12), at(2023, 6, 14, 23, 50)],
        excludes=[at(2023, 6, 15, 9), at(2023, 6, 12), at(2023, 5, 14)],
    )


def test_today_is_the_reference_day() -> None:
    check(
        "What did Caroline say today?",
        contains=[at(2023, 6, 15, 0, 10), at(2023, 6, 15, 9), at(2023, 6, 15, 15)],
        excludes=[at(2023, 6, 14, 12), at(2023, 6, 16, 12), at(2022, 6, 15, 12)],
    )


def test_last_week_covers_the_past_seven_days_and_a_little_more() -> None:
    # "people say 'last week' of something nine days ago" (module docstring)
    check(
        "What did Caroline say last week?",
        contains=[at(2023, 6, 8), at(2023, 6, 10), at(2023, 6, 12), at(2023, 6, 6)],
        excludes=[at(2023, 5, 15), at(2023, 4, 1), at(2023, 6, 25), at(2022, 6, 10)],
    )


def test_this_week_covers_the_recent_days() -> None:
    check(
        "Anything new this week?",
        contains=[at(2023, 6, 13), at(2023, 6, 15, 10)],
        excludes=[at(2023, 5, 15), at(2023, 6, 25), at(2022, 6, 13)],
    )


def test_last_month_is_the_previous_calendar_month() -> None:
    check(
        "Where did we travel last month?",
        contains=[at(2023, 5, 1, 1), at(2023, 5, 15), at(2023, 5, 31, 22)],
        excludes=[at(2023, 6, 10), at(2023, 4, 20), at(2022, 5, 15)],
    )


def test_last_month_in_january_is_december_of_the_previous_year() -> None:
    check(
        "What did I buy last month?",
        reference=at(2024, 1, 10),
        contains=[at(2023, 12, 1, 1), at(2023, 12, 15), at(2023, 12, 31, 22)],
        excludes=[at(2024, 1, 5), at(2023, 11, 15), at(2024, 12, 15), at(2022, 12, 15)],
    )


def test_last_year_is_the_previous_calendar_year() -> None:
    check(
        "Which books did I read last year?",
        contains=[at(2022, 1, 2), at(2022, 7, 1), at(2022, 12, 30)],
        excludes=[at(2023, 3, 1), at(2021, 7, 1), at(2023, 6, 14)],
    )


def test_in_may_after_may_is_this_years_may() -> None:
    check(
        "What did Melanie paint in May?",
        reference=at(2023, 6, 15),
        contains=[at(2023, 5, 1, 1), at(2023, 5, 10), at(2023, 5, 31, 22)],
        excludes=[at(2022, 5, 10), at(2024, 5, 10), at(2023, 6, 10), at(2023, 4, 20)],
    )


def test_in_may_before_may_is_last_years_may() -> None:
    check(
        "What did Melanie paint in May?",
        reference=at(2023, 3, 15),
        contains=[at(2022, 5, 1, 1), at(2022, 5, 10), at(2022, 5, 31, 22)],
        excludes=[at(2023, 5, 10), at(2021, 5, 10), at(2022, 6, 10)],
    )


def test_in_may_during_may_is_this_years_may() -> None:
    check("What happened in May?", reference=at(2023, 5, 20), contains=[at(2023, 5, 10)], excludes=[at(2022, 5, 10)])


def test_month_names_are_case_insensitive_and_abbreviations_count() -> None:
    check("what happened in MAY?", contains=[at(2023, 5, 10)], excludes=[at(2023, 6, 10)])
    check("what happened in Feb?", contains=[at(2023, 2, 10)], excludes=[at(2023, 6, 10), at(2022, 2, 10)])


def test_in_may_2023_is_that_month_whatever_the_reference() -> None:
    for reference in (REF, at(2025, 1, 1), at(2023, 2, 1)):
        check(
            "What did Caroline do in May 2023?",
            reference=reference,
            contains=[at(2023, 5, 1, 1), at(2023, 5, 20), at(2023, 5, 31, 22)],
            excludes=[at(2023, 6, 2), at(2023, 4, 20), at(2022, 5, 20), at(2024, 5, 20)],
        )


@pytest.mark.parametrize(
    "query",
    [
        "What happened on 8 May 2023?",
        "What happened on 8th May, 2023?",
        "What happened on the 8 of May 2023?",
        "What happened on May 8, 2023?",
        "What happened on May 8th 2023?",
    ],
)
def test_a_full_date_is_that_day_give_or_take_a_day(query: str) -> None:
    check(
        query,
        reference=at(2024, 3, 1),
        contains=[at(2023, 5, 8, 0, 30), at(2023, 5, 8, 13, 56), at(2023, 5, 8, 23, 30)],
        excludes=[at(2023, 5, 20), at(2023, 4, 20), at(2023, 5, 1), at(2022, 5, 8), at(2024, 5, 8)],
    )


def test_in_a_year_is_that_whole_year() -> None:
    check(
        "Where did we go on holiday in 2023?",
        reference=at(2025, 3, 1),
        contains=[at(2023, 1, 1, 1), at(2023, 7, 1), at(2023, 12, 31, 22)],
        excludes=[at(2022, 12, 15), at(2024, 1, 15), at(2025, 2, 1)],
    )


def test_days_ago_is_around_that_day() -> None:
    check(
        "What did I say 3 days ago?",
        contains=[at(2023, 6, 12, 1), at(2023, 6, 12, 12), at(2023, 6, 12, 23)],
        excludes=[at(2023, 6, 1), at(2023, 5, 12), at(2023, 6, 20)],
    )


def test_weeks_ago_in_words_is_around_that_week() -> None:
    check(
        "Who did I meet two weeks ago?",
        contains=[at(2023, 6, 1), at(2023, 5, 30), at(2023, 6, 3)],
        excludes=[at(2023, 6, 15, 10), at(2023, 5, 1), at(2023, 4, 15), at(2022, 6, 1)],
    )


def test_an_expression_is_found_anywhere_in_the_question() -> None:
    check("yesterday, what did I cook", contains=[at(2023, 6, 14)], excludes=[at(2023, 6, 15, 10)])
    check("Remind me what I cooked YESTERDAY", contains=[at(2023, 6, 14)], excludes=[at(2023, 6, 15, 10)])


@pytest.mark.parametrize(
    "query",
    [
        "What is my favourite colour?",
        "Where does Caroline work?",
        "I have 3 dogs and 2 cats",
        "What does Melanie think about maybe painting?",  # "may" inside other words
        "week month year",  # no "last"/"this"/"ago"
        "",
    ],
)
def test_no_time_expression_gives_no_window(query: str) -> None:
    assert query_window(query, REF) is None


def test_an_impossible_date_does_not_crash() -> None:
    found = query_window("What happened on 31 February 2023?", REF)
    # Either no window, or one that is a real span of time around February 2023:
    # never an exception, never a window from another year.
    if found is not None:
        start, end = found
        assert start < end
        assert at(2023, 1, 1) <= start and end <= at(2023, 4, 1)


@pytest.mark.parametrize(
    "query",
    [
        "Did Caroline run in marathons?",
        "Is Melanie interested in novels?",
        "Did she stay in decent shape?",
        "Was he in junior high?",
        "Is Caroline interested in augmented reality?",
    ],
)
def test_a_word_starting_with_a_month_abbreviation_is_not_a_month(query: str) -> None:
    # "in marathons" is not "in March", "in novels" is not "in November": such a
    # query has no time expression, and a window would push that month's memories up.
    found = query_window(query, REF)
    assert found is None, (query, [datetime.fromtimestamp(t, UTC).date().isoformat() for t in found])


def test_windows_follow_the_reference_time() -> None:
    earlier = window("What did Caroline say last week?", at(2023, 5, 10))
    later = window("What did Caroline say last week?", at(2023, 6, 15))
    assert inside(at(2023, 5, 5), earlier) and not inside(at(2023, 5, 5), later)
    assert inside(at(2023, 6, 10), later) and not inside(at(2023, 6, 10), earlier)


@pytest.mark.parametrize(
    "query",
    [
        "What happened 5000 years ago?",
        "The pyramids were built 4500 years ago",
        "what happened 99999999999 days ago",
        "plans for 31 December 9999",
        "on December 31, 9999",
        "January 1, 0001",
        "the 1st of January 1",
    ],
)
def test_a_window_outside_the_dates_python_holds_is_no_window(query: str) -> None:
    """Before, these raised OverflowError, and every search holding them failed."""
    assert query_window(query, REF) is None


@pytest.mark.parametrize("query", ["What did I do today?", "this week", "this year", "in December", "tomorrow, last week"])
def test_a_reference_at_the_end_of_time_does_not_crash(query: str) -> None:
    end_of_time = datetime(9999, 12, 31, 12, tzinfo=UTC).timestamp()
    found = query_window(query, end_of_time)
    assert found is None or found[0] < found[1]


def test_a_reference_no_date_holds_gives_no_window() -> None:
    assert query_window("What did I do today?", 1e20) is None


def test_last_march_said_in_march_is_the_year_befores() -> None:
    """Before, "last March" asked in March 2024 was March 2024, the current month."""
    check(
        "What did we do last March?",
        reference=at(2024, 3, 20),
        contains=[at(2023, 3, 1, 1), at(2023, 3, 15), at(2023, 3, 31, 22)],
        excludes=[at(2024, 3, 10), at(2023, 4, 2), at(2022, 3, 15)],
    )
    # After March, last March is this year's; before it, last year's (as before).
    check("last March", reference=at(2024, 4, 1), contains=[at(2024, 3, 15)], excludes=[at(2023, 3, 15)])
    check("last March", reference=at(2024, 2, 1), contains=[at(2023, 3, 15)], excludes=[at(2024, 3, 15)])
    # "in March" asked in March is still this March.
    check("in March", reference=at(2024, 3, 20), contains=[at(2024, 3, 10)], excludes=[at(2023, 3, 15)])


def test_since_a_month_runs_until_the_question() -> None:
    """Before, "since January" asked in June was January alone."""
    check(
        "What did I read since January?",
        reference=at(2024, 6, 1, 15),
        contains=[at(2024, 1, 1, 1), at(2024, 3, 15), at(2024, 5, 31), at(2024, 6, 1, 14)],
        excludes=[at(2023, 12, 31), at(2024, 6, 3)],
    )
    # A month not reached yet this year: since last year's.
    check("since August", reference=at(2024, 6, 1), contains=[at(2023, 8, 2), at(2024, 2, 1)], excludes=[at(2023, 7, 30)])

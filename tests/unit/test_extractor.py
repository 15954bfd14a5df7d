"""HeuristicExtractor: spec 004's extraction guidelines, deterministically."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from memorist.model import Fact, Message
from memorist.roles.extractor import HeuristicExtractor

WEDNESDAY = datetime(2024, 5, 8, 15, 30, tzinfo=UTC)


def extract(*messages: tuple[str, str], timestamp: datetime | None = None) -> list[Fact]:
    return HeuristicExtractor().extract([Message(role, content) for role, content in messages], timestamp=timestamp)


def texts(*messages: tuple[str, str], timestamp: datetime | None = None) -> list[str]:
    return [fact.text for fact in extract(*messages, timestamp=timestamp)]


def user(content: str, timestamp: datetime | None = None) -> list[str]:
    return texts(("user", content), timestamp=timestamp)


# --- spec 004 and the demo --------------------------------------------------------------------------


def test_spec_004_example_gives_exactly_the_three_facts_in_order():
    facts = extract(
        ("user", "Hi, I'm Alex. I'm a vegetarian and allergic to nuts."),
        ("assistant", "Hello Alex! I'll remember your dietary preferences."),
    )
    assert [f.text for f in facts] == ["Name is Alex", "Is vegetarian", "Allergic to nuts"]
    assert all(f.source_role == "user" for f in facts)


def test_tutoring_example_splits_at_the_em_dash_and_keeps_fractions_verbatim():
    got = user(
        "I get confused when adding fractions with different denominators\u2014please remind me that 1/2 becomes 3/6."
    )
    assert got == [
        "Gets confused when adding fractions with different denominators",
        "Wants to be reminded that 1/2 becomes 3/6",
    ]


def test_tutor_reply_in_the_demo_adds_nothing():
    assert texts(("assistant", "Of course! To add fractions, first give them the same denominator. "
                               "With sixths, 1/2 becomes 3/6. I'll remind you next time.")) == []


# --- first person -> subjectless third person --------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        ("I love hiking", "Loves hiking"),
        ("I live in San Francisco", "Lives in San Francisco"),
        ("I work as a nurse at St. Mary's", "Works as a nurse at St. Mary's"),
        ("My name is John", "Name is John"),
        ("I'm John", "Name is John"),
        ("I am John.", "Name is John"),
        ("call me John", "Name is John"),
        ("My favorite color is blue", "Favorite color is blue"),
        ("My sister lives in Paris", "Sister lives in Paris"),
        ("I have two cats", "Has two cats"),
        ("I don't like coffee", "Does not like coffee"),
        ("I do not eat meat", "Does not eat meat"),
        ("I prefer dark mode in all my applications", "Prefers dark mode in all applications"),
        ("I started learning Python in 2023", "Started learning Python in 2023"),
        ("I'm working on a Python project using FastAPI", "Is working on a Python project using FastAPI"),
        ("I study biology", "Studies biology"),
        ("I watch a lot of anime", "Watches a lot of anime"),
        ("I've been vegetarian since May", "Has been vegetarian since May"),
        ("I was born in 1990", "Was born in 1990"),
        ("I'd like to visit Japan", "Would like to visit Japan"),
        ("I can speak French", "Can speak French"),
        ("I can't eat gluten", "Cannot eat gluten"),
        ("I never drink alcohol", "Never drinks alcohol"),
        ("I no longer have a car", "No longer has a car"),
        ("I'm not a fan of horror movies", "Is not a fan of horror movies"),
        ("I usually wake up at 6am", "Usually wakes up at 6am"),
        ("I live and work in Berlin", "Lives and works in Berlin"),
        ("I live in Berlin, Germany", "Lives in Berlin, Germany"),
        ("Oh, and I have a dog named Rex.", "Has a dog named Rex"),
    ],
)
def test_first_person_becomes_subjectless_third_person(said, fact):
    assert user(said) == [fact]


def test_coordination_sharing_the_subject_is_split():
    assert user("I became vegan and no longer eat pizza") == ["Became vegan", "No longer eats pizza"]
    assert user("I am Alex and I love hiking") == ["Name is Alex", "Loves hiking"]
    assert user("I'm married and have two kids") == ["Is married", "Has two kids"]
    assert user("I really love jazz but hate techno") == ["Really loves jazz", "Hates techno"]
    assert user("I used to live in London but now I live in Berlin") == ["Used to live in London", "Lives in Berlin now"]


def test_noun_lists_are_not_split():
    assert user("I like apples and pears") == ["Likes apples and pears"]
    assert user("I'm allergic to peanuts and shellfish") == ["Allergic to peanuts and shellfish"]
    assert user("I like to read and write") == ["Likes to read and write"]


def test_identity_adjectives_drop_the_article_but_professions_keep_it():
    assert user("I'm a vegetarian") == ["Is vegetarian"]
    assert user("I'm a vegan") == ["Is vegan"]
    assert user("I'm a teacher") == ["Is a teacher"]
    assert user("I'm Italian") == ["Is Italian"]  # a capitalised nationality is not a name


def test_name_with_origin_or_apposition_gives_two_facts():
    assert user("I'm Alex from Berlin") == ["Name is Alex", "Is from Berlin"]
    assert user("I'm Alex, a nurse") == ["Name is Alex", "Is a nurse"]


def test_specificity_is_preserved():
    assert user("I drink oat milk latte every morning") == ["Drinks oat milk latte every morning"]


@pytest.mark.parametrize(
    "said",
    [
        "I prefer dark mode in all my applications",
        "I walk my dog every morning",
        "I get nervous when I speak in public",
        "My sister calls me every Sunday",
        "I taught myself Python",
        "please remind me that my exam is on Friday",
        "I'm learning German because I'm moving to Berlin",
    ],
)
def test_facts_never_keep_first_person_pronouns(said):
    got = user(said)
    assert got
    for fact in got:
        assert not re.search(r"\b(?:I|me|my|myself|mine)\b", fact, re.IGNORECASE), fact


# --- requests to remember -----------------------------------------------------------------------------


def test_remind_me_becomes_wants_to_be_reminded():
    assert user("Please remind me to call mom") == ["Wants to be reminded to call mom"]
    assert user("Can you remind me that my exam is on Friday?") == ["Wants to be reminded that exam is on Friday"]
    assert user("Remind me what 1/2 + 1/3 is") == []  # asks for an answer now, no reminder


def test_remember_that_stores_the_fact_itself():
    assert user("Remember that I'm allergic to nuts") == ["Allergic to nuts"]
    assert user("Don't forget that my birthday is on June 3") == ["Birthday is on June 3"]
    assert user("Note: I'm allergic to shellfish") == ["Allergic to shellfish"]


def test_remind_requests_are_facts_not_preferences():
    (fact,) = extract(("user", "Please remind me that 1/2 becomes 3/6"))
    assert fact.kind == "fact"


# --- questions, small talk, assistant -----------------------------------------------------------------


@pytest.mark.parametrize("question", ["What's 1/2 + 1/3?", "Can you help me?", "Do I need a visa?", "How are you?"])
def test_questions_give_no_fact(question):
    assert user(question) == []


def test_talk_about_the_conversation_is_not_a_fact():
    assert user("I was wondering whether the shop opens at 9") == []
    assert user("I have a question about fractions") == []
    assert user("I'm curious about quantum physics") == ["Is curious about quantum physics"]


def test_a_statement_inside_a_question_is_kept():
    assert user("I'm stuck on fractions, can you help?") == ["Is stuck on fractions"]


@pytest.mark.parametrize(
    "small_talk",
    ["Hi!", "Hello there", "Thanks, I love it!", "Thank you so much!", "I see.", "I agree", "OK", "Sure, sounds good.",
     "I'm fine, thanks", "I need your help", "I was wondering if you could help me?", "I'm so happy today!"],
)
def test_greetings_thanks_and_small_talk_give_nothing(small_talk):
    assert user(small_talk) == []


@pytest.mark.parametrize(
    "reply",
    ["I'll remember that", "Nice to meet you, Alex!", "Great!", "Noted! I'll remember your preference for dark mode.",
     "Great! I'll remember that you're working with Python and FastAPI.", "You're welcome!",
     "You should try the oat milk latte.", "My name is Claude and I love helping."],
)
def test_assistant_acknowledgements_advice_and_self_talk_give_nothing(reply):
    assert texts(("assistant", reply)) == []


def test_assistant_statements_about_the_user_in_second_person_become_facts():
    facts = extract(("assistant", "You mentioned you live in Berlin. Your appointment is on Monday."))
    assert [f.text for f in facts] == ["Lives in Berlin", "Appointment is on Monday"]
    assert all(f.source_role == "assistant" for f in facts)
    assert texts(("assistant", "You're a vegetarian, right?")) == []  # the assistant asks, it does not state
    assert user("I'm a vegetarian, right?") == ["Is vegetarian"]  # the user states, with a tag


def test_system_messages_are_ignored():
    assert texts(("system", "I am a helpful assistant. My name is Bot. The user lives in Paris.")) == []
    assert texts(("system", "I love hiking"), ("user", "I love jazz")) == ["Loves jazz"]


# --- kinds, dedup ---------------------------------------------------------------------------------------


def test_kind_marks_preferences():
    kinds = {f.text: f.kind for f in extract(("user", "I love hiking. I don't like coffee. My favorite color is "
                                                      "blue. I want to learn Spanish. I live in Berlin."))}
    assert kinds == {
        "Loves hiking": "preference",
        "Does not like coffee": "preference",
        "Favorite color is blue": "preference",
        "Wants to learn Spanish": "preference",
        "Lives in Berlin": "fact",
    }


def test_duplicates_within_one_call_are_dropped_case_and_space_insensitive():
    got = texts(("user", "I'm a vegetarian. I'm a  VEGETARIAN!"), ("user", "i'm a vegetarian"),
                ("assistant", "You're a vegetarian."))
    assert got == ["Is vegetarian"]


# --- time ------------------------------------------------------------------------------------------------


def test_temporal_phrases_are_kept_without_a_timestamp():
    assert user("I went to Rome yesterday") == ["Went to Rome yesterday"]
    assert user("Yesterday, I went to Rome") == ["Went to Rome yesterday"]
    assert user("I have a dentist appointment on Monday") == ["Has a dentist appointment on Monday"]


def test_relative_dates_are_resolved_with_a_timestamp():
    got = user("I went to Rome yesterday. I'm flying to Paris tomorrow. I moved here 3 days ago. "
               "Last year I started yoga. I'll be in Lisbon next week. I changed jobs last month. "
               "I have a cold today.", timestamp=WEDNESDAY)
    assert got == [
        "Went to Rome on 2024-05-07",
        "Is flying to Paris on 2024-05-09",
        "Moved here on 2024-05-05",
        "Started yoga in 2023",
        "Will be in Lisbon in the week of 2024-05-13",
        "Changed jobs in April 2024",
        "Has a cold on 2024-05-08",
    ]


def test_dates_use_the_timestamps_own_calendar_day():
    late_evening_in_new_york = datetime(2024, 5, 8, 22, 0, tzinfo=timezone(timedelta(hours=-4)))
    assert user("I went to Rome yesterday", timestamp=late_evening_in_new_york) == ["Went to Rome on 2024-05-07"]


# --- German and other languages -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "facts"),
    [
        ("Ich heiße Anna.", ["Name ist Anna"]),
        ("Ich bin Anna.", ["Name ist Anna"]),
        ("Ich bin Vegetarierin und allergisch gegen Nüsse.", ["Ist Vegetarierin", "Allergisch gegen Nüsse"]),
        ("Ich wohne in Berlin.", ["Wohnt in Berlin"]),
        ("Ich mag Kaffee.", ["Mag Kaffee"]),
        ("Mein Lieblingsessen ist Pizza.", ["Lieblingsessen ist Pizza"]),
        ("Ich arbeite als Lehrerin.", ["Arbeitet als Lehrerin"]),
        ("Ich bin Lehrer.", ["Ist Lehrer"]),
        ("Ich mag Kaffee und Tee.", ["Mag Kaffee und Tee"]),
        ("Ich wohne in Berlin und arbeite als Lehrerin.", ["Wohnt in Berlin", "Arbeitet als Lehrerin"]),
        ("Ich esse gerne Pizza.", ["Isst gerne Pizza"]),
        ("Ich mag keinen Kaffee mehr.", ["Mag keinen Kaffee mehr"]),
        ("Meine Schwester wohnt in Paris.", ["Schwester wohnt in Paris"]),
        ("Seit Mai bin ich Vegetarierin.", ["Ist seit Mai Vegetarierin"]),
        ("Ich interessiere mich für Musik.", ["Interessiert sich für Musik"]),
        ("Hallo, ich bin Peter und wohne in Wien.", ["Name ist Peter", "Wohnt in Wien"]),
        ("Kannst du mir helfen?", []),
        ("Merk dir, dass ich Veganerin bin.", ["Ist Veganerin"]),
    ],
)
def test_german_is_rewritten_in_german(said, facts):
    assert user(said) == facts


def test_german_kinds_dates_and_assistant():
    (coffee,) = extract(("user", "Ich mag Kaffee."))
    assert coffee.kind == "preference"
    assert user("Gestern war ich in Rom.", timestamp=WEDNESDAY) == ["War am 2024-05-07 in Rom"]
    assert texts(("assistant", "Du wohnst in Berlin.")) == ["Wohnt in Berlin"]
    assert texts(("assistant", "Ich merke mir das.")) == []


def test_language_is_detected_per_message():
    got = texts(("user", "Ich wohne in Berlin."), ("user", "I love hiking."))
    assert got == ["Wohnt in Berlin", "Loves hiking"]


def test_unsupported_language_keeps_a_first_person_statement_verbatim():
    assert user("Yo vivo en Madrid.") == ["Vivo en Madrid"]
    assert user("Je suis végétarien?") == []
    assert user("Bonjour tout le monde.") == []


# --- odd input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "   ", "!!!", "?!.,;:", "\U0001f355\U0001f355\U0001f355", "\n\n\n", "```",
                                     "```python\nI love code\nprint('hi')\n```", "\u2014\u2014", "I", "my", "I <3"])
def test_odd_input_gives_nothing_and_never_crashes(content):
    assert user(content) == []


def test_emoji_and_code_blocks_around_a_fact():
    assert user("I love pizza \U0001f355") == ["Loves pizza"]
    assert user("Look:\n```\nx = 1\n```\nI work as a data engineer.") == ["Works as a data engineer"]


def test_very_long_input_returns_a_list_and_still_finds_the_facts():
    prose = "".join(f"The report on page {i} lists the quarterly numbers for region {i % 7}. " for i in range(1600))
    long_text = "I love hiking. " + prose + "I live in Berlin. " * 100  # ~100 kB
    assert len(long_text) > 100_000
    assert user(long_text) == ["Loves hiking", "Lives in Berlin"]


@pytest.mark.parametrize("pathological", ["a, " * 33000, "I like " + "and " * 25000, "St. " * 25000,
                                          "(" * 100_000, "I'm " * 25000, "- " * 50000, "x" * 100_000])
def test_pathological_long_input_gives_nothing(pathological):
    assert user(pathological) == []

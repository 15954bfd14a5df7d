"""The chat page in a real browser (Debian's Chromium driven by Playwright): the
"Long Term Memory" setting survives a reload and reaches the backend, the memory
indicator, the drawer listing what the conversation added, delete and search,
keyboard access, and no request leaving the chat's own origin.

Without ``/usr/bin/chromium`` the tests skip locally and fail when ``CI`` is set."""

from __future__ import annotations

import contextlib
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
    pg.on("request", lambda req: None if req.url.startswith((url, "data:", "blob:" + url)) else foreign.append(req.url))
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
    expect(drawer.get_by_role("status")).to_have_text("Deleted “Likes chess”. 2 memories, newest first.")
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
    expect(page.locator(".message.user")).to_have_count(1)  # sent from the keyboard
    # The reply: on a loaded two-core machine the turn (extraction, the store's commit)
    # has taken over the default 5 s; a refused turn shows its error and fails here too.
    expect(page.locator(".message.assistant, #chat-error:not([hidden])").first).to_be_visible(timeout=20_000)
    expect(page.locator("#chat-error")).to_be_hidden()
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
    with page.expect_response(lambda r: r.url.endswith("/api/ai/chat")) as answered:
        _send(page, "How do I add fractions with different denominators?")
    used = answered.value.json()["metadata"]["scratch"]["injected_ids"]
    assert used  # the bullet the first message taught
    helpful = outcome.get_by_role("button", name="Helpful", exact=True)
    not_helpful = outcome.get_by_role("button", name="Not helpful")
    not_helpful.click()
    expect(not_helpful).to_have_attribute("aria-pressed", "true")
    helpful.focus()
    page.keyboard.press("Space")  # one mark at a time, from the keyboard too
    expect(helpful).to_have_attribute("aria-pressed", "true")
    expect(not_helpful).to_have_attribute("aria-pressed", "false")

    with page.expect_response(lambda r: r.url.endswith("/api/ai/chat")) as answered:
        sent = _send(page, "Thanks!")
    assert sent["outcome"] == "success"
    # The mark counts for the bullets the marked answer used, not the next message's.
    mark = answered.value.json()["metadata"]["outcome"]
    assert mark["applied"] and mark["bullets"] == used and mark["ace_delta"]["num_updates"] == 1
    expect(helpful).to_have_attribute("aria-pressed", "false")  # a mark goes with one message only
    assert "outcome" not in _send(page, "One more question: what is 1/2 + 1/3?")
    page.get_by_role("button", name="New conversation").click()
    expect(outcome).to_be_hidden()
    assert not refused, refused


def _hold_chat(page) -> list:
    """Hold every chat request until the test lets it go (route.continue_())."""
    held: list = []
    page.route("**/api/ai/chat", lambda route: held.append(route))
    return held


def _wait_for(page, held: list, n: int = 1) -> None:
    for _ in range(200):
        if len(held) >= n:
            return
        page.wait_for_timeout(25)
    raise AssertionError("the chat request never came")


def test_new_conversation_drops_a_reply_still_on_its_way(page, chat):
    """Before, the late reply landed in the cleared conversation, and the next message
    went with the old conversation id and history."""
    url, keys, _ = chat
    _login(page, url, keys.alice)
    _send(page, "Explain fractions")
    held = _hold_chat(page)
    page.get_by_label("Your message").fill("Explain decimals")
    page.get_by_label("Your message").press("Enter")
    _wait_for(page, held)
    page.get_by_role("button", name="New conversation").click()
    expect(page.locator(".message")).to_have_count(0)
    expect(page.get_by_label("Your message")).to_be_focused()
    late = {"response": "A LATE REPLY", "conversationId": "the-old-one", "metadata": {}}
    with contextlib.suppress(Exception):  # the page aborted it: dropped either way
        held[0].fulfill(status=200, json=late)
    page.wait_for_timeout(300)
    expect(page.locator(".message")).to_have_count(0)
    expect(page.get_by_text("A LATE REPLY")).to_have_count(0)
    expect(page.get_by_role("group", name="Did my last answer help?")).to_be_hidden()
    page.unroute("**/api/ai/chat")
    sent = _send(page, "Explain percentages")
    assert sent["conversationId"] is None and sent["conversationHistory"] == []
    expect(page.locator(".message")).to_have_count(2)


def test_a_new_key_is_a_new_user_with_a_new_conversation(page, chat):
    """Before, the conversation went on under the new key: its id was refused (404)
    until "New conversation", and the first user's messages were sent as the second's."""
    url, keys, _ = chat
    _login(page, url, keys.alice)
    page.evaluate("localStorage.setItem('memorist.chat.memoryEnabled', 'true')")
    page.reload()
    first = _send(page, "What is 6 times 7?")
    assert first["conversationId"] is None
    _send(page, "And 6 times 8?")
    page.get_by_role("button", name="Agent Memory Enabled").click()
    drawer = page.get_by_role("dialog", name="Project Long Term Memory")
    expect(drawer.locator(".memory-text", has_text="Likes chess")).to_have_count(1)
    drawer.get_by_role("button", name="Close").click()

    page.get_by_role("button", name="Settings").click()
    page.get_by_label("API key").fill(keys.bob)
    page.get_by_label("API key").press("Enter")  # Enter in the field is Done too
    expect(page.get_by_role("dialog", name="Settings")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('memorist.chat.apiKey')") == keys.bob
    expect(page.locator(".message")).to_have_count(0)
    with page.expect_response(lambda r: r.url.endswith("/api/ai/chat")) as answered:
        sent = _send(page, "What is 2 plus 3?")
    assert answered.value.status == 200
    assert sent["conversationId"] is None and sent["conversationHistory"] == []
    expect(page.locator("#chat-error")).to_be_hidden()
    # The drawer holds bob's memories, not alice's.
    page.get_by_role("button", name="Agent Memory Enabled").click()
    expect(drawer.get_by_role("status")).not_to_have_text("Loading…")
    expect(drawer.locator(".memory-text", has_text="Likes chess")).to_have_count(0)


def test_a_reply_leaves_the_focus_in_the_open_drawer(page, chat):
    """Before, a reply arriving while the drawer (a modal) was open moved the focus to
    the message box behind it."""
    url, keys, _ = chat
    _login(page, url, keys.alice)
    page.evaluate("localStorage.setItem('memorist.chat.memoryEnabled', 'true')")
    page.reload()
    held = _hold_chat(page)
    page.get_by_label("Your message").fill("Explain decimals")
    page.get_by_label("Your message").press("Enter")
    _wait_for(page, held)
    page.get_by_role("button", name="Agent Memory Enabled").click()
    drawer = page.get_by_role("dialog", name="Project Long Term Memory")
    close = drawer.get_by_role("button", name="Close")
    expect(close).to_be_focused()
    held[0].continue_()
    expect(page.locator(".message.assistant")).to_have_count(1)
    page.wait_for_timeout(200)
    expect(close).to_be_focused()
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    expect(page.get_by_role("button", name="Agent Memory Enabled")).to_be_focused()


def test_a_message_that_was_not_sent_goes_back_to_the_box(page, chat):
    """Before, a refused message (401, 429, the service out of reach) stayed in the
    conversation as if sent, the box was emptied, and the next message's history left
    it out."""
    url, keys, _ = chat
    page.goto(url + "/")
    box = page.get_by_label("Your message")
    error = page.locator("#chat-error")
    question = "A long question I typed carefully: what is 17 times 23?"
    with page.expect_response(lambda r: r.url.endswith("/api/ai/chat")) as answered:
        box.fill(question)
        box.press("Enter")
    assert answered.value.status == 401  # the chat has keys; none is set
    expect(error).to_be_visible()
    expect(error).to_contain_text("needs an API key")
    expect(error).to_contain_text("Settings")
    expect(page.locator(".message")).to_have_count(0)
    expect(box).to_have_value(question)
    expect(box).to_be_focused()

    # A refused key says so.
    page.evaluate("sessionStorage.setItem('memorist.chat.apiKey', 'ek_wrong')")
    with page.expect_response(lambda r: r.url.endswith("/api/ai/chat")):
        box.press("Enter")
    expect(error).to_contain_text("refused the API key")
    expect(error).to_contain_text("unknown or revoked")
    expect(box).to_have_value(question)

    # A rate limit, and the service out of reach, the same.
    page.evaluate(f"sessionStorage.setItem('memorist.chat.apiKey', {keys.alice!r})")
    page.route("**/api/ai/chat", lambda route: route.fulfill(
        status=429, headers={"Retry-After": "3"},
        json={"error": {"type": "rate_limited", "message": "too many requests for this user; retry in 3.0 s", "field": None}}))
    box.press("Enter")
    expect(error).to_contain_text("retry in 3.0 s")
    expect(page.locator(".message")).to_have_count(0)
    expect(box).to_have_value(question)
    page.unroute("**/api/ai/chat")
    page.route("**/api/ai/chat", lambda route: route.abort())
    box.press("Enter")
    expect(error).to_contain_text("could not be reached")
    expect(page.locator(".message")).to_have_count(0)
    expect(box).to_have_value(question)
    page.unroute("**/api/ai/chat")

    # Sent at last: the view and the history hold it once.
    with page.expect_request(lambda r: r.url.endswith("/api/ai/chat")) as req:
        box.press("Enter")
    expect(page.locator(".message.assistant")).to_have_count(1)
    expect(error).to_be_hidden()
    assert json.loads(req.value.post_data)["conversationHistory"] == []
    expect(page.locator(".message.user")).to_have_count(1)
    sent = _send(page, "and 2 plus 2?")
    assert [m["content"] for m in sent["conversationHistory"]][:1] == [question]
    assert len(sent["conversationHistory"]) == 2


def test_the_drawer_says_when_there_are_more_and_counts_after_a_delete(page, chat):
    """Before, the drawer showed the newest 100 and said "100 memories", kept that
    count after a delete, and named each delete button with the whole memory."""
    url, keys, memory = chat
    long_text = "A very long memory " + "about fractions " * 500
    now = time.time()
    with Memory(memory.db, embedder="hashing", tenant_id="school") as m:
        for i in range(104):
            m.add(f"Fact number {i:03d}", user_id="school/alice", agent_id="chat", infer=False, timestamp=now - 3600 + i)
        m.add(long_text, user_id="school/alice", agent_id="chat", infer=False, timestamp=now)
    _login(page, url, keys.alice)
    page.evaluate("localStorage.setItem('memorist.chat.memoryEnabled', 'true')")
    page.reload()
    with page.expect_response(lambda r: "/api/ai/memories" in r.url) as listed:
        page.get_by_role("button", name="Agent Memory Enabled").click()
    assert listed.value.json()["more"] is True
    drawer = page.get_by_role("dialog", name="Project Long Term Memory")
    status = drawer.get_by_role("status")
    items = drawer.locator(".memory")
    expect(items).to_have_count(100)
    expect(status).to_have_text("The newest 100 memories; there are more.")
    more = drawer.get_by_role("button", name="Show more")
    expect(more).to_be_visible()

    # The delete buttons' names are short.
    labels = drawer.locator(".delete").evaluate_all("bs => bs.map(b => b.getAttribute('aria-label'))")
    assert max(len(label) for label in labels) <= len("Delete memory: ") + 60
    first = drawer.locator(".delete").first
    assert first.get_attribute("aria-label") == "Delete memory: " + long_text[:59] + "…"
    first.click()
    expect(status).to_have_text("Deleted “" + long_text[:59] + "…”. The newest 99 memories; there are more.")
    expect(items).to_have_count(99)

    more.click()
    expect(items).to_have_count(105)  # 104 facts and "Likes chess"
    expect(status).to_have_text("105 memories, newest first.")
    expect(more).to_be_hidden()
    expect(items.nth(99).locator(".delete")).to_be_focused()  # the first the click brought
    expect(items.last.locator(".memory-text")).to_have_text("Likes chess")


def test_the_chats_api_docs_load_nothing_from_elsewhere(page, chat):
    """Before, /redoc tried to load ReDoc's logo from its CDN (refused by the policy,
    a broken image). The page fixture fails on any request to another origin."""
    url = chat[0]
    refused: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.goto(url + "/docs")
    expect(page.get_by_text("/api/ai/chat").first).to_be_visible()
    page.goto(url + "/redoc")
    expect(page.get_by_text("API docs by Redocly")).to_be_visible()
    page.wait_for_timeout(300)
    assert not refused, refused
    assert "cdn.redoc.ly" not in page.request.get(url + "/docs-assets/redoc.standalone.js").text()


def test_a_reply_longer_than_a_history_message_does_not_break_the_conversation(page, chat):
    """Before, a model's reply over 10,000 characters went back whole in the history,
    and the chat refused every later message of the conversation (422)."""
    url, keys, _ = chat
    _login(page, url, keys.alice)
    long = "x" * 9_998 + "\U0001F600" + "y" * 2_000  # an emoji astride the cut: never half of it
    page.route("**/api/ai/chat", lambda route: route.fulfill(
        status=200, json={"response": long, "conversationId": "c-long", "metadata": {}}))
    _send(page, "Explain fractions at length")
    page.unroute("**/api/ai/chat")
    sent = _send(page, "Help me multiply 12 by 5.")
    history = sent["conversationHistory"]
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert len(history[1]["content"]) <= 10_000 and history[1]["content"].endswith("…")
    assert history[1]["content"].startswith("x" * 9_998) and "\ud83d" not in history[1]["content"]
    expect(page.locator(".message.assistant").last).to_contain_text("12 * 5 = 60")
    expect(page.locator("#chat-error")).to_be_hidden()

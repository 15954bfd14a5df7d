"""The memory panel with awkward data, in a real browser (Debian's Chromium driven by
Playwright, the ``browser`` fixture of tests/surfaces): long ids and metadata keys,
right-to-left text and direction controls, a long memory in the delete dialog, paging by
keyboard, a key no header can carry, validation errors, and how the panel's files are
cached.

The service is the real app served by uvicorn in a background thread on a free port
(``client_live.live_server``),
over a throwaway store seeded through ``Memory``. Without ``/usr/bin/chromium`` the
tests skip locally and fail when ``CI`` is set.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import quote

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from memorist import Memory  # noqa: E402
from surfaces.client.client_live import live_server  # noqa: E402

try:
    from playwright.sync_api import expect
except ImportError:  # the dev extra is missing: the browser fixture says so
    expect = None

HOUR = 3600.0
LONG_ID = "U" * 250                        # user ids may have up to 256 characters
LONG_KEY = "K" * 200                       # a metadata key as long
OVERRIDE_ID = "\u202egnp.exe"              # RIGHT-TO-LEFT OVERRIDE, then "gnp.exe"
ARABIC = "يحب المستخدم القهوة (بدون سكر)، ويعمل في Google منذ 2020."
ARABIC_KEY, ARABIC_VALUE = "ملاحظة", "مهم جدا!"
BIG = 250                                  # memories of "big": two pages and a half
HUGE = "word " * 19_999                    # just under the 100,000 characters a memory may have


def _seed(db: str) -> None:
    now = time.time()
    with Memory(db, embedder="hashing") as m:
        m.add("Allergic to nuts", user_id="alex", infer=False, timestamp=now - 2 * HOUR, metadata={"source": "chat"})
        m.add(ARABIC, user_id="alex", infer=False, timestamp=now - HOUR, metadata={ARABIC_KEY: ARABIC_VALUE})
        m.add("A memory with a long metadata key", user_id="meta", infer=False,
              metadata={LONG_KEY: "v", "link": "https://example.com/" + "K" * 200})
        m.add("The memory of a long user id", user_id=LONG_ID, infer=False)
        m.add("bidi user " + OVERRIDE_ID, user_id=OVERRIDE_ID, infer=False, metadata={"file": OVERRIDE_ID})
        m.add(HUGE, user_id="huge", infer=False)
        for i in range(BIG):
            m.add(f"bulk memory number {i}", user_id="big", infer=False, timestamp=now - (BIG - i))


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The service's URL, over one seeded store for the module (no test writes to it)."""
    db = str(tmp_path_factory.mktemp("panel-fixes") / "panel.db")
    _seed(db)
    with live_server(db) as server:
        yield server.url


def _page(browser, width: int = 1000, height: int = 900):  # noqa: F811
    context = browser.new_context(viewport={"width": width, "height": height})
    pg = context.new_page()
    pg.errors = []
    pg.on("pageerror", lambda exc: pg.errors.append(str(exc)))
    pg.set_default_timeout(10_000)
    return pg


@pytest.fixture
def page(browser) -> Iterator[object]:  # noqa: F811
    pg = _page(browser)
    yield pg
    pg.context.close()
    assert not pg.errors, f"the page raised: {pg.errors}"


def _open(page, url: str, user: str) -> None:
    page.goto(f"{url}/#user={quote(user, safe='')}")
    # (A new hash on the same page opens the user at its hashchange event.)
    expect(page.locator("#memories-heading")).to_contain_text(user)
    expect(page.locator("#memory-list")).not_to_have_attribute("aria-busy", "true")


# Where a piece of an element's text is drawn: the box of the characters from the
# first occurrence of `piece`, over the element's text nodes (one or several).
_RECT_OF = """([node, piece]) => {
  const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
  const texts = [];
  let all = "";
  while (walker.nextNode()) { texts.push([walker.currentNode, all.length]); all += walker.currentNode.data; }
  const start = all.indexOf(piece);
  if (start < 0) return null;
  const end = start + piece.length;
  const range = document.createRange();
  for (const [text, offset] of texts) {
    if (start >= offset && start <= offset + text.length) range.setStart(text, start - offset);
    if (end >= offset && end <= offset + text.length) { range.setEnd(text, end - offset); break; }
  }
  const r = range.getBoundingClientRect();
  return {left: r.left, right: r.right};
}"""


def _rect_of(locator, piece: str) -> dict[str, float]:
    rect = locator.evaluate(f"(node, piece) => ({_RECT_OF})([node, piece])", piece)
    assert rect, piece
    return rect


def _within_viewport(page) -> None:
    """Nothing scrolls sideways, and every control a user needs is on screen."""
    width = page.viewport_size["width"]
    sizes = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert sizes[0] <= sizes[1], f"the page is {sizes[0]} px wide in a {sizes[1]} px viewport"
    for selector in ("#project", "#memories-heading", "#status", "li.memory .card", "li.memory button.delete", ".chip"):
        for box in (page.locator(selector).nth(i).bounding_box() for i in range(page.locator(selector).count())):
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, (selector, box, width)


# 1 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [390, 1000])
def test_long_ids_keys_and_queries_keep_the_page_and_its_delete_buttons_in_the_viewport(browser, service: str, width: int) -> None:  # noqa: F811
    """Before, one 250-character user id in the store made the picker 3,000 px wide on
    every project's page, and a long metadata key pushed the card's Delete button to
    x ≈ 2,050 px."""
    page = _page(browser, width=width)
    try:
        for user in ("alex", LONG_ID, "meta"):
            _open(page, service, user)
            expect(page.locator("li.memory")).not_to_have_count(0)
            _within_viewport(page)
        page.get_by_role("searchbox", name="Search memories").fill("Q" * 300)
        page.get_by_role("searchbox", name="Search memories").press("Enter")
        expect(page.locator("#memories-heading")).to_contain_text("Search results for")
        expect(page.locator("#memory-list")).not_to_have_attribute("aria-busy", "true")
        _within_viewport(page)
        # The picker shows a long id cut short, and the whole id in the option's title.
        option = page.locator("#project option").filter(has_text="UUUU")
        expect(option).to_have_text("U" * 59 + "… (1 memory)")
        expect(option).to_have_attribute("title", LONG_ID)
        expect(option).to_have_attribute("value", LONG_ID)
        assert not page.errors, page.errors
    finally:
        page.context.close()


# 2 ----------------------------------------------------------------------------------
def test_show_more_keeps_the_keyboard_focus(page, service: str) -> None:
    """Before, "Show more" hid itself while loading: the focus fell to <body> and the
    next Tab went to the footer, past the memories just loaded."""
    _open(page, service, "big")
    items = page.locator("li.memory")
    expect(items).to_have_count(100)
    more = page.get_by_role("button", name="Show more")
    more.focus()
    page.keyboard.press("Enter")
    expect(items).to_have_count(200)
    expect(page.locator("#memory-list")).not_to_have_attribute("aria-busy", "true")
    # More to come: the button stays, and keeps the focus.
    expect(more).to_be_visible()
    expect(more).to_be_focused()
    expect(more).not_to_have_attribute("aria-disabled", "true")
    page.keyboard.press("Enter")
    expect(items).to_have_count(BIG)
    expect(more).to_be_hidden()
    # The last page: the focus goes to the first memory just loaded, and Tab goes on from there.
    first_new = items.nth(200)
    expect(first_new.locator(".text")).to_have_text("bulk memory number 49")
    expect(first_new.locator("button.delete")).to_be_focused()
    page.keyboard.press("Tab")
    expect(items.nth(201).locator("button.delete")).to_be_focused()


# 3 ----------------------------------------------------------------------------------
def test_a_key_a_header_cannot_carry_is_reported_as_a_bad_key(page, service: str) -> None:
    """Before, fetch refused the key ("…" is outside ISO-8859-1) and the panel said the
    service "could not be reached", with the key shown as set."""
    sent: list[str | None] = []
    page.on("request", lambda r: sent.append(r.headers.get("authorization")) if "/api/" in r.url else None)
    _open(page, service, "alex")
    key = page.get_by_label("API key")
    key.fill("ek_abc…")
    key.press("Enter")
    expect(key).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#key-state")).to_contain_text("“…” (U+2026), a character an HTTP header cannot carry")
    expect(page.locator("#status")).to_contain_text("The key was not used")
    expect(page.locator("#error")).to_be_hidden()
    expect(page.get_by_text("could not be reached")).to_have_count(0)
    assert page.evaluate("sessionStorage.getItem('memorist.apiKey')") is None
    assert all(s is None for s in sent), sent
    # A zero-width space picked up with a copied key is dropped, and the key is used.
    key.fill("ek_abc\u200b")
    key.press("Enter")
    expect(key).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#key-state")).to_contain_text("A key is set for this tab")
    assert page.evaluate("sessionStorage.getItem('memorist.apiKey')") == "ek_abc"
    expect(page.locator("li.memory")).to_have_count(2)
    assert "Bearer ek_abc" in sent


def test_a_stored_key_a_header_cannot_carry_is_reported_as_a_bad_key(page, service: str) -> None:
    """A key kept in the tab's storage that fetch cannot send: the lists say the key is
    bad, and the key field is marked invalid."""
    page.add_init_script("sessionStorage.setItem('memorist.apiKey', 'ek_abc\\u2026')")
    _open(page, service, "alex")
    alert = page.locator("#error")
    expect(alert).to_contain_text("Could not load the memories: The API key holds “…” (U+2026), a character an HTTP header cannot carry")
    expect(alert).not_to_contain_text("could not be reached")
    expect(page.get_by_label("API key")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#project-state")).to_contain_text("a character an HTTP header cannot carry")
    expect(alert.get_by_role("button", name="Change the API key")).to_be_visible()


# 4 ----------------------------------------------------------------------------------
def test_validation_errors_name_the_field(page, service: str) -> None:
    """Before, a 422 showed the API's message without the field it is about: "string
    should have at most 256 characters" said nothing of which input was wrong."""
    _open(page, service, "x" * 257)
    expect(page.locator("#error-message")).to_have_text(
        "Could not load the memories: user_id: string should have at most 256 characters (HTTP 422)")
    _open(page, service, "alex")
    expect(page.locator("li.memory")).to_have_count(2)
    page.get_by_role("searchbox", name="Search memories").fill("q" * 100_001)
    page.get_by_role("searchbox", name="Search memories").press("Enter")
    expect(page.locator("#error-message")).to_have_text(
        "Search failed: query: is 100,001 characters; the limit is 100,000 (HTTP 422)")


# 5 ----------------------------------------------------------------------------------
def _direction(locator) -> str:
    return locator.evaluate("n => getComputedStyle(n).direction")


def test_user_text_takes_its_own_direction_and_cannot_reorder_the_panels_words(page, service: str) -> None:
    """Before, an Arabic memory was laid out left to right (its full stop at the wrong
    end), and a RIGHT-TO-LEFT OVERRIDE in a user id or a query reversed the panel's own
    words around it ("Memories of tsrif tsewen ,exe.png")."""
    _open(page, service, "alex")
    arabic = page.locator("li.memory").filter(has=page.locator(".text", has_text="القهوة"))
    expect(arabic.locator(".text")).to_have_text(ARABIC)
    assert _direction(arabic.locator(".text")) == "rtl"
    assert _direction(arabic.locator(".chip dt")) == "rtl"
    assert _direction(arabic.locator(".chip dd")) == "rtl"
    # The full stop ends the sentence: at its left end.
    whole = _rect_of(arabic.locator(".text"), ARABIC)
    assert _rect_of(arabic.locator(".text"), ".")["left"] <= whole["left"] + 1, whole
    english = page.locator("li.memory .text", has_text="Allergic")
    assert _direction(english) == "ltr"
    # The delete dialog quotes it right to left too.
    arabic.locator("button.delete").click()
    assert _direction(page.locator("#confirm-memory")) == "rtl"
    page.get_by_role("dialog").get_by_role("button", name="Cancel").click()

    # A direction control in a user id reorders the id only, not "newest first".
    _open(page, service, OVERRIDE_ID)
    heading = page.locator("#memories-heading")
    expect(heading).to_have_text(f"Memories of {OVERRIDE_ID}, newest first")
    words, user, tail = (_rect_of(heading, piece) for piece in ("Memories of", OVERRIDE_ID, ", newest first"))
    assert words["right"] <= user["left"] + 1 and user["right"] <= tail["left"] + 1, (words, user, tail)
    chip = page.locator("li.memory .chip dd")
    expect(chip).to_have_text(OVERRIDE_ID)
    # In the picker, the id is isolated from the count after it.
    option = page.locator(f"#project option[value='{OVERRIDE_ID}']")
    expect(option).to_have_attribute("dir", "auto")
    assert option.text_content() == f"\u2068{OVERRIDE_ID}\u2069 (1 memory)"

    # The same in a query: the heading, and the status line.
    query = "\u202ebidi"
    page.get_by_role("searchbox", name="Search memories").fill(query)
    page.get_by_role("searchbox", name="Search memories").press("Enter")
    expect(heading).to_have_text(f"Search results for “{query}” in {OVERRIDE_ID}")
    words, asked, tail = (_rect_of(heading, piece) for piece in ("Search results for “", query, "” in"))
    assert words["right"] <= asked["left"] + 1 and asked["right"] <= tail["left"] + 1, (words, asked, tail)
    status = page.locator("#status")
    expect(status).to_have_text(f"1 memory found for “{query}”.")
    found, asked, tail = (_rect_of(status, piece) for piece in ("1 memory found for “", query, "”."))
    assert found["right"] <= asked["left"] + 1 and asked["right"] <= tail["left"] + 1, (found, asked, tail)
    # Text stays text: the only elements are the <bdi> around the user's pieces.
    assert heading.evaluate("h => [...h.querySelectorAll('*')].map(n => n.tagName)") == ["BDI", "BDI"]


# 6 ----------------------------------------------------------------------------------
def test_the_delete_dialog_of_a_long_memory_keeps_its_question_and_buttons_in_view(browser, service: str) -> None:  # noqa: F811
    """Before, the dialog of a 100,000-character memory was one long scroll: the
    autofocused Cancel scrolled it to its end, and the question went out of view."""
    page = _page(browser, width=1000, height=700)
    try:
        _open(page, service, "huge")
        page.locator("li.memory button.delete").click()
        dialog = page.get_by_role("dialog", name="Delete this memory?")
        expect(dialog).to_be_visible()
        expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
        view = page.evaluate("[innerWidth, innerHeight]")
        box = dialog.bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= view[1], box
        for part in (dialog.get_by_role("heading", name="Delete this memory?"), page.locator("#confirm-question"),
                     dialog.get_by_role("button", name="Cancel"), dialog.get_by_role("button", name="Delete", exact=True)):
            # Drawn where it is, not scrolled out of the dialog: the point at its centre is it.
            assert part.evaluate(
                "n => { const r = n.getBoundingClientRect();"
                " return n.contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2)); }"
            ), part
        # The memory scrolls inside its quote, which the keyboard can reach.
        quote = page.locator("#confirm-memory")
        assert quote.evaluate("q => q.scrollHeight > q.clientHeight")
        expect(quote).to_have_attribute("tabindex", "0")
        assert not page.errors, page.errors
    finally:
        page.context.close()


# 7 ----------------------------------------------------------------------------------
def test_the_panel_and_its_files_are_revalidated_with_their_etag(page, service: str) -> None:
    """Before, the panel's files had an ETag but no Cache-Control: Chromium reused them
    from its cache without asking, so an upgraded service could meet an older app.js."""
    for path in ("/", "/static/app.js", "/static/style.css"):
        first = page.request.get(service + path)
        assert first.status == 200, path
        assert first.headers.get("cache-control") == "no-cache", (path, first.headers)
        etag = first.headers.get("etag")
        assert etag, path
        # The policy is untouched.
        assert "script-src 'self';" in first.headers["content-security-policy"]
        again = page.request.get(service + path, headers={"If-None-Match": etag})
        assert again.status == 304, path
        assert again.headers.get("cache-control") == "no-cache" and again.headers.get("etag") == etag, path
        assert again.body() == b""
    # In the browser: a second visit asks the service again (a 304), nothing is reused unasked.
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    reused: list[str] = []
    asked: list[tuple[str, int]] = []
    cdp.on("Network.requestServedFromCache", lambda e: reused.append(e["requestId"]))
    cdp.on("Network.responseReceived",
           lambda e: asked.append((e["response"]["url"], e["response"]["status"])) if "/static/" in e["response"]["url"] else None)
    _open(page, service, "alex")
    page.goto("about:blank")
    asked.clear()
    _open(page, service, "alex")
    page.wait_for_timeout(200)
    assert not reused, reused
    assert sorted(url.rsplit("/", 1)[-1] for url, _ in asked) == ["app.js", "style.css"], asked


def test_the_api_key_schemes_read_a_memorist_api_key() -> None:
    """The security schemes' descriptions, shown in Swagger UI's Authorize dialog."""
    from memorist.server import deps

    descriptions = [deps._bearer.model.description, deps._api_key.model.description]
    assert all(d.startswith("A Memorist API key") for d in descriptions), descriptions

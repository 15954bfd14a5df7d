"""The memory panel in a real browser: Debian's Chromium driven by Playwright.

The service is the real app (``memorist.server.app.create_app``) served by uvicorn in a
background thread on a free port, over a throwaway store seeded through ``Memory``
with distinct timestamps. Each test gets its own store and its own browser context.

Without ``/usr/bin/chromium`` the tests skip locally and fail when ``CI`` is set
(CI installs it). A screenshot of the panel is kept in ``$MEMORIST_TEST_ARTIFACTS``
(default ``<repo>/.artifacts/``) as ``panel.png``.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from memorist import Memory  # noqa: E402
from surfaces.client.client_live import live_server  # noqa: E402

try:
    from playwright.sync_api import expect
except ImportError:  # the dev extra is missing: the browser fixture says so
    expect = None

REPO = Path(__file__).resolve().parents[3]
HOUR = 3600.0

# Seeded out of time order, so "newest first" is the timestamps' order, not the inserts'.
ALEX = [
    ("Allergic to nuts", 2, {"session_id": "s2", "source": "chat"}),
    ("Is vegetarian", 4, {"session_id": "s1", "source": "chat"}),
    ("Started learning Python in 2023", 1, {"session_id": "s3", "source": "chat"}),
    ("Prefers <b>dark</b> mode & short answers", 3, {"session_id": "s2", "tags": ["ui", "tone"]}),
]
NEWEST_FIRST = [text for text, _, _ in sorted(ALEX, key=lambda row: row[1])]
SAM = [("Likes green tea", 5, {"source": "chat"})]

ERROR_500 = {"error": {"type": "internal", "message": "Internal server error (test)", "field": None}}



@dataclass
class Service:
    url: str
    db: str
    tenant_id: str = ""

    def store_texts(self, user_id: str) -> list[str]:
        with Memory(self.db, embedder="hashing", tenant_id=self.tenant_id) as m:
            return [item["memory"] for item in m.get_all(user_id=user_id)["results"]]


def _seed(db: str, tenant_id: str = "") -> None:
    now = time.time()
    with Memory(db, embedder="hashing", tenant_id=tenant_id) as m:
        for user, rows in (("alex", ALEX), ("sam", SAM)):
            for text, hours_ago, meta in rows:
                m.add(text, user_id=user, infer=False, timestamp=now - hours_ago * HOUR, metadata=meta)


@contextlib.contextmanager
def _serve(db: str, tenant_id: str = "") -> Iterator[Service]:
    with live_server(db) as server:
        yield Service(server.url, db, tenant_id)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    db = str(tmp_path / "panel.db")
    _seed(db)
    with _serve(db) as s:
        yield s


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.set_default_timeout(10_000)
    yield pg
    context.close()
    assert not errors, f"the page raised: {errors}"


def _open(page, service: Service, user: str = "alex") -> None:
    page.goto(f"{service.url}/#user={user}")


def _item(page, text: str):
    return page.locator("li.memory").filter(has=page.locator(".text", has_text=text))


def _artifacts() -> Path:
    folder = Path(os.environ.get("MEMORIST_TEST_ARTIFACTS") or REPO / ".artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_lists_newest_first_with_icon_dates_and_metadata(page, service: Service) -> None:
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url))
    _open(page, service)
    expect(page.get_by_role("heading", level=1)).to_have_text("Project Long Term Memory")
    items = page.locator("li.memory")
    expect(items).to_have_count(len(ALEX))
    expect(items.locator(".text")).to_have_text(NEWEST_FIRST)
    expect(page.locator("#status")).to_have_text("4 memories, newest first.")
    # Each memory has its timeline icon, a machine-readable date and its metadata chips.
    expect(items.locator("svg.icon")).to_have_count(len(ALEX))
    created = items.locator("time.created")
    stamps = [created.nth(i).get_attribute("datetime") for i in range(len(ALEX))]
    assert stamps == sorted(stamps, reverse=True)
    assert all(s and s == created.nth(i).get_attribute("title") for i, s in enumerate(stamps))
    first = _item(page, "Started learning Python")
    expect(first.locator(".chip dt")).to_have_text(["session_id", "source"])
    expect(first.locator(".chip dd")).to_have_text(["s3", "chat"])
    # Text is text: markup in a memory is shown, never parsed.
    odd = _item(page, "dark")
    expect(odd.locator(".text")).to_have_text("Prefers <b>dark</b> mode & short answers")
    expect(odd.locator(".text b")).to_have_count(0)
    expect(odd.locator(".chip").last).to_contain_text('["ui","tone"]')
    # The picker lists the projects of the store.
    options = page.locator("#project option")
    expect(options).to_contain_text(["alex (4 memories)", "sam (1 memory)"])
    expect(page.locator("#project")).to_have_value("alex")
    page.screenshot(path=str(_artifacts() / "panel.png"), full_page=True)
    # Everything comes from the service itself: no CDN, works offline.
    assert urls and all(u.startswith(service.url + "/") or u.startswith("data:") for u in urls), urls


def test_picker_switches_project(page, service: Service) -> None:
    page.goto(service.url + "/")
    expect(page.locator("#project option", has_text="sam")).to_have_count(1)
    page.get_by_label("Project (user)").select_option("sam")
    expect(page.locator("li.memory .text")).to_have_text(["Likes green tea"])
    expect(page.get_by_role("heading", level=2).first).to_contain_text("sam")
    # The manual entry opens any user id.
    page.get_by_label("Or open a user id").fill("alex")
    page.get_by_label("Or open a user id").press("Enter")
    expect(page.locator("li.memory")).to_have_count(len(ALEX))


def test_search_finds_the_memory_and_clear_restores_the_list(page, service: Service) -> None:
    _open(page, service)
    expect(page.locator("li.memory")).to_have_count(len(ALEX))
    requests: list[str] = []
    page.on("request", lambda r: requests.append(f"{r.method} {r.url}"))
    search = page.get_by_role("searchbox", name="Search memories")
    search.fill("nuts")
    search.press("Enter")
    expect(page.locator("li.memory .text").first).to_have_text("Allergic to nuts")
    expect(page.locator("#memories-heading")).to_contain_text("Search results for “nuts”")
    assert any(r.startswith("POST ") and r.endswith("/api/memories/search/") for r in requests)
    page.get_by_role("button", name="Clear").click()
    expect(search).to_have_value("")
    expect(page.locator("li.memory .text")).to_have_text(NEWEST_FIRST)


def test_delete_asks_first_cancel_keeps_confirm_removes(page, service: Service) -> None:
    _open(page, service)
    item = _item(page, "Is vegetarian")
    expect(item).to_have_count(1)
    dialog = page.get_by_role("dialog", name="Delete this memory?")
    item.get_by_role("button", name="Delete memory: Is vegetarian").click()
    expect(dialog).to_be_visible()
    expect(dialog.locator("#confirm-memory")).to_have_text("Is vegetarian")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("li.memory")).to_have_count(len(ALEX))
    assert "Is vegetarian" in service.store_texts("alex")

    item.get_by_role("button", name="Delete memory: Is vegetarian").click()
    dialog.get_by_role("button", name="Delete", exact=True).click()
    expect(dialog).to_be_hidden()
    expect(item).to_have_count(0)
    expect(page.locator("li.memory")).to_have_count(len(ALEX) - 1)
    expect(page.locator("#status")).to_have_text("Memory deleted.")
    expect(page.locator("#project option[value='alex']")).to_have_text("alex (3 memories)")
    texts = service.store_texts("alex")
    assert "Is vegetarian" not in texts and len(texts) == len(ALEX) - 1


def test_dialog_by_keyboard_returns_focus(page, service: Service) -> None:
    _open(page, service)
    dialog = page.get_by_role("dialog", name="Delete this memory?")
    button = _item(page, "Allergic to nuts").locator("button.delete")
    button.focus()
    page.keyboard.press("Enter")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(button).to_be_focused()
    assert "Allergic to nuts" in service.store_texts("alex")

    # Enter opens it again; Tab reaches Delete; Enter confirms; focus lands on the next memory.
    page.keyboard.press("Enter")
    expect(dialog).to_be_visible()
    page.keyboard.press("Tab")
    expect(dialog.get_by_role("button", name="Delete", exact=True)).to_be_focused()
    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()
    expect(_item(page, "Allergic to nuts")).to_have_count(0)
    expect(_item(page, "dark").locator("button.delete")).to_be_focused()
    assert "Allergic to nuts" not in service.store_texts("alex")


def test_a_delete_asked_again_right_after_closing_the_dialog_deletes(page, service: Service) -> None:
    """The dialog's close event arrives after it closed: asking again before it
    arrives (Escape then Enter, fast) must leave that new ask pending, not forget it
    so that Delete closes the dialog and deletes nothing."""
    _open(page, service)
    dialog = page.get_by_role("dialog", name="Delete this memory?")
    button = _item(page, "Allergic to nuts").locator("button.delete")
    button.click()
    expect(dialog).to_be_visible()
    # Closed and asked again in one task: the close event comes after both.
    button.evaluate("b => { document.getElementById('confirm').close(); b.click(); }")
    expect(dialog).to_be_visible()
    page.wait_for_timeout(50)  # the late close event has been handled
    dialog.get_by_role("button", name="Delete", exact=True).click()
    expect(dialog).to_be_hidden()
    expect(_item(page, "Allergic to nuts")).to_have_count(0)
    assert "Allergic to nuts" not in service.store_texts("alex")


def test_error_state_shows_the_service_message_and_retries(page, service: Service) -> None:
    page.route(
        "**/api/memories/**",
        lambda route: route.fulfill(status=500, json=ERROR_500),
    )
    _open(page, service)
    alert = page.locator("#error")
    expect(alert).to_be_visible()
    expect(alert).to_have_attribute("role", "alert")
    expect(alert).to_contain_text("Internal server error (test)")
    expect(alert).to_contain_text("HTTP 500")
    expect(page.locator("li.memory")).to_have_count(0)
    page.unroute("**/api/memories/**")
    alert.get_by_role("button", name="Retry").click()
    expect(alert).to_be_hidden()
    expect(page.locator("li.memory .text")).to_have_text(NEWEST_FIRST)


def test_empty_state(page, service: Service) -> None:
    _open(page, service, user="nobody")
    expect(page.locator("#memory-list .empty")).to_have_text("No memories for this project yet")
    expect(page.locator("#status")).to_have_text("No memories for this project yet.")
    expect(page.locator("li.memory")).to_have_count(0)


def test_empty_store_lists_no_projects(page, tmp_path: Path) -> None:
    with _serve(str(tmp_path / "empty.db")) as empty:
        page.goto(empty.url + "/")
        expect(page.locator("#project-state")).to_contain_text("No projects yet")
        expect(page.locator("#status")).to_have_text("Choose a project to see its memories.")


def _keyed_store(tmp_path: Path) -> tuple[str, str]:
    """A seeded store of tenant acme with a key bound to alex (and a tenant key, unused):
    its path and alex's key."""
    keys = pytest.importorskip("memorist.server.keys")
    db = str(tmp_path / "keys.db")
    _seed(db, tenant_id="acme")
    with keys.KeyStore(db) as store:
        secret, _ = store.create("acme", user_id="alex", label="panel test")
        store.create("acme", label="the whole tenant")  # exists, not used by the panel here
    return db, secret


def _keys_sent(page) -> list[str | None]:
    """The Authorization header of each /api/ request the page makes from now on."""
    sent: list[str | None] = []
    page.on("request", lambda r: sent.append(r.headers.get("authorization")) if "/api/" in r.url else None)
    return sent


def test_key_is_asked_for_and_a_user_bound_key_sees_only_its_user(page, tmp_path: Path) -> None:
    db, secret = _keyed_store(tmp_path)

    sent = _keys_sent(page)
    with _serve(db, tenant_id="acme") as service:
        _open(page, service)
        alert = page.locator("#error")
        expect(alert).to_contain_text("needs an API key")
        expect(alert).to_contain_text("HTTP 401")
        alert.get_by_role("button", name="Enter an API key").click()
        key_field = page.get_by_label("API key")
        expect(key_field).to_be_focused()
        key_field.fill(secret)
        key_field.press("Enter")
        expect(page.locator("li.memory .text")).to_have_text(NEWEST_FIRST)
        expect(alert).to_be_hidden()
        assert f"Bearer {secret}" in sent
        assert page.evaluate("sessionStorage.getItem('memorist.apiKey')") == secret
        # Only the key's user is listed; another user of the tenant answers like a missing one.
        expect(page.locator("#project option:not([value=''])")).to_have_text(["alex (4 memories)"])
        page.get_by_label("Or open a user id").fill("sam")
        page.get_by_label("Or open a user id").press("Enter")
        expect(alert).to_contain_text("HTTP 404")
        expect(page.locator("li.memory")).to_have_count(0)
        expect(page.get_by_text("Likes green tea")).to_have_count(0)
        # Forgetting the key asks for one again.
        page.get_by_role("button", name="Forget key").click()
        assert page.evaluate("sessionStorage.getItem('memorist.apiKey')") is None
        expect(alert).to_contain_text("HTTP 401")


def test_the_panel_and_the_api_docs_work_under_the_content_security_policy(page, service: Service) -> None:
    """Nothing the pages need is refused by the policy, and nothing is loaded from
    another origin: the panel, Swagger UI at /docs and ReDoc at /redoc."""
    refused: list[str] = []
    elsewhere: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
    # What was fetched (a load the policy refused is attempted, never answered).
    page.on("response", lambda res: None if res.url.startswith((service.url, "data:", "blob:")) else elsewhere.append(res.url))
    attempted: list[str] = []
    page.on("request", lambda req: None if req.url.startswith((service.url, "data:", "blob:")) else attempted.append(req.url))
    _open(page, service)
    expect(page.locator("li.memory .text")).to_have_text(NEWEST_FIRST)
    page.goto(f"{service.url}/docs")
    expect(page.locator(".opblock-summary-path").first).to_be_visible()
    expect(page.get_by_text("/api/memories/search/").first).to_be_visible()
    page.goto(f"{service.url}/redoc")
    expect(page.get_by_text("Memorist memory service").first).to_be_visible()
    expect(page.get_by_text("API docs by Redocly")).to_be_visible()
    page.wait_for_timeout(300)  # the credit's logo has loaded, or failed
    # Before, ReDoc's credit line loaded its logo from ReDoc's CDN (refused by the
    # policy, yet an attempt to reach another origin, and a broken image): nothing is
    # refused now, nothing is attempted elsewhere, and no page or asset of the
    # service's own names another origin.
    assert not refused, refused
    assert not elsewhere, elsewhere
    assert not attempted, attempted
    for path in ("/", "/static/app.js", "/static/style.css", "/static/docs.js", "/docs", "/redoc"):
        text = page.request.get(service.url + path).text()
        assert not re.search(r"https?://(?!www\.w3\.org/)", text), path
    assert "cdn.redoc.ly" not in page.request.get(f"{service.url}/docs-assets/redoc.standalone.js").text()


# Every kind of id a user may have: a chat's "tenant/user", dot segments, ids that are
# also route names, and characters that mean something in a URL.
ODD_USERS = ["school/alice", "..", ".", "search", "events", "100%", "a b", "a/b?c#d"]


def test_any_user_id_opens_and_its_memories_delete(page, tmp_path: Path) -> None:
    """Before, the panel put the user id in the list's path: "school/alice" (every chat
    user) reached the service as two segments, "." and ".." were folded away by the
    browser, and "search" or "events" met other routes; such projects could not be
    opened. The user id goes in the query now."""
    db = str(tmp_path / "odd.db")
    with Memory(db, embedder="hashing") as m:
        now = time.time()
        for user in ODD_USERS:
            m.add(f"A memory of {user}", user_id=user, infer=False, timestamp=now - 2 * HOUR)
            m.add(f"Another memory of {user}", user_id=user, infer=False, timestamp=now - HOUR)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "/api/" in r.url else None)
    with _serve(db) as service:
        page.goto(service.url + "/")
        picker = page.get_by_label("Project (user)")
        expect(page.locator("#project option:not([value=''])")).to_have_count(len(ODD_USERS))
        assert sorted(page.locator("#project option:not([value=''])").all_inner_texts()) == sorted(
            f"{user} (2 memories)" for user in ODD_USERS)
        for user in ODD_USERS:
            picker.select_option(user)
            expect(page.locator("li.memory .text")).to_have_text([f"Another memory of {user}", f"A memory of {user}"])
            expect(page.locator("#error")).to_be_hidden()
        # A link to one opens it too.
        page.goto(service.url + "/#user=school%2Falice")
        expect(page.locator("li.memory .text")).to_have_text(["Another memory of school/alice", "A memory of school/alice"])
        page.get_by_role("button", name="Delete memory: A memory of school/alice").click()
        page.get_by_role("dialog").get_by_role("button", name="Delete", exact=True).click()
        expect(page.locator("#status")).to_have_text("Memory deleted.")
        assert service.store_texts("school/alice") == ["Another memory of school/alice"]
        page.get_by_label("Or open a user id").fill("..")
        page.get_by_label("Or open a user id").press("Enter")
        expect(page.locator("li.memory")).to_have_count(2)
        page.get_by_role("button", name="Delete memory: A memory of ..").click()
        page.get_by_role("dialog").get_by_role("button", name="Delete", exact=True).click()
        expect(page.locator("#status")).to_have_text("Memory deleted.")
        assert service.store_texts("..") == ["Another memory of .."]
    # No user id in a path: the list's and the delete's user go in the query.
    paths = [r.split("?")[0] for r in requests]
    assert all(p.endswith(("/api/memories/", "/api/users/")) or re.search(r"/api/memories/[0-9a-f-]{36}/$", p) for p in paths), paths


def test_a_refused_key_is_named_and_the_key_field_marked(page, tmp_path: Path) -> None:
    """Before, a wrong key was reported as a missing one ("Enter an API key…") while a
    key was set, and the key field was not marked."""
    keys = pytest.importorskip("memorist.server.keys")
    db = str(tmp_path / "keys.db")
    _seed(db, tenant_id="acme")
    with keys.KeyStore(db) as store:
        secret, _ = store.create("acme", label="the tenant")
    with _serve(db, tenant_id="acme") as service:
        page.goto(service.url + "/")
        key_field = page.get_by_label("API key")
        expect(page.locator("#project-state")).to_contain_text("Enter an API key")  # none set yet
        key_field.fill("ek_wrong")
        key_field.press("Enter")
        state = page.locator("#project-state")
        expect(state).to_contain_text("refused the API key")
        expect(state).to_contain_text("not valid")  # the service's own reason
        expect(state).not_to_contain_text("Enter an API key")
        expect(key_field).to_have_attribute("aria-invalid", "true")
        expect(page.locator("#key-state")).to_contain_text("refused this key")
        # A project opened with it says the same.
        page.get_by_label("Or open a user id").fill("alex")
        page.get_by_label("Or open a user id").press("Enter")
        alert = page.locator("#error")
        expect(alert).to_contain_text("refused the API key")
        expect(alert).to_contain_text("HTTP 401")
        expect(alert).not_to_contain_text("needs an API key")
        expect(alert.get_by_role("button", name="Change the API key")).to_be_visible()
        # The right key clears the mark.
        key_field.fill(secret)
        key_field.press("Enter")
        expect(page.locator("li.memory .text")).to_have_text(NEWEST_FIRST)
        expect(key_field).not_to_have_attribute("aria-invalid", "true")
        expect(state).to_have_text("")


def test_the_picker_says_when_it_lists_only_the_first_projects(page, service: Service) -> None:
    """Before, the picker stopped at the service's default of 1,000 users without a
    word. It asks for one more than it shows, so it knows when the list goes on."""
    asked: list[str] = []

    def users(route) -> None:
        asked.append(route.request.url)
        limit = int(parse_qs(urlsplit(route.request.url).query).get("limit", ["1000"])[0])
        many = [{"user_id": f"user-{i:05d}", "memories": 1} for i in range(min(limit, 1500))]
        route.fulfill(status=200, json={"results": many})

    page.route("**/api/users/**", users)
    page.goto(service.url + "/")
    expect(page.locator("#project option:not([value=''])")).to_have_count(1000)
    expect(page.locator("#project-state")).to_contain_text("first 1,000 projects")
    expect(page.locator("#project-state")).to_contain_text("open one by its user id")
    assert asked and all(parse_qs(urlsplit(u).query)["limit"] == ["1001"] for u in asked), asked  # bounded
    # One beyond the list opens by its id.
    page.get_by_label("Or open a user id").fill("alex")
    page.get_by_label("Or open a user id").press("Enter")
    expect(page.locator("li.memory .text")).to_have_text(NEWEST_FIRST)


def test_a_rate_limit_says_once_when_to_try_again(page, service: Service) -> None:
    """Before, the service's "retry in 1 s" was followed by the panel's own "Try again in 1 s."."""
    said = {"message": "rate limit exceeded: 60 requests per minute, bursts of 6; retry in 1 s"}

    def limited(route) -> None:
        route.fulfill(status=429, headers={"Retry-After": "1"},
                      json={"error": {"type": "rate_limited", "message": said["message"], "field": None}})

    page.route("**/api/memories/**", limited)
    _open(page, service)
    alert = page.locator("#error-message")
    expect(alert).to_contain_text("retry in 1 s")
    expect(alert).to_contain_text("HTTP 429")
    expect(alert).not_to_contain_text("Try again")
    # A message without the wait gets it from Retry-After.
    said["message"] = "too many requests at once"
    page.get_by_role("button", name="Retry").click()
    expect(alert).to_contain_text("too many requests at once Try again in 1 s.")


def test_a_key_works_for_the_page_s_life_where_the_browser_refuses_storage(page, tmp_path: Path) -> None:
    """With the tab's storage refused (a privacy setting), the key given was dropped:
    the page still asked for one and its requests went without it."""
    db, secret = _keyed_store(tmp_path)
    page.add_init_script(
        "Object.defineProperty(window, 'sessionStorage', {get() { throw new DOMException('denied', 'SecurityError'); }});"
    )
    sent = _keys_sent(page)
    with _serve(db, tenant_id="acme") as service:
        _open(page, service)
        alert = page.locator("#error")
        expect(alert).to_contain_text("HTTP 401")
        alert.get_by_role("button", name="Enter an API key").click()
        key_field = page.get_by_label("API key")
        key_field.fill(secret)
        key_field.press("Enter")
        expect(page.locator("li.memory .text")).to_have_text(NEWEST_FIRST)
        assert f"Bearer {secret}" in sent
        page.get_by_role("button", name="Forget key").click()
        expect(alert).to_contain_text("HTTP 401")

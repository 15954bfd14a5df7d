"""What the surfaces' browser tests share: Debian's Chromium driven by Playwright.

Without ``/usr/bin/chromium`` (or playwright) the page tests skip locally and fail when
``CI`` is set: CI must run them."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

try:
    from playwright.sync_api import sync_playwright
except ImportError:
    sync_playwright = None

CHROMIUM = "/usr/bin/chromium"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run the page tests)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """A headless Chromium for the module's page tests."""
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"{CHROMIUM} is missing: install Debian's chromium to run the page tests")
    if sync_playwright is None:
        _unavailable("playwright is not installed (the dev extra)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()

"""The inspector in a real browser: the system's headless Chromium driven by Playwright.

No browser is downloaded: scripts/ensure_chromium.sh installs Debian's chromium (the Makefile's
pytest target runs it) and Playwright launches /usr/bin/chromium through ``executable_path``.
The test saves a screenshot of the session page with a query's result; set
``LANGMEM_TIERS_INSPECTOR_SCREENSHOT=docs/inspector.png`` to refresh the README's copy.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the inspector extra is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (requirements-dev) is not installed")

CHROMIUM = os.environ.get("LANGMEM_TIERS_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
LENA = "When and where is Lena's wedding?"
FACT = "Lena is getting married in Porto"
BADGE = "My badge number is 31337"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing: run scripts/ensure_chromium.sh")
def test_query_explain_forget_pin_and_screenshot_in_chromium(tmp_path: Path) -> None:
    from rich.console import Console

    from langmem_tiers.cli.demo import run_demo
    from langmem_tiers.inspector.server import running
    from langmem_tiers.inspector.settings import InspectorSettings

    folder = tmp_path / "memory"
    run_demo(folder, sessions=2, turns_per_session=24, no_vectors=True, console=Console(file=io.StringIO()))
    settings = InspectorSettings.resolve(str(folder), port=_free_port(), vectors=False)
    shot = tmp_path / "inspector.png"
    with running(settings) as url, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.set_default_timeout(10_000)
            page.goto(url)  # the token in the URL becomes a cookie, the address bar loses it
            assert "token=" not in page.url
            page.click("a.session-link:text-is('demo')")
            page.wait_for_selector("text=Timeline")

            page.fill("#query", LENA)
            page.press("#query", "Enter")
            explain = page.text_content("#explain") or ""
            assert "tokens: pinned" in explain
            assert "recall 0 " not in explain
            hit = page.locator("#hits tr.hit", has_text=FACT)
            assert hit.count() == 1
            assert hit.locator("td.num").nth(1).text_content() == "1"  # keyword rank 1
            page.screenshot(path=str(shot))
            # The summary's version history is on the page, collapsed (the forget below must empty it
            # of the fact: the page's content is checked whole, collapsed parts included).
            assert page.locator("#summary-history li.version").count() >= 1
            assert page.get_attribute("#summary-history", "open") is None

            hit.locator("a.forget").click()
            page.wait_for_selector("text=This cannot be undone.")
            assert FACT in (page.text_content("main") or "")
            page.click("#confirm-forget")
            page.wait_for_selector("text=forgot record")
            assert page.locator("#hits tr.hit", has_text=FACT).count() == 0
            assert FACT not in (page.content())  # gone from the hits, the timeline and the summary

            # Pin a memory and see it marked.
            page.fill("#panel-memories input[name=text]", BADGE)
            page.click("#panel-memories button:text-is('Remember')")
            page.wait_for_selector("text=remembered record")
            row = page.locator("#panel-memories li", has_text=BADGE)
            assert row.locator(".badge.pin").count() == 0
            row.locator("button.pin").click()
            page.wait_for_selector("text=pinned record")
            row = page.locator("#panel-memories li", has_text=BADGE)
            assert row.locator(".badge.pin").text_content() == "pinned"
            assert row.locator("button.pin").text_content() == "unpin"
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
    target = os.environ.get("LANGMEM_TIERS_INSPECTOR_SCREENSHOT")
    if target:
        _save_small(shot, Path(target))


def _save_small(source: Path, target: Path) -> None:
    """The README's copy as a 256-colour PNG (a UI screenshot loses nothing visible; a fifth of the bytes)."""
    try:
        from PIL import Image
    except ImportError:
        shutil.copyfile(source, target)
        return
    with Image.open(source) as image:
        image.convert("RGB").quantize(colors=256).save(target, optimize=True)

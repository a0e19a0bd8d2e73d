"""The console in a real browser, for the tests that drive it: Debian's Chromium, headless,
through Playwright pointed at the system browser (no browser is downloaded); a logged-in tab
that records script errors, failed requests and CSP violations; screenshots into the test
output directory (.toolproxy-test-output/console/, or TOOLPROXY_TEST_OUTPUT)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("TOOLPROXY_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage"]
OUTPUT = Path(os.environ.get("TOOLPROXY_TEST_OUTPUT")
              or Path(__file__).resolve().parents[2] / ".toolproxy-test-output") / "console"
XSS = '<img src=x onerror="window.__xss=1;document.title=\'pwned\'">'


def _absent() -> str | None:
    if not os.path.exists(CHROMIUM):
        return ("Debian's chromium is not installed (apt-get install -y chromium; .ci/run installs "
                "it where apt-get is available as root)")
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing (pip install -e '.[dev]')"
    return None


def absent() -> str | None:
    """Why the browser tests cannot run here, or None."""
    return _absent()


skip_without_browser = pytest.mark.skipif(_absent() is not None, reason=_absent() or "")


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        # Playwright gives each launch a fresh, temporary profile (user data dir).
        b = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield b
        finally:
            await b.close()


class Page:
    """A console tab: its page, and what it reported (script errors, CSP violations)."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text}")
                if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
        # Failed requests, by URL: only the first look for a session (before logging in) may fail.
        page.on("response", lambda r: self.errors.append(f"{r.status} {r.request.method} {r.url}")
                if r.status >= 400 and not (r.status == 401 and r.url.endswith("/console/session")
                                            and r.request.method == "GET") else None)

    async def violations(self) -> list[str]:
        return await self.page.evaluate("window.__csp || []")

    async def shot(self, name: str) -> Path:
        OUTPUT.mkdir(parents=True, exist_ok=True)
        path = OUTPUT / f"{name}.png"
        await self.page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 1000
        return path


@pytest.fixture
async def open_console(browser: Any, client: Any) -> AsyncIterator[Any]:
    contexts: list[Any] = []
    base = str(client.make_url("")).rstrip("/")

    async def open_(token: str, at: Any = None) -> Page:
        """A logged-in tab on `at` (a test client; default: the `client` fixture's server)."""
        root = base if at is None else str(at.make_url("")).rstrip("/")
        context = await browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        # Records every CSP violation the page meets (an injected inline handler would be one).
        await context.add_init_script(
            "window.__csp = []; document.addEventListener('securitypolicyviolation',"
            " e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")
        tab = Page(await context.new_page())
        await tab.page.goto(f"{root}/console")
        await tab.page.wait_for_selector("#login-token", state="visible")
        await tab.page.fill("#login-token", token)
        await tab.page.click("#login button[type=submit]")
        await tab.page.wait_for_selector("#nav", state="visible")
        await tab.page.wait_for_selector("#page-inbox .status.live")
        return tab

    try:
        yield open_
    finally:
        for c in contexts:
            await c.close()

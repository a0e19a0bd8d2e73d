"""Signing in to the console with the OpenID provider (authorization code + PKCE), through the
real provider's own login page, in Debian's headless Chromium; and the flow's refusals over
plain HTTP (no browser): a state that is not this browser's, a flow cookie that is missing or
forged, an agent's identity."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from proxy.config import Settings
from proxy.web.app import create_app
from tests.support.oidc_provider import RESOURCE, OidcProvider

CHROMIUM = os.environ.get("TOOLPROXY_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage"]


def _no_browser() -> str | None:
    if not os.path.exists(CHROMIUM):
        return "Debian's chromium is not installed (apt-get install -y chromium; .ci/run installs it)"
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing (pip install -e '.[dev]')"
    return None


@pytest.fixture
async def signin_client(aiohttp_client: Callable[..., Any], settings: Settings,
                        oidc_provider: OidcProvider) -> TestClient:
    s = Settings(**{**settings.model_dump(), "oidc_issuer": oidc_provider.issuer,
                    "oidc_audience": RESOURCE, "oidc_client_id": "console",
                    "oidc_client_secret": "console-secret", "oidc_console_scopes": "openid toolproxy"})
    c: TestClient = await aiohttp_client(create_app(s))
    return c


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    reason = _no_browser()
    if reason:
        pytest.skip(reason)
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield b
        finally:
            await b.close()


async def _sign_in(page: Any, base: str, account: str) -> None:
    await page.goto(f"{base}/console")
    link = await page.wait_for_selector("#signin-link", state="visible")
    await link.click()
    # the provider's own pages: its login form, then its consent
    await page.wait_for_selector("input[name=login]")
    await page.fill("input[name=login]", account)
    await page.fill("input[name=password]", "any")
    await page.click("button[type=submit]")
    await page.wait_for_load_state()
    if "/interaction/" in page.url:
        await page.click("button[type=submit]")
    await page.wait_for_url(f"{base}/console*")


async def test_a_governor_signs_in_with_the_provider_and_out_again(signin_client, browser) -> None:
    base = str(signin_client.make_url("")).rstrip("/")
    context = await browser.new_context()
    try:
        page = await context.new_page()
        await _sign_in(page, base, "gov-alice")
        await page.wait_for_selector("#nav", state="visible")
        assert await page.text_content("#who-name") == "gov-alice@t-console (governance)"
        cookies = {c["name"]: c for c in await context.cookies()}
        session = cookies["toolproxy_console"]
        assert session["httpOnly"] and session["sameSite"] == "Strict"
        assert "toolproxy_signin" not in cookies  # the flow's cookie is spent
        assert await page.evaluate("document.cookie") == ""
        # the session works as a pasted token's does: the inbox reads approvals
        await page.wait_for_selector("#page-inbox .status.live")
        await page.click("#logout")
        await page.wait_for_selector("#login", state="visible")
        r = await page.request.get(f"{base}/console/session")
        assert r.status == 401
    finally:
        await context.close()


async def test_an_agent_identity_gets_no_console(signin_client, browser) -> None:
    base = str(signin_client.make_url("")).rstrip("/")
    context = await browser.new_context()
    try:
        page = await context.new_page()
        await _sign_in(page, base, "agent-carol")
        await page.wait_for_selector("#login", state="visible")
        text = await page.text_content("#login-error")
        assert "governance and admin" in (text or "")
        assert not [c for c in await context.cookies() if c["name"] == "toolproxy_console"]
    finally:
        await context.close()


# --- over plain HTTP -------------------------------------------------------------------------


async def _start(client: TestClient) -> tuple[str, dict[str, str], aiohttp.CookieJar]:
    r = await client.get("/console/signin", allow_redirects=False)
    assert r.status == 302
    location = r.headers["Location"]
    query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
    assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
    assert query["response_type"] == "code" and query["client_id"] == "console"
    assert query["redirect_uri"].endswith("/console/signin/callback")
    cookie = r.cookies["toolproxy_signin"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax" and cookie["path"] == "/console/signin"
    return location, query, client.session.cookie_jar


async def test_the_flow_refuses_a_state_that_is_not_its_own(signin_client) -> None:
    _, query, _ = await _start(signin_client)
    r = await signin_client.get("/console/signin/callback", params={"code": "x", "state": "forged"},
                                allow_redirects=False)
    assert r.status == 303 and r.headers["Location"] == "/console?signin_error=signin_state_mismatch"
    # the cookie is spent: the right state afterwards finds no flow
    r = await signin_client.get("/console/signin/callback", params={"code": "x", "state": query["state"]},
                                allow_redirects=False)
    assert r.headers["Location"] == "/console?signin_error=signin_expired"


async def test_a_forged_flow_cookie_or_a_bad_code_opens_nothing(signin_client) -> None:
    signin_client.session.cookie_jar.update_cookies({"toolproxy_signin": "A" * 200})
    r = await signin_client.get("/console/signin/callback", params={"code": "x", "state": "y"},
                                allow_redirects=False)
    assert r.headers["Location"] == "/console?signin_error=signin_expired"
    _, query, _ = await _start(signin_client)
    r = await signin_client.get("/console/signin/callback",
                                params={"code": "not-a-code", "state": query["state"]}, allow_redirects=False)
    assert r.headers["Location"] == "/console?signin_error=unauthenticated"


async def test_sign_in_options(signin_client, client) -> None:
    body = await (await signin_client.get("/console/signin/options")).json()
    assert body == {"provider": "oidc", "token_paste": True}
    assert await (await client.get("/console/signin/options")).json() == {"provider": None, "token_paste": True}
    r = await client.get("/console/signin", allow_redirects=False)
    assert r.status == 404

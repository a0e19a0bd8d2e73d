"""The browser tools: browser.lite (internal, B) and browser.full (internet, D)."""

from __future__ import annotations

import asyncpg

from services.browser import full, lite
from services.netguard.fetch import Fetcher
from services.netguard.guard import Guard
from services.netguard.settings import NetOptions
from services.sdk import Service


def service(pool: asyncpg.Pool, options: NetOptions) -> Service:
    """Each tool has its own guard and session: their rules differ, so no connection made
    under browser.lite's rules is ever reused by browser.full."""
    resolver = options.the_resolver()
    lite_fetcher = Fetcher(Guard(resolver), user_agent="toolproxy-browser-lite/1.0")
    full_fetcher = Fetcher(
        Guard(resolver, unsafe_allow_loopback_for_tests=options.unsafe_allow_loopback_for_tests),
        user_agent="toolproxy-browser/1.0",
    )
    return Service(
        name="browser",
        tools=[lite.tool(lite_fetcher, options.settings.lite_patterns()), full.tool(full_fetcher, pool)],
        on_stop=[lite_fetcher.close, full_fetcher.close],
    )

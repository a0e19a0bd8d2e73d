"""What browser.lite and browser.full share: fetch a page, then extract its text and links."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from services.browser.extract import extract_html, extract_text
from services.netguard.fetch import Fetcher
from services.netguard.hosts import HostPattern
from services.netguard.urls import parse_url
from services.sdk import CallContext
from services.sdk.service import ToolResult

DEFAULT_MAX_BYTES = 200_000
MAX_BYTES = 1_000_000
ACCEPT = frozenset({"text/html", "text/plain"})
DEADLINE_MARGIN_S = 0.3  # answer with our own code before the SDK's deadline fires

async def browse(
    fetcher: Fetcher,
    args: dict[str, Any],
    ctx: CallContext,
    allowlist: Sequence[HostPattern],
    *,
    internal_ok: bool,
) -> ToolResult:
    target = parse_url(args["url"])
    response = await fetcher.fetch(
        target, allowlist, internal_ok=internal_ok,
        max_bytes=int(args.get("max_bytes", DEFAULT_MAX_BYTES)),
        timeout_s=max(ctx.remaining() - DEADLINE_MARGIN_S, 0.1), accept=ACCEPT,
    )
    final = response.target.url
    text = response.text()
    if response.content_type == "text/html":
        # Parsing a large page takes a while (~0.1 s per MB, more for hostile markup): in a
        # thread, so the other calls this service process serves keep being answered.
        page = await asyncio.to_thread(extract_html, text, final)
    else:
        page = extract_text(text)
    return ToolResult(
        output={"url": final, "status": response.status, **page.as_json(),
                "truncated": response.truncated or page.cut},
        compute_units=len(response.body) / 1_000_000,
        provenance_refs=[{"type": "url", "url": final, "status": response.status}],
    )

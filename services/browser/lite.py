"""Category B `browser.lite`: one page of an allowlisted internal host, no JavaScript."""

from __future__ import annotations

from typing import Any

from services.browser.page import INPUT_SCHEMA, OUTPUT_SCHEMA, browse
from services.netguard.fetch import Fetcher
from services.netguard.hosts import HostPattern
from services.sdk import CallContext, Cost
from services.sdk.service import ToolDef, ToolResult, make_manifest

MANIFEST = make_manifest(
    {
        "tool_id": "browser.lite",
        "version": "1.0.0",
        "category": "B",
        "action": "read",
        "description": "Fetch one page (text/html or text/plain) of an internal host on the "
        "operator's allowlist, without JavaScript: its title, readable text and links. "
        "url_not_allowed for any other host or address.",
        "input_schema": INPUT_SCHEMA,
        "output_schema": OUTPUT_SCHEMA,
        "cost": Cost(per_call=0.0005, per_compute_unit=0.001),
        "network": True,
        "timeout_ms": 3_000,
    }
)


def tool(fetcher: Fetcher, allowlist: list[HostPattern]) -> ToolDef:
    """browser.lite over the operator's TOOLPROXY_BROWSER_LITE_HOSTS (empty: nothing)."""

    async def handle(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        return await browse(fetcher, args, ctx, allowlist, internal_ok=True)

    return ToolDef(manifest=MANIFEST, handler=handle)

"""The catalog entries of browser.lite (internal hosts, B) and browser.full (the internet, D)."""

from __future__ import annotations

from typing import Any

from services.browser.extract import MAX_LINKS
from services.browser.page import DEFAULT_MAX_BYTES, MAX_BYTES
from services.netguard.urls import MAX_URL_LENGTH
from services.sdk import Cost
from services.sdk.service import make_manifest

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["url"],
    "properties": {
        "url": {"type": "string", "minLength": 1, "maxLength": MAX_URL_LENGTH,
                "description": "an http(s) URL"},
        "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_BYTES,
                      "description": f"how much of the body to read (default {DEFAULT_MAX_BYTES})"},
    },
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["url", "status", "title", "text", "links", "truncated"],
    "properties": {
        "url": {"type": "string", "description": "the URL finally read, after redirects"},
        "status": {"type": "integer"},
        "title": {"type": "string"},
        "text": {"type": "string"},
        "links": {
            "type": "array",
            "maxItems": MAX_LINKS,
            "items": {"type": "object", "required": ["url", "text"],
                      "properties": {"url": {"type": "string"}, "text": {"type": "string"}}},
        },
        "truncated": {"type": "boolean", "description": "the text covers only the beginning "
                      "of the page (longer than max_bytes, or nested too deep to read whole)"},
    },
}

LITE = make_manifest(
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

FULL = make_manifest(
    {
        "tool_id": "browser.full",
        "version": "1.0.0",
        "category": "D",
        "action": "read",
        "description": "Fetch one internet page (text/html or text/plain), without JavaScript, "
        "from a host on your team's egress allowlist (kept by governance): its title, readable "
        "text and links. Never private, loopback, link-local or metadata addresses. Each call "
        "waits for a governance approval.",
        "input_schema": INPUT_SCHEMA,
        "output_schema": OUTPUT_SCHEMA,
        "cost": Cost(per_call=0.002, per_compute_unit=0.002),
        "network": True,
        "requires_approval": True,
        "timeout_ms": 10_000,
    }
)

# In the order the service serves them.
MANIFESTS = (LITE, FULL)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)

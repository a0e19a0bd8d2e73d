"""Where each tool of governance's whole catalog comes from: the live catalog (built-in
services), the plugin registry (every installed plugin, enabled or not) and, where the upstream
bridge's table exists, the upstream and OpenAPI tools with their pins."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg
import structlog
from pydantic import ValidationError

from proxy.core.catalog import Catalog
from services.plugins.registry import PluginRegistry
from wire.manifest import ToolManifest

log = structlog.get_logger("toolproxy.admin.catalog")

SOURCES = ("builtin", "plugin", "upstream", "openapi")
MAX_TOOLS = 5000  # per source: the view is built whole, then paged


@dataclass(frozen=True, slots=True)
class Listed:
    """One tool as governance sees it: its manifest where one is known, where it comes from,
    whether a responder serves it now, and what its definition is pinned to (None: nothing is
    pinned, as for a built-in whose service ships its own definition)."""

    tool_id: str
    source: str
    manifest: ToolManifest | None
    available: bool
    pin: dict[str, Any] | None
    summary: dict[str, Any] | None = None  # classification and description without a manifest


def _source_of(m: ToolManifest) -> str:
    declared = getattr(m, "source", None)  # a manifest that names its own source wins
    if isinstance(declared, str) and declared in SOURCES:
        return declared
    return "plugin" if m.plugin else "builtin"


async def _upstream_rows(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    """The classified upstream and OpenAPI tools, if the upstream bridge's table exists here."""
    if await pool.fetchval("SELECT to_regclass('upstream_tools')") is None:
        return []
    try:
        return await pool.fetch(
            """SELECT tool_id, upstream, source, state, hash, pinned_hash, classification,
                      definition
               FROM upstream_tools WHERE tool_id IS NOT NULL ORDER BY tool_id LIMIT $1""",
            MAX_TOOLS)
    except asyncpg.UndefinedColumnError as exc:  # another shape than this view reads
        log.warning("upstream_tools_unreadable", error=str(exc))
        return []


def _plugin_listed(row: asyncpg.Record, catalog: Catalog) -> Listed | None:
    try:
        m = ToolManifest.model_validate(row["tool"])
    except ValidationError:
        log.error("plugin_manifest_invalid", plugin=row["name"], version=row["version"])
        return None
    served = catalog.get(m.tool_id)
    available = (bool(row["enabled"]) and served is not None and served.plugin
                 and served.version == m.version and catalog.available(m.tool_id))
    pin = {"state": "enabled" if row["enabled"] else "disabled", "version": row["version"],
           "hash": row["sha256"]}
    return Listed(m.tool_id, "plugin", m, available, pin)


def _upstream_listed(row: asyncpg.Record, catalog: Catalog) -> Listed:
    source = row["source"] if row["source"] in SOURCES else "upstream"
    pin = {"state": row["state"], "hash": row["pinned_hash"], "current_hash": row["hash"],
           "upstream": row["upstream"]}
    m = catalog.get(row["tool_id"])
    available = m is not None and row["state"] == "classified" and catalog.available(row["tool_id"])
    summary = None
    if m is None:  # not served right now: what governance classified it as
        cls = row["classification"] if isinstance(row["classification"], dict) else {}
        definition = row["definition"] if isinstance(row["definition"], dict) else {}
        summary = {**{k: cls.get(k) for k in ("category", "action", "risk", "cost",
                                              "requires_approval")},
                   "network": True, "description": str(definition.get("description") or "")}
    return Listed(row["tool_id"], source, m, available, pin, summary)


async def every_tool(pool: asyncpg.Pool, catalog: Catalog, plugins: PluginRegistry) -> list[Listed]:
    """Every tool, by name, unfiltered by any policy."""
    listed: dict[str, Listed] = {}
    for m in catalog.manifests():
        if not m.plugin:
            listed[m.tool_id] = Listed(m.tool_id, _source_of(m), m, catalog.available(m.tool_id), None)
    for row in await plugins.catalog_index(MAX_TOOLS):
        item = _plugin_listed(row, catalog)
        if item is not None and item.tool_id not in listed:  # a built-in keeps its name
            listed[item.tool_id] = item
    for row in await _upstream_rows(pool):
        listed[row["tool_id"]] = _upstream_listed(row, catalog)
    return [listed[name] for name in sorted(listed)]

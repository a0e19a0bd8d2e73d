"""The plugin registry in Postgres: installed versions (bundles kept whole), one enabled."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from services.plugins.bundle import Plugin
from services.plugins.manifest import portability

CHANNEL = "toolproxy_plugins"

_COLUMNS = """name, version, sha256, size, manifest, tool, enabled, installed_by, installed_at,
              enabled_by, enabled_at"""


def _iso(v: datetime | None) -> str | None:
    return v.isoformat() if v else None


def plugin_json(r: asyncpg.Record) -> dict[str, Any]:
    tool = r["tool"]
    return {
        "name": r["name"],
        "version": r["version"],
        "sha256": r["sha256"],
        "size": r["size"],
        "enabled": r["enabled"],
        "manifest": r["manifest"],
        "tool": {k: tool.get(k) for k in ("tool_id", "category", "action", "description",
                                          "timeout_ms", "requires_approval")},
        # Are its schemas what every model API and MCP client takes? (reported, not refused)
        "schema_portability": portability(tool),
        "installed_by": r["installed_by"],
        "installed_at": _iso(r["installed_at"]),
        "enabled_by": r["enabled_by"],
        "enabled_at": _iso(r["enabled_at"]),
    }


@dataclass(frozen=True, slots=True)
class Installed:
    plugin: dict[str, Any]
    created: bool  # False: the very same bundle was installed already


class VersionExists(Exception):
    """This version is installed already, with another bundle."""


class PluginEnabled(Exception):
    """An enabled version cannot be removed: disable it first."""


class PluginRegistry:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def install(self, plugin: Plugin, *, installed_by: str) -> Installed:
        m = plugin.manifest
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                f"""INSERT INTO plugins (name, version, sha256, bundle, size, manifest, tool,
                                         installed_by)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                    ON CONFLICT (name, version) DO NOTHING RETURNING {_COLUMNS}""",
                m.name, m.version, plugin.bundle.sha256, plugin.bundle.archive,
                len(plugin.bundle.archive), m.as_json(), plugin.tool.model_dump(mode="json"),
                installed_by,
            )
            if row is not None:
                return Installed(plugin_json(row), created=True)
            row = await conn.fetchrow(
                f"SELECT {_COLUMNS} FROM plugins WHERE name = $1 AND version = $2", m.name, m.version)
        if row is None or row["sha256"] != plugin.bundle.sha256:
            raise VersionExists(f"{m.name} {m.version} is installed with another bundle")
        return Installed(plugin_json(row), created=False)

    async def list(self, name: str | None = None) -> list[dict[str, Any]]:
        rows = await self._pool.fetch(
            f"""SELECT {_COLUMNS} FROM plugins WHERE ($1::text IS NULL OR name = $1)
                ORDER BY name, installed_at, version LIMIT 1000""",
            name,
        )
        return [plugin_json(r) for r in rows]

    async def get(self, name: str, version: str) -> dict[str, Any] | None:
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM plugins WHERE name = $1 AND version = $2", name, version)
        return plugin_json(row) if row else None

    async def enable(self, name: str, version: str, *, by: str) -> dict[str, Any] | None:
        """Enable one version, disabling any other of the same plugin, atomically."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT 1 FROM plugins WHERE name = $1 FOR UPDATE", name)
            exists = await conn.fetchval(
                "SELECT 1 FROM plugins WHERE name = $1 AND version = $2", name, version)
            if exists is None:
                return None
            await conn.execute(
                "UPDATE plugins SET enabled = false WHERE name = $1 AND enabled AND version <> $2",
                name, version)
            row = await conn.fetchrow(
                f"""UPDATE plugins SET enabled = true,
                        enabled_by = CASE WHEN enabled THEN enabled_by ELSE $3 END,
                        enabled_at = CASE WHEN enabled THEN enabled_at ELSE now() END
                    WHERE name = $1 AND version = $2 RETURNING {_COLUMNS}""",
                name, version, by)
        return plugin_json(row) if row else None

    async def disable(self, name: str) -> dict[str, Any] | None:
        row = await self._pool.fetchrow(
            f"""UPDATE plugins SET enabled = false WHERE name = $1 AND enabled
                RETURNING {_COLUMNS}""", name)
        return plugin_json(row) if row else None

    async def remove(self, name: str, version: str) -> dict[str, Any] | None:
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                f"SELECT {_COLUMNS} FROM plugins WHERE name = $1 AND version = $2 FOR UPDATE",
                name, version)
            if row is None:
                return None
            if row["enabled"]:
                raise PluginEnabled(f"{name} {version} is enabled; disable it first")
            await conn.execute("DELETE FROM plugins WHERE name = $1 AND version = $2", name, version)
        return plugin_json(row)

    async def catalog_index(self, limit: int = 5000) -> list[asyncpg.Record]:
        """One row per plugin, its tool whole: the enabled version, else the latest installed
        (for governance's whole catalog, /v1/admin/catalog)."""
        return await self._pool.fetch(
            """SELECT DISTINCT ON (name) name, version, sha256, enabled, tool FROM plugins
               ORDER BY name, enabled DESC, installed_at DESC, version DESC LIMIT $1""", limit)

    async def enabled(self) -> list[asyncpg.Record]:
        """The enabled versions, bundles included (for the plugin host)."""
        return await self._pool.fetch(
            "SELECT name, version, sha256, bundle, manifest, tool FROM plugins WHERE enabled"
            " ORDER BY name")

    async def enabled_index(self) -> list[asyncpg.Record]:
        """The enabled versions without their bundles (for the proxy's directory)."""
        return await self._pool.fetch(
            "SELECT name, version, sha256, manifest, tool FROM plugins WHERE enabled ORDER BY name")

"""The enabled plugin versions, as the registry in Postgres says, followed live: the catalog
shows a plugin's tool only as the exact manifest of its enabled version."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import asyncpg
import orjson
import structlog
from pydantic import ValidationError

from infra.pg_listener import Follower, Listener
from services.plugins.registry import CHANNEL, PluginRegistry
from wire.manifest import ToolManifest

log = structlog.get_logger("toolproxy.plugins.directory")


def manifest_digest(m: ToolManifest) -> str:
    """The same digest the catalog keeps of an announced manifest."""
    return hashlib.sha256(orjson.dumps(m.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True, slots=True)
class EnabledPlugin:
    name: str
    version: str
    sha256: str
    tool: ToolManifest
    digest: str
    internal_api: frozenset[str]


class PluginDirectory:
    def __init__(self, pool: asyncpg.Pool, listener: Listener) -> None:
        self._registry = PluginRegistry(pool)
        self._listener = listener
        self._enabled: dict[str, EnabledPlugin] = {}
        self._follower: Follower | None = None

    async def start(self) -> None:
        self._follower = await self._listener.follow(
            CHANNEL, reload=self.refresh, every_s=30.0, reload_first=True, name="plugin-directory")

    async def close(self) -> None:
        if self._follower is not None:
            await self._follower.close()

    async def refresh(self) -> None:
        enabled: dict[str, EnabledPlugin] = {}
        for row in await self._registry.enabled_index():
            try:
                tool = ToolManifest.model_validate(row["tool"])
            except ValidationError:
                log.error("plugin_manifest_invalid", plugin=row["name"], version=row["version"])
                continue
            enabled[row["name"]] = EnabledPlugin(
                name=row["name"], version=row["version"], sha256=row["sha256"], tool=tool,
                digest=manifest_digest(tool),
                internal_api=frozenset(row["manifest"]["permissions"]["internal_api"]))
        self._enabled = enabled

    def get(self, name: str) -> EnabledPlugin | None:
        return self._enabled.get(name)

    def admitted_digest(self, name: str) -> str | None:
        e = self._enabled.get(name)
        return e.digest if e is not None else None

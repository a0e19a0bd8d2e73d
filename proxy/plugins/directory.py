"""The enabled plugin versions, as the registry in Postgres says, followed live: the catalog
shows a plugin's tool only as the exact manifest of its enabled version."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from dataclasses import dataclass

import asyncpg
import orjson
import structlog
from pydantic import ValidationError

from pdp.listener import Listener
from services.plugins.registry import CHANNEL, PluginRegistry
from services.sdk.manifest import ToolManifest

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
    def __init__(self, pool: asyncpg.Pool, listener: Listener | None = None) -> None:
        self._registry = PluginRegistry(pool)
        self._listener = listener
        self._enabled: dict[str, EnabledPlugin] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.refresh()
        if self._listener is not None:
            await self._listener.subscribe(CHANNEL, lambda _: self._wake.set(),
                                           on_reconnect=self._wake.set)
        self._task = asyncio.create_task(self._follow(), name="plugin-directory")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _follow(self) -> None:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 30.0)
            self._wake.clear()
            try:
                await self.refresh()
            except Exception as exc:
                log.warning("plugin_directory_refresh_failed", error=str(exc))
                await asyncio.sleep(1.0)
                self._wake.set()

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

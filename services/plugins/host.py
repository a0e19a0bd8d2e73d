"""The plugin host: serves every enabled plugin's tool over NATS like any service, running
its entry (exactly the installed bundle, its SHA-256 checked) in the sandbox worker pool."""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
import structlog
from nats.aio.client import Client as NATS

from infra.lifecycle import Parts
from infra.pg_listener import Follower, Listener
from services.plugins.bundle import entry_source, read_archive
from services.plugins.config import SandboxLimits
from services.plugins.errors import PLUGIN_FORBIDDEN, PluginFailure
from services.plugins.internal import InternalCalls
from services.plugins.manifest import PluginManifest, parse_plugin_json
from services.plugins.pool import Job, WorkerPool
from services.plugins.registry import CHANNEL, PluginRegistry
from services.sdk import CallContext, Service
from services.sdk.trust import CallTrust
from wire.manifest import ToolManifest
from services.sdk.service import ToolDef, ToolResult

log = structlog.get_logger("toolproxy.plugins.host")

# Replies leave the host this long before the call's deadline (a tenth of the budget, 0.1 to
# 0.3 s), so the proxy hears the plugin's own code (plugin_timeout) rather than a bus timeout.
def deadline_margin(budget_s: float) -> float:
    return max(0.1, min(0.3, budget_s / 10))


@dataclass(frozen=True, slots=True)
class LoadedPlugin:
    manifest: PluginManifest
    tool: ToolManifest
    sha256: str
    source: str


def load(row: asyncpg.Record) -> LoadedPlugin:
    """An enabled registry row, as it will run. Raises ValueError if the stored bundle is not
    what was installed (its SHA-256) or does not hold what its manifest says."""
    archive = bytes(row["bundle"])
    if hashlib.sha256(archive).hexdigest() != row["sha256"]:
        raise ValueError("the stored bundle does not match its SHA-256")
    bundle = read_archive(archive)
    declared = row["manifest"]["permissions"]["internal_api"]
    manifest = parse_plugin_json(row["manifest"], known_services=set(declared))
    tool = ToolManifest.model_validate(row["tool"])
    if tool.tool_id != manifest.name or not tool.plugin:
        raise ValueError("the stored catalog entry is not this plugin's")
    return LoadedPlugin(manifest=manifest, tool=tool, sha256=row["sha256"],
                        source=entry_source(bundle, manifest.entry))


class PluginHost:
    def __init__(self, pool: asyncpg.Pool, nc: NATS, workers: WorkerPool, *,
                 database_url: str | None = None, refresh_s: float = 5.0,
                 heartbeat_s: float = 2.0, trust: CallTrust | None = None) -> None:
        self._registry = PluginRegistry(pool)
        # The proxy's call-context keys: one seen-set for every plugin this host serves.
        self._trust = trust or CallTrust.from_env()
        self._nc = nc
        self.workers = workers
        self._database_url = database_url
        self._refresh_s = refresh_s
        self._heartbeat_s = heartbeat_s
        self._running: dict[str, tuple[LoadedPlugin, Service]] = {}
        self._parts = Parts()  # the listener (when there is a database URL) and the follower
        self._lock = asyncio.Lock()

    @property
    def limits(self) -> SandboxLimits:
        return self.workers.limits

    def serving(self) -> dict[str, str]:
        """name -> version of the plugins served right now."""
        return {name: lp.manifest.version for name, (lp, _) in self._running.items()}

    async def start(self) -> None:
        """Serve what is enabled, then follow the registry: at once on its NOTIFY (without a
        database URL, only every `refresh_s`); a failed round is tried again after that."""
        if self._database_url is None:
            follower = Follower("plugin-host", reload=self.reconcile, every_s=self._refresh_s,
                                retry_s=self._refresh_s)
            await follower.start(reload_first=True)
            self._parts.started("follower", follower)
            return
        listener = await self._parts.start("listener", Listener(self._database_url))
        self._parts.started("follower", await listener.follow(
            CHANNEL, reload=self.reconcile, every_s=self._refresh_s, retry_s=self._refresh_s,
            reload_first=True, name="plugin-host"))

    async def close(self) -> None:
        await self._parts.close()
        async with self._lock:
            for _, service in self._running.values():
                await service.stop()
            self._running.clear()

    async def reconcile(self) -> None:
        """Serve exactly the enabled versions: start new ones, stop disabled or replaced ones."""
        async with self._lock:
            rows = {r["name"]: r for r in await self._registry.enabled()}
            for name, (lp, service) in list(self._running.items()):
                row = rows.get(name)
                if row is None or row["sha256"] != lp.sha256:
                    await service.stop()
                    del self._running[name]
                    log.info("plugin_stopped", plugin=name, version=lp.manifest.version)
            for name, row in rows.items():
                if name in self._running:
                    continue
                try:
                    lp = load(row)
                except Exception as exc:
                    log.error("plugin_refused", plugin=name, version=row["version"], error=str(exc))
                    continue
                service = Service(name=f"plugin:{name}"[:64], heartbeat_s=self._heartbeat_s,
                                  tools=[ToolDef(manifest=lp.tool, handler=self._handler(lp))])
                await service.start(self._nc, self._trust)
                self._running[name] = (lp, service)
                log.info("plugin_serving", plugin=name, version=lp.manifest.version, sha256=lp.sha256)

    def _handler(self, lp: LoadedPlugin) -> Any:
        async def handle(args: dict[str, Any], ctx: CallContext) -> ToolResult:
            if ctx.confidential:  # the policy already refuses: never run one anyway
                raise PluginFailure(PLUGIN_FORBIDDEN, "plugins never run in confidential mode")
            deadline = ctx.deadline - deadline_margin(ctx.remaining())
            # All the plugin ever sees of the call: never the session, the message, the agent.
            context = {"agent_run_id": ctx.run_id, "team_id": ctx.team_id,
                       "capabilities": list(lp.manifest.capabilities)}
            relay = InternalCalls(self._nc, plugin=lp.manifest, ctx=ctx, deadline=deadline,
                                  max_calls=self.limits.max_internal_calls)
            job = Job(source=lp.source, args=args, context=context,
                      internal=bool(lp.manifest.internal_api))
            started = time.perf_counter()
            try:
                result = await self.workers.run(job, deadline=deadline, on_internal=relay)
            except PluginFailure as exc:
                if relay.forbidden is not None:
                    raise PluginFailure(PLUGIN_FORBIDDEN, relay.forbidden) from exc
                log.info("plugin_call_failed", plugin=lp.manifest.name, code=exc.code)
                raise
            if relay.forbidden is not None:
                raise PluginFailure(PLUGIN_FORBIDDEN, relay.forbidden)
            log.debug("plugin_call_done", plugin=lp.manifest.name,
                      ms=round((time.perf_counter() - started) * 1000, 3))
            return ToolResult(
                output=result.output,
                compute_units=round(result.cpu_s, 6),  # the sandbox's CPU seconds
                provenance_refs=[{"type": "plugin", "name": lp.manifest.name,
                                  "version": lp.manifest.version, "sha256": lp.sha256}],
            )

        return handle

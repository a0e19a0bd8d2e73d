"""The live tool catalog: manifests announced by services, persisted, with availability."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from dataclasses import dataclass, field
from typing import Protocol

import asyncpg
import orjson
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from pydantic import ValidationError

from proxy.metrics import Metrics
from wire import protocol as p
from wire.manifest import ToolManifest

log = structlog.get_logger("toolproxy.catalog")

_MISSED_BEATS = 3  # an instance unheard for this many heartbeats is gone


@dataclass
class _Tool:
    manifest: ToolManifest
    digest: str
    instances: dict[str, float] = field(default_factory=dict)  # instance -> expiry (monotonic)
    raw_digest: str = ""  # of the announced JSON, before validation


def _digest(manifest: ToolManifest) -> str:
    return _raw_digest(manifest.model_dump(mode="json"))


def _raw_digest(raw: object) -> str:
    try:
        return hashlib.sha256(orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)).hexdigest()
    except TypeError:
        return ""


class PluginGate(Protocol):
    def admitted_digest(self, name: str) -> str | None:
        """The manifest digest of the plugin tool's enabled version, None if none is."""


class Catalog:
    """Only tools in here can be invoked; anything else is `unknown_tool` before any publish.

    Plugin tools are kept per manifest (version) and shown only as the exact manifest of the
    enabled version (the gate); a built-in tool's id is never taken by a plugin."""

    def __init__(self, nc: NATS, pool: asyncpg.Pool, metrics: Metrics,
                 plugins: PluginGate | None = None) -> None:
        self._nc = nc
        self._pool = pool
        self._metrics = metrics
        self._plugins = plugins
        self._tools: dict[str, _Tool] = {}
        self._plugin_tools: dict[tuple[str, str], _Tool] = {}  # (tool_id, digest)
        self._subs: list[Subscription] = []
        self._persist_tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Condition()

    async def start(self) -> None:
        for row in await self._pool.fetch("SELECT name, manifest, manifest_hash FROM tools"):
            try:
                m = ToolManifest.model_validate(row["manifest"])
            except ValidationError:
                log.warning("persisted_manifest_invalid", tool=row["name"])
                continue
            if m.plugin:
                self._plugin_tools[(m.tool_id, _digest(m))] = _Tool(m, _digest(m), raw_digest=_digest(m))
            else:
                self._tools[m.tool_id] = _Tool(m, row["manifest_hash"], raw_digest=_digest(m))
        self._subs.append(await self._nc.subscribe(p.ANNOUNCE_SUBJECT, cb=self._on_announce))
        self._subs.append(await self._nc.subscribe(p.GOODBYE_SUBJECT, cb=self._on_goodbye))
        await self._nc.publish(p.DISCOVER_SUBJECT, b"{}")
        await self._nc.flush()
        self._update_gauges()

    async def rediscover(self) -> None:
        """Ask every service to announce itself now (after a reconnect: liveness at once)."""
        await self._nc.publish(p.DISCOVER_SUBJECT, b"{}")

    async def close(self) -> None:
        for sub in self._subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        self._subs.clear()
        if self._persist_tasks:
            await asyncio.wait(self._persist_tasks, timeout=5)

    # --- reading ------------------------------------------------------------------------

    def _find(self, name: str) -> _Tool | None:
        t = self._tools.get(name)
        if t is not None or self._plugins is None:
            return t
        digest = self._plugins.admitted_digest(name)
        return self._plugin_tools.get((name, digest)) if digest is not None else None

    def get(self, name: str) -> ToolManifest | None:
        t = self._find(name)
        return t.manifest if t else None

    def available(self, name: str) -> bool:
        t = self._find(name)
        if t is None:
            return False
        now = time.monotonic()
        return any(expiry > now for expiry in t.instances.values())

    def manifests(self) -> list[ToolManifest]:
        shown = list(self._tools.values())
        names = {name for name, _ in self._plugin_tools}
        shown += [t for t in (self._find(n) for n in names - self._tools.keys()) if t is not None]
        return [t.manifest for t in sorted(shown, key=lambda t: t.manifest.tool_id)]

    def internal_services(self) -> set[str]:
        """The internal APIs a plugin may declare: the services of the non-plugin tools."""
        return {name.split(".", 1)[0] for name in self._tools}

    async def wait_available(self, names: list[str], timeout: float = 10.0) -> None:
        async def ready() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: all(self.available(n) for n in names))

        await asyncio.wait_for(ready(), timeout)

    # --- ingesting ----------------------------------------------------------------------

    async def _on_announce(self, msg: Msg) -> None:
        try:
            ann = p.Announcement.model_validate_json(msg.data)
        except ValidationError:
            self._metrics.catalog_rejected.inc()
            log.warning("announcement_invalid")
            return
        expiry = time.monotonic() + ann.heartbeat_s * _MISSED_BEATS
        for raw in ann.tools:
            # Heartbeats repeat the same manifests: validate (costly: JSON Schema meta-checks)
            # only what is new or changed; an identical raw manifest just refreshes liveness.
            raw_digest = _raw_digest(raw)
            known = self._known(raw, raw_digest)
            if known is not None and known.raw_digest == raw_digest:
                known.instances[ann.instance] = expiry
                continue
            try:
                m = ToolManifest.model_validate(raw)
            except ValidationError as exc:
                # Unclassified or malformed: it never enters the catalog.
                self._metrics.catalog_rejected.inc()
                log.warning(
                    "manifest_refused",
                    service=ann.service,
                    tool=str(raw.get("tool_id"))[:64] if isinstance(raw, dict) else None,
                    error=exc.errors()[0]["msg"],
                )
                continue
            self._accept(m, ann.instance, expiry, raw_digest)
        self._update_gauges()
        async with self._changed:
            self._changed.notify_all()

    def _known(self, raw: object, raw_digest: str) -> _Tool | None:
        if not isinstance(raw, dict):
            return None
        name = raw.get("tool_id")
        if raw.get("plugin") is True and isinstance(name, str):
            return self._plugin_tools.get((name, raw_digest))
        return self._tools.get(name) if isinstance(name, str) else None

    def _accept(self, m: ToolManifest, instance: str, expiry: float, raw_digest: str) -> None:
        digest = _digest(m)
        if m.plugin:
            if m.tool_id in self._tools:
                # A built-in (or any service's) tool keeps its id: a plugin never shadows it.
                log.warning("plugin_tool_name_taken", tool=m.tool_id)
                return
            key = (m.tool_id, digest)
            plugin_tool = self._plugin_tools.get(key)
            if plugin_tool is None:
                plugin_tool = self._plugin_tools[key] = _Tool(m, digest)
                task = asyncio.create_task(self._persist(m, digest))
                self._persist_tasks.add(task)
                task.add_done_callback(self._persist_tasks.discard)
            plugin_tool.raw_digest = raw_digest
            plugin_tool.instances[instance] = expiry
            return
        known = self._tools.get(m.tool_id)
        if known is None or known.digest != digest:
            if known is not None and (
                known.manifest.category != m.category or known.manifest.action != m.action
            ):
                log.warning(
                    "tool_reclassified",
                    tool=m.tool_id,
                    old=f"{known.manifest.category}/{known.manifest.action}",
                    new=f"{m.category}/{m.action}",
                )
            instances = known.instances if known else {}
            self._tools[m.tool_id] = known = _Tool(m, digest, instances)
            task = asyncio.create_task(self._persist(m, digest))
            self._persist_tasks.add(task)
            task.add_done_callback(self._persist_tasks.discard)
        known.raw_digest = raw_digest
        known.instances[instance] = expiry

    async def _persist(self, m: ToolManifest, digest: str) -> None:
        try:
            await self._pool.execute(
                """INSERT INTO tools (name, manifest, manifest_hash) VALUES ($1, $2, $3)
                   ON CONFLICT (name) DO UPDATE
                   SET manifest = EXCLUDED.manifest, manifest_hash = EXCLUDED.manifest_hash,
                       updated_at = now()
                   WHERE tools.manifest_hash <> EXCLUDED.manifest_hash""",
                m.tool_id, m.model_dump(mode="json"), digest,
            )
        except Exception as exc:  # the in-memory catalog is already right; next change retries
            log.warning("manifest_persist_failed", tool=m.tool_id, error=str(exc))

    async def _on_goodbye(self, msg: Msg) -> None:
        try:
            bye = p.Goodbye.model_validate_json(msg.data)
        except ValidationError:
            return
        for t in [*self._tools.values(), *self._plugin_tools.values()]:
            t.instances.pop(bye.instance, None)
        self._update_gauges()

    def mark_unreachable(self, name: str) -> None:
        """No responders right now: every instance we knew of for this tool is gone."""
        t = self._find(name)
        if t is not None:
            t.instances.clear()
            self._update_gauges()

    def _update_gauges(self) -> None:
        shown = self.manifests()
        up = sum(1 for m in shown if self.available(m.tool_id))
        self._metrics.catalog_tools.labels(available="true").set(up)
        self._metrics.catalog_tools.labels(available="false").set(len(shown) - up)

"""The upstream bridge: keeps a link to each registered upstream, syncs their tool lists (on
request, periodically, on notifications/tools/list_changed), and serves each upstream's
classified tools over NATS like any service, each call checked against its pin first."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import asyncpg
import orjson
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from infra.lifecycle import Parts, cancel_and_wait
from infra.pg_listener import Follower, Listener
from infra.secret_box import SecretBox
from services.netguard.guard import Guard
from services.sdk import CallContext, Service
from services.sdk.errors import ManifestError, ToolError
from services.sdk.service import ToolDef, ToolResult
from services.sdk.trust import CallTrust
from services.upstreams import store
from services.upstreams.catalog_entry import manifest_for
from services.upstreams.config import UpstreamSettings
from services.upstreams.definitions import MAX_DEFINITION_BYTES, definition_of, definition_size
from services.upstreams.addresses import check_url
from services.upstreams.breaker import Breaker
from services.upstreams.errors import ToolChanged, UpstreamUnavailable
from services.upstreams.openapi_link import OpenApiLink, openapi_link
from wire import protocol as p

if TYPE_CHECKING:  # the MCP client loads with the first MCP upstream, not with the bridge
    from services.upstreams.link import Link

log = structlog.get_logger("toolproxy.upstreams")

GOVERNANCE_SUBJECT = "toolproxy.governance.upstreams"
QUEUE = "toolproxy-upstreams"
MARGIN_S = 0.2  # replies leave before the call's deadline, so the proxy hears our code


@dataclass
class _Served:
    upstream: store.Upstream
    link: Link | OpenApiLink
    service: Service | None = None
    fingerprint: str = ""
    tools: dict[str, tuple[str, str]] = field(default_factory=dict)  # tool_id -> (tool, state)
    last_sync: float = 0.0
    sync_pending: bool = False  # a list_changed sync is waiting: further notifications join it
    sync_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class UpstreamBridge:
    def __init__(self, pool: asyncpg.Pool, nc: NATS, settings: UpstreamSettings, box: SecretBox,
                 guard: Guard, *, database_url: str | None = None, heartbeat_s: float = 2.0,
                 refresh_s: float = 5.0, trust: CallTrust | None = None) -> None:
        self._pool, self._nc, self._settings, self._box, self._guard = pool, nc, settings, box, guard
        self._database_url = database_url
        self._trust = trust or CallTrust.from_env()  # the proxy's call-context keys
        self._heartbeat_s, self._refresh_s = heartbeat_s, refresh_s
        self._served: dict[str, _Served] = {}
        self._parts = Parts()
        self._lock = asyncio.Lock()
        self._sub: Subscription | None = None
        self._periodic: asyncio.Task[None] | None = None

    def serving(self) -> dict[str, list[str]]:
        return {n: sorted(s.tools) for n, s in self._served.items()}

    def links(self) -> dict[str, tuple[bool, bool, int]]:
        """For /metrics: upstream -> (session up and breaker closed, breaker open, tools served)."""
        return {n: (s.link.healthy, s.link.breaker.open, len(s.tools)) for n, s in self._served.items()}

    async def start(self) -> None:
        self._sub = await self._nc.subscribe(p.UPSTREAM_SYNC_SUBJECT, queue=QUEUE, cb=self._on_sync)
        if self._database_url is None:
            follower = Follower("upstreams", reload=self.reconcile, every_s=self._refresh_s,
                                retry_s=self._refresh_s)
            await follower.start(reload_first=True)
            self._parts.started("follower", follower)
        else:
            listener = await self._parts.start("listener", Listener(self._database_url))
            self._parts.started("follower", await listener.follow(
                store.CHANNEL, reload=self.reconcile, every_s=self._refresh_s,
                retry_s=self._refresh_s, reload_first=True, name="upstreams"))
        self._periodic = asyncio.create_task(self._sync_periodically(), name="upstreams:sync")

    async def close(self) -> None:
        if self._periodic is not None:
            await cancel_and_wait(self._periodic)
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
        await self._parts.close()
        async with self._lock:
            for s in self._served.values():
                await self._stop(s)
            self._served.clear()

    async def _stop(self, s: _Served) -> None:
        if s.service is not None:
            await s.service.stop()
            s.service = None
        await s.link.close()

    # --- following the registry ------------------------------------------------------------

    async def reconcile(self) -> None:
        async with self._lock:
            ups = {u.name: u for u in await store.list_all(self._pool)}
            rows: dict[str, list[asyncpg.Record]] = {}
            for r in await store.tools(self._pool):
                rows.setdefault(r["upstream"], []).append(r)
            for name, s in list(self._served.items()):
                u = ups.get(name)
                if u is None or _registration(u) != _registration(s.upstream):
                    await self._stop(s)
                    del self._served[name]
            for name, u in ups.items():
                s = self._served.get(name)
                if s is None:
                    try:
                        s = self._served[name] = self._link(u)
                    except Exception as exc:  # refused command, unopenable secret: nothing starts
                        log.warning("upstream_refused", upstream=name, error=str(exc)[:300])
                        continue
                s.upstream = u
                await self._serve(s, rows.get(name, []))

    def _link(self, u: store.Upstream) -> _Served:
        if u.transport == "openapi":
            served = _Served(upstream=u, link=openapi_link(u, self._settings, self._box, self._guard))
            return served
        from services.upstreams.endpoints import endpoint
        from services.upstreams.link import Link

        ep = endpoint(u, self._settings, self._box, self._guard)
        served: _Served

        async def precheck() -> None:
            if ep.url is not None:
                await check_url(self._guard, ep.url, self._settings.host_patterns())

        async def list_changed() -> None:
            await self._sync_soon(served)

        def health() -> None:
            if served.service is not None and served.service._nc is not None:
                asyncio.get_running_loop().create_task(served.service.announce())

        link = Link(ep, Breaker(self._settings.upstream_breaker_failures,
                                self._settings.upstream_breaker_open_s),
                    on_list_changed=list_changed, on_health=health, precheck=precheck)
        served = _Served(upstream=u, link=link)
        link.start()
        return served

    async def _serve(self, s: _Served, rows: list[asyncpg.Record]) -> None:
        defs: list[ToolDef] = []
        tools: dict[str, tuple[str, str]] = {}
        for r in rows:
            if r["tool_id"] is None or r["pinned_hash"] is None:
                continue
            try:
                m = manifest_for(r["tool_id"], r["pinned_hash"], r["pinned_definition"],
                                 r["classification"], s.upstream.timeout_ms)
            except ManifestError as exc:
                log.warning("upstream_tool_refused", tool=r["tool_id"], error=str(exc))
                continue
            tools[m.tool_id] = (r["tool"], r["state"])
            defs.append(ToolDef(manifest=m, handler=self._handler(s, r["tool"], r["pinned_definition"])))
        s.tools = tools
        fingerprint = orjson.dumps(sorted(d.manifest.model_dump_json() for d in defs)).decode()
        if fingerprint == s.fingerprint and s.service is not None:
            await s.service.announce()  # states may have changed: hidden ones drop out
            return
        if s.service is not None:
            await s.service.stop()
            s.service = None
        s.fingerprint = fingerprint
        if defs:
            s.service = Service(name=f"upstream:{s.upstream.name}"[:64], tools=defs,
                                heartbeat_s=self._heartbeat_s,
                                max_concurrency=max(s.upstream.max_concurrency * 4, 16),
                                hidden=lambda tool_id, s=s: self._hidden(s, tool_id))
            await s.service.start(self._nc, self._trust)
            log.info("upstream_serving", upstream=s.upstream.name, tools=sorted(tools))

    @staticmethod
    def _hidden(s: _Served, tool_id: str) -> bool:
        entry = s.tools.get(tool_id)
        return entry is None or entry[1] != "classified" or not s.link.healthy

    def _handler(self, s: _Served, tool: str, pinned: dict[str, Any]) -> Any:
        async def handle(args: dict[str, Any], ctx: CallContext) -> ToolResult:
            # Read at call time from the registry: a definition that left its pin in any
            # replica's sync is refused here, before anything reaches the upstream.
            state = await store.pin_state(self._pool, s.upstream.name, tool)
            if state is None or state[0] != "classified" or not state[1]:
                raise ToolChanged(f"{s.upstream.name}'s {tool} changed since governance "
                                  "classified it (or is gone); it waits for approval")
            budget = ctx.remaining() - MARGIN_S
            if isinstance(s.link, OpenApiLink):
                return await s.link.call(pinned, args, max(min(budget, s.link.endpoint.timeout_s), 0.05))
            from services.upstreams.results import to_result

            result = await s.link.call_tool(tool, args, max(min(budget, s.link.endpoint.timeout_s), 0.05))
            return await to_result(result, ctx, self._pool, upstream=s.upstream.name, tool=tool,
                                   max_bytes=self._settings.upstream_max_result_bytes)

        return handle

    # --- syncing ---------------------------------------------------------------------------

    def protocol_version(self, name: str) -> str | None:
        s = self._served.get(name)
        return s.link.protocol_version if s is not None else None

    async def sync(self, name: str) -> list[dict[str, Any]]:
        s = self._served.get(name)
        if s is None:
            await self.reconcile()
            s = self._served.get(name)
        if s is None:
            raise UpstreamUnavailable(f"{name} is not registered, or cannot be started")
        async with s.sync_lock:
            s.last_sync = time.monotonic()
            try:
                listed = await s.link.list_tools()
            except ToolError as exc:
                await store.record_sync_error(self._pool, name, exc.message)
                raise
            definitions = []
            for t in listed:
                d = definition_of(t)
                if not isinstance(d["name"], str) or definition_size(d) > MAX_DEFINITION_BYTES:
                    continue  # unreadable or oversized: never a candidate
                definitions.append(d)
            outcome = await store.record_sync(self._pool, name, definitions)
        for tool in outcome.changed + outcome.gone:
            event = {"type": "upstream.tool_changed" if tool in outcome.changed else "upstream.tool_gone",
                     "upstream": name, "tool": tool}
            log.warning("upstream_tool_unpinned", **event)
            with contextlib.suppress(Exception):
                await self._nc.publish(GOVERNANCE_SUBJECT, orjson.dumps(event))
        await self.reconcile()
        return [{"tool": d["name"], "hash": _hash(d)} for d in definitions]

    async def _sync_soon(self, s: _Served) -> None:
        """On list_changed: at most one sync per interval however many notifications arrive."""
        if s.sync_pending:
            return
        s.sync_pending = True
        try:
            wait = s.last_sync + self._settings.upstream_list_changed_min_s - time.monotonic()
            await asyncio.sleep(max(wait, 0.0))
        finally:
            s.sync_pending = False
        with contextlib.suppress(Exception):
            await self.sync(s.upstream.name)

    async def _sync_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._settings.upstream_sync_every_s)
            for name in list(self._served):
                try:
                    await self.sync(name)
                except Exception as exc:
                    log.info("upstream_sync_failed", upstream=name, error=str(exc)[:300])

    async def _on_sync(self, msg: Msg) -> None:
        try:
            name = orjson.loads(msg.data)["name"]
            reply: dict[str, Any] = {"ok": True, "tools": await self.sync(str(name)),
                                     "protocol_version": self.protocol_version(str(name))}
        except ToolError as exc:
            reply = {"ok": False, "error": {"code": exc.code, "message": exc.message[:1000]}}
        except Exception as exc:
            reply = {"ok": False, "error": {"code": "upstream_error", "message": str(exc)[:500]}}
        with contextlib.suppress(Exception):
            await msg.respond(orjson.dumps(reply))


def _hash(d: dict[str, Any]) -> str:
    from services.upstreams.definitions import definition_hash

    return definition_hash(d)


def _registration(u: store.Upstream) -> tuple[Any, ...]:
    return (u.transport, u.url, u.command, u.args, u.secret_header, u.secret_sealed,
            u.timeout_ms, u.max_concurrency, u.document_url, u.created_at)  # created_at: re-registered

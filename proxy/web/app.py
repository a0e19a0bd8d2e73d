"""The app factory: middleware order, routes, and the resources the app owns."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import structlog
from aiohttp import web

from pdp.data.approvals import ApprovalRepository
from pdp.cache import DecisionCache
from pdp.embedded import EmbeddedEngine
from pdp.engine import Engine
from pdp.errors import PolicyInvalid
from pdp.data.grants import GrantCache, GrantRepository
from infra.pg_listener import Listener
from pdp.data.overrides import OverrideRepository
from pdp.point import PolicyDecisionPoint
from pdp.policy_set import PolicySet, load_policy_dir
from pdp.policy_store import PolicyWatcher, active_policies
from pdp.data.quotas import Quota, QuotaRepository
from pdp.data.standing import StandingApprovals, StandingRepository
from pdp.data.team_rules import TeamRuleRepository
from proxy.web import keys as k
from proxy.web.admin import keys as admin_keys
from proxy.web.api import keys as api_keys
from infra import tracing
from infra.lifecycle import Parts
from infra.wakeups import TeamWakeups
from proxy.core.approval_flow import ApprovalFlow
from infra.bus import Reconnects, connect
from proxy.core.signing import ContextSigner
from infra.bus import close as close_nats
from proxy.core.catalog import Catalog
from proxy.core.toolsets import ToolSets
from proxy.config import Settings
from proxy.web.console import api as console_api
from proxy.web.console import app as console
from proxy.web.console import routes as console_routes
from proxy.web.console import signin as console_signin
from infra.db import create_pool
from infra.nats_inbox import Inbox
from proxy.records.journal import Journal
from proxy.core.limits.counters import Counters
from proxy.core.limits.stores import make_limiter
from proxy.metrics import Metrics
from proxy.allowlists import HostAllowlist, OriginAllowlist
from proxy.web import native
from proxy.web.http.headers import harden_response
from proxy.web.parts import owning
from proxy.web.http.team_gate import TeamGate
from proxy.web.middlewares.auth import authenticate
from proxy.web.middlewares.body_deadline import body_deadline
from proxy.web.middlewares.errors import errors
from proxy.web.middlewares.hosts import allowed_host
from proxy.web.middlewares.http_metrics import http_metrics
from proxy.web.middlewares.inputs import refuse_nul
from proxy.web.middlewares.mcp_origin import mcp_origin
from proxy.web.middlewares.request_context import request_context
from proxy.web.middlewares.team_gate import team_gate
from proxy.web.middlewares.tracing import trace_request
from proxy.core.housekeeping import Housekeeping
from proxy.core.idempotency import IdempotencyStore
from proxy.core.inflight import InFlight
from proxy.core.pipeline import Pipeline
from proxy.web.admin import agents as agent_routes
from proxy.web.admin import catalog as admin_catalog
from proxy.web.admin import toolsets as admin_toolsets
from proxy.web.admin import plugins as plugin_routes
from proxy.core.plugins.calls import PluginCalls
from proxy.core.plugins.directory import PluginDirectory
from proxy.core.plugins.relay import InternalRelay
from services.plugins.registry import PluginRegistry
from proxy.core.run_budget import RunBudgets
from proxy.records.events import CHANNEL as EVENTS
from proxy.records.runs import RunRepository
from proxy.web.admin import egress as admin_egress
from proxy.web.admin import external_apis as admin_external_apis
from proxy.web.admin import openapi as admin_openapi
from proxy.web.admin import upstreams as admin_upstreams
from services.netguard.guard import Guard
from services.netguard.resolver import SystemResolver
from services.upstreams.config import UpstreamSettings
from proxy.web.admin import governance as admin_governance
from proxy.web.admin import grants as admin_grants
from proxy.web.admin import journal as admin_journal
from proxy.web.admin import quotas as admin_quotas
from proxy.web.admin import standing as admin_standing
from proxy.web.admin import team_rules as admin_team_rules
from proxy.web.api import approvals
from proxy.web.api import calls
from proxy.web.api import events
from proxy.web.mcp import app as mcp_app
from proxy.web.mcp import routes as mcp
from proxy.web.openai import routes as openai_tools
from proxy.web.api import probes
from proxy.web.openapi import document as openapi_document
from proxy.web.api import runs
from proxy.web.api import tools
from proxy.web.api import usage
from proxy.identity.metrics import IdentityMetrics
from proxy.identity.verifier import TokenVerifier
from proxy.web import wellknown
from proxy.web.api import turns as turn_routes
from proxy.turns.runtime import TurnRuntime
from infra.secret_box import SecretBox

log = structlog.get_logger("toolproxy.app")


async def _identity(app: web.Application, parts: Parts) -> None:
    verifier = app[k.VERIFIER]
    parts.on_close("identity", verifier.close)
    await verifier.start()  # the providers' keys start coming; nothing waits for them


async def _postgres(app: web.Application, parts: Parts) -> None:
    s = app[k.SETTINGS]
    app[k.POOL] = parts.started("pool", await create_pool(
        s.require_database_url(), min_size=s.db_pool_min, max_size=s.db_pool_max))
    app[k.JOURNAL_POOL] = parts.started("journal_pool", await create_pool(
        s.require_database_url(), min_size=1, max_size=1))
    app[k.LISTENER] = await parts.start("listener", Listener(s.require_database_url()))


async def _nats(app: web.Application, parts: Parts) -> None:
    reconnects = app[k.RECONNECTS] = Reconnects()
    s = app[k.SETTINGS]
    nc = app[k.NC] = await connect(s.require_nats_url(), name="toolproxy-proxy",
                                   reconnects=reconnects, auth=s.nats_auth())
    parts.on_close("nats", lambda: close_nats(nc))
    app[k.INBOX] = await parts.start("inbox", Inbox(nc))


def _engine(settings: Settings) -> Engine:
    if settings.pdp == "opa":
        from pdp.opa import OpaEngine

        assert settings.opa_url is not None
        return OpaEngine(settings.opa_url, check_every_s=settings.opa_check_every_s)
    return EmbeddedEngine()


async def _pdp(app: web.Application, parts: Parts) -> None:
    """Policy source, in order: TOOLPROXY_POLICY_DIR (pinned, for this replica only), else the
    revision active in Postgres (followed live), else the policies shipped in pdp/policies."""
    s = app[k.SETTINGS]
    pool = app[k.POOL]
    grants = await parts.start("grants", GrantCache(pool, app[k.LISTENER]))
    engine = parts.started("engine", _engine(s))
    metrics = app[k.METRICS]
    pdp = PolicyDecisionPoint(engine, grants, budget_s=s.pdp_budget_ms / 1000.0,
                              cache=DecisionCache(ttl_s=s.pdp_cache_ttl_s),
                              on_cache=lambda result: metrics.child(metrics.pdp_cache, result).inc())
    watcher: PolicyWatcher | None = None
    if s.policy_dir is not None:
        policies: PolicySet = load_policy_dir(s.policy_dir)
    else:
        policies = await active_policies(pool) or load_policy_dir()

        async def apply(new: PolicySet, pushed: bool) -> None:
            # A push (or a reconnect) loads it even at the same revision: an OPA server that
            # lost its policy gets it back; a periodic check only acts on a new revision.
            if new.revision == pdp.revision and not pushed:
                return
            try:
                revision = await pdp.load(new)
            except PolicyInvalid as exc:  # the previous revision keeps serving
                log.error("policy_rejected", revision=new.revision, error=str(exc)[:2000])
                return
            log.info("policy_loaded", engine=engine.name, revision=revision)

        watcher = PolicyWatcher(pool, app[k.LISTENER], apply)
    revision = await pdp.load(policies)
    log.info("policy_loaded", engine=engine.name, revision=revision)
    if watcher is not None:
        await parts.start("policy_watcher", watcher)
    app[k.GRANTS] = grants
    app[admin_keys.GRANT_REPO] = GrantRepository(pool)
    app[admin_keys.OVERRIDE_REPO] = OverrideRepository(pool)
    app[admin_keys.TEAM_RULE_REPO] = TeamRuleRepository(pool)
    app[k.PDP] = pdp


async def _catalog(app: web.Application, parts: Parts) -> None:
    # The enabled plugins first: the catalog shows a plugin tool only as its enabled version.
    directory = await parts.start("plugin_directory", PluginDirectory(app[k.POOL], app[k.LISTENER]))
    catalog = await parts.start("catalog", Catalog(app[k.NC], app[k.POOL], app[k.METRICS],
                                                   plugins=directory))
    app[admin_keys.PLUGIN_DIRECTORY] = directory
    app[admin_keys.PLUGIN_REGISTRY] = PluginRegistry(app[k.POOL])
    app[k.RECONNECTS].add("catalog", catalog.rediscover)
    app[k.CATALOG] = catalog
    app[k.TOOLSETS] = await parts.start("toolsets", ToolSets(app[k.POOL], app[k.LISTENER]))


async def _journal(app: web.Application, parts: Parts) -> None:
    journal = await parts.start("journal", Journal(app[k.NC], app[k.POOL], app[k.METRICS],
                                                   writer_pool=app[k.JOURNAL_POOL],
                                                   replicas=app[k.SETTINGS].jetstream_replicas))
    app[k.RECONNECTS].add("journal", journal.ensure)
    app[k.JOURNAL] = journal


async def _limits(app: web.Application, parts: Parts) -> None:
    metrics = app[k.METRICS]

    def remaining(team: str, agent: str | None, quota: Quota, used: Counters) -> None:
        for kind, limit, value in (
            ("invocations", quota.invocations, used.invocations),
            ("tokens", quota.tokens, used.tokens),
            ("compute_units", quota.compute_units, used.compute_units),
            ("cost_1t", quota.cost_1t, used.cost_1t),
        ):
            if limit is not None:
                metrics.quota_remaining.labels(team=team, agent=agent or "", kind=kind).set(
                    max(0.0, float(limit) - float(value)))

    s = app[k.SETTINGS]
    limiter = await parts.start("limiter", make_limiter(
        s.limits_store, nats=app[k.NC], pool=app[k.POOL], quota_of=app[k.GRANTS].quota,
        on_counted=remaining, team_per_minute=dict(s.team_rate_per_minute),
        replicas=s.jetstream_replicas, lease_s=s.limits_lease_s))
    app[k.RECONNECTS].add("limits", limiter.ensure)
    app[admin_keys.LIMITER] = limiter
    app[admin_keys.QUOTA_REPO] = QuotaRepository(app[k.POOL])


async def _pipeline(app: web.Application, parts: Parts) -> None:
    s = app[k.SETTINGS]
    inflight = await parts.start("inflight", InFlight(app[k.NC], app[k.POOL]))
    budgets = await parts.start("run_budgets", RunBudgets(app[k.NC], app[k.POOL], app[k.LISTENER],
                                                          replicas=s.jetstream_replicas))
    app[k.RECONNECTS].add("run_budgets", budgets.ensure)
    standing_repo = StandingRepository(app[k.POOL])
    grants = app[k.GRANTS]
    standing = await parts.start("standing", StandingApprovals(
        standing_repo, app[k.LISTENER], per_call_required=lambda team, tool: any(
            r["require_approval"] for r in grants.team_rules(team, tool))))
    approvals = ApprovalRepository(app[k.POOL], ttl=timedelta(seconds=s.approval_ttl_s))
    idempotency = await parts.start("idempotency", IdempotencyStore(
        app[k.NC], ttl=timedelta(seconds=s.idempotency_ttl_s), replicas=s.jetstream_replicas))
    app[k.RECONNECTS].add("idempotency", idempotency.ensure)
    plugin_calls = PluginCalls()  # the relay's view of this replica's running plugin calls
    pipeline = Pipeline(
        settings=s,
        catalog=app[k.CATALOG],
        pdp=app[k.PDP],
        nc=app[k.NC],
        inbox=app[k.INBOX],
        pool=app[k.POOL],
        journal=app[k.JOURNAL],
        approvals=approvals,
        limiter=app[admin_keys.LIMITER],
        idempotency=idempotency,
        runs=RunRepository(app[k.POOL]),
        budgets=budgets,
        inflight=inflight,
        metrics=app[k.METRICS],
        http_status=native.http_status,
        standing=standing,
        hook=plugin_calls,
        signer=ContextSigner.from_text(s.call_context_key_text()),
    )
    flow = ApprovalFlow(pipeline, approvals=approvals, catalog=app[k.CATALOG],
                        http_status=native.http_status)
    flow.start_sweeper()
    parts.started("approval_flow", flow)
    keeper = Housekeeping(pool=app[k.POOL], journal=app[k.JOURNAL], catalog=app[k.CATALOG],
                          idempotency=idempotency, http_status=native.http_status,
                          events_retention_days=s.events_retention_days,
                          every_s=s.housekeeping_every_s, lost_after_s=s.lost_after_s)
    keeper.start()
    parts.started("housekeeping", keeper)
    # The journal writer NOTIFYs after each batch, from whichever replica.
    hub = await parts.start("event_wakeups", TeamWakeups(app[k.LISTENER], EVENTS))
    relay = await parts.start("plugin_relay", InternalRelay(
        pipeline, plugin_calls, app[admin_keys.PLUGIN_DIRECTORY], app[k.NC], inflight.instance_id))
    app[k.PLUGIN_RELAY] = relay
    app[k.PIPELINE] = pipeline
    app[k.APPROVAL_FLOW] = flow
    app[api_keys.EVENT_WAKEUPS] = hub
    app[admin_keys.STANDING_REPO] = standing_repo
    app[admin_keys.STANDING] = standing


async def _turns(app: web.Application, parts: Parts) -> None:
    runtime = TurnRuntime(app, settings=app[k.SETTINGS], pipeline=app[k.PIPELINE],
                          flow=app[k.APPROVAL_FLOW], journal=app[k.JOURNAL],
                          http_status=native.http_status)
    runtime.start_sweeper()
    app[api_keys.TURNS] = parts.started("turns", runtime)


def create_app(settings: Settings) -> web.Application:
    # Order, outermost first: (tracing) -> request context -> metrics -> errors -> body
    # deadline -> Host -> NUL in the target -> Origin (/mcp) -> authentication -> a team's
    # large bodies, paced.
    middlewares = [request_context, http_metrics, errors, body_deadline, allowed_host,
                   refuse_nul, mcp_origin, authenticate, team_gate]
    if tracing.setup():
        middlewares.insert(0, trace_request)
    app = web.Application(middlewares=middlewares, client_max_size=settings.max_body_bytes)
    app.on_response_prepare.append(harden_response)
    app[k.SETTINGS] = settings
    app[k.HOSTS] = (HostAllowlist.default(settings.host) if settings.allowed_hosts is None
                    else HostAllowlist.parse(settings.allowed_hosts))
    app[k.ORIGINS] = (OriginAllowlist.default(settings.host, settings.port)
                      if settings.allowed_origins is None
                      else OriginAllowlist.parse(settings.allowed_origins))
    app[k.TEAM_GATE] = TeamGate(settings.large_bodies_per_team, settings.large_body_bytes_per_s)
    app[k.METRICS] = Metrics()
    app[k.DRAINING] = asyncio.Event()
    probes.setup(app)
    app[k.VERIFIER] = TokenVerifier(settings, metrics=IdentityMetrics(app[k.METRICS].registry))
    app[admin_keys.SECRET_BOX] = SecretBox(settings.secrets_key, settings.data_dir)
    upstream_settings = UpstreamSettings()  # TOOLPROXY_UPSTREAM_*: invalid ones stop the start
    app[admin_keys.UPSTREAM_SETTINGS] = upstream_settings
    app[admin_keys.UPSTREAM_GUARD] = Guard(SystemResolver())
    # Created in order, released in reverse (and so are each context's parts).
    app.cleanup_ctx.extend(owning(setup) for setup in (
        _identity, _postgres, _nats, _pdp, _catalog, _journal, _limits, _pipeline, _turns))
    if tracing.enabled():
        app.on_cleanup.append(lambda _: asyncio.to_thread(tracing.shutdown))
    for module in (tools, usage, admin_grants, admin_governance, admin_quotas, admin_standing,
                   admin_team_rules, admin_egress, admin_external_apis, admin_upstreams, admin_openapi,
                   admin_journal,
                   admin_catalog, admin_toolsets, approvals,
                   calls, runs,
                   events, mcp, openai_tools, plugin_routes, agent_routes, probes, openapi_document,
                   turn_routes, console_routes, console_api, console_signin, wellknown):
        app.router.add_routes([_lenient_expect(d) for d in module.routes])
    console.setup(app)
    mcp_app.setup(app)
    return app


async def _expect_continue_only(request: web.Request) -> None:
    """`Expect: 100-continue` is honoured; any other expectation is ignored (RFC 9110 allows
    it), instead of aiohttp's plain-text 417 before any middleware could answer in JSON."""
    if request.version >= (1, 1) and request.headers.get("Expect", "").lower() == "100-continue":
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")


def _lenient_expect(d: web.AbstractRouteDef) -> web.AbstractRouteDef:
    if isinstance(d, web.RouteDef):
        return web.RouteDef(d.method, d.path, d.handler, {**d.kwargs, "expect_handler": _expect_continue_only})
    return d

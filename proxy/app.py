"""The app factory: middleware order, routes, and the resources the app owns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import structlog
from aiohttp import web

from pdp.approvals import ApprovalRepository
from pdp.cache import DecisionCache
from pdp.embedded import EmbeddedEngine
from pdp.engine import Engine
from pdp.errors import PolicyInvalid
from pdp.grants import GrantCache, GrantRepository
from pdp.listener import Listener
from pdp.overrides import OverrideRepository
from pdp.point import PolicyDecisionPoint
from pdp.policy_set import PolicySet, load_policy_dir
from pdp.policy_store import PolicyWatcher, active_policies
from pdp.quotas import Quota, QuotaRepository
from pdp.standing import StandingApprovals, StandingRepository
from pdp.team_rules import TeamRuleRepository
from proxy import appkeys as k
from proxy import tracing
from proxy.approval_flow import ApprovalFlow
from proxy.bus import Reconnects, connect
from proxy.bus import close as close_nats
from proxy.catalog import Catalog
from proxy.config import Settings
from proxy.console import api as console_api
from proxy.console import app as console
from proxy.console import routes as console_routes
from proxy.db import create_pool
from proxy.inbox import Inbox
from proxy.journal import Journal
from proxy.limits.counters import Counters
from proxy.limits.limiter import make_limiter
from proxy.metrics import Metrics
from proxy.http.allowlists import HostAllowlist, OriginAllowlist
from proxy.http.headers import harden_response
from proxy.http.team_gate import TeamGate
from proxy.middlewares.auth import authenticate
from proxy.middlewares.body_deadline import body_deadline
from proxy.middlewares.errors import errors
from proxy.middlewares.hosts import allowed_host
from proxy.middlewares.http_metrics import http_metrics
from proxy.middlewares.inputs import refuse_nul
from proxy.middlewares.mcp_origin import mcp_origin
from proxy.middlewares.request_context import request_context
from proxy.middlewares.team_gate import team_gate
from proxy.middlewares.tracing import trace_request
from proxy.event_hub import EventHub
from proxy.housekeeping import Housekeeping
from proxy.idempotency import IdempotencyStore
from proxy.inflight import InFlight
from proxy.pipeline import Pipeline
from proxy.agents import routes as agent_routes
from proxy.plugins import routes as plugin_routes
from proxy.plugins.directory import PluginDirectory
from proxy.plugins.relay import InternalRelay
from services.plugins.registry import PluginRegistry
from proxy.run_budget import RunBudgets
from proxy.runs import RunRepository
from proxy.routes import (
    admin_egress,
    admin_external_apis,
    admin_governance,
    admin_grants,
    admin_quotas,
    admin_standing,
    admin_team_rules,
    approvals,
    calls,
    events,
    mcp,
    openai_tools,
    probes,
    runs,
    tools,
    usage,
)
from proxy.tokens import TokenVerifier
from proxy.turns import routes as turn_routes
from proxy.turns.runtime import TurnRuntime
from proxy.turns.upstream import ModelClient
from services.external_api.secret_box import SecretBox

log = structlog.get_logger("toolproxy.app")


async def _postgres(app: web.Application) -> AsyncIterator[None]:
    s = app[k.SETTINGS]
    app[k.POOL] = await create_pool(
        s.require_database_url(), min_size=s.db_pool_min, max_size=s.db_pool_max
    )
    listener = Listener(s.require_database_url())
    await listener.start()
    app[k.LISTENER] = listener
    yield
    await listener.close()
    await app[k.POOL].close()


async def _nats(app: web.Application) -> AsyncIterator[None]:
    reconnects = app[k.RECONNECTS] = Reconnects()
    app[k.NC] = await connect(app[k.SETTINGS].require_nats_url(), name="toolproxy-proxy",
                              reconnects=reconnects)
    inbox = app[k.INBOX] = Inbox(app[k.NC])
    await inbox.start()
    yield
    await inbox.close()
    await close_nats(app[k.NC])


def _engine(settings: Settings) -> Engine:
    if settings.pdp == "opa":
        from pdp.opa import OpaEngine

        assert settings.opa_url is not None
        return OpaEngine(settings.opa_url, check_every_s=settings.opa_check_every_s)
    return EmbeddedEngine()


async def _pdp(app: web.Application) -> AsyncIterator[None]:
    """Policy source, in order: TOOLPROXY_POLICY_DIR (pinned, for this replica only), else the
    revision active in Postgres (followed live), else the policies shipped in pdp/policies."""
    s = app[k.SETTINGS]
    pool = app[k.POOL]
    grants = GrantCache(pool, app[k.LISTENER])
    await grants.start()
    engine = _engine(s)
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
        await watcher.start()
    app[k.GRANTS] = grants
    app[k.GRANT_REPO] = GrantRepository(pool)
    app[k.OVERRIDE_REPO] = OverrideRepository(pool)
    app[k.TEAM_RULE_REPO] = TeamRuleRepository(pool)
    app[k.PDP] = pdp
    yield
    if watcher is not None:
        await watcher.close()
    await grants.close()
    await engine.close()


async def _catalog(app: web.Application) -> AsyncIterator[None]:
    # The enabled plugins first: the catalog shows a plugin tool only as its enabled version.
    directory = PluginDirectory(app[k.POOL], app[k.LISTENER])
    await directory.start()
    catalog = Catalog(app[k.NC], app[k.POOL], app[k.METRICS], plugins=directory)
    await catalog.start()
    app[k.PLUGIN_DIRECTORY] = directory
    app[k.PLUGIN_REGISTRY] = PluginRegistry(app[k.POOL])
    app[k.RECONNECTS].add("catalog", catalog.rediscover)
    app[k.CATALOG] = catalog
    yield
    await catalog.close()
    await directory.close()


async def _journal(app: web.Application) -> AsyncIterator[None]:
    writer = "writer" not in app[k.SETTINGS].disabled_parts()
    journal = Journal(app[k.NC], app[k.POOL], app[k.METRICS], writer=writer)
    await journal.start()
    app[k.RECONNECTS].add("journal", journal.ensure)
    app[k.JOURNAL] = journal
    yield
    await journal.close()


async def _limits(app: web.Application) -> AsyncIterator[None]:
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
    limiter = make_limiter(s.limits_store, nats=app[k.NC], pool=app[k.POOL],
                           quota_of=app[k.GRANTS].quota, on_counted=remaining,
                           team_per_minute=dict(s.team_rate_per_minute))
    await limiter.start()
    app[k.RECONNECTS].add("limits", limiter.ensure)
    app[k.LIMITER] = limiter
    app[k.QUOTA_REPO] = QuotaRepository(app[k.POOL])
    yield
    await limiter.close()


async def _pipeline(app: web.Application) -> AsyncIterator[None]:
    s = app[k.SETTINGS]
    inflight = InFlight(app[k.NC], app[k.POOL])
    await inflight.start()
    budgets = RunBudgets(app[k.NC], app[k.POOL], app[k.LISTENER])
    await budgets.start()
    app[k.RECONNECTS].add("run_budgets", budgets.ensure)
    standing_repo = StandingRepository(app[k.POOL])
    grants = app[k.GRANTS]
    standing = StandingApprovals(standing_repo, app[k.LISTENER], per_call_required=lambda team, tool: any(
        r["require_approval"] for r in grants.team_rules(team, tool)))
    await standing.start()
    pipeline = Pipeline(
        settings=s,
        catalog=app[k.CATALOG],
        pdp=app[k.PDP],
        nc=app[k.NC],
        inbox=app[k.INBOX],
        pool=app[k.POOL],
        journal=app[k.JOURNAL],
        approvals=ApprovalRepository(app[k.POOL], ttl=timedelta(seconds=s.approval_ttl_s)),
        limiter=app[k.LIMITER],
        idempotency=IdempotencyStore(app[k.POOL], ttl=timedelta(seconds=s.idempotency_ttl_s)),
        runs=RunRepository(app[k.POOL]),
        budgets=budgets,
        inflight=inflight,
        metrics=app[k.METRICS],
        standing=standing,
    )
    flow = ApprovalFlow(pipeline)
    flow.start_sweeper()
    keeper = Housekeeping(pipeline, every_s=s.housekeeping_every_s, lost_after_s=s.lost_after_s)
    keeper.start()
    hub = EventHub(app[k.LISTENER])
    await hub.start()
    relay = InternalRelay(pipeline, app[k.PLUGIN_DIRECTORY], app[k.NC], inflight.instance_id)
    await relay.start()
    app[k.PLUGIN_RELAY] = relay
    app[k.PIPELINE] = pipeline
    app[k.APPROVAL_FLOW] = flow
    app[k.EVENT_HUB] = hub
    app[k.STANDING_REPO] = standing_repo
    app[k.STANDING] = standing
    yield
    await relay.close()
    await keeper.close()
    await flow.close()
    await standing.close()
    await budgets.close()
    await inflight.close()


async def _turns(app: web.Application) -> AsyncIterator[None]:
    s = app[k.SETTINGS]
    model = ModelClient(s) if s.model_base_url and s.model_name else None
    runtime = TurnRuntime(app, settings=s, pipeline=app[k.PIPELINE], flow=app[k.APPROVAL_FLOW],
                          journal=app[k.JOURNAL], model=model)
    runtime.start_sweeper()
    app[k.TURNS] = runtime
    yield
    await runtime.close()


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
    app[k.VERIFIER] = TokenVerifier(settings)
    app[k.SECRET_BOX] = SecretBox(settings.secrets_key, settings.data_dir)
    # Created in order, released in reverse.
    app.cleanup_ctx.extend([_postgres, _nats, _pdp, _catalog, _journal, _limits, _pipeline, _turns])
    if tracing.enabled():
        app.on_cleanup.append(lambda _: asyncio.to_thread(tracing.shutdown))
    for module in (tools, usage, admin_grants, admin_governance, admin_quotas, admin_standing,
                   admin_team_rules, admin_egress, admin_external_apis, approvals, calls, runs,
                   events, mcp, openai_tools, plugin_routes, agent_routes, probes, turn_routes,
                   console_routes, console_api):
        app.router.add_routes([_lenient_expect(d) for d in module.routes])
    console.setup(app)
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

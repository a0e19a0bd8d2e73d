"""The app factory: middleware order, routes, and the resources the app owns."""

from __future__ import annotations

from collections.abc import AsyncIterator

import structlog
from aiohttp import web

from pdp.embedded import EmbeddedEngine
from pdp.grants import GrantCache, GrantRepository
from pdp.point import PolicyDecisionPoint
from pdp.policy_set import load_policy_dir
from proxy import appkeys as k
from proxy.bus import close as close_nats
from proxy.bus import connect
from proxy.catalog import Catalog
from proxy.config import Settings
from proxy.db import create_pool
from proxy.metrics import Metrics
from proxy.middlewares.auth import authenticate
from proxy.middlewares.errors import errors
from proxy.middlewares.http_metrics import http_metrics
from proxy.middlewares.request_context import request_context
from proxy.pipeline import Pipeline
from proxy.routes import admin_grants, probes, tools, usage
from proxy.tokens import TokenVerifier

log = structlog.get_logger("toolproxy.app")


async def _postgres(app: web.Application) -> AsyncIterator[None]:
    s = app[k.SETTINGS]
    app[k.POOL] = await create_pool(
        s.require_database_url(), min_size=s.db_pool_min, max_size=s.db_pool_max
    )
    yield
    await app[k.POOL].close()


async def _nats(app: web.Application) -> AsyncIterator[None]:
    app[k.NC] = await connect(app[k.SETTINGS].require_nats_url(), name="toolproxy-proxy")
    yield
    await close_nats(app[k.NC])


async def _pdp(app: web.Application) -> AsyncIterator[None]:
    s = app[k.SETTINGS]
    grants = GrantCache(app[k.POOL], s.require_database_url())
    await grants.start()
    engine = EmbeddedEngine()
    pdp = PolicyDecisionPoint(engine, grants)
    revision = await pdp.load(load_policy_dir(s.policy_dir))
    log.info("policy_loaded", engine=engine.name, revision=revision)
    app[k.GRANTS] = grants
    app[k.GRANT_REPO] = GrantRepository(app[k.POOL])
    app[k.PDP] = pdp
    yield
    await grants.close()
    await engine.close()


async def _catalog(app: web.Application) -> AsyncIterator[None]:
    catalog = Catalog(app[k.NC], app[k.POOL], app[k.METRICS])
    await catalog.start()
    app[k.CATALOG] = catalog
    yield
    await catalog.close()


async def _usage(app: web.Application) -> AsyncIterator[None]:
    from proxy.usage import UsageRecorder

    recorder = UsageRecorder(app[k.NC], app[k.POOL], app[k.METRICS])
    await recorder.start()
    app[k.USAGE] = recorder
    yield
    await recorder.close()


async def _pipeline(app: web.Application) -> AsyncIterator[None]:
    app[k.PIPELINE] = Pipeline(
        settings=app[k.SETTINGS],
        catalog=app[k.CATALOG],
        pdp=app[k.PDP],
        nc=app[k.NC],
        usage=app[k.USAGE],
        metrics=app[k.METRICS],
    )
    yield


def create_app(settings: Settings) -> web.Application:
    app = web.Application(
        # Order, outermost first: request context -> metrics -> errors -> authentication.
        middlewares=[request_context, http_metrics, errors, authenticate],
        client_max_size=settings.max_body_bytes,
    )
    app[k.SETTINGS] = settings
    app[k.METRICS] = Metrics()
    app[k.VERIFIER] = TokenVerifier(settings)
    # Created in order, released in reverse.
    app.cleanup_ctx.extend([_postgres, _nats, _pdp, _catalog, _usage, _pipeline])
    for module in (tools, usage, admin_grants, probes):
        app.router.add_routes(module.routes)
    return app

"""Operations routes: liveness, readiness and Prometheus metrics.

Liveness (/healthz) answers while this worker's event loop runs: nothing about its
dependencies, whose outages must not restart it. Readiness (/readyz) says whether this replica
can serve calls now: not draining, a policy and its grants loaded, tools in the catalog, NATS
connected and the JetStream assets the calls write to answering. Postgres is reported but not
required: calls are served without it (records wait in the journal), so an outage of Postgres
must not take every replica out of its load balancer at once."""

from __future__ import annotations

import asyncio

from aiohttp import web

from nats.js.errors import NotFoundError

from infra.jetstream import ride_out
from proxy.web.keys import CATALOG, DRAINING, LISTENER, METRICS, NC, PDP, RECONNECTS, SETTINGS, VERIFIER
from proxy.web.responses import json_response

routes = web.RouteTableDef()

ASSETS_TIMEOUT_S = 1.0  # each JetStream asset must answer its info request within this
ASSETS_FRESH_S = 1.0  # an answer serves the probes of the next second (LBs probe often)
ASSETS_WAIT_S = 0.1  # a probe waits this long for a check under way, then answers the last


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    """Answering at all means the event loop runs (a stuck loop times the probe out)."""
    return json_response(200, {"ok": True, "checks": {"event_loop": True}})


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    app = request.app
    draining = app[DRAINING].is_set()
    checks = {
        "draining": draining,
        "pdp": app[PDP].ready,
        "catalog": bool(app[CATALOG].manifests()),
        "nats": await nats_assets_ready(app),
    }
    # Key sets: each issuer's freshness; ready while at least one issuer can verify tokens.
    checks["identity"], identity = app[VERIFIER].readiness()
    ok = not draining and all(v for k, v in checks.items() if k != "draining")
    # Informational: calls are served without Postgres.
    checks["postgres"] = app[LISTENER].healthy
    return json_response(200 if ok else 503, {"ok": ok, "checks": checks, "identity": identity})


async def nats_assets_ready(app: web.Application) -> bool:
    """NATS connected, and every JetStream stream the calls write to answers its info request
    in time (a stream without a leader, or an unreachable server, does not), or did less than
    RIDE_OUT_S ago and none is missing (a leader election). One check serves the probes of
    the next ASSETS_FRESH_S; a probe waits for a check at most ASSETS_WAIT_S (a balancer's
    check times out fast), answering the last result meanwhile."""
    nc = app[NC]
    if nc.is_closed:
        return False
    # Disconnected (its server died) and reconnecting to another: the assets' answers below,
    # with their grace, say whether that lasts.
    state = app[_ASSETS]
    loop = asyncio.get_running_loop()
    if loop.time() - state.checked_at >= ASSETS_FRESH_S and (
            state.checking is None or state.checking.done()):
        state.checking = asyncio.ensure_future(_check(app, state))
    if state.checking is not None and not state.checking.done():
        first = state.checked_at == float("-inf")
        await asyncio.wait([state.checking], timeout=None if first else ASSETS_WAIT_S)
    return state.ok


async def _check(app: web.Application, state: AssetsState) -> None:
    answered, missing = await _streams_answer(app[NC], call_streams(app))
    state.checked_at = asyncio.get_running_loop().time()
    if answered:
        state.answered_at = state.checked_at
    # A stream without a leader answers nothing while its cluster elects one (4-9 s): every
    # replica sees that at once, and calls ride it out (RIDE_OUT_S), so the replicas stay in
    # their balancer meanwhile; a missing stream, or no answer for longer than a ride out,
    # takes this one out.
    grace = ride_out(app[SETTINGS].jetstream_replicas)  # a single server elects nothing
    state.ok = answered or (not missing and state.checked_at - state.answered_at < grace)
    if missing:  # lost by the server: made again as after a reconnect
        app[RECONNECTS].fire()


def call_streams(app: web.Application) -> list[str]:
    """The streams behind what a call writes (proxy.core.assets: the one list)."""
    from proxy.core.assets import call_streams as streams

    return streams(app[SETTINGS].limits_store)


async def _streams_answer(nc: object, streams: list[str]) -> tuple[bool, bool]:
    """(every stream answered, one of them is missing)."""
    js = nc.jetstream(timeout=ASSETS_TIMEOUT_S)  # type: ignore[attr-defined]
    try:
        async with asyncio.timeout(ASSETS_TIMEOUT_S):
            answers = await asyncio.gather(*(js.stream_info(s) for s in streams),
                                           return_exceptions=True)
    except TimeoutError:
        return False, False
    failed = [a for a in answers if isinstance(a, BaseException)]
    # Missing: the server says so. No responders or a 503 is also what a stream electing its
    # leader answers, and is waited out like a timeout.
    return not failed, any(isinstance(a, NotFoundError) for a in failed)


class AssetsState:
    def __init__(self) -> None:
        self.ok = False
        self.checked_at = float("-inf")
        self.answered_at = float("-inf")  # the last time every stream answered
        self.checking: asyncio.Future[None] | None = None


_ASSETS = web.AppKey("nats_assets_state", AssetsState)


def setup(app: web.Application) -> None:
    app[_ASSETS] = AssetsState()


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    """Here unless TOOLPROXY_METRICS_PORT is set: then only on that port (proxy.web.http.server),
    so a network policy can keep the API port's clients from reading it."""
    if request.app[SETTINGS].metrics_port is not None:
        raise web.HTTPNotFound()
    body, content_type = request.app[METRICS].exposition()
    return web.Response(body=body, headers={"Content-Type": content_type})

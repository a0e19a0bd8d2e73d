"""Events of the caller's team: polled by cursor, or streamed (SSE) with Last-Event-ID resume."""

from __future__ import annotations

import time

import orjson
from aiohttp import web

from proxy.web.api.keys import EVENT_WAKEUPS
from proxy.web.keys import POOL, SETTINGS, identity_of
from proxy.errors import TooManyStreams
from proxy.identity.identity import Identity
from proxy.records.events import read_events
from proxy.web.params import query_int
from proxy.web.responses import json_response

routes = web.RouteTableDef()

MAX_LIMIT = 1000
KEEPALIVE_S = 15.0


@routes.get("/v1/events")
async def poll(request: web.Request) -> web.Response:
    identity = identity_of(request)
    cursor = query_int(request.query, "cursor", 0)
    limit = query_int(request.query, "limit", 100, lo=1, hi=MAX_LIMIT)
    events = await read_events(request.app[POOL], identity.team_id, cursor, limit)
    return json_response(200, {"events": events, "cursor": events[-1]["sequence"] if events else cursor})


MAX_STREAMS = 500  # per process: each open stream holds a connection and polls


@routes.get("/v1/events/stream")
async def stream(request: web.Request) -> web.StreamResponse:
    identity = identity_of(request)
    hub = request.app[EVENT_WAKEUPS]
    if hub.streams >= MAX_STREAMS:
        raise TooManyStreams("too many open event streams on this replica; poll /v1/events or retry")
    hub.streams += 1
    try:
        return await _stream(request, identity)
    finally:
        hub.streams -= 1


async def _stream(request: web.Request, identity: Identity) -> web.StreamResponse:
    cursor = query_int(request.query, "cursor", 0)
    if "Last-Event-ID" in request.headers:  # the browser's reconnect: it wins over ?cursor=
        cursor = query_int(request.headers, "Last-Event-ID", cursor)
    pool = request.app[POOL]
    hub = request.app[EVENT_WAKEUPS]
    resp = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
    })
    await resp.prepare(request)
    ends = time.monotonic() + request.app[SETTINGS].events_stream_max_s
    last_write = time.monotonic()
    while time.monotonic() < ends:
        ticket = hub.ticket(identity.team_id)  # before reading: a batch written meanwhile wakes us
        events = await read_events(pool, identity.team_id, cursor, 500)
        if events:
            chunk = b"".join(
                b"id: %d\nevent: %s\ndata: %s\n\n" % (e["sequence"], e["type"].encode(), orjson.dumps(e))
                for e in events)
            await resp.write(chunk)
            cursor = events[-1]["sequence"]
            last_write = time.monotonic()
            continue
        if time.monotonic() - last_write >= KEEPALIVE_S:
            await resp.write(b": keepalive\n\n")
            last_write = time.monotonic()
        await hub.wait(ticket, timeout=max(0.0, min(KEEPALIVE_S, ends - time.monotonic())))
    return resp




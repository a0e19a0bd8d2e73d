"""Typed keys for the resources the app owns and more than one surface (or the base web layer)
reaches; a resource only one surface reaches has its key in that surface's `keys.py`."""

from __future__ import annotations

import asyncio

import asyncpg
from aiohttp import web
from nats.aio.client import Client as NATS

from infra.bus import Reconnects
from infra.nats_inbox import Inbox
from infra.pg_listener import Listener
from pdp.data.grants import GrantCache
from pdp.point import PolicyDecisionPoint
from proxy.allowlists import HostAllowlist, OriginAllowlist
from proxy.config import Settings
from proxy.core.approval_flow import ApprovalFlow
from proxy.core.catalog import Catalog
from proxy.core.pipeline import Pipeline
from proxy.core.plugins.relay import InternalRelay
from proxy.core.toolsets import ToolSets
from proxy.identity.identity import Identity
from proxy.identity.verifier import TokenVerifier
from proxy.metrics import Metrics
from proxy.records.journal import Journal
from proxy.web.http.team_gate import TeamGate

SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", Metrics)
VERIFIER = web.AppKey("verifier", TokenVerifier)
POOL = web.AppKey("pool", asyncpg.Pool)
# The journal writer's own connection: its batch statements leave a Postgres backend tens of MB
# larger, kept for the connection's life; on the shared pool every connection would end so.
JOURNAL_POOL = web.AppKey("journal_pool", asyncpg.Pool)
LISTENER = web.AppKey("listener", Listener)
NC = web.AppKey("nats", NATS)
INBOX = web.AppKey("inbox", Inbox)  # requests whose replies this replica awaits
RECONNECTS = web.AppKey("reconnects", Reconnects)
GRANTS = web.AppKey("grants", GrantCache)
PDP = web.AppKey("pdp", PolicyDecisionPoint)
CATALOG = web.AppKey("catalog", Catalog)
JOURNAL = web.AppKey("journal", Journal)
PIPELINE = web.AppKey("pipeline", Pipeline)
APPROVAL_FLOW = web.AppKey("approval_flow", ApprovalFlow)
HOSTS = web.AppKey("allowed_hosts", HostAllowlist)
ORIGINS = web.AppKey("allowed_origins", OriginAllowlist)
TEAM_GATE = web.AppKey("team_gate", TeamGate)
PLUGIN_RELAY = web.AppKey("plugin_relay", InternalRelay)
TOOLSETS = web.AppKey("toolsets", ToolSets)  # governance's tool sets (admin writes, /mcp/sets reads)
# Set on SIGTERM: /readyz answers 503 and every response closes its connection while the
# replica drains (proxy.web.http.server).
DRAINING = web.AppKey("draining", asyncio.Event)

IDENTITY = web.RequestKey("identity", Identity)  # set by the authentication middleware


def identity_of(request: web.Request) -> Identity:
    ident = request.get(IDENTITY)
    assert isinstance(ident, Identity), "route registered without authentication"
    return ident

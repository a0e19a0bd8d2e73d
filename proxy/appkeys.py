"""Typed keys for the resources the app owns (created in cleanup contexts, reached by handlers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import asyncpg
from aiohttp import web
from nats.aio.client import Client as NATS

from pdp.grants import GrantCache, GrantRepository
from pdp.listener import Listener
from pdp.overrides import OverrideRepository
from pdp.point import PolicyDecisionPoint
from pdp.quotas import QuotaRepository
from pdp.standing import StandingApprovals, StandingRepository
from pdp.team_rules import TeamRuleRepository
from proxy.approval_flow import ApprovalFlow
from proxy.bus import Reconnects
from proxy.catalog import Catalog
from proxy.console.session import Session as ConsoleSession
from proxy.console.state import Console
from proxy.event_hub import EventHub
from proxy.inbox import Inbox
from proxy.http.allowlists import HostAllowlist, OriginAllowlist
from proxy.http.team_gate import TeamGate
from proxy.config import Settings
from proxy.identity import Identity
from proxy.metrics import Metrics
from proxy.pipeline import Pipeline
from proxy.plugins.directory import PluginDirectory
from proxy.plugins.relay import InternalRelay
from services.plugins.registry import PluginRegistry
from proxy.tokens import TokenVerifier
from proxy.journal import Journal
from proxy.limits.limiter import Limiter
from services.external_api.secret_box import SecretBox

if TYPE_CHECKING:  # the runtime imports route modules that import this one
    from proxy.turns.runtime import TurnRuntime

SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", Metrics)
VERIFIER = web.AppKey("verifier", TokenVerifier)
POOL = web.AppKey("pool", asyncpg.Pool)
LISTENER = web.AppKey("listener", Listener)
NC = web.AppKey("nats", NATS)
INBOX = web.AppKey("inbox", Inbox)  # requests whose replies this replica awaits
RECONNECTS = web.AppKey("reconnects", Reconnects)
GRANTS = web.AppKey("grants", GrantCache)
GRANT_REPO = web.AppKey("grant_repo", GrantRepository)
PDP = web.AppKey("pdp", PolicyDecisionPoint)
CATALOG = web.AppKey("catalog", Catalog)
OVERRIDE_REPO = web.AppKey("override_repo", OverrideRepository)
TEAM_RULE_REPO = web.AppKey("team_rule_repo", TeamRuleRepository)
JOURNAL = web.AppKey("journal", Journal)
LIMITER = web.AppKey("limiter", Limiter)
QUOTA_REPO = web.AppKey("quota_repo", QuotaRepository)
PIPELINE = web.AppKey("pipeline", Pipeline)
APPROVAL_FLOW = web.AppKey("approval_flow", ApprovalFlow)
EVENT_HUB = web.AppKey("event_hub", EventHub)
HOSTS = web.AppKey("allowed_hosts", HostAllowlist)
ORIGINS = web.AppKey("allowed_origins", OriginAllowlist)
TEAM_GATE = web.AppKey("team_gate", TeamGate)
STANDING_REPO = web.AppKey("standing_repo", StandingRepository)
STANDING = web.AppKey("standing", StandingApprovals)
SECRET_BOX = web.AppKey("secret_box", SecretBox)  # seals external APIs' secrets (key loaded on first use)
PLUGIN_DIRECTORY = web.AppKey("plugin_directory", PluginDirectory)
PLUGIN_REGISTRY = web.AppKey("plugin_registry", PluginRegistry)
PLUGIN_RELAY = web.AppKey("plugin_relay", InternalRelay)
TURNS: web.AppKey[TurnRuntime] = web.AppKey("turns")
CONSOLE = web.AppKey("console", Console)

IDENTITY = web.RequestKey("identity", Identity)  # set by the authentication middleware
CONSOLE_SESSION = web.RequestKey("console_session", ConsoleSession)  # when a session authenticated


def identity_of(request: web.Request) -> Identity:
    ident = request.get(IDENTITY)
    assert isinstance(ident, Identity), "route registered without authentication"
    return ident

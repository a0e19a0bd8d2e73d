"""Typed keys for what only the admin and governance routes reach (set by the app factory)."""

from __future__ import annotations

from aiohttp import web

from infra.secret_box import SecretBox
from pdp.data.grants import GrantRepository
from pdp.data.overrides import OverrideRepository
from pdp.data.quotas import QuotaRepository
from pdp.data.standing import StandingApprovals, StandingRepository
from pdp.data.team_rules import TeamRuleRepository
from proxy.core.limits.limiter import Limiter
from proxy.core.plugins.directory import PluginDirectory
from services.plugins.registry import PluginRegistry
from services.netguard.guard import Guard
from services.upstreams.config import UpstreamSettings

GRANT_REPO = web.AppKey("grant_repo", GrantRepository)
OVERRIDE_REPO = web.AppKey("override_repo", OverrideRepository)
TEAM_RULE_REPO = web.AppKey("team_rule_repo", TeamRuleRepository)
QUOTA_REPO = web.AppKey("quota_repo", QuotaRepository)
LIMITER = web.AppKey("limiter", Limiter)
STANDING_REPO = web.AppKey("standing_repo", StandingRepository)
STANDING = web.AppKey("standing", StandingApprovals)
SECRET_BOX = web.AppKey("secret_box", SecretBox)  # seals external APIs' secrets (key loaded on first use)
PLUGIN_DIRECTORY = web.AppKey("plugin_directory", PluginDirectory)
PLUGIN_REGISTRY = web.AppKey("plugin_registry", PluginRegistry)
UPSTREAM_SETTINGS = web.AppKey("upstream_settings", UpstreamSettings)  # the stdio allowlist, upstream hosts
UPSTREAM_GUARD = web.AppKey("upstream_guard", Guard)  # checks an upstream URL at registration

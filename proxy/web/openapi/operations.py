"""The operations of the OpenAPI document, one row per route: request bodies from the same
pydantic models the routes validate with, every status code each route answers with its
schema, and the parameters with the types, bounds and patterns the server enforces."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from proxy.web.admin.agents import AgentKey, AgentRegistration
from proxy.web.console.routes import Login as ConsoleLogin
from proxy.core.envelope import InvokeRequest
from wire.ids import ID_PATTERN
from proxy.web.openapi.schemas import (
    ANY,
    BOOL,
    STR,
    Schema,
    array_of,
    listing,
    obj,
    ref,
    wrap,
)
from proxy.web.params import UUID_PATTERN
from proxy.web.admin.plugins import PluginInstall, PluginName, PluginVersion
from proxy.web.admin.egress import EgressBody
from proxy.web.admin.external_apis import ExternalApiBody, ExternalApiKey
from proxy.web.admin.governance import RESULTS, OverrideKey, OverrideRequest, PolicyPush
from proxy.web.admin.grants import GrantRequest
from proxy.web.admin.journal import Replay as DeadLetterReplay
from proxy.web.admin.quotas import QuotaBody, QuotaKey
from proxy.web.admin.standing import STATES as STANDING_STATES
from proxy.web.admin.standing import StandingRequest
from proxy.web.admin.team_rules import TeamRuleKey, TeamRuleRequest
from proxy.web.api.approvals import STATES, DecisionBody, ResumeBody
from proxy.web.api.events import MAX_LIMIT
from proxy.core.tool_calls import ToolCallsBody
from proxy.web.api.runs import Complete, Plan, StartRun
from proxy.turns.models import StartTurn
from proxy.core.input_rules import INT64_MAX, TOOL_NAME_PATTERN
from proxy.records.usage import GROUPS

JSON = "application/json"


@dataclass(frozen=True)
class Param:
    name: str
    schema: Schema
    where: str = "query"
    description: str = ""


@dataclass(frozen=True)
class Op:
    """One route. `responses`: status -> schema (None: no body; a (media type, schema) pair
    for a body that is not JSON). The errors every route shares are added by `_responses`."""

    method: str
    path: str
    tag: str
    summary: str
    responses: dict[int, Schema | tuple[str, Schema] | None]
    body: type[BaseModel] | Schema | None = None
    body_required: bool = True
    params: tuple[Param, ...] = ()
    public: bool = False
    errors: dict[int, Schema] = field(default_factory=dict)  # overrides of the Error schema


def _int(lo: int = 0, hi: int = INT64_MAX, default: int | None = None) -> Schema:
    s: Schema = {"type": "integer", "minimum": lo, "maximum": hi}
    if default is not None:
        s["default"] = default
    return s


ID_SCHEMA: Schema = {"type": "string", "pattern": ID_PATTERN, "maxLength": 64}
UUID_SCHEMA: Schema = {"type": "string", "pattern": UUID_PATTERN, "maxLength": 36}
DATE: Schema = {"type": "string", "format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}
DATE_TIME: Schema = {"type": "string", "format": "date-time", "maxLength": 40}
TIME_SCHEMA: Schema = {"type": "string", "format": "date-time"}
# Path parameters by name: the shapes the routes accept (anything else is 404).
PATH_PARAMS: dict[str, Schema] = {"run_id": ID_SCHEMA, "call_id": UUID_SCHEMA,
                                  "result_id": UUID_SCHEMA, "approval_id": UUID_SCHEMA,
                                  "artifact_id": UUID_SCHEMA, "turn_id": UUID_SCHEMA,
                                  "standing_approval_id": UUID_SCHEMA}

TEAM = Param("team_id", ID_SCHEMA, description="another team (admins; governance: its own only)")
LIMIT = Param("limit", _int(1, 1000, 100))
CURSOR = Param("cursor", _int(0, INT64_MAX, 0), description="the last sequence already seen")

# Statuses and their error codes, as a reading aid in the document.
ERROR_NOTES = {
    400: "invalid_request / invalid_args (NUL characters, integers beyond 64 bits, non-finite "
         "numbers, wrong types, patterns and bounds)",
    401: "unauthenticated", 403: "forbidden / denied / run_budget_exceeded",
    404: "not_found / unknown_tool", 409: "a conflict (idempotency_conflict, run_exists...)",
    413: "payload_too_large", 415: "unsupported_media_type",
    421: "misdirected_request: a Host this server does not serve (TOOLPROXY_ALLOWED_HOSTS)",
    429: "rate_limited / quota_exceeded (Retry-After)", 499: "cancelled: the client went away",
    502: "proxy_lost: the replica running the call died",
    503: "tool_unavailable / pdp_unavailable / policy_undefined / limits_unavailable / "
         "dependency_unavailable / tool_busy (the team's share of the service is in use)",
    504: "timeout",
}

CALL_OUTCOMES: dict[int, Schema | tuple[str, Schema] | None] = {
    200: ref("CallResult"), 202: ref("AuthorizationRequired"), 403: ref("Error"),
    404: ref("Error"), 409: ref("Error"), 429: ref("Error"), 502: ref("Error"), 504: ref("Error"),
}
GOVERNANCE = {403: ref("Error")}
DEAD_LETTER = obj(["sequence", "subject", "journal_sequence", "error", "refusals", "time", "size", "entry"], {
    "sequence": {"type": "integer"}, "subject": STR, "journal_sequence": {"type": "integer"},
    "error": STR, "refusals": {"type": "integer"}, "time": {"type": ["string", "null"]},
    "size": {"type": "integer"}, "entry": STR})
_PLATFORM_GOVERNANCE = "admins, or governance of a team in TOOLPROXY_PLUGIN_GOVERNANCE_TEAMS"
AGENT = obj(["agent_id", "team_id", "description", "input_schema", "created_by", "created_at",
             "updated_at"],
            {"agent_id": STR, "team_id": STR, "description": STR, "input_schema": {"type": "object"},
             "created_by": STR, "created_at": STR, "updated_at": STR})
EGRESS: Schema = obj(["team_id", "hosts", "updated_by", "updated_at"], {
    "team_id": STR, "hosts": array_of(STR), "updated_by": STR, "updated_at": STR})
EXTERNAL_API: Schema = obj(
    ["name", "base_url", "methods", "paths", "secret_header", "secret_source", "secret_file"], {
        "name": STR, "base_url": STR, "methods": array_of(STR), "paths": array_of(STR),
        "secret_header": STR, "secret_source": {"enum": ["stored", "file"]},
        "secret_file": {"type": ["string", "null"]}, "created_by": STR, "created_at": STR,
        "updated_at": STR})

OPERATIONS: list[Op] = [
    Op("post", "/v1/tools/invoke", "tools", "Invoke a tool through the whole pipeline",
       CALL_OUTCOMES, InvokeRequest),
    Op("get", "/v1/tools", "tools", "The catalog, filtered to what the caller may call",
       {200: listing("tools", ref("CatalogEntry"))}),
    Op("get", "/v1/calls/{call_id}", "calls", "A call: status, timing, output, references",
       {200: ref("Call"), 404: ref("Error")}),
    Op("get", "/v1/results/{result_id}", "calls", "A call's result by its result_id",
       {200: ref("Result"), 404: ref("Error")}),
    Op("post", "/v1/calls/{call_id}/resume", "calls", "Run an approved call (exactly once)",
       {**CALL_OUTCOMES, 499: ref("Error")}, ResumeBody, body_required=False),
    Op("post", "/v1/calls/{call_id}/cancel", "calls", "Cancel a running or held call",
       {200: ref("Call"), 202: obj(["call_id", "status"], {"call_id": STR, "status": {"const": "CANCELLING"}}),
        403: ref("Error"), 404: ref("Error"), 409: ref("Error")}),
    Op("get", "/v1/artifacts/{artifact_id}", "calls", "An output kept whole as an artifact",
       {200: ("*/*", ANY), 404: ref("Error")}),
    Op("post", "/v1/runs", "runs", "Start a run (turn), optionally with a budget (body `{}` for none)",
       {201: ref("Run"), 409: ref("Error")}, StartRun),
    Op("post", "/v1/runs/{run_id}/plan", "runs", "Publish the run's plan",
       {200: ref("Run"), 403: ref("Error"), 404: ref("Error"), 409: ref("Error")}, Plan),
    Op("post", "/v1/runs/{run_id}/complete", "runs", "Complete the run",
       {200: ref("Run"), 403: ref("Error"), 404: ref("Error"), 409: ref("Error")}, Complete,
       body_required=False),
    Op("get", "/v1/runs/{run_id}", "runs", "A run with its calls and totals",
       {200: ref("RunDetail"), 404: ref("Error")}),
    Op("post", "/v1/turns", "turns",
       "Start a turn of an agent (demo or model) in a run (201 once it rests, 202 while running)",
       {201: ref("Turn"), 202: ref("Turn"), 403: ref("Error"), 409: ref("Error")}, StartTurn),
    Op("get", "/v1/turns/{turn_id}", "turns", "A turn: status, steps, result",
       {200: ref("TurnDetail"), 404: ref("Error")}),
    Op("post", "/v1/turns/{turn_id}/resume", "turns",
       "Resume a turn held for an authorization, once decided (202 while still pending)",
       {200: ref("Turn"), 202: ref("Turn"), 404: ref("Error"), 409: ref("Error")}),
    Op("post", "/v1/turns/{turn_id}/cancel", "turns", "Cancel a running or held turn",
       {200: ref("Turn"), 202: ref("Turn"), 403: ref("Error"), 404: ref("Error"), 409: ref("Error")}),
    Op("get", "/v1/events", "events", "Events after a cursor (per-team sequence)",
       {200: obj(["events", "cursor"], {"events": array_of(ref("Event")), "cursor": {"type": "integer"}})},
       params=(CURSOR, Param("limit", _int(1, MAX_LIMIT, 100)))),
    Op("get", "/v1/events/stream", "events", "Events as server-sent events (Last-Event-ID)",
       # Before OpenAPI 3.2, `schema` of text/event-stream describes each event.
       {200: ("text/event-stream", obj(["id", "event", "data"], {
           "id": {"type": "string", "pattern": "^[0-9]+$"}, "event": STR,
           "data": {"type": "string", "contentMediaType": JSON,
                    "contentSchema": ref("Event")}}))},
       params=(CURSOR, Param("Last-Event-ID", _int(0, INT64_MAX), "header",
                             "resume after this sequence (wins over cursor)"))),
    Op("get", "/v1/approvals", "governance", "Calls awaiting (or past) approval",
       {200: listing("approvals", ref("Approval")), **GOVERNANCE},
       params=(Param("state", {"enum": [*STATES, "all"], "default": "pending"}), TEAM, LIMIT)),
    Op("post", "/v1/approvals/{approval_id}/decision", "governance", "Approve or deny a held call",
       {200: wrap("approval", ref("Approval")), **GOVERNANCE, 404: ref("Error"), 409: ref("Error")},
       DecisionBody),
    Op("get", "/v1/usage", "usage", "Usage totals for a day, or over a range grouped",
       {200: {"type": "object"}, 403: ref("Error")},
       params=(TEAM, Param("day", DATE), Param("from", DATE), Param("to", DATE),
               Param("group_by", {"enum": list(GROUPS), "default": "tool"}))),
    Op("post", "/v1/admin/grants", "admin", "Grant a capability",
       {201: wrap("grant", ref("Grant")), **GOVERNANCE, 404: ref("Error")}, GrantRequest),
    Op("get", "/v1/admin/grants", "admin", "List grants",
       {200: listing("grants", ref("Grant")), **GOVERNANCE}, params=(TEAM,)),
    Op("post", "/v1/admin/grants/revoke", "admin", "Revoke a grant",
       {200: wrap("grant", ref("Grant")), **GOVERNANCE, 404: ref("Error")}, GrantRequest),
    Op("post", "/v1/admin/overrides", "admin", "Allow or deny one tool for one agent",
       {201: wrap("override", ref("Override")), **GOVERNANCE, 404: ref("Error")}, OverrideRequest),
    Op("get", "/v1/admin/overrides", "admin", "List overrides",
       {200: listing("overrides", ref("Override")), **GOVERNANCE}, params=(TEAM,)),
    Op("post", "/v1/admin/overrides/delete", "admin", "Delete an override",
       {200: wrap("override", ref("Override")), **GOVERNANCE, 404: ref("Error")}, OverrideKey),
    Op("post", "/v1/admin/team-rules", "admin",
       "Tighten your own team's decisions for one tool (deny, approval per call, rate, deadline)",
       {201: wrap("team_rule", ref("TeamRule")), **GOVERNANCE, 404: ref("Error")}, TeamRuleRequest),
    Op("get", "/v1/admin/team-rules", "admin", "List team rules",
       {200: listing("team_rules", ref("TeamRule")), **GOVERNANCE}, params=(TEAM,)),
    Op("post", "/v1/admin/team-rules/delete", "admin", "Delete a team rule",
       {200: wrap("team_rule", ref("TeamRule")), **GOVERNANCE, 404: ref("Error")}, TeamRuleKey),
    Op("post", "/v1/admin/standing-approvals", "governance",
       "Grant a standing approval: a tool for a team or agent, an argument constraint, an expiry, a call limit",
       {201: ref("StandingApproval"), **GOVERNANCE, 404: ref("Error")}, StandingRequest),
    Op("get", "/v1/admin/standing-approvals", "governance", "Standing approvals with their use",
       {200: listing("standing_approvals", ref("StandingApproval")), **GOVERNANCE},
       params=(TEAM, Param("tool", {"type": "string", "pattern": TOOL_NAME_PATTERN, "maxLength": 64}),
               Param("state", {"enum": [*STANDING_STATES, "all"], "default": "all"}),
               Param("limit", _int(1, 1000, 200)))),
    Op("post", "/v1/admin/standing-approvals/{standing_approval_id}/revoke", "governance",
       "Revoke a standing approval (at once, on every replica)",
       {200: ref("StandingApproval"), **GOVERNANCE, 404: ref("Error")}),
    Op("post", "/v1/admin/quotas", "admin", "Set a daily quota (admins)",
       {201: wrap("quota", ref("Quota")), **GOVERNANCE}, QuotaBody),
    Op("get", "/v1/admin/quotas", "admin", "Quotas with today's use",
       {200: listing("quotas", ref("Quota")), **GOVERNANCE}, params=(TEAM,)),
    Op("post", "/v1/admin/quotas/delete", "admin", "Delete a quota (admins)",
       {200: obj(["deleted"], {"deleted": {"const": True}}), **GOVERNANCE, 404: ref("Error")}, QuotaKey),
    Op("post", "/v1/admin/egress", "admin", "Set a team's browser.full egress allowlist (replaces it)",
       {200: wrap("egress", EGRESS), **GOVERNANCE}, EgressBody),
    Op("get", "/v1/admin/egress", "admin", "Egress allowlists",
       {200: listing("egress", EGRESS), **GOVERNANCE}, params=(TEAM,)),
    Op("post", "/v1/admin/external-apis", "admin", "Register (or replace) an external API (admins)",
       {201: wrap("external_api", EXTERNAL_API), **GOVERNANCE}, ExternalApiBody),
    Op("get", "/v1/admin/external-apis", "admin", "Registered external APIs (never their secrets)",
       {200: listing("external_apis", EXTERNAL_API), **GOVERNANCE}),
    Op("post", "/v1/admin/external-apis/delete", "admin", "Remove an external API (admins)",
       {200: obj(["deleted", "name"], {"deleted": {"const": True}, "name": STR}), **GOVERNANCE,
        404: ref("Error")}, ExternalApiKey),
    Op("get", "/v1/admin/decisions", "admin", "The decision log",
       {200: listing("decisions", ref("Decision")), **GOVERNANCE},
       params=(TEAM, Param("agent_id", ID_SCHEMA),
               Param("tool", {"type": "string", "pattern": TOOL_NAME_PATTERN, "maxLength": 64}),
               Param("result", {"enum": list(RESULTS)}), Param("phase", {"enum": ["list", "call"]}),
               Param("call_id", UUID_SCHEMA), Param("since", DATE_TIME), Param("until", DATE_TIME),
               LIMIT)),
    Op("get", "/v1/admin/policies", "admin", "Serving policy revision and history",
       {200: obj(["serving", "revisions"], {"serving": {"type": "object"},
                                            "revisions": array_of({"type": "object"})}),
        **GOVERNANCE}),
    Op("post", "/v1/admin/policies", "admin",
       "Push (validate, test, activate) the global policy modules (admins)",
       {201: obj(["revision", "active"], {"revision": STR, "active": {"const": True},
                                          "note": {"type": ["string", "null"]}}), **GOVERNANCE},
       PolicyPush),
    Op("post", "/v1/admin/plugins", "plugins", "Install a plugin bundle (admins)",
       {201: wrap("plugin", {"type": "object"}), 200: wrap("plugin", {"type": "object"}),
        **GOVERNANCE, 409: ref("Error")}, PluginInstall),
    Op("get", "/v1/admin/plugins", "plugins", "Installed plugin versions",
       {200: listing("plugins", {"type": "object"}), **GOVERNANCE}),
    Op("post", "/v1/admin/plugins/enable", "plugins",
       f"Enable one version of a plugin ({_PLATFORM_GOVERNANCE})",
       {200: wrap("plugin", {"type": "object"}), **GOVERNANCE, 404: ref("Error"), 409: ref("Error")},
       PluginVersion),
    Op("post", "/v1/admin/plugins/disable", "plugins", f"Disable a plugin ({_PLATFORM_GOVERNANCE})",
       {200: wrap("plugin", {"type": "object"}), **GOVERNANCE, 404: ref("Error")}, PluginName),
    Op("post", "/v1/admin/plugins/remove", "plugins", "Remove an installed, disabled version (admins)",
       {200: obj(["plugin", "removed"], {"plugin": {"type": "object"}, "removed": {"const": True}}),
        **GOVERNANCE, 404: ref("Error"), 409: ref("Error")}, PluginVersion),
    Op("post", "/v1/admin/agents", "admin", "Register an agent for agent.invoke, or update it (admins)",
       {201: obj(["agent", "created"], {"agent": AGENT, "created": {"const": True}}),
        200: obj(["agent", "created"], {"agent": AGENT, "created": {"const": False}}),
        **GOVERNANCE, 409: ref("Error")}, AgentRegistration),
    Op("get", "/v1/admin/agents", "admin", "Registered agents (governance: its own team's)",
       {200: listing("agents", AGENT), **GOVERNANCE}, params=(TEAM,)),
    Op("post", "/v1/admin/agents/remove", "admin", "Remove a registered agent (admins)",
       {200: obj(["agent", "removed"], {"agent": AGENT, "removed": {"const": True}}),
        **GOVERNANCE, 404: ref("Error")}, AgentKey),
    Op("get", "/v1/admin/journal/dead-letters", "admin",
       "Journal records Postgres refused for their data, set aside whole (admins)",
       {200: obj(["dead_letters", "count"], {"dead_letters": array_of(DEAD_LETTER), "count": _int()}),
        **GOVERNANCE, 503: ref("Error")},
       params=(Param("after", _int(0, INT64_MAX, 0), description="the last sequence already seen"),
               Param("limit", _int(1, 1000, 100)),
               Param("full", {"enum": ["0", "1", "true", "false"]}, description="the entries whole"))),
    Op("post", "/v1/admin/journal/dead-letters/replay", "admin",
       "Write dead letters back into the journal, then remove them (admins)",
       {200: obj(["replayed", "missing"], {"replayed": array_of(_int(1)), "missing": array_of(_int(1))}),
        **GOVERNANCE, 503: ref("Error")}, DeadLetterReplay),
    Op("post", "/mcp", "agents", "MCP over streamable HTTP (JSON-RPC)",
       {200: {"oneOf": [ref("JsonRpcResponse"), array_of(ref("JsonRpcResponse"))]}, 202: None,
        404: ref("JsonRpcError"), 406: ref("JsonRpcError"),
        403: {"oneOf": [ref("JsonRpcError"), ref("Error")]}},
       {"oneOf": [ref("JsonRpcMessage"), {**array_of(ref("JsonRpcMessage")), "minItems": 1, "maxItems": 16}]},
       # 400 and 401 from the middlewares (a NUL in the target, no token) are native errors.
       errors={400: {"oneOf": [ref("JsonRpcError"), ref("Error")]}, 401: ref("Error"),
               413: ref("JsonRpcError"), 415: ref("JsonRpcError")}),
    Op("get", "/v1/openai/tools", "agents", "The callable catalog as OpenAI tools",
       {200: obj(["tools", "names"], {"tools": array_of({"type": "object"}), "names": {"type": "object"}})}),
    Op("post", "/v1/openai/tool_calls", "agents", "Run an assistant message's tool_calls",
       {200: obj(["messages", "results"], {"messages": array_of(obj(
           ["role", "tool_call_id", "content"], {"role": {"const": "tool"}, "tool_call_id": STR,
                                                "content": STR})),
           "results": array_of({"type": "object"})}), 403: ref("Error")}, ToolCallsBody),
    # The console: its page and files; its session (the cookie authenticates only the
    # console's own requests, with X-CSRF-Token, this console's Origin and Host).
    Op("get", "/console", "console", "The governance console (a static page)",
       {200: ("text/html", STR), 304: None}, public=True),
    Op("get", "/console/static/{name}", "console", "The console's scripts and styles",
       {200: ("*/*", ANY), 304: None, 404: ref("Error")}, public=True),
    Op("post", "/console/session", "console",
       "Exchange a governance or admin token for a session cookie (agents: 403; this console's Origin only)",
       {201: ref("ConsoleSession"), 401: ref("Error"), 403: ref("Error"), 429: ref("Error"),
        503: ref("Error")}, ConsoleLogin, public=True),
    Op("get", "/console/session", "console", "The cookie's session, with its CSRF token",
       {200: ref("ConsoleSession"), 401: ref("Error"), 403: ref("Error"), 503: ref("Error")}, public=True),
    Op("delete", "/console/session", "console", "End the cookie's session (X-CSRF-Token, Origin)",
       {200: obj(["ended"], {"ended": {"const": True}}), 401: ref("Error"), 403: ref("Error"),
        503: ref("Error")}, public=True),
    # Signing in with the OpenID provider (authorization code + PKCE: proxy/web/console/signin.py).
    Op("get", "/console/signin/options", "console", "How this console signs in (provider, token paste)",
       {200: obj(["provider", "token_paste"], {"provider": {"type": ["string", "null"]},
                                              "token_paste": BOOL})}, public=True),
    Op("get", "/console/signin", "console", "Start signing in with the identity provider (a redirect)",
       {302: None, 303: None, 404: ref("Error")}, public=True),
    Op("get", "/console/signin/callback", "console",
       "The provider's redirect back: opens a session, then to /console (a redirect)",
       {303: None, 404: ref("Error")}, public=True),
    Op("get", "/console/api/inbox/stream", "console",
       "The approvals inbox as server-sent events: snapshot, then added / removed",
       {200: ("text/event-stream", obj(["event", "data"], {
           "event": {"enum": ["snapshot", "added", "removed", "ended"]},
           "data": {"type": "string", "contentMediaType": JSON,
                    "contentSchema": {"oneOf": [
                        obj(["now", "approvals"], {"now": TIME_SCHEMA, "approvals": array_of(ref("InboxItem"))}),
                        obj(["now", "approval"], {"now": TIME_SCHEMA, "approval": ref("InboxItem")}),
                        obj(["approval_id"], {"approval_id": STR})]}}})),
        **GOVERNANCE}, params=(TEAM,)),
    Op("get", "/console/api/policy", "console",
       "The serving policy revision, its modules and the unit test results it was pushed with",
       {200: obj(["serving", "modules", "tests", "revisions"], {
           "serving": obj(["revision", "engine", "source"], {
               "revision": STR, "engine": STR, "source": {"enum": ["pushed", "directory", "unknown"]}}),
           "modules": {"type": "object", "additionalProperties": STR},
           "tests": {"type": ["object", "null"]}, "revisions": array_of({"type": "object"})}),
        **GOVERNANCE}),
    Op("get", "/console/api/catalog", "console", "Every tool's name and class (for the console's forms)",
       {200: listing("tools", obj(["tool_id", "category", "action"], {
           "tool_id": STR, "category": STR, "action": STR, "requires_approval": BOOL})), **GOVERNANCE}),
    Op("get", "/healthz", "operations", "Liveness", {200: {"type": "object"}}, public=True),
    Op("get", "/readyz", "operations",
       "Readiness: this replica can serve calls (not draining, policy, catalog, NATS and its "
       "JetStream assets; Postgres reported, not required)",
       {200: {"type": "object"}, 503: {"type": "object"}}, public=True),
    Op("get", "/metrics", "operations", "Prometheus metrics", {200: ("text/plain", STR)}, public=True),
    Op("get", "/openapi.json", "operations", "This document", {200: {"type": "object"}}, public=True),
    # OAuth (proxy/web/wellknown.py): what a client learns before it has a token.
    Op("get", "/.well-known/oauth-protected-resource", "operations",
       "Protected resource metadata of the API (RFC 9728)", {200: {"type": "object"}}, public=True),
    Op("get", "/.well-known/oauth-protected-resource/mcp", "operations",
       "Protected resource metadata of /mcp (RFC 9728; the MCP authorization spec)",
       {200: {"type": "object"}}, public=True),
    Op("get", "/.well-known/jwks.json", "operations", "The dev issuer's public keys (a JWKS)",
       {200: {"type": "object"}}, public=True),
]

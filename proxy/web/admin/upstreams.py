"""Upstream MCP servers under /v1/admin/upstreams: registering and removing one is an admin act;
syncing, reading candidates, classifying and approving changed definitions are governance acts
(platform-wide: an admin, or governance of a team in TOOLPROXY_PLUGIN_GOVERNANCE_TEAMS)."""

from __future__ import annotations

from typing import Any, Literal

import asyncpg
import orjson
from aiohttp import web
from nats.errors import NoRespondersError, TimeoutError as NatsTimeout
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from proxy.errors import Forbidden, InvalidRequest, NotFound
from proxy.web.access import require_governance, require_platform_governance
from proxy.web.admin.errors import (
    BridgeUnavailable,
    CommandNotAllowed,
    InvalidSchema,
    NotClassifiable,
    SecretsUnavailable,
    ToolNameTaken,
    UpstreamExists,
    UpstreamFailed,
    UpstreamTimedOut,
    UpstreamUnreachable,
    UrlNotAllowed,
)
from proxy.web.admin.keys import SECRET_BOX, UPSTREAM_GUARD, UPSTREAM_SETTINGS
from proxy.web.body import read_model
from proxy.web.keys import CATALOG, NC, POOL, identity_of
from proxy.web.responses import json_response
from infra.secret_box import SecretBox, SecretUnavailable
from services.external_api.store import MAX_SECRET, header_problem, secret_problem
from services.netguard.urls import MAX_URL_LENGTH
from services.sdk import ToolError
from services.sdk.errors import ManifestError
from services.upstreams import commands, store
from services.upstreams.catalog_entry import manifest_for
from services.upstreams.definitions import catalog_name, suggestion
from services.upstreams.addresses import check_url
from services.upstreams.errors import CommandNotAllowed as CommandRefused
from services.upstreams.oauth import OAuthConfig
from wire.portable_schema import report as portability_report
from wire import protocol as p
from wire.manifest import Cost

routes = web.RouteTableDef()
SYNC_TIMEOUT_S = 30.0


_PRINTABLE = r"^[\x21-\x7e]+$"


class OAuthBody(BaseModel):
    """OAuth client credentials against the upstream's authorization server (RFC 6749 §4.4)."""

    model_config = ConfigDict(extra="forbid")

    token_url: str = Field(min_length=1, max_length=MAX_URL_LENGTH)
    client_id: str = Field(min_length=1, max_length=256, pattern=_PRINTABLE)
    client_secret: SecretStr = Field(min_length=1, max_length=MAX_SECRET)
    scope: str | None = Field(default=None, min_length=1, max_length=1024,
                              pattern=r"^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$")
    audience: str | None = Field(default=None, min_length=1, max_length=512, pattern=_PRINTABLE)
    resource: str | None = Field(default=None, min_length=1, max_length=MAX_URL_LENGTH,
                                 pattern=r"^https?://[\x21-\x22\x24-\x7e]+$")  # no fragment

    def config(self) -> OAuthConfig:
        return OAuthConfig(token_url=self.token_url, client_id=self.client_id,
                           client_secret=self.client_secret.get_secret_value(), scope=self.scope,
                           audience=self.audience, resource=self.resource)


class UpstreamCredentials(BaseModel):
    """What every upstream registration takes beside its address: a header secret (sealed) or
    OAuth client credentials, a timeout and a concurrency bound."""

    model_config = ConfigDict(extra="forbid")

    secret_header: str | None = Field(default=None, min_length=1, max_length=64)
    secret: SecretStr | None = Field(default=None, max_length=MAX_SECRET)
    oauth: OAuthBody | None = None
    timeout_ms: int = Field(default=5_000, ge=100, le=10_000)
    max_concurrency: int = Field(default=8, ge=1, le=256)

    @field_validator("secret_header")
    @classmethod
    def _header(cls, value: str | None) -> str | None:
        if value is not None and (problem := header_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _secret(self) -> UpstreamCredentials:
        if (self.secret is None) != (self.secret_header is None):
            raise ValueError("give secret_header and secret together")
        if self.secret is not None and (problem := secret_problem(self.secret.get_secret_value())):
            raise ValueError(problem)
        return self

    def sealed(self, box: SecretBox, name: str) -> tuple[bytes, str] | None:
        """The secret sealed for upstream `name` with the box's key id, or None without one;
        OAuth credentials are sealed whole (token URL included), with no secret_header."""
        secret = (self.secret.get_secret_value() if self.secret is not None
                  else self.oauth.config().sealed_text() if self.oauth is not None else None)
        if secret is None:
            return None
        try:
            return box.seal(store.sealed_name(name), secret), box.key_id
        except SecretUnavailable as exc:
            raise SecretsUnavailable(str(exc)) from None


class UpstreamBody(UpstreamCredentials):

    name: str = Field(pattern=store.NAME_PATTERN, max_length=32)
    transport: Literal["streamable_http", "stdio"]
    url: str | None = Field(default=None, min_length=1, max_length=MAX_URL_LENGTH)
    command: str | None = Field(default=None, min_length=1, max_length=64)
    args: list[str] = Field(default_factory=list, max_length=32)

    @model_validator(mode="after")
    def _shape(self) -> UpstreamBody:
        if self.transport == "streamable_http" and (self.url is None or self.command is not None):
            raise ValueError("streamable_http takes a url and no command")
        if self.transport == "stdio" and (self.command is None or self.url is not None):
            raise ValueError("stdio takes a command (a name in the operator's allowlist) and no url")
        if self.oauth is not None and (self.secret is not None or self.transport != "streamable_http"):
            raise ValueError("oauth is for a streamable_http upstream, instead of secret_header")
        return self


class Classification(BaseModel):
    model_config = ConfigDict(extra="forbid")

    category: Literal["A", "B", "C", "D"]
    action: Literal["read", "write"]
    risk: Literal["low", "medium", "high", "critical"] | None = None
    cost: Cost | None = None
    requires_approval: bool = False


class Approval(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hash: str = Field(pattern=r"^[0-9a-f]{64}$")


def _admin(request: web.Request) -> str:
    identity = identity_of(request)
    if not identity.is_admin:
        raise Forbidden("upstreams are registered and removed by admin tokens")
    return identity.actor


@routes.post("/v1/admin/upstreams")
async def register(request: web.Request) -> web.Response:
    by = _admin(request)
    body = await read_model(request, UpstreamBody)
    settings = request.app[UPSTREAM_SETTINGS]
    catalog = request.app[CATALOG]
    if any(m.tool_id == body.name or m.tool_id.startswith(body.name + ".")
           for m in catalog.manifests() if not m.from_upstream):
        raise ToolNameTaken(f"{body.name!r} names tools already in the catalog")
    if body.transport == "stdio":
        assert body.command is not None
        try:  # nothing outside the operator's allowlist, whoever asks; nothing is started here
            commands.resolve(settings.upstream_commands, body.command, body.args)
        except CommandRefused as exc:
            raise CommandNotAllowed(str(exc)) from None
    else:
        assert body.url is not None
        try:
            await check_url(request.app[UPSTREAM_GUARD], body.url, settings.host_patterns())
        except ToolError as exc:
            raise UrlNotAllowed(f"url: {exc.message}") from None
        if body.oauth is not None:  # the token URL is an outbound address like any other
            try:
                await check_url(request.app[UPSTREAM_GUARD], body.oauth.token_url,
                                settings.host_patterns())
            except ToolError as exc:
                raise UrlNotAllowed(f"oauth.token_url: {exc.message}") from None
    sealed = body.sealed(request.app[SECRET_BOX], body.name)
    u = await store.insert(request.app[POOL], name=body.name, transport=body.transport,
                           url=body.url, command=body.command, args=body.args,
                           secret_header=body.secret_header, sealed=sealed,
                           timeout_ms=body.timeout_ms, max_concurrency=body.max_concurrency, by=by)
    if u is None:
        raise UpstreamExists(f"an upstream named {body.name!r} exists; remove it first")
    return json_response(201, {"upstream": shown(request, u)})


@routes.get("/v1/admin/upstreams")
async def list_upstreams(request: web.Request) -> web.Response:
    require_governance(identity_of(request), None)
    return json_response(200, {"upstreams": [shown(request, u) for u in await store.list_all(request.app[POOL])]})


@routes.get("/v1/admin/upstreams/{name}")
async def get_upstream(request: web.Request) -> web.Response:
    require_governance(identity_of(request), None)
    return json_response(200, {"upstream": shown(request, await _upstream(request))})


def shown(request: web.Request, u: store.Upstream) -> dict[str, Any]:
    """A registration as listed; OAuth's token URL and client id shown, never its secret."""
    out = u.as_json()
    if u.credentials == "oauth_client_credentials":
        assert u.secret_sealed is not None and u.secret_key_id is not None
        try:
            c = OAuthConfig.from_sealed(request.app[SECRET_BOX].open(
                store.sealed_name(u.name), u.secret_sealed, u.secret_key_id))
        except (SecretUnavailable, ValueError, KeyError, TypeError):
            out["oauth"] = None  # sealed with a key this proxy does not have
        else:
            out["oauth"] = {"token_url": c.token_url, "client_id": c.client_id, "scope": c.scope,
                            "audience": c.audience, "resource": c.resource}
    return out


@routes.delete("/v1/admin/upstreams/{name}")
async def delete_upstream(request: web.Request) -> web.Response:
    _admin(request)
    name = request.match_info["name"]
    if not await store.delete(request.app[POOL], name):
        raise NotFound("no such upstream")
    return json_response(200, {"deleted": True, "name": name})


@routes.post("/v1/admin/upstreams/{name}/sync")
async def sync(request: web.Request) -> web.Response:
    require_platform_governance(request, identity_of(request), "syncing an upstream")
    u = await _upstream(request)
    try:
        msg = await request.app[NC].request(p.UPSTREAM_SYNC_SUBJECT, orjson.dumps({"name": u.name}),
                                            timeout=SYNC_TIMEOUT_S)
    except NoRespondersError:
        raise BridgeUnavailable("no upstream bridge is running") from None
    except NatsTimeout:
        raise BridgeUnavailable("no upstream bridge answered in time") from None
    reply = orjson.loads(msg.data)
    if not reply.get("ok"):
        error = reply.get("error") or {}
        code, message = error.get("code"), str(error.get("message", ""))[:1000]
        raise {"upstream_timeout": UpstreamTimedOut, "upstream_unavailable": UpstreamUnreachable
               }.get(code, UpstreamFailed)(message)
    return json_response(200, {"tools": await _tools(request, u.name),
                               "protocol_version": reply.get("protocol_version")})


@routes.get("/v1/admin/upstreams/{name}/tools")
async def list_tools(request: web.Request) -> web.Response:
    require_governance(identity_of(request), None)
    u = await _upstream(request)
    return json_response(200, {"tools": await _tools(request, u.name)})


@routes.post("/v1/admin/upstreams/{name}/tools/{tool}/classify")
async def classify(request: web.Request) -> web.Response:
    identity = identity_of(request)
    require_platform_governance(request, identity, "classifying an upstream's tool")
    u = await _upstream(request)
    body = await read_model(request, Classification)
    row = await _tool(request, u.name)
    if row["state"] not in ("candidate", "classified"):
        raise NotClassifiable(f"{row['tool']} is {row['state']}: approve its new definition instead"
                              if row["state"] == "changed" else f"{row['tool']} is gone")
    tool_id = row["tool_id"] or catalog_name(u.name, row["tool"])
    if tool_id is None:
        raise InvalidRequest(f"{row['tool']!r} cannot become a catalog name under {u.name!r}")
    existing = request.app[CATALOG].get(tool_id)
    if existing is not None and not existing.from_upstream:
        raise ToolNameTaken(f"{tool_id!r} is a built-in tool's name")
    classification = body.model_dump(mode="json", exclude_none=True)
    try:
        manifest_for(tool_id, row["hash"], row["definition"], classification, u.timeout_ms)
    except ManifestError as exc:
        raise InvalidSchema(str(exc)) from None
    try:
        updated = await store.classify(request.app[POOL], u.name, row["tool"], tool_id=tool_id,
                                       classification=classification, by=identity.actor)
    except asyncpg.UniqueViolationError:
        raise ToolNameTaken(f"{tool_id!r} is another upstream tool's name") from None
    if updated is None:
        raise NotClassifiable(f"{row['tool']} changed while it was being classified; read it again")
    return json_response(200, {"tool": _tool_json(updated)})


@routes.post("/v1/admin/upstreams/{name}/tools/{tool}/approve")
async def approve(request: web.Request) -> web.Response:
    identity = identity_of(request)
    require_platform_governance(request, identity, "approving an upstream tool's new definition")
    u = await _upstream(request)
    body = await read_model(request, Approval)
    row = await _tool(request, u.name)
    if row["state"] != "changed":
        raise NotClassifiable(f"{row['tool']} is {row['state']}, not changed")
    try:
        manifest_for(row["tool_id"], row["hash"], row["definition"], row["classification"], u.timeout_ms)
    except ManifestError as exc:
        raise InvalidSchema(str(exc)) from None
    updated = await store.approve(request.app[POOL], u.name, row["tool"], body.hash, identity.actor)
    if updated is None:
        raise NotClassifiable("the hash is not the tool's current definition (it changed again?)")
    return json_response(200, {"tool": _tool_json(updated)})


async def _upstream(request: web.Request) -> store.Upstream:
    u = await store.get(request.app[POOL], request.match_info["name"])
    if u is None:
        raise NotFound("no such upstream")
    return u


async def _tool(request: web.Request, upstream: str) -> asyncpg.Record:
    row = await store.tool(request.app[POOL], upstream, request.match_info["tool"])
    if row is None:
        raise NotFound("no such tool at this upstream (sync first?)")
    return row


async def _tools(request: web.Request, upstream: str) -> list[dict[str, Any]]:
    return [_tool_json(r) for r in await store.tools(request.app[POOL], upstream)]


def _tool_json(r: asyncpg.Record) -> dict[str, Any]:
    """A tool as governance reads it: every definition as text, never rendered; the pinned one
    beside the current one where they differ."""
    d = r["definition"]
    out: dict[str, Any] = {
        "tool": r["tool"], "tool_id": r["tool_id"], "state": r["state"], "hash": r["hash"],
        "title": d.get("title"), "description": d.get("description"),
        "input_schema": d.get("input_schema"), "output_schema": d.get("output_schema"),
        "annotations": d.get("annotations"), "flags": list(r["flags"]),
        "suggested": None if r["tool_id"] else suggestion(d, list(r["flags"])),
        # What strict clients and model APIs would refuse in its schemas once published (the
        # tool is callable all the same): governance reads it before classifying.
        "schema_portability": portability_report(d.get("input_schema"), d.get("output_schema")),
        "classification": r["classification"],
        "definition_text": _text(d),
    }
    if r["pinned_hash"] is not None:
        pinned = r["pinned_definition"]
        out["pinned"] = {"hash": r["pinned_hash"], "description": pinned.get("description"),
                         "input_schema": pinned.get("input_schema"),
                         "definition_text": _text(pinned)}
    return out


def _text(d: dict[str, Any]) -> str:
    return orjson.dumps(d, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()

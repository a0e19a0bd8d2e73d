"""POST /v1/admin/openapi: an OpenAPI service registered as an upstream of transport `openapi`
(an admin act); its operations are then synced, classified and approved under
/v1/admin/upstreams like an MCP server's tools."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from pydantic import Field, model_validator

from proxy.web.admin.errors import (
    OpenApiRefused,
    ToolNameTaken,
    UpstreamExists,
    UpstreamFailed,
    UrlNotAllowed,
)
from proxy.web.admin.keys import SECRET_BOX, UPSTREAM_GUARD, UPSTREAM_SETTINGS
from proxy.web.admin.upstreams import UpstreamCredentials, _admin, shown
from proxy.web.body import read_model
from proxy.web.keys import CATALOG, POOL
from proxy.web.responses import json_response
from services.netguard.fetch import Fetcher
from services.netguard.urls import MAX_URL_LENGTH
from services.sdk import ToolError
from services.upstreams import store
from services.upstreams.addresses import check_url
from services.upstreams.errors import OpenApiRefused as DocumentRefused
from services.upstreams.openapi_doc import MAX_DOCUMENT_BYTES, load, operations
from services.upstreams.openapi_link import OpenApiEndpoint, OpenApiLink

routes = web.RouteTableDef()


class OpenApiBody(UpstreamCredentials):
    name: str = Field(pattern=store.NAME_PATTERN, max_length=32)
    document: str | dict[str, Any] | None = None  # JSON or YAML text, or the JSON itself
    url: str | None = Field(default=None, min_length=1, max_length=MAX_URL_LENGTH)
    base_url: str = Field(min_length=1, max_length=MAX_URL_LENGTH)

    @model_validator(mode="after")
    def _shape(self) -> OpenApiBody:
        if (self.document is None) == (self.url is None):
            raise ValueError("give the document or its url, not both")
        if self.oauth is not None and self.secret is not None:
            raise ValueError("give oauth or secret_header, not both")
        return self


@routes.post("/v1/admin/openapi")
async def register(request: web.Request) -> web.Response:
    by = _admin(request)
    body = await read_model(request, OpenApiBody)
    settings = request.app[UPSTREAM_SETTINGS]
    guard = request.app[UPSTREAM_GUARD]
    if any(m.tool_id == body.name or m.tool_id.startswith(body.name + ".")
           for m in request.app[CATALOG].manifests() if not m.from_upstream):
        raise ToolNameTaken(f"{body.name!r} names tools already in the catalog")
    token_url = body.oauth.token_url if body.oauth is not None else None
    for field, url in (("base_url", body.base_url), ("url", body.url), ("oauth.token_url", token_url)):
        if url is not None:
            try:
                await check_url(guard, url, settings.host_patterns())
            except ToolError as exc:
                raise UrlNotAllowed(f"{field}: {exc.message}") from None
    document: dict[str, Any] | None = None
    try:
        if body.url is not None:  # read now through netguard, as each sync will
            link = OpenApiLink(OpenApiEndpoint(
                name=body.name, base_url=body.base_url, document_url=body.url, document=None,
                headers=None, timeout_s=body.timeout_ms / 1000, max_bytes=MAX_DOCUMENT_BYTES),
                Fetcher(guard, user_agent="toolproxy-openapi/1.0"), settings.host_patterns())
            try:
                raw: bytes | str = await link.fetch_document()
            except ToolError as exc:
                raise UpstreamFailed(f"url: {exc.message}") from None
            finally:
                await link.close()
            found = await asyncio.to_thread(_read, raw)
        else:
            given = body.document
            document = load(given) if isinstance(given, str) else load(_json_bytes(given or {}))
            found = await asyncio.to_thread(operations, document)
    except DocumentRefused as exc:
        raise OpenApiRefused(exc.code, str(exc)) from None
    sealed = body.sealed(request.app[SECRET_BOX], body.name)
    u = await store.insert(request.app[POOL], name=body.name, transport="openapi", url=body.base_url,
                           command=None, args=[], secret_header=body.secret_header, sealed=sealed,
                           timeout_ms=body.timeout_ms, max_concurrency=body.max_concurrency, by=by,
                           document=document, document_url=body.url)
    if u is None:
        raise UpstreamExists(f"an upstream named {body.name!r} exists; remove it first")
    return json_response(201, {"upstream": shown(request, u), "operations": len(found)})


def _read(raw: bytes | str) -> list[dict[str, Any]]:
    """Validating a document is CPU work (~1-2 s for 500 operations): off the event loop."""
    return operations(load(raw))


def _json_bytes(doc: dict[str, Any]) -> bytes:
    import orjson

    data = orjson.dumps(doc)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise DocumentRefused("openapi_too_large", f"the document exceeds {MAX_DOCUMENT_BYTES} bytes")
    return data

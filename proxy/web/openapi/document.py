"""The OpenAPI 3.1 document, built once from the operations table, and its route."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aiohttp import web

from proxy.web.openapi.operations import ERROR_NOTES, ID_SCHEMA, JSON, OPERATIONS, PATH_PARAMS, Op
from proxy.web.openapi.operations_catalog import CATALOG_OPERATIONS
from proxy.web.openapi.operations_upstreams import UPSTREAM_OPERATIONS
from proxy.web.openapi.schemas import SCHEMAS, Schema, ref
from proxy.web.responses import json_response

routes = web.RouteTableDef()


@routes.get("/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return json_response(200, openapi_document())


def _content(schema: Schema | tuple[str, Schema]) -> dict[str, Any]:
    media, s = schema if isinstance(schema, tuple) else (JSON, schema)
    return {media: {"schema": s}}


def _responses(op: Op) -> dict[str, Any]:
    """The route's own statuses, and the ones every route shares: 400 (a NUL in the target,
    a malformed parameter or body), 401 (no or bad token), 413/415 (bodies), 421 (a Host not
    served; the probes answer any), 503 (a dependency down)."""
    shared: dict[int, Schema] = {400: ref("Error")}
    if op.path not in ("/healthz", "/readyz"):
        shared[421] = ref("Error")
    if not op.public:
        shared |= {401: ref("Error"), 503: ref("Error")}
    if op.body is not None:
        shared |= {413: ref("Error"), 415: ref("Error")}
    shared |= op.errors
    out: dict[str, Any] = {}
    for status, schema in sorted({**shared, **op.responses}.items()):
        entry: dict[str, Any] = {"description": ERROR_NOTES.get(status, "success")
                                 if status >= 400 else _success(status)}
        if schema is not None:
            entry["content"] = _content(schema)
        out[str(status)] = entry
    return out


def _success(status: int) -> str:
    return {200: "success", 201: "created", 202: "accepted (held for approval, or no reply due)"}.get(
        status, "success")


def _parameters(op: Op) -> list[dict[str, Any]]:
    given = {p.name for p in op.params if p.where == "path"}  # an operation's own path shapes
    out = [{"name": p[1:-1], "in": "path", "required": True,
            "schema": PATH_PARAMS.get(p[1:-1], ID_SCHEMA)}
           for p in op.path.split("/") if p.startswith("{") and p[1:-1] not in given]
    for p in op.params:
        entry: dict[str, Any] = {"name": p.name, "in": p.where, "required": p.where == "path",
                                 "schema": p.schema}
        if p.description:
            entry["description"] = p.description
        out.append(entry)
    return out


def _operation_id(op: Op) -> str:
    path = op.path.strip("/").replace("/", "_").replace("{", "").replace("}", "").replace("-", "_")
    return f"{op.method}_{path}".replace(".", "_")


@lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    schemas: dict[str, Any] = dict(SCHEMAS)
    paths: dict[str, dict[str, Any]] = {}
    for op in (*OPERATIONS, *CATALOG_OPERATIONS, *UPSTREAM_OPERATIONS):
        entry: dict[str, Any] = {"tags": [op.tag], "summary": op.summary,
                                 "operationId": _operation_id(op), "responses": _responses(op)}
        params = _parameters(op)
        if params:
            entry["parameters"] = params
        if isinstance(op.body, type):
            schema = op.body.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schema.pop("$defs", {}))
            schemas[op.body.__name__] = schema
            entry["requestBody"] = {"required": op.body_required,
                                    "content": _content(ref(op.body.__name__))}
        elif op.body is not None:
            entry["requestBody"] = {"required": op.body_required, "content": _content(op.body)}
        if op.public:
            entry["security"] = []
        paths.setdefault(op.path, {})[op.method] = entry
    return {
        "openapi": "3.1.0",
        "info": {"title": "Toolproxy", "version": "0.1.0",
                 "description": "A tool proxy for AI agents with a policy decision point. "
                                "Every request is held to what can be stored exactly: no NUL "
                                "characters, integers within 64 bits, finite numbers."},
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
        },
    }

"""The external API service: external_api.call, a request to a registered API checked against
its registration, its secret injected here."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import asyncpg
import orjson

from infra.secret_box import SecretBox, SecretUnavailable
from services.external_api import store
from services.external_api.errors import (
    ApiMisconfigured,
    ApiNotRegistered,
    BodyNotAllowed,
    CredentialUnavailable,
    MethodNotAllowed,
    PathNotAllowed,
)
from services.external_api.manifests import MANIFEST
from services.external_api.paths import PathPatternError, parse_patterns, split_request_path
from services.netguard.errors import UnsupportedContent
from services.netguard.fetch import Fetcher
from services.netguard.guard import Guard
from services.netguard.hosts import HostPattern
from services.netguard.settings import NetOptions
from services.netguard.urls import parse_url
from services.sdk import CallContext, Service
from services.sdk.service import ToolDef, ToolResult

MAX_RESPONSE_BYTES = 1_000_000
DEADLINE_MARGIN_S = 0.3
WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
REDACTED = "[redacted]"


def tool(fetcher: Fetcher, pool: asyncpg.Pool, box: SecretBox, secret_dir: Path) -> ToolDef:
    """Everything about the request is checked against the registration before a connection:
    the API exists, the method and path are registered, the base URL's host is public."""

    async def handle(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        api = await store.get(pool, args["api"])
        if api is None:
            raise ApiNotRegistered(f"no external API named {args['api']!r} is registered")
        method: str = args["method"]
        if method not in api.methods:
            raise MethodNotAllowed(f"{method} is not registered for {api.name}")
        path, segments, query = split_request_path(args["path"])
        try:
            patterns = parse_patterns(api.paths)
        except PathPatternError:
            raise ApiMisconfigured(f"{api.name}'s path patterns are invalid") from None
        if not any(p.matches(segments) for p in patterns):
            raise PathNotAllowed(f"{path} matches none of {api.name}'s paths")
        body = args.get("body")
        if body is not None and method not in WITH_BODY:
            raise BodyNotAllowed(f"{method} requests carry no body")
        base = parse_url(api.base_url)
        # The host, port and scheme are the registration's: the agent's path only extends it.
        target = dataclasses.replace(base, path=base.path.rstrip("/") + path, query=query)
        allow = [HostPattern(host=base.host, wildcard=False, port=base.port, any_port=False, ip=base.ip)]
        try:
            secret = api.secret(box, secret_dir)
        except SecretUnavailable as exc:
            raise CredentialUnavailable(f"{api.name}'s credential is unavailable: {exc}") from None
        headers = {api.secret_header: secret, "Accept": "application/json"}
        response = await fetcher.fetch(
            target, allow, internal_ok=False, max_bytes=MAX_RESPONSE_BYTES,
            timeout_s=max(ctx.remaining() - DEADLINE_MARGIN_S, 0.1), accept=None,
            method=method, headers=headers, json_body=body, follow_redirects=False,
        )
        content_type = response.content_type
        is_json = content_type == "application/json" or content_type.endswith("+json")
        if not (is_json or content_type.startswith("text/")):
            raise UnsupportedContent(f"the answer is {content_type}, not JSON or text")
        # An upstream that echoes request headers must not hand the credential to the agent.
        text = response.text().replace(secret, REDACTED)
        value: Any = text
        if is_json and not response.truncated:
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                value = text
        return ToolResult(
            output={"api": api.name, "method": method, "path": args["path"],
                    "status": response.status, "content_type": content_type, "body": value,
                    "truncated": response.truncated},
            provenance_refs=[{"type": "external_api", "api": api.name, "method": method,
                              "path": path, "status": response.status}],
        )

    return ToolDef(manifest=MANIFEST, handler=handle)


def service(pool: asyncpg.Pool, options: NetOptions) -> Service:
    s = options.settings
    fetcher = Fetcher(
        Guard(options.the_resolver(),
              unsafe_allow_loopback_for_tests=options.unsafe_allow_loopback_for_tests),
        user_agent="toolproxy-external-api/1.0",
    )
    box = SecretBox(s.secrets_key, s.data_dir)
    return Service(name="external_api", tools=[tool(fetcher, pool, box, s.secret_dir())],
                   on_stop=[fetcher.close])

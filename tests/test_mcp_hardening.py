"""MCP hardening (issue 10 §6): the Origin check, error results a validating client can read,
and JSON-RPC ids never echoed when they are not ids."""

from __future__ import annotations

from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

from proxy.web.app import create_app
from tests.support.calls import bearer
from tests.support.overrides import set_override
from tests.support.mcp_client import ACCEPT, init_body, mcp_http, mcp_url, raw


class SchemaMismatch(Exception):
    """What the TypeScript SDK throws: "Structured content does not match the tool's output schema"."""


def ts_sdk_check(output_schemas: dict[str, Any], name: str, result: Any) -> None:
    """Client.callTool of the TypeScript SDK (1.x): a tool with an outputSchema must return
    structuredContent unless isError, and structuredContent, when present, is validated
    against the outputSchema even on errors."""
    schema = output_schemas.get(name)
    if schema is None:
        return
    if result.structured_content is None:
        if not result.is_error:
            raise SchemaMismatch(f"{name} has an output schema but returned no structured content")
        return
    try:
        jsonschema.validate(result.structured_content, schema)
    except jsonschema.ValidationError as exc:
        raise SchemaMismatch(str(exc)) from None


async def test_errors_reach_a_validating_client_readably(client, token, team) -> None:
    await set_override(client, token, team, "ts-agent", "calendar", 1)
    tok = token(agent="ts-agent", team=team)
    async with mcp_http(mcp_url(client), tok) as c:
        schemas = {t.name: t.output_schema for t in (await c.list_tools()).tools}
        assert schemas["math"]["required"] == ["value"]

        async def call(name: str, args: dict[str, Any], **kw: Any) -> Any:
            result = await c.call_tool(name, args, **kw)
            ts_sdk_check(schemas, name, result)  # raises where a TypeScript agent would
            return result

        ok = await call("math", {"expr": "6*7"})
        assert ok.is_error is False and ok.structured_content == {"value": 42}
        seen: dict[str, Any] = {}
        # Denied: a listed tool, called for another team (the policy's team_mismatch).
        seen["denied"] = await call("math", {"expr": "1"},
                                    meta={"toolproxy/context": {"team_id": "someone-else"}})
        seen["tool_error"] = await call("math", {"expr": "1/0"})
        for i in range(10):
            result = await call("calendar", {"op": "parse", "datetime": f"2026-01-{i + 1:02d}"})
            if result.is_error:
                seen["rate_limited"] = result
                break
        seen["tool_error_open_schema"] = await call("testsvc.fail", {})
    for code, result in seen.items():
        native = result.meta["toolproxy/error"]
        assert result.is_error is True
        assert native["error"]["code"] == code.removesuffix("_open_schema"), native
        assert native.get("call_id") == result.meta.get("toolproxy/call_id")
        assert result.content[0].text
    # The native bodies do not fit these outputSchemas: sent as structuredContent (as before),
    # a TypeScript client would have thrown instead of showing the error.
    for code, tool in (("denied", "math"), ("tool_error", "math"), ("rate_limited", "calendar")):
        assert not Draft202012Validator(schemas[tool]).is_valid(seen[code].meta["toolproxy/error"])
    for code in ("denied", "tool_error", "rate_limited"):
        assert seen[code].structured_content is None, code
    # testsvc.fail declares no outputSchema beyond {"type": "object"}: the body fits, so it stays.
    assert seen["tool_error_open_schema"].structured_content["error"]["code"] == "tool_error"
    assert seen["rate_limited"].meta["toolproxy/error"]["error"]["retry_after_s"] > 0


async def test_a_foreign_origin_is_forbidden(client, token, team) -> None:
    tok = token(team=team)
    for headers in ({"Origin": "https://evil.example", **bearer(tok)},
                    {"Origin": "https://evil.example"},  # before authentication
                    {"Origin": "null", **bearer(tok)}):
        r = await client.post("/mcp", json=init_body(), headers={**ACCEPT, **headers})
        body = await r.json()
        assert r.status == 403, headers
        assert body["id"] is None and body["error"]["code"] == -32600
    status, body, _ = await raw(client, tok, init_body())  # no Origin: a non-browser client
    assert status == 200 and body["result"]["protocolVersion"]
    r = await client.get("/v1/tools", headers={"Origin": "https://evil.example", **bearer(tok)})
    assert r.status == 200  # the Origin check is /mcp's


async def test_an_allowed_origin_is_served(aiohttp_client, settings, builtin, token, team) -> None:
    c = await aiohttp_client(create_app(settings.model_copy(
        update={"allowed_origins": "https://app.example"})))
    tok = token(team=team)
    for origin, status in (("https://app.example", 200), ("https://APP.example/", 200),
                           ("https://app.example:444", 403), ("http://app.example", 403)):
        r = await c.post("/mcp", json=init_body(), headers={**ACCEPT, **bearer(tok), "Origin": origin})
        assert r.status == status, origin


async def test_an_overlong_id_is_answered_null(client, token, team) -> None:
    tok = token(team=team)
    for bad_id in ("x" * 1_000_000, "y" * 257):
        r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": bad_id, "method": "ping"},
                              headers={**ACCEPT, **bearer(tok)})
        text = await r.text()
        assert r.status == 400 and len(text) < 500, len(text)
        body = await r.json()
        assert body["id"] is None and body["error"]["code"] == -32600
    status, body, _ = await raw(client, tok, init_body(request_id="z" * 256))  # the longest id
    assert status == 200 and body["id"] == "z" * 256

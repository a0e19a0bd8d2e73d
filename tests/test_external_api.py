"""external_api.call and its registrations: refused outside them before any connection, the
secret injected by the service and never shown, stored, returned or logged."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from pydantic import SecretStr

from proxy.web.keys import POOL
from services.external_api import service as external_api
from services.sdk import CallContext
from infra import log_context
from tests.support.calls import bearer, grant, invoke
from tests.support.network_flow import approved_call, lift_rate, roomy
from tests.support.tool_harness import run_tool
from tests.support.web_site import API_HEADER, API_SECRETS, Site


@pytest.fixture
def settings(settings):
    return roomy(settings)


def api_body(site: Site, name: str, secret: str | None = None, **more: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name, "base_url": site.url("/api", host="public.test"), "methods": ["GET", "POST"],
        "paths": ["/items", "/items/{id}", "/docs/**", "/headers"], "secret_header": API_HEADER,
    }
    if secret is not None:
        body["secret"] = secret
    body.update(more)
    return body


def new_secret(site: Site) -> str:
    secret = "sk-" + uuid.uuid4().hex
    site.app[API_SECRETS].add(secret)
    return secret


async def register(client, admin: str, body: dict[str, Any]) -> tuple[int, dict]:
    r = await client.post("/v1/admin/external-apis", json=body, headers=bearer(admin))
    return r.status, await r.json()


def ctx(team: str = "t_unit") -> CallContext:
    return CallContext(call_id=str(uuid.uuid4()), decision_id=str(uuid.uuid4()), team_id=team,
                       agent_id="a", run_id=None, deadline=time.time() + 5)


def api_hits(site: Site) -> int:
    return sum(n for path, n in site.hits.items() if path.startswith("/api"))


@pytest.fixture
def admin(token) -> str:
    return token(agent="root", team="ops", role="admin")


@pytest.fixture
async def caller(client, token, team) -> str:
    await grant(client, token, team, "tool.external_api.call.invoke")
    await lift_rate(client, token, team, "caller", "external_api.call")
    await asyncio.sleep(0.2)
    return token(agent="caller", team=team)


@pytest.fixture
async def direct(db_pool, web_site: Site):
    """The service's tool called directly (the SDK path, no NATS): for refusals."""
    svc = external_api.service(db_pool, web_site.options())
    yield svc.tools[0]
    for close in svc.on_stop:
        await close()


async def test_registration_is_admin_only_and_never_shows_the_secret(client, admin, token, team, web_site) -> None:
    name = f"crm-{uuid.uuid4().hex[:8]}"
    secret = new_secret(web_site)
    gov = token(agent="gov", team=team, role="governance")
    agent = token(agent="a1", team=team)
    for who in (gov, agent):
        assert (await register(client, who, api_body(web_site, name, secret)))[0] == 403
    status, body = await register(client, admin, api_body(web_site, name, secret, methods=["GET", "GET", "POST"]))
    assert status == 201, body
    api = body["external_api"]
    assert api["methods"] == ["GET", "POST"] and api["secret_source"] == "stored" and api["secret_file"] is None
    assert api["base_url"] == f"http://public.test:{web_site.port}/api"
    assert secret not in json.dumps(body)
    r = await client.get("/v1/admin/external-apis", headers=bearer(gov))
    listed = await r.json()
    assert r.status == 200 and name in [a["name"] for a in listed["external_apis"]]
    assert secret not in json.dumps(listed)
    assert (await client.get("/v1/admin/external-apis", headers=bearer(agent))).status == 403
    row = await client.app[POOL].fetchrow(
        "SELECT secret_sealed FROM external_apis WHERE name = $1", name)
    assert secret.encode() not in bytes(row["secret_sealed"])  # sealed, not stored in clear

    r = await client.post("/v1/admin/external-apis/delete", json={"name": name}, headers=bearer(admin))
    assert r.status == 200
    r = await client.post("/v1/admin/external-apis/delete", json={"name": name}, headers=bearer(admin))
    assert r.status == 404


@pytest.mark.parametrize(("change", "code"), [
    ({"base_url": "http://127.0.0.1:80/api"}, "url_not_allowed"),
    ({"base_url": "http://10.0.0.1/"}, "url_not_allowed"),
    ({"base_url": "http://[::1]/"}, "url_not_allowed"),
    ({"base_url": "http://0x7f.1/"}, "url_not_allowed"),
    ({"base_url": "ftp://example.com/"}, "url_not_allowed"),
    ({"base_url": "https://user@example.com/"}, "url_not_allowed"),
    ({"base_url": "https://example.com/api?key=1"}, "invalid_request"),
    ({"name": "Bad Name"}, "invalid_request"),
    ({"methods": ["TRACE"]}, "invalid_request"),
    ({"methods": []}, "invalid_request"),
    ({"paths": ["/a/../b"]}, "invalid_request"),
    ({"paths": ["/a/**/b"]}, "invalid_request"),
    ({"paths": ["no-slash"]}, "invalid_request"),
    ({"paths": ["/a%2e"]}, "invalid_request"),
    ({"secret_header": "Host"}, "invalid_request"),
    ({"secret_header": "Bad Header"}, "invalid_request"),
    ({"secret_header": "X-A\r\nX-B"}, "invalid_request"),
    ({"secret": "two\nlines"}, "invalid_request"),
    ({"secret": "nul\u0000"}, "invalid_request"),
    ({"secret": "x" * 4097}, "invalid_request"),
    ({"secret_file": "key.txt"}, "invalid_request"),  # both
    ({"secret": None}, "invalid_request"),  # neither
    ({"unknown": 1}, "invalid_request"),
])
async def test_bad_registrations(client, admin, web_site, change, code) -> None:
    body = api_body(web_site, f"bad-{uuid.uuid4().hex[:8]}", "s3cr3t-value") | change
    body = {k: v for k, v in body.items() if v is not None}
    status, answer = await register(client, admin, body)
    assert (status, answer["error"]["code"]) == (400, code), answer
    assert "s3cr3t-value" not in json.dumps(answer) and "two\nlines" not in json.dumps(answer)


@pytest.mark.parametrize("name", ["../etc/passwd", "/etc/passwd", "a/b", ".hidden"])
async def test_secret_file_names_stay_in_the_secret_directory(client, admin, web_site, name) -> None:
    body = api_body(web_site, f"f-{uuid.uuid4().hex[:8]}", secret_file=name)
    assert (await register(client, admin, body))[0] == 400


async def test_a_call_is_held_approved_and_carries_the_credential(client, admin, caller, token, team, web_site) -> None:
    name = f"crm-{uuid.uuid4().hex[:8]}"
    assert (await register(client, admin, api_body(web_site, name, new_secret(web_site))))[0] == 201
    gov = token(agent="gov", team=team, role="governance")
    args = {"api": name, "method": "POST", "path": "/items?expand=owner", "body": {"title": "x", "n": [1, 2]}}
    before = api_hits(web_site)
    status, held = await invoke(client, caller, "external_api.call", args)
    assert status == 202 and api_hits(web_site) == before  # nothing sent before the approval
    status, done = await approved_call(client, caller, gov, "external_api.call", args)
    assert status == 200 and done["status"] == "COMPLETED", done
    out = done["output"]
    assert (out["api"], out["method"], out["status"], out["content_type"], out["truncated"]) == (
        name, "POST", 200, "application/json", False)
    assert out["body"] == {"method": "POST", "path": "/api/items", "query": "expand=owner",
                           "body": {"title": "x", "n": [1, 2]}}
    # Re-registered with a secret the upstream refuses: the call reaches it and gets its 401.
    assert (await register(client, admin, api_body(web_site, name, "not-accepted")))[0] == 201
    status, done = await approved_call(client, caller, gov, "external_api.call",
                                       {"api": name, "method": "GET", "path": "/items/7"})
    assert done["output"]["status"] == 401


async def test_out_of_registration_is_refused_before_any_connection(client, admin, direct, web_site) -> None:
    name = f"crm-{uuid.uuid4().hex[:8]}"
    assert (await register(client, admin, api_body(web_site, name, new_secret(web_site))))[0] == 201
    before = api_hits(web_site)
    cases = [
        ({"api": "never-registered", "method": "GET", "path": "/items"}, "api_not_registered"),
        ({"api": name, "method": "DELETE", "path": "/items/1"}, "method_not_allowed"),
        ({"api": name, "method": "GET", "path": "/admin"}, "path_not_allowed"),
        ({"api": name, "method": "GET", "path": "/items/1/2"}, "path_not_allowed"),
        ({"api": name, "method": "GET", "path": "/items/../admin"}, "path_not_allowed"),
        ({"api": name, "method": "GET", "path": "/docs/../../admin"}, "path_not_allowed"),
        ({"api": name, "method": "GET", "path": "/docs/%2e%2e/admin"}, "path_not_allowed"),
        ({"api": name, "method": "GET", "path": "/docs/a%2fb"}, "path_not_allowed"),
        ({"api": name, "method": "GET", "path": "/docs/a%5cb"}, "path_not_allowed"),
        ({"api": name, "method": "GET", "path": "/docs/a\\b"}, "path_not_allowed"),
        ({"api": name, "method": "GET", "path": "//evil.example/items"}, "path_not_allowed"),
        ({"api": name, "method": "GET", "path": "http://evil.example/items"}, "path_not_allowed"),
        ({"api": name, "method": "GET", "path": "@evil.example/items"}, "path_not_allowed"),
        ({"api": name, "method": "GET", "path": "/items/1?x=%zz"}, "path_not_allowed"),
        ({"api": name, "method": "GET", "path": "/items/1?x=a b"}, "path_not_allowed"),
        ({"api": name, "method": "GET", "path": "/items", "body": {"a": 1}}, "body_not_allowed"),
        ({"api": name, "method": "TRACE", "path": "/items"}, "invalid_args"),
        ({"api": name, "method": "GET", "path": "/items", "host": "evil.example"}, "invalid_args"),
        ({"api": name, "method": "POST", "path": "/items", "body": {"a": "x" * 70_000}}, "invalid_args"),
        ({"api": name, "method": "POST", "path": "/items", "body": {"a": 2**63}}, "invalid_args"),
        ({"api": name, "method": "POST", "path": "/items", "body": [[[[[[[1]]]]]]]}, "invalid_args"),
    ]
    for args, code in cases:
        reply = await run_tool(direct, args, ctx())
        assert reply.get("error", {}).get("code") == code, (args, reply)
    # A registered name that resolves to a private address: refused at call time.
    private = f"prv-{uuid.uuid4().hex[:8]}"
    body = api_body(web_site, private, new_secret(web_site), base_url=f"http://private.test:{web_site.port}/api")
    assert (await register(client, admin, body))[0] == 201
    reply = await run_tool(direct, {"api": private, "method": "GET", "path": "/items"}, ctx())
    assert reply["error"]["code"] == "url_not_allowed"
    assert api_hits(web_site) == before
    # And within the registration, the call goes out.
    reply = await run_tool(direct, {"api": name, "method": "GET", "path": "/docs/a/b.md"}, ctx())
    assert reply["ok"] and reply["output"]["body"]["path"] == "/api/docs/a/b.md"


async def test_secret_files_are_read_at_call_time(client, admin, direct, web_site) -> None:
    name = f"file-{uuid.uuid4().hex[:8]}"
    file_name = f"{name}.key"
    path = web_site.secret_dir / file_name
    path.write_text(new_secret(web_site) + "\n")
    status, body = await register(client, admin, api_body(web_site, name, secret_file=file_name))
    assert status == 201 and body["external_api"]["secret_source"] == "file"
    call = {"api": name, "method": "GET", "path": "/items"}
    assert (await run_tool(direct, call, ctx()))["output"]["status"] == 200
    path.write_text("rotated-but-unknown-upstream")
    assert (await run_tool(direct, call, ctx()))["output"]["status"] == 401  # the new value went out
    path.unlink()
    assert (await run_tool(direct, call, ctx()))["error"]["code"] == "secret_unavailable"


async def test_sealed_secrets_open_only_with_their_key_and_row(client, admin, db_pool, web_site) -> None:
    name = f"seal-{uuid.uuid4().hex[:8]}"
    assert (await register(client, admin, api_body(web_site, name, new_secret(web_site))))[0] == 201
    options = web_site.options()
    other_key = SecretStr(base64.urlsafe_b64encode(b"z" * 32).decode())
    wrong = type(options)(settings=options.settings.model_copy(update={"secrets_key": other_key}),
                          resolver=options.resolver, unsafe_allow_loopback_for_tests=True)
    svc = external_api.service(db_pool, wrong)
    try:
        reply = await run_tool(svc.tools[0], {"api": name, "method": "GET", "path": "/items"}, ctx())
        assert reply["error"]["code"] == "secret_unavailable"
    finally:
        for close in svc.on_stop:
            await close()
    # A sealed secret copied onto another API's row does not open there (bound to its name).
    twin = f"twin-{uuid.uuid4().hex[:8]}"
    assert (await register(client, admin, api_body(web_site, twin, new_secret(web_site))))[0] == 201
    await db_pool.execute("""UPDATE external_apis t SET secret_sealed = s.secret_sealed
                             FROM external_apis s WHERE t.name = $1 AND s.name = $2""", twin, name)
    direct_svc = external_api.service(db_pool, options)
    try:
        reply = await run_tool(direct_svc.tools[0], {"api": twin, "method": "GET", "path": "/items"}, ctx())
        assert reply["error"]["code"] == "secret_unavailable"
    finally:
        for close in direct_svc.on_stop:
            await close()


@pytest.fixture
def captured(caplog) -> Iterator[list[dict[str, Any]]]:
    """Every structlog event (any level) and stdlib log record, the configuration restored
    exactly afterwards (loggers cached under another configuration would break later tests)."""
    events: list[dict[str, Any]] = []
    saved = structlog.get_config()

    def keep(logger: object, method: str, event: dict[str, Any]) -> dict[str, Any]:
        events.append(dict(event))
        raise structlog.DropEvent

    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, log_context.merge, structlog.processors.add_log_level,
                    structlog.processors.format_exc_info, keep],
        wrapper_class=structlog.make_filtering_bound_logger(0),
        cache_logger_on_first_use=False,
    )
    caplog.set_level(logging.DEBUG)
    try:
        yield events
    finally:
        structlog.configure(**saved)


async def test_the_secret_never_appears_anywhere(client, admin, caller, token, team, web_site, db_pool,
                                                 captured, caplog) -> None:
    name = f"leak-{uuid.uuid4().hex[:8]}"
    secret = new_secret(web_site)
    gov = token(agent="gov", team=team, role="governance")
    seen: list[Any] = []
    status, body = await register(client, admin, api_body(web_site, name, secret))
    seen.append(body)
    # An upstream that echoes the request's headers; a failing call; a refused one.
    status, done = await approved_call(client, caller, gov, "external_api.call",
                                       {"api": name, "method": "GET", "path": "/headers"})
    assert done["status"] == "COMPLETED", done
    echoed = {k.lower(): v for k, v in done["output"]["body"]["headers"].items()}
    assert echoed[API_HEADER.lower()] == "[redacted]"
    seen.append(done)
    for args in ({"api": name, "method": "GET", "path": "/nowhere"},
                 {"api": name, "method": "GET", "path": "/items/1"}):
        seen.append(await approved_call(client, caller, gov, "external_api.call", args))
    await asyncio.sleep(1.0)  # the journal writes usage and decisions to Postgres
    for path, tok, params in (("/v1/calls/" + done["call_id"], caller, {}), ("/v1/events", caller, {}),
                              ("/v1/admin/decisions", gov, {"team_id": team}),
                              ("/v1/approvals", gov, {"state": "all"}), ("/v1/admin/external-apis", gov, {})):
        r = await client.get(path, params=params, headers=bearer(tok))
        assert r.status == 200, path
        seen.append(await r.json())
    for table in ("calls", "approvals", "usage_records", "decisions", "events", "idempotency_keys"):
        rows = await db_pool.fetch(f"SELECT row_to_json(t)::text AS j FROM {table} t WHERE team_id = $1", team)
        seen.extend(r["j"] for r in rows)
    rows = await db_pool.fetch("SELECT row_to_json(t)::text AS j FROM external_apis t")
    seen.extend(r["j"] for r in rows)
    assert len(seen) > 10
    assert secret not in json.dumps(seen)
    assert captured and secret not in repr(captured)
    assert secret not in caplog.text

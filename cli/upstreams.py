"""`toolproxy upstreams add|add-openapi|list|sync|tools|classify|approve|remove` against a running stack."""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from cli.common import admin_token, call_api, data_dir_of, stack_url
from cli.errors import CliError


def _line(u: dict[str, Any]) -> str:
    where = u["url"] or f"{u['command']} {' '.join(u['args'])}".strip()
    synced = u["synced_at"] or "never synced"
    return f"{u['name']:<20} {u['transport']:<16} {where:<40} {synced}" + (
        f"  error: {u['sync_error']}" if u.get("sync_error") else "")


def _tool_line(t: dict[str, Any]) -> str:
    flags = f"  flags: {','.join(t['flags'])}" if t["flags"] else ""
    if not (t.get("schema_portability") or {"portable": True})["portable"]:
        flags += f"  schemas not portable: {len(t['schema_portability']['problems'])} problem(s)"
    return f"{t['tool']:<32} {t['state']:<10} {t['tool_id'] or '-':<40} {t['hash'][:16]}{flags}"


def _oauth(a: argparse.Namespace) -> dict[str, Any]:
    """OAuth client credentials; the client secret only from the environment variable named."""
    if not a.oauth_client_id or not a.oauth_client_secret_env:
        raise CliError("--oauth-token-url needs --oauth-client-id and --oauth-client-secret-env VAR")
    secret = os.environ.get(a.oauth_client_secret_env)
    if not secret:
        raise CliError(f"the environment variable {a.oauth_client_secret_env} holds no client secret")
    oauth = {"token_url": a.oauth_token_url, "client_id": a.oauth_client_id, "client_secret": secret}
    for key in ("scope", "audience", "resource"):
        if getattr(a, f"oauth_{key}"):
            oauth[key] = getattr(a, f"oauth_{key}")
    return oauth


def cmd_upstreams(a: argparse.Namespace) -> int:
    data_dir = data_dir_of(a.data_dir)
    url = stack_url(a.url, data_dir)
    token = a.token or os.environ.get("TOOLPROXY_TOKEN") or admin_token(data_dir)
    base = f"{url}/v1/admin/upstreams"

    def api(method: str, path: str = "", body: dict[str, Any] | None = None) -> Any:
        return asyncio.run(call_api(method, base + path, token, json_body=body))

    if a.action == "list":
        rows = api("GET")["upstreams"]
        if not rows:
            print("no upstreams registered")
        for u in rows:
            print(_line(u))
        return 0
    if not a.name:
        raise CliError(f"upstreams {a.action} needs an upstream name")
    if a.action == "add":
        body: dict[str, Any] = {"name": a.name, "timeout_ms": a.timeout_ms,
                                "max_concurrency": a.max_concurrency}
        if a.url_of_upstream:
            body.update(transport="streamable_http", url=a.url_of_upstream)
        elif a.command:
            body.update(transport="stdio", command=a.command, args=a.arg or [])
        else:
            raise CliError("upstreams add needs --server-url URL or --command NAME")
        if a.secret_header:
            secret = os.environ.get("TOOLPROXY_UPSTREAM_SECRET")
            if not secret:
                raise CliError("--secret-header takes its secret from TOOLPROXY_UPSTREAM_SECRET")
            body.update(secret_header=a.secret_header, secret=secret)
        if a.oauth_token_url:
            body["oauth"] = _oauth(a)
        print(_line(asyncio.run(call_api("POST", base, token, json_body=body))["upstream"]))
        return 0
    if a.action == "add-openapi":
        print(_line(asyncio.run(call_api("POST", f"{url}/v1/admin/openapi", token,
                                         json_body=_openapi_body(a)))["upstream"]))
        return 0
    if a.action == "remove":
        api("DELETE", f"/{a.name}")
        print(f"removed {a.name}")
        return 0
    if a.action in ("sync", "tools"):
        rows = api("POST", f"/{a.name}/sync", {}) if a.action == "sync" else api("GET", f"/{a.name}/tools")
        for t in rows["tools"]:
            print(_tool_line(t))
        return 0
    if not a.tool:
        raise CliError(f"upstreams {a.action} needs --tool")
    if a.action == "classify":
        if not (a.category and a.action_kind):
            raise CliError("classify needs --category and --action")
        body = {"category": a.category, "action": a.action_kind, "requires_approval": a.requires_approval}
        if a.risk:
            body["risk"] = a.risk
        t = api("POST", f"/{a.name}/tools/{a.tool}/classify", body)["tool"]
    else:
        if not a.hash:
            raise CliError("approve needs --hash (the new definition's, as `upstreams tools` shows it)")
        t = api("POST", f"/{a.name}/tools/{a.tool}/approve", {"hash": a.hash})["tool"]
    print(_tool_line(t))
    return 0


def _openapi_body(a: argparse.Namespace) -> dict[str, Any]:
    if not a.base_url or bool(a.spec) == bool(a.spec_url):
        raise CliError("upstreams add-openapi needs --base-url and one of --spec FILE or --spec-url URL")
    body: dict[str, Any] = {"name": a.name, "base_url": a.base_url, "timeout_ms": a.timeout_ms,
                            "max_concurrency": a.max_concurrency}
    if a.spec:
        try:
            with open(a.spec, encoding="utf-8") as f:
                body["document"] = f.read()
        except OSError as exc:
            raise CliError(f"cannot read {a.spec}: {exc.strerror}") from None
    else:
        body["url"] = a.spec_url
    if a.secret_header:
        secret = os.environ.get("TOOLPROXY_UPSTREAM_SECRET")
        if not secret:
            raise CliError("--secret-header takes its secret from TOOLPROXY_UPSTREAM_SECRET")
        body.update(secret_header=a.secret_header, secret=secret)
    if a.oauth_token_url:
        body["oauth"] = _oauth(a)
    return body


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    sp = sub.add_parser("upstreams", help="register, sync, classify and approve upstream MCP servers",
                        description="add, add-openapi and remove (admin), list and tools (governance), sync, classify and "
                                    "approve (admin, or governance of a team in TOOLPROXY_PLUGIN_GOVERNANCE_TEAMS)")
    sp.set_defaults(func=cmd_upstreams)
    sp.add_argument("action", choices=["add", "add-openapi", "list", "sync", "tools", "classify", "approve",
                                       "remove"])
    sp.add_argument("name", nargs="?", help="the upstream's name")
    sp.add_argument("--server-url", dest="url_of_upstream", help="add: a streamable HTTP server's URL")
    sp.add_argument("--command", help="add: a stdio command's name in TOOLPROXY_UPSTREAM_COMMANDS")
    sp.add_argument("--arg", action="append", help="add: an argument for the command (repeatable)")
    sp.add_argument("--spec", help="add-openapi: an OpenAPI 3.0/3.1 document's file (JSON or YAML)")
    sp.add_argument("--spec-url", help="add-openapi: where the document is read (again at each sync)")
    sp.add_argument("--base-url", help="add-openapi: the URL the operations' paths extend")
    sp.add_argument("--secret-header", help="add: the header its secret goes in (secret: TOOLPROXY_UPSTREAM_SECRET)")
    sp.add_argument("--oauth-token-url", help="add: OAuth client credentials: the upstream's token endpoint")
    sp.add_argument("--oauth-client-id", help="add: the client id at that authorization server")
    sp.add_argument("--oauth-client-secret-env", metavar="VAR",
                    help="add: the environment variable holding the client secret")
    sp.add_argument("--oauth-scope", help="add: the scope asked for (space-separated)")
    sp.add_argument("--oauth-audience", help="add: an audience parameter, where the server wants one")
    sp.add_argument("--oauth-resource", help="add: a resource indicator (RFC 8707)")
    sp.add_argument("--timeout-ms", type=int, default=5000)
    sp.add_argument("--max-concurrency", type=int, default=8)
    sp.add_argument("--tool", help="classify/approve: the upstream's tool name")
    sp.add_argument("--category", choices=["A", "B", "C", "D"])
    sp.add_argument("--action", dest="action_kind", choices=["read", "write"])
    sp.add_argument("--risk", choices=["low", "medium", "high", "critical"])
    sp.add_argument("--requires-approval", action="store_true")
    sp.add_argument("--hash", help="approve: the definition hash governance read")
    sp.add_argument("--token", help="bearer token (default: TOOLPROXY_TOKEN or the data dir's admin)")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

"""The `toolproxy` command's own subcommands: each parses nothing, does one thing (the others
live beside it in cli/, one module per family of subcommands)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from pydantic import ValidationError

from cli.common import admin_token, call_api, data_dir_of, mint_token, print_list, stack_url
from cli.errors import CliError
from proxy.config import Settings


def _settings(**overrides: Any) -> Settings:
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise CliError(f"configuration: {exc.errors()[0]['msg']}") from None


def _admin_session(a: argparse.Namespace) -> tuple[str, str]:
    """(the running stack's URL, a short-lived admin token from the data dir's key)."""
    data_dir = data_dir_of(a.data_dir)
    return stack_url(a.url, data_dir), admin_token(data_dir)


def cmd_up(a: argparse.Namespace) -> int:
    from cli.up import up

    return up(data_dir_of(a.data_dir), a.port, a.workers, nats_nodes=a.nats_nodes)


def cmd_serve(a: argparse.Namespace) -> int:
    from cli.serve import serve

    return serve(_settings(port=a.port, host=a.host, workers=a.workers,
                           development=True if a.dev else None))


def cmd_services(a: argparse.Namespace) -> int:
    from cli.serve import services

    services(_settings())
    return 0


def cmd_upstream_bridge(a: argparse.Namespace) -> int:
    from cli.serve import upstream_bridge

    upstream_bridge(_settings())
    return 0


def cmd_plugin_host(a: argparse.Namespace) -> int:
    from cli.serve import plugin_host

    plugin_host(_settings())
    return 0


def cmd_token(a: argparse.Namespace) -> int:
    settings = _settings(data_dir=data_dir_of(a.data_dir))
    print(mint_token(settings, agent_id=a.agent, team_id=a.team, role=a.role, ttl_s=a.ttl,
                     scopes=a.scope or ()))
    return 0


def cmd_migrate(a: argparse.Namespace) -> int:
    import asyncpg

    from infra.db import MigrationError, migrate
    from infra.logs import configure_logging

    settings = _settings()
    if a.check or a.wait is not None:
        from cli.migrations import check

        print(asyncio.run(check(settings.require_database_url(), a.wait or 0.0)))
        return 0
    configure_logging(settings.log_level, settings.log_format)
    try:
        applied = asyncio.run(migrate(settings.require_database_url()))
    except (MigrationError, asyncpg.PostgresError) as exc:
        raise CliError(f"migrate: {exc}") from None
    print("applied: " + (", ".join(applied) if applied else "nothing (up to date)"))
    return 0


def cmd_grants(a: argparse.Namespace) -> int:
    url, token = _admin_session(a)
    if a.action == "list":
        return print_list(url, token, "/v1/admin/grants", "grants", a.team, empty="no grants",
                          line=lambda g: f"{g['team_id']:<20} {g['agent_id'] or '*':<20} "
                                         f"{g['capability']:<40} {g['grant_id']}")
    if not a.team or not a.capability:
        raise CliError(f"grants {a.action} needs --team and --capability")
    payload = {"team_id": a.team, "agent_id": a.agent, "capability": a.capability}
    path = "/v1/admin/grants" if a.action == "add" else "/v1/admin/grants/revoke"
    body = asyncio.run(call_api("POST", f"{url}{path}", token, json_body=payload))
    g = body["grant"]
    verb = "granted" if a.action == "add" else "revoked"
    print(f"{verb} {g['capability']} to team {g['team_id']}" + (f" agent {g['agent_id']}" if g["agent_id"] else ""))
    return 0


def cmd_approvals(a: argparse.Namespace) -> int:
    url, token = _admin_session(a)
    if a.action == "list":
        params = {"state": a.state}
        if a.team:
            params["team_id"] = a.team
        body = asyncio.run(call_api("GET", f"{url}/v1/approvals", token, params=params))
        rows = body["approvals"]
        if not rows:
            print(f"no {a.state} approvals")
        for r in rows:
            print(f"{r['approval_id']}  {r['state']:<9} {r['team_id']:<16} {r['agent_id']:<16} "
                  f"{r['tool']:<20} expires {r['expires_at']}")
        return 0
    if not a.id:
        raise CliError(f"approvals {a.action} needs --id APPROVAL_ID")
    decision = "approve" if a.action == "approve" else "deny"
    body = asyncio.run(call_api("POST", f"{url}/v1/approvals/{a.id}/decision", token,
                                json_body={"decision": decision, "reason": a.reason or ""}))
    print(f"{body['approval']['approval_id']}: {body['approval']['state']}")
    return 0


def cmd_policy(a: argparse.Namespace) -> int:
    from pathlib import Path

    from pdp.policy_set import load_policy_dir

    try:
        policies = load_policy_dir(Path(a.dir) if a.dir else None)
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None
    if a.action == "check":
        from pdp.rego_tests import compile_isolated

        problem = compile_isolated(policies)
        if problem is not None:
            raise CliError(f"policy does not compile:\n{problem}")
        print(f"ok: {len(policies.modules)} module(s), revision {policies.revision}")
        return 0
    if a.action == "test":
        from pdp.rego_tests import run_policy_tests

        results = run_policy_tests(policies)
        failed = [r for r in results if not r.passed]
        for r in results:
            mark = "PASS" if r.passed else "FAIL"
            print(f"{mark} {r.package}.{r.name}" + (f": {r.error}" if r.error else ""))
        print(f"{len(results) - len(failed)}/{len(results)} passed")
        return 1 if failed or not results else 0
    url, token = _admin_session(a)
    modules = {**policies.modules, **policies.tests}
    body = asyncio.run(call_api("POST", f"{url}/v1/admin/policies", token,
                                json_body={"modules": modules}))
    print(f"pushed and activated revision {body['revision']}")
    return 0


def cmd_quotas(a: argparse.Namespace) -> int:
    url, token = _admin_session(a)
    if a.action == "set":
        if not a.team:
            raise CliError("quotas set needs --team")
        body = {"team_id": a.team, "agent_id": a.agent, "invocations": a.invocations,
                "tokens": a.tokens, "compute_units": a.compute_units, "cost_1t": a.cost}
        q = asyncio.run(call_api("POST", f"{url}/v1/admin/quotas", token, json_body=body))["quota"]
        who = f"team {q['team_id']}" + (f" agent {q['agent_id']}" if q["agent_id"] else "")
        limits = ", ".join(f"{k}={q[k]}" for k in ("invocations", "tokens", "compute_units", "cost_1t")
                           if q[k] is not None) or "unlimited"
        print(f"daily quota for {who}: {limits}")
        return 0
    def line(q: dict[str, Any]) -> str:
        used, left = q["used_today"], q["remaining_today"]
        parts = [f"{k} {used[k]}/{q[k]} (left {left[k]})" for k in ("invocations", "tokens",
                 "compute_units", "cost_1t") if q[k] is not None]
        return f"{q['team_id']:<20} {q['agent_id'] or '*':<20} " + "; ".join(parts)

    return print_list(url, token, "/v1/admin/quotas", "quotas", a.team, empty="no quotas", line=line)


def cmd_usage(a: argparse.Namespace) -> int:
    url, token = _admin_session(a)
    params = {"team_id": a.team}
    if a.day:
        params["day"] = a.day
    body = asyncio.run(call_api("GET", f"{url}/v1/usage", token, params=params))
    cols = ("calls", "invocations", "completed", "failed", "denied", "tokens_used", "cost_1t")
    print(f"usage of team {body['team_id']} on {body['day']} (UTC)")
    print(f"{'tool':<22}{'cat':<5}" + "".join(f"{c:>13}" for c in cols))
    for row in body["by_tool"]:
        print(f"{row['tool']:<22}{row['category']:<5}" + "".join(f"{row[c]:>13}" for c in cols))
    t = body["totals"]
    print(f"{'total':<27}" + "".join(f"{t[c]:>13}" for c in cols))
    return 0


def cmd_mcp_stdio(a: argparse.Namespace) -> int:
    import os

    from cli.mcp_stdio import main as relay

    url = stack_url(a.url, data_dir_of(a.data_dir))
    token = a.token or os.environ.get("TOOLPROXY_TOKEN")
    if not token:
        raise CliError("mcp-stdio needs --token or TOOLPROXY_TOKEN (a bearer token, see `toolproxy token`)")
    return relay(url, token)

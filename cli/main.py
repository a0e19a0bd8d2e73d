"""Entry point of the `toolproxy` command: parses arguments and dispatches to one command."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from cli import network
from cli.common import CliError, admin_token, call_api, data_dir_of, mint_token, stack_url
from proxy.config import Settings

_TTL_RE = re.compile(r"(\d+)([smhd]?)")
_TTL_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_ttl(text: str) -> int:
    m = _TTL_RE.fullmatch(text.strip())
    if not m:
        raise argparse.ArgumentTypeError("ttl like 90s, 15m, 1h or 7d")
    return int(m.group(1)) * _TTL_UNITS[m.group(2)]


def _settings(**overrides: Any) -> Settings:
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise CliError(f"configuration: {exc.errors()[0]['msg']}") from None


def _admin_session(a: argparse.Namespace) -> tuple[str, str]:
    """(the running stack's URL, a short-lived admin token from the data dir's key)."""
    data_dir = data_dir_of(a.data_dir)
    return stack_url(a.url, data_dir), admin_token(data_dir)


# --- commands -------------------------------------------------------------------------------


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
        params = {"team_id": a.team} if a.team else None
        body = asyncio.run(call_api("GET", f"{url}/v1/admin/grants", token, params=params))
        rows = body["grants"]
        if not rows:
            print("no grants")
        for g in rows:
            print(f"{g['team_id']:<20} {g['agent_id'] or '*':<20} {g['capability']:<40} {g['grant_id']}")
        return 0
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
    params = {"team_id": a.team} if a.team else None
    rows = asyncio.run(call_api("GET", f"{url}/v1/admin/quotas", token, params=params))["quotas"]
    if not rows:
        print("no quotas")
    for q in rows:
        used, left = q["used_today"], q["remaining_today"]
        parts = [f"{k} {used[k]}/{q[k]} (left {left[k]})" for k in ("invocations", "tokens",
                 "compute_units", "cost_1t") if q[k] is not None]
        print(f"{q['team_id']:<20} {q['agent_id'] or '*':<20} " + "; ".join(parts))
    return 0


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


# --- parser ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="toolproxy", description="A tool proxy for AI agents with a policy decision point.")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, fn: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(func=fn)
        return sp

    sp = add("up", cmd_up, "run the whole stack on embedded defaults")
    sp.add_argument("--port", type=int, default=8080)
    sp.add_argument("--data-dir")
    sp.add_argument("--workers", type=int, help="proxy processes (default: CPUs, at most 4)")
    sp.add_argument("--nats-nodes", type=int, default=1, choices=range(1, 6), metavar="N",
                    help="embedded NATS servers: 3 runs a JetStream cluster on loopback, every "
                         "stream and bucket with 3 replicas (default 1)")

    sp = add("serve", cmd_serve, "run the proxy alone (configuration from TOOLPROXY_* variables)")
    sp.add_argument("--port", type=int)
    sp.add_argument("--host")
    sp.add_argument("--workers", type=int, help="proxy processes sharing the port (default 1)")
    sp.add_argument("--dev", action="store_true",
                    help="a development run: tokens may be signed by a key of this data dir alone "
                         "(TOOLPROXY_DEVELOPMENT=true); replicas need a shared key set or secret")

    add("services", cmd_services, "run the built-in tool services alone")
    add("plugin-host", cmd_plugin_host, "run the plugin host and its sandbox workers alone")
    add("upstream-bridge", cmd_upstream_bridge, "run the upstream MCP bridge alone (any number of replicas)")
    sp = add("migrate", cmd_migrate, "apply SQL migrations to TOOLPROXY_DATABASE_URL")
    sp.add_argument("--check", action="store_true",
                    help="apply nothing: exit 0 if every migration is applied, else 1")
    sp.add_argument("--wait", type=float, metavar="SECONDS",
                    help="with --check: wait up to this long for the migrations to be applied")

    sp = add("token", cmd_token, "print a signed bearer token")
    sp.add_argument("--agent", required=True)
    sp.add_argument("--team", required=True)
    sp.add_argument("--role", choices=["agent", "governance", "admin"], default="agent")
    sp.add_argument("--ttl", type=parse_ttl, default=3600, help="e.g. 15m, 1h (default), 7d")
    sp.add_argument("--scope", action="append", metavar="SCOPE",
                    help="an OAuth scope the token carries (repeatable); tool.<name>.invoke "
                         "scopes limit the token to those tools")
    sp.add_argument("--data-dir")

    from cli.keys import add_parser as add_keys

    add_keys(add)

    sp = add("grants", cmd_grants, "manage capability grants on a running stack (admin)")
    sp.add_argument("action", choices=["add", "list", "revoke"])
    sp.add_argument("--team")
    sp.add_argument("--agent")
    sp.add_argument("--capability")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

    sp = add("approvals", cmd_approvals, "governance decisions on calls awaiting approval")
    sp.add_argument("action", choices=["list", "approve", "deny"])
    sp.add_argument("--id", help="the approval id (approve, deny)")
    sp.add_argument("--reason")
    sp.add_argument("--state", default="pending", help="list: pending (default), approved, ..., all")
    sp.add_argument("--team")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

    from cli.standing import register as register_standing

    register_standing(sub, add, parse_ttl)

    sp = add("policy", cmd_policy, "validate, unit-test and publish Rego policies")
    sp.add_argument("action", choices=["check", "test", "push"])
    sp.add_argument("--dir", help="policy directory (default: the shipped pdp/policies)")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

    sp = add("quotas", cmd_quotas, "daily quotas per team or agent (admin)")
    sp.add_argument("action", choices=["set", "list"])
    sp.add_argument("--team")
    sp.add_argument("--agent")
    sp.add_argument("--invocations", type=int)
    sp.add_argument("--tokens", type=int)
    sp.add_argument("--compute-units", type=float)
    sp.add_argument("--cost", type=float, help="in 1T")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

    network.add_parsers(add)

    sp = add("usage", cmd_usage, "usage reports")
    sp.add_argument("action", choices=["report"])
    sp.add_argument("--team", required=True)
    sp.add_argument("--day", help="YYYY-MM-DD (default: today, UTC)")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

    from cli.agents import add_parser as add_agents
    from cli.catalog import add_parser as add_catalog
    from cli.journal import add_parser as add_journal
    from cli.plugins import add_parser as add_plugins
    from cli.toolsets import add_parser as add_toolsets
    from cli.upstreams import add_parser as add_upstreams

    add_plugins(sub)
    add_upstreams(sub)
    add_catalog(sub)
    add_toolsets(sub)
    add_agents(sub)
    add_journal(sub)

    sp = add("mcp-stdio", cmd_mcp_stdio, "MCP stdio server relaying to a proxy's /mcp (for desktop MCP clients)")
    sp.add_argument("--url", help="the proxy's base URL or its /mcp URL (default: TOOLPROXY_URL or the data "
                    "dir's running stack)")
    sp.add_argument("--token", help="bearer token (default: TOOLPROXY_TOKEN)")
    sp.add_argument("--data-dir")
    return p


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
    except CliError as exc:
        print(f"toolproxy: {exc}", file=sys.stderr)
        code = 1
    except ValueError as exc:  # e.g. a required URL missing from the configuration
        print(f"toolproxy: {exc}", file=sys.stderr)
        code = 1
    except OSError as exc:  # a data dir or file that cannot be read or written: one line too
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"toolproxy: {exc.strerror or exc}{where}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 130
    raise SystemExit(code)


if __name__ == "__main__":
    main()

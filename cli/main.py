"""Entry point of the `toolproxy` command: parses arguments and dispatches to one command.

Light to import: every process of the stack starts here, and a service's spawned CPU workers
import it again as their main module; the commands and what they need load when one runs."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable

from cli.errors import CliError

_TTL_RE = re.compile(r"(\d+)([smhd]?)")
_TTL_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_ttl(text: str) -> int:
    m = _TTL_RE.fullmatch(text.strip())
    if not m:
        raise argparse.ArgumentTypeError("ttl like 90s, 15m, 1h or 7d")
    return int(m.group(1)) * _TTL_UNITS[m.group(2)]


# --- parser ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from cli import network
    from cli.commands import (cmd_approvals, cmd_grants, cmd_mcp_stdio, cmd_migrate, cmd_plugin_host,
                              cmd_policy, cmd_quotas, cmd_serve, cmd_services, cmd_token, cmd_up,
                              cmd_upstream_bridge, cmd_usage)

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

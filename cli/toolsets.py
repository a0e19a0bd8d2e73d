"""`toolproxy toolsets add|list|show|remove`: a team's tool sets, each served at
/mcp/sets/<name> (governance of the team, or an admin)."""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any
from urllib.parse import quote

from cli.common import admin_token, call_api, data_dir_of, stack_url
from cli.errors import CliError


def _line(s: dict[str, Any]) -> str:
    return f"{s['team_id']:<16} {s['name']:<20} {s['endpoint']:<28} {', '.join(s['tools'])}"


def cmd_toolsets(a: argparse.Namespace) -> int:
    data_dir = data_dir_of(a.data_dir)
    url = stack_url(a.url, data_dir)
    token = a.token or os.environ.get("TOOLPROXY_TOKEN") or admin_token(data_dir)
    base = f"{url}/v1/admin/toolsets"
    team = {"team_id": a.team} if a.team else None
    if a.action == "list":
        rows = asyncio.run(call_api("GET", base, token, params=team))["toolsets"]
        if not rows:
            print("no tool sets")
        for row in rows:
            print(_line(row))
        return 0
    if not a.name:
        raise CliError(f"toolsets {a.action} needs a set name")
    if a.action == "add":
        if not a.team or not a.tool:
            raise CliError("toolsets add needs --team and at least one --tool")
        body = asyncio.run(call_api("POST", base, token, json_body={
            "name": a.name, "team_id": a.team, "tools": a.tool, "description": a.description or ""}))
        print(("created " if body["created"] else "replaced ") + _line(body["toolset"]))
        return 0
    path = f"{base}/{quote(a.name, safe='')}"
    if a.action == "show":
        print(_line(asyncio.run(call_api("GET", path, token, params=team))["toolset"]))
        return 0
    body = asyncio.run(call_api("DELETE", path, token, params=team))
    print(f"removed {body['toolset']['name']} (team {body['toolset']['team_id']})")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    sp = sub.add_parser("toolsets", help="tool sets served at /mcp/sets/<name> (governance)",
                        description="a team's named subsets of the catalog, each its own MCP endpoint")
    sp.set_defaults(func=cmd_toolsets)
    sp.add_argument("action", choices=["add", "list", "show", "remove"])
    sp.add_argument("name", nargs="?", help="the set's name (add, show, remove)")
    sp.add_argument("--team", help="the team (add: required; others: default the token's own)")
    sp.add_argument("--tool", action="append", help="a tool of the set (repeat; add replaces the list)")
    sp.add_argument("--description")
    sp.add_argument("--token", help="bearer token (default: TOOLPROXY_TOKEN or the data dir's admin)")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

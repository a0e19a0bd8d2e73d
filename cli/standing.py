"""`toolproxy standing-approvals add|list|revoke`: standing approvals on a running stack."""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import datetime, timedelta, timezone
from typing import Any

from cli.common import admin_token, call_api, data_dir_of, stack_url
from cli.errors import CliError


def _json_arg(name: str, text: str | None) -> Any:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{name} is not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise CliError(f"{name} must be a JSON object")
    return value


def _line(a: dict[str, Any]) -> str:
    who = a["agent_id"] or "*"
    return (f"{a['standing_approval_id']}  {a['state']:<9} {a['team_id']:<16} {who:<16} "
            f"{a['tool']:<20} {a['used_calls']}/{a['max_calls']} calls, expires {a['expires_at']}")


def cmd_standing(a: argparse.Namespace, parse_ttl: Any) -> int:
    data_dir = data_dir_of(a.data_dir)
    url, token = stack_url(a.url, data_dir), admin_token(data_dir)
    base = f"{url}/v1/admin/standing-approvals"
    if a.action == "list":
        params = {"state": a.state}
        if a.team:
            params["team_id"] = a.team
        rows = asyncio.run(call_api("GET", base, token, params=params))["standing_approvals"]
        if not rows:
            print("no standing approvals")
        for row in rows:
            print(_line(row))
        return 0
    if a.action == "revoke":
        if not a.id:
            raise CliError("standing-approvals revoke needs --id STANDING_APPROVAL_ID")
        row = asyncio.run(call_api("POST", f"{base}/{a.id}/revoke", token))
        print(f"revoked {row['standing_approval_id']} ({row['tool']}, team {row['team_id']})")
        return 0
    if not a.team or not a.tool or not a.max_calls:
        raise CliError("standing-approvals add needs --team, --tool and --max-calls")
    if a.expires_at:
        expires = a.expires_at
    else:
        seconds = parse_ttl(a.expires_in or "1h")
        expires = (datetime.now(timezone.utc) + timedelta(seconds=seconds)).isoformat()
    payload = {"team_id": a.team, "agent_id": a.agent, "tool": a.tool,
               "args": _json_arg("--args", a.args), "args_schema": _json_arg("--args-schema", a.args_schema),
               "expires_at": expires, "max_calls": a.max_calls, "reason": a.reason or ""}
    row = asyncio.run(call_api("POST", base, token, json_body=payload))
    print(_line(row))
    return 0


def register(sub: Any, add: Any, parse_ttl: Any) -> None:
    sp = add("standing-approvals", lambda a: cmd_standing(a, parse_ttl),
             "standing approvals: pre-approved calls of one tool (governance)")
    sp.add_argument("action", choices=["add", "list", "revoke"])
    sp.add_argument("--team")
    sp.add_argument("--agent", help="one agent (default: every agent of the team)")
    sp.add_argument("--tool")
    sp.add_argument("--args", help='exact argument values, JSON (e.g. \'{"meter_id": "em-001"}\')')
    sp.add_argument("--args-schema", help="a JSON Schema the arguments must match")
    sp.add_argument("--expires-in", help="e.g. 15m, 8h (default 1h)")
    sp.add_argument("--expires-at", help="ISO 8601 with a time zone")
    sp.add_argument("--max-calls", type=int)
    sp.add_argument("--reason")
    sp.add_argument("--id", help="revoke: the standing approval id")
    sp.add_argument("--state", default="all", help="list: active, expired, exhausted, revoked, all")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

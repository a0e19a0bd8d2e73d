"""`toolproxy agents add|list|remove`: the agents agent.invoke can call, on a running stack."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from cli.common import admin_token, call_api, data_dir_of, print_list, stack_url
from cli.errors import CliError

# An agent that takes free text: what `add` registers without --schema.
DEFAULT_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["text"],
    "properties": {"text": {"type": "string", "maxLength": 32_000}},
}


def _schema(text: str | None) -> dict[str, Any]:
    """--schema: a JSON object, inline or in a file (@path or a path)."""
    if text is None:
        return DEFAULT_SCHEMA
    source = text
    if text.startswith("@") or (not text.lstrip().startswith("{") and Path(text).exists()):
        path = Path(text.removeprefix("@"))
        try:
            source = path.read_text()
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror}") from None
    try:
        schema = json.loads(source)
    except ValueError as exc:
        raise CliError(f"--schema is not JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise CliError("--schema must be a JSON object")
    return schema


def cmd_agents(a: argparse.Namespace) -> int:
    data_dir = data_dir_of(a.data_dir)
    url, token = stack_url(a.url, data_dir), admin_token(data_dir)
    if a.action == "list":
        return print_list(url, token, "/v1/admin/agents", "agents", a.team,
                          empty="no agents registered",
                          line=lambda r: f"{r['agent_id']:<24} {r['team_id']:<20} {r['description'][:60]}")
    if not a.id or not a.team:
        raise CliError(f"agents {a.action} needs --id and --team")
    if a.action == "add":
        if not a.description:
            raise CliError("agents add needs --description")
        payload = {"agent_id": a.id, "team_id": a.team, "description": a.description,
                   "input_schema": _schema(a.schema)}
        body = asyncio.run(call_api("POST", f"{url}/v1/admin/agents", token, json_body=payload))
        verb = "registered" if body["created"] else "updated"
        print(f"{verb} agent {body['agent']['agent_id']} for team {body['agent']['team_id']} "
              f"(it serves agents.{body['agent']['agent_id']}.invoke)")
        return 0
    body = asyncio.run(call_api("POST", f"{url}/v1/admin/agents/remove", token,
                                json_body={"agent_id": a.id, "team_id": a.team}))
    print(f"removed agent {body['agent']['agent_id']} of team {body['agent']['team_id']}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    sp = sub.add_parser("agents", help="register, list and remove agents for agent.invoke (admin)",
                        description="register (add), list and remove agents that agent.invoke can call")
    sp.set_defaults(func=cmd_agents)
    sp.add_argument("action", choices=["add", "list", "remove"])
    sp.add_argument("--id", help="the agent id (it serves agents.<id>.invoke)")
    sp.add_argument("--team")
    sp.add_argument("--description")
    sp.add_argument("--schema", help="its input schema: inline JSON, or @file (default: {text})")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

"""`toolproxy catalog list`: every tool governance governs, with its source, class, pin and
availability (GET /v1/admin/catalog, every page)."""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from cli.common import admin_token, call_api, data_dir_of, stack_url


def _pin(t: dict[str, Any]) -> str:
    pin = t.get("pin")
    if not pin:
        return "-"
    text = str(pin.get("state"))
    if pin.get("version"):
        text += f" {pin['version']}"
    if pin.get("hash"):
        text += f" {str(pin['hash'])[:12]}"
    return text


def _line(t: dict[str, Any]) -> str:
    klass = f"{t.get('category')}/{t.get('action')}"
    flags = " approval" if t.get("requires_approval") else ""
    state = "available" if t["available"] else "unavailable"
    return f"{t['tool_id']:<28} {t['source']:<9} {klass:<8} {state:<12} {_pin(t)}{flags}"


async def _all(url: str, token: str, source: str | None) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    params: dict[str, str] = {"limit": "500"}
    if source:
        params["source"] = source
    while True:
        body = await call_api("GET", f"{url}/v1/admin/catalog", token, params=params)
        tools += body["tools"]
        if body["next"] is None:
            return tools
        params["after"] = body["next"]


def cmd_catalog(a: argparse.Namespace) -> int:
    data_dir = data_dir_of(a.data_dir)
    url = stack_url(a.url, data_dir)
    token = a.token or os.environ.get("TOOLPROXY_TOKEN") or admin_token(data_dir)
    tools = asyncio.run(_all(url, token, a.source))
    if not tools:
        print("no tools")
    for t in tools:
        print(_line(t))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    sp = sub.add_parser("catalog", help="every tool: source, class, availability, pin (governance)",
                        description="every tool governance governs, unfiltered by the policy")
    sp.set_defaults(func=cmd_catalog)
    sp.add_argument("action", choices=["list"])
    sp.add_argument("--source", choices=["builtin", "plugin", "upstream", "openapi"])
    sp.add_argument("--token", help="bearer token (default: TOOLPROXY_TOKEN or the data dir's admin)")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

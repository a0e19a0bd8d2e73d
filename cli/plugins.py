"""`toolproxy plugins install|list|enable|disable|remove` against a running stack."""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sys
from pathlib import Path

from cli.common import admin_token, call_api, data_dir_of, stack_url
from cli.errors import CliError
from services.plugins.bundle import load_bundle
from services.plugins.errors import BundleError


def _line(p: dict[str, object]) -> str:
    tool = p["tool"] if isinstance(p["tool"], dict) else {}
    state = "enabled" if p["enabled"] else "installed"
    return (f"{p['name']:<28} {p['version']:<12} {state:<10} {tool.get('category')}/{tool.get('action'):<6} "
            f"sha256:{str(p['sha256'])[:16]}  by {p['installed_by']}")


def _only_version(url: str, token: str, name: str) -> str:
    """The one installed version of `name`; several need --version, none is an error."""
    rows = asyncio.run(call_api("GET", f"{url}/v1/admin/plugins", token, params={"name": name}))["plugins"]
    versions = sorted({str(p["version"]) for p in rows if p["name"] == name})
    if not versions:
        raise CliError(f"{name} is not installed (`toolproxy plugins list` shows what is)")
    if len(versions) > 1:
        raise CliError(f"{name} has {len(versions)} versions installed ({', '.join(versions)}): "
                       "pick one with --version")
    return versions[0]


def cmd_plugins(a: argparse.Namespace) -> int:
    data_dir = data_dir_of(a.data_dir)
    url = stack_url(a.url, data_dir)
    # Enabling is a platform governance act: pass such a token, or use the data dir's admin one.
    token = a.token or os.environ.get("TOOLPROXY_TOKEN") or admin_token(data_dir)
    if a.action == "list":
        params = {"name": a.target} if a.target else None
        rows = asyncio.run(call_api("GET", f"{url}/v1/admin/plugins", token, params=params))["plugins"]
        if not rows:
            print("no plugins installed")
        for p in rows:
            print(_line(p))
        return 0
    if not a.target:
        raise CliError(f"plugins {a.action} needs {'a bundle (directory or .tar.gz)' if a.action == 'install' else 'a plugin name'}")
    if a.action == "install":
        try:
            archive = load_bundle(Path(a.target))
        except BundleError as exc:
            raise CliError(str(exc)) from None
        body = asyncio.run(call_api("POST", f"{url}/v1/admin/plugins", token,
                                    json_body={"bundle_base64": base64.b64encode(archive).decode()}))
        p = body["plugin"]
        verb = "installed" if body["created"] else "already installed"
        print(f"{verb} {p['name']} {p['version']} (sha256 {p['sha256']}); "
              f"enable it with `toolproxy plugins enable {p['name']}`")
        report = p.get("schema_portability") or {"portable": True}
        if not report["portable"]:
            print(f"warning: {p['name']}'s schemas are not portable: some model APIs and MCP "
                  "clients will refuse them:", file=sys.stderr)
            for problem in report["problems"]:
                print(f"  {problem}", file=sys.stderr)
        return 0
    version = a.version
    if a.action == "enable" and not version:
        version = _only_version(url, token, a.target)
    if a.action == "remove" and not version:  # removing deletes: it names what it deletes
        raise CliError("plugins remove needs --version")
    payload: dict[str, str] = {"name": a.target}
    if a.action in ("enable", "remove"):
        payload["version"] = version
    body = asyncio.run(call_api("POST", f"{url}/v1/admin/plugins/{a.action}", token, json_body=payload))
    p = body["plugin"]
    done = {"enable": "enabled", "disable": "disabled", "remove": "removed"}[a.action]
    print(f"{done} {p['name']} {p['version']}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    sp = sub.add_parser("plugins", help="install, list, enable, disable and remove plugins",
                        description="install (admin), list (governance), enable and disable (admin, or governance of "
                                    "a team in TOOLPROXY_PLUGIN_GOVERNANCE_TEAMS), remove (admin)")
    sp.set_defaults(func=cmd_plugins)
    sp.add_argument("action", choices=["install", "list", "enable", "disable", "remove"])
    sp.add_argument("target", nargs="?", help="install: a bundle directory or .tar.gz; others: the plugin name")
    sp.add_argument("--version", help="the plugin version (remove; enable: default the only installed one)")
    sp.add_argument("--token", help="bearer token to act with (default: TOOLPROXY_TOKEN or the data dir's admin)")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

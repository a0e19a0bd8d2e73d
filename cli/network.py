"""`toolproxy egress` and `toolproxy external-apis`: what the network tools may reach."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable

from cli.common import admin_token, call_api, data_dir_of, print_list, stack_url
from cli.errors import CliError

Add = Callable[[str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def _session(a: argparse.Namespace) -> tuple[str, str]:
    data_dir = data_dir_of(a.data_dir)
    return stack_url(a.url, data_dir), admin_token(data_dir)


def cmd_egress(a: argparse.Namespace) -> int:
    url, token = _session(a)
    if a.action == "set":
        if not a.team:
            raise CliError("egress set needs --team (and --host for each pattern; none clears)")
        body = {"team_id": a.team, "hosts": a.host or []}
        entry = asyncio.run(call_api("POST", f"{url}/v1/admin/egress", token, json_body=body))["egress"]
        print(f"egress of team {entry['team_id']}: {', '.join(entry['hosts']) or 'nothing'}")
        return 0
    return print_list(url, token, "/v1/admin/egress", "egress", a.team, empty="no egress allowlists",
                      line=lambda r: f"{r['team_id']:<20} {', '.join(r['hosts']) or '-'}")


def _secret_from_stdin() -> str:
    value = sys.stdin.readline().rstrip("\r\n")
    if not value:
        raise CliError("--secret-stdin: no secret on standard input")
    return value


def cmd_external_apis(a: argparse.Namespace) -> int:
    url, token = _session(a)
    if a.action == "list":
        rows = asyncio.run(call_api("GET", f"{url}/v1/admin/external-apis", token))["external_apis"]
        if not rows:
            print("no external APIs")
        for r in rows:
            secret = f"file {r['secret_file']}" if r["secret_file"] else "stored (sealed)"
            print(f"{r['name']:<20} {r['base_url']:<40} {','.join(r['methods']):<20} "
                  f"{' '.join(r['paths'])}  [{r['secret_header']}: {secret}]")
        return 0
    if not a.name:
        raise CliError(f"external-apis {a.action} needs --name")
    if a.action == "remove":
        asyncio.run(call_api("POST", f"{url}/v1/admin/external-apis/delete", token,
                             json_body={"name": a.name}))
        print(f"removed external API {a.name}")
        return 0
    if not (a.base_url and a.method and a.path and a.secret_header):
        raise CliError("external-apis add needs --base-url, --method, --path and --secret-header")
    if bool(a.secret_stdin) == bool(a.secret_file):
        raise CliError("external-apis add needs one of --secret-stdin and --secret-file")
    body: dict[str, object] = {"name": a.name, "base_url": a.base_url, "methods": a.method,
                               "paths": a.path, "secret_header": a.secret_header}
    if a.secret_stdin:
        body["secret"] = _secret_from_stdin()  # never from argv: the process list shows that
    else:
        body["secret_file"] = a.secret_file
    api = asyncio.run(call_api("POST", f"{url}/v1/admin/external-apis", token, json_body=body))["external_api"]
    print(f"registered external API {api['name']} at {api['base_url']} "
          f"({', '.join(api['methods'])} {' '.join(api['paths'])})")
    return 0


def add_parsers(add: Add) -> None:
    sp = add("egress", cmd_egress, "browser.full egress allowlists per team (governance, admin)")
    sp.add_argument("action", choices=["set", "list"])
    sp.add_argument("--team")
    sp.add_argument("--host", action="append", help="a host[:port] pattern (repeat; none clears)")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

    sp = add("external-apis", cmd_external_apis, "external APIs external_api.call may reach (admin)")
    sp.add_argument("action", choices=["add", "list", "remove"])
    sp.add_argument("--name")
    sp.add_argument("--base-url")
    sp.add_argument("--method", action="append", choices=["GET", "POST", "PUT", "PATCH", "DELETE"])
    sp.add_argument("--path", action="append", help="a path pattern, e.g. /v1/items/* (repeat)")
    sp.add_argument("--secret-header")
    sp.add_argument("--secret-stdin", action="store_true", help="read the secret from standard input")
    sp.add_argument("--secret-file", help="a file name in the services' secret directory")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

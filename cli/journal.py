"""`toolproxy journal dead-letters list|replay`: the journal records Postgres refused for
their data, kept whole in their own stream, on a running stack (admin)."""

from __future__ import annotations

import argparse
import asyncio

from cli.common import admin_token, call_api, data_dir_of, stack_url
from cli.errors import CliError


def cmd_journal(a: argparse.Namespace) -> int:
    data_dir = data_dir_of(a.data_dir)
    url, token = stack_url(a.url, data_dir), admin_token(data_dir)
    base = f"{url}/v1/admin/journal/dead-letters"
    if a.action == "list":
        params = {"after": str(a.after), "limit": str(a.limit), "full": "1" if a.full else "0"}
        body = asyncio.run(call_api("GET", base, token, params=params))
        letters = body["dead_letters"]
        if not letters:
            print("no dead letters")
            return 0
        for d in letters:
            print(f"{d['sequence']:>8}  {d['time'] or '-':<32} refused {d['refusals']}x  {d['subject']}")
            print(f"          {d['error']}")
            if a.full:
                print(f"          {d['entry']}")
        print(f"{len(letters)} shown of {body['count']}")
        return 0
    if bool(a.seq) == a.all:
        raise CliError("dead-letters replay needs --seq N (repeatable) or --all")
    payload = {"all": True} if a.all else {"sequences": a.seq}
    body = asyncio.run(call_api("POST", f"{base}/replay", token, json_body=payload))
    print(f"replayed {len(body['replayed'])} dead letter(s) into the journal"
          + (f"; not found: {', '.join(map(str, body['missing']))}" if body["missing"] else ""))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    help = "list or replay the journal's dead letters on a running stack (admin)"
    sp = sub.add_parser("journal", help=help, description=help)
    sp.set_defaults(func=cmd_journal)
    sp.add_argument("what", choices=["dead-letters"])
    sp.add_argument("action", choices=["list", "replay"])
    sp.add_argument("--seq", type=int, action="append", help="replay: a dead letter's sequence (repeatable)")
    sp.add_argument("--all", action="store_true", help="replay: every dead letter")
    sp.add_argument("--after", type=int, default=0, help="list: after this sequence")
    sp.add_argument("--limit", type=int, default=100, help="list: at most this many (1-1000)")
    sp.add_argument("--full", action="store_true", help="list: print each entry whole")
    sp.add_argument("--url")
    sp.add_argument("--data-dir")

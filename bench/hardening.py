"""Micro-benchmark: the time the issue-10 hardening adds to one call, in process.

Run by hand: `python bench/hardening.py`. Measures, per call (median of 5 rounds):
- the new middlewares (Host allowlist, body deadline, Origin check, team gate) and the
  response-header signal, each around a trivial handler, against that handler alone;
- the args check (size bound, then the schema, sizes first) against the validation it
  replaced (the schema as written, best_match over every error), for a small `math` call, a
  `calendar` call at its bounds (1,000 holidays) and the 60,000-entry attack.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proxy.web import keys as k
from proxy.core.args.checker import ArgsChecker  # noqa: E402
from proxy.config import Settings  # noqa: E402
from proxy.core.errors import InvalidArgs  # noqa: E402
from proxy.allowlists import HostAllowlist, OriginAllowlist  # noqa: E402
from proxy.web.http.headers import harden_response  # noqa: E402
from proxy.web.http.team_gate import TeamGate  # noqa: E402
from proxy.identity.identity import Identity  # noqa: E402
from proxy.web.middlewares.body_deadline import body_deadline  # noqa: E402
from proxy.web.middlewares.hosts import allowed_host  # noqa: E402
from proxy.web.middlewares.mcp_origin import mcp_origin  # noqa: E402
from proxy.web.middlewares.team_gate import team_gate  # noqa: E402
from services.calendar.service import calendar_tool  # noqa: E402
from services.math.service import math_tool  # noqa: E402


def per_call_us(fn: Callable[[], Any], n: int) -> float:
    rounds = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        rounds.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(rounds)


async def per_call_async_us(fn: Callable[[], Awaitable[Any]], n: int) -> float:
    rounds = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            await fn()
        rounds.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(rounds)


def old_check(validator: Draft202012Validator, args: dict[str, Any]) -> None:
    error = best_match(validator.iter_errors(args))
    if error is not None:
        raise InvalidArgs(error.message[:300])


def refused(fn: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except InvalidArgs:
            pass
    return run


async def middlewares(n: int) -> list[str]:
    settings = Settings()
    app = web.Application()
    app[k.SETTINGS] = settings
    app[k.HOSTS] = HostAllowlist.default(settings.host)
    app[k.ORIGINS] = OriginAllowlist.default(settings.host, settings.port)
    app[k.TEAM_GATE] = TeamGate(settings.large_bodies_per_team, settings.large_body_bytes_per_s)
    response = web.Response(body=b"{}", content_type="application/json")
    identity = Identity(agent_id="a", team_id="t", role="agent", token_id="")

    async def handler(request: web.Request) -> web.StreamResponse:
        return response

    class Body:  # a body still arriving: the deadline middleware arms (and cancels) its timer
        def is_eof(self) -> bool:
            return False

    req = make_mocked_request("POST", "/v1/tools/invoke", app=app, payload=Body(), headers={
        "Host": "127.0.0.1:8080", "Content-Type": "application/json", "Content-Length": "60"})
    req[k.IDENTITY] = identity

    def request() -> web.Request:
        return req  # one request, reused: only the middleware's own work is timed

    base = await per_call_async_us(lambda: handler(request()), n)
    lines = [f"{'trivial handler alone':<48} {base:8.2f} µs"]
    for name, mw in (("Host allowlist", allowed_host), ("body deadline (a timer)", body_deadline),
                     ("Origin check (/mcp only)", mcp_origin), ("team gate (small body)", team_gate)):
        t = await per_call_async_us(lambda mw=mw: mw(request(), handler), n)
        lines.append(f"{'+ ' + name:<48} {t - base:8.2f} µs")
    plain_response = web.Response()
    t = await per_call_async_us(lambda: harden_response(request(), plain_response), n)
    plain = await per_call_async_us(lambda: _noop(request(), plain_response), n)
    lines.append(f"{'+ response headers (signal)':<48} {t - plain:8.2f} µs")
    return lines


async def _noop(request: web.Request, response: web.StreamResponse) -> None:
    return None


def args(n: int) -> list[str]:
    lines = []
    cases: list[tuple[str, Any, dict[str, Any], int]] = []
    small = {"expr": "2+3*4"}
    cases.append(("math {expr}", math_tool.manifest, small, n))
    holidays = [f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}" for i in range(60_000)]
    at_bounds = {"op": "business_days", "start": "2026-01-01", "end": "2026-12-31",
                 "holidays": holidays[:1000]}
    cases.append(("calendar, 1,000 holidays (valid)", calendar_tool.manifest, at_bounds, max(1, n // 500)))
    attack = {**at_bounds, "holidays": holidays}
    cases.append(("calendar, 60,000 holidays (refused)", calendar_tool.manifest, attack, max(1, n // 5000)))
    for label, manifest, a, reps in cases:
        body = len(orjson.dumps({"tool": manifest.tool_id, "args": a}))
        checker = ArgsChecker(manifest)
        old = Draft202012Validator(manifest.input_schema)
        new_us = per_call_us(refused(lambda: checker.check(a, body)), reps)
        old_us = per_call_us(refused(lambda: old_check(old, a)), reps)
        lines.append(f"{label:<40} new {new_us:10.1f} µs   before {old_us:10.1f} µs")
    return lines


def main() -> None:
    n = 20_000
    out = asyncio.run(middlewares(n))
    out += [""] + args(n)
    print("\n".join(out))


if __name__ == "__main__":
    main()

"""Identity benchmark (run by hand: python bench/identity.py [--seconds 5] [--rounds 3]).

What verifying a bearer token adds to a request, by kind of token: the dev issuer's HS256
token against a real OpenID provider's RS256 and ES256 access tokens (oidc-provider, the
tests' provider: tests/support/oidc/), at 1 and 32 connections (wrk), beside a bare aiohttp
handler in the same run. The server is an aiohttp app with the proxy's own authentication
middleware and TokenVerifier in front of a trivial handler, in a process of its own; its
verified-token cache is switched off and every request carries another token of a pool of
distinct tokens, so each request pays a whole verification (a real agent reuses its token,
and pays it once per token). Printed per kind and connection count: added p50 over the bare
handler (median of the rounds, lowest–highest), throughput ÷ bare, and the server's CPU per
call (user + system, from /proc).

Then the time from a key rotation at the provider to the first token signed with the new key
being accepted: (a) when the refetch floor has passed since the proxy last fetched the key set
(the usual case: the new `kid` triggers one refetch), (b) right after a fetch, with the floor
set to 5 s (the proxy waits out the floor: the default floor, 30 s, bounds it).

Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pipeline import Wrk, wrk  # noqa: E402
from infra.embedded.ports import free_port  # noqa: E402
from tests.support.oidc_provider import RESOURCE, OidcProvider, install  # noqa: E402

SECRET = "bench-secret-" + "x" * 40
POOL = 2000
KINDS = ("bare", "dev HS256", "provider RS256", "provider ES256")

SERVER = '''
import asyncio, os, sys
from aiohttp import web
from proxy.config import Settings
from proxy.identity import verifier as verifier_module
from proxy.identity.verifier import TokenVerifier
from proxy.web.keys import IDENTITY, SETTINGS, VERIFIER
from proxy.web.middlewares.auth import authenticate
verifier_module._VERIFIED_MAX = 0  # every request pays a whole verification
bare = sys.argv[2] == "bare"
async def handler(request):
    ident = request.get(IDENTITY)
    return web.json_response({"ok": True, "agent": ident.agent_id if ident else None})
app = web.Application(middlewares=[] if bare else [authenticate])
app.router.add_get("/v1/ping", handler)
if not bare:
    settings = Settings()
    app[SETTINGS] = settings
    app[VERIFIER] = TokenVerifier(settings)
    async def start(app):
        await app[VERIFIER].start()
        while os.environ.get("TOOLPROXY_OIDC_ISSUER") and not app[VERIFIER].remote("oidc").usable():
            await asyncio.sleep(0.05)
    app.on_startup.append(start)
try:
    import uvloop; uvloop.install()
except ImportError:
    pass
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
'''

# Each wrk thread cycles through its share of the token file, one token per request.
TOKENS_LUA = '''
local tokens = {}
local i = 0
local threads = {}
function setup(thread) thread:set("tid", #threads); table.insert(threads, thread) end
function init(args)
  local tid = tonumber(wrk.thread:get("tid"))
  local n = 0
  for line in io.lines("FILE") do
    if n % 2 == tid then table.insert(tokens, line) end
    n = n + 1
  end
  i = 0
end
request = function()
  i = i + 1
  if i > #tokens then i = 1 end
  return wrk.format("GET", "/v1/ping", {["Authorization"] = "Bearer " .. tokens[i]})
end
'''


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, kind: str, env: dict[str, str]) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(self.port), "bare" if kind == "bare" else "auth"],
            cwd=ROOT, env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL, stderr=open(tempfile.gettempdir() + f"/bench-identity-{kind.replace(' ', '_')}.log", "w"))

    async def ready(self) -> None:
        async with aiohttp.ClientSession() as s:
            for _ in range(200):
                try:
                    async with s.get(f"http://127.0.0.1:{self.port}/v1/ping") as r:
                        if r.status:  # serving (no token: refused, which is fine)
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
        raise RuntimeError("the bench server did not start")

    def stop(self) -> None:
        self.proc.terminate()  # this child only
        self.proc.wait(10)


async def provider_tokens(provider: OidcProvider, client: str, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        out += await asyncio.gather(*(provider.token(client) for _ in range(min(32, n - len(out)))))
    return out


def dev_tokens(n: int, data_dir: Path) -> list[str]:
    from pydantic import SecretStr

    from proxy.config import Settings
    from proxy.identity.tokens import mint

    s = Settings(jwt_secret=SecretStr(SECRET), data_dir=data_dir)
    return [mint(s, agent_id=f"a{i}", team_id="t1") for i in range(n)]


async def throughput(args: argparse.Namespace, provider: OidcProvider, tmp: Path) -> None:
    env = {"TOOLPROXY_JWT_SECRET": SECRET, "TOOLPROXY_OIDC_ISSUER": provider.issuer,
           "TOOLPROXY_OIDC_AUDIENCE": RESOURCE, "TOOLPROXY_DATA_DIR": str(tmp / "data"),
           "TOOLPROXY_LOG_LEVEL": "error"}
    print(f"minting {POOL} distinct tokens of each kind ...", flush=True)
    dev = dev_tokens(POOL, tmp)
    pools = {"bare": dev, "dev HS256": dev,
             "provider RS256": await provider_tokens(provider, "agent-rs", POOL),
             "provider ES256": await provider_tokens(provider, "agent-es", POOL)}
    files = {}
    for kind, tokens in pools.items():
        path = tmp / f"{kind.replace(' ', '_')}.tokens"
        path.write_text("\n".join(tokens) + "\n")
        files[kind] = path
    servers = {kind: Server(kind, env) for kind in KINDS}
    try:
        for s in servers.values():
            await s.ready()
        results: dict[tuple[str, int], list[tuple[Wrk, float]]] = {}
        for rnd in range(args.rounds):
            order = KINDS if rnd % 2 == 0 else tuple(reversed(KINDS))
            for conns in (1, 32):
                for kind in order:
                    server = servers[kind]
                    lua = TOKENS_LUA.replace("FILE", str(files[kind]))
                    before = cpu_s(server.proc.pid)
                    r = await asyncio.to_thread(wrk, kind, f"http://127.0.0.1:{server.port}", lua, {},
                                                conns, args.seconds)
                    used = cpu_s(server.proc.pid) - before
                    assert r.non_2xx == 0, f"{kind}: {r.non_2xx} refused"
                    results.setdefault((kind, conns), []).append((r, used * 1000 / max(1, r.requests)))
        print(f"\n{platform.node()}: {os.cpu_count()} CPUs, {args.rounds} rounds of {args.seconds:g} s, "
              f"{POOL} distinct tokens per kind, the verified-token cache off")
        for conns in (1, 32):
            bare = results[("bare", conns)]
            print(f"c={conns}: bare {statistics.median(b.rps for b, _ in bare):.0f} req/s, "
                  f"p50 {statistics.median(b.p50_ms for b, _ in bare):.3f} ms, "
                  f"CPU {statistics.median(c for _, c in bare):.3f} ms/call")
            for kind in KINDS[1:]:
                runs = results[(kind, conns)]
                added = [r.p50_ms - b.p50_ms for (r, _), (b, _) in zip(runs, bare)]
                ratio = [r.rps / b.rps for (r, _), (b, _) in zip(runs, bare)]
                cpu = [c for _, c in runs]
                extra = [c - bc for (_, c), (_, bc) in zip(runs, bare)]
                print(f"  {kind:<15} added p50 {statistics.median(added):.3f} ms "
                      f"[{min(added):.3f}–{max(added):.3f}]   ÷ bare {statistics.median(ratio):.3f} "
                      f"[{min(ratio):.3f}–{max(ratio):.3f}]   CPU {statistics.median(cpu):.3f} ms/call "
                      f"(+{statistics.median(extra):.3f} over bare)")
    finally:
        for s in servers.values():
            s.stop()


async def rotation(provider: OidcProvider, tmp: Path, rounds: int) -> None:
    from pydantic import SecretStr

    from proxy.config import Settings
    from proxy.errors import Unauthenticated
    from proxy.identity.verifier import TokenVerifier

    settings = Settings(jwt_secret=SecretStr(SECRET), data_dir=tmp / "data", oidc_issuer=provider.issuer,
                        oidc_audience=RESOURCE, log_level="error")
    from infra.logs import configure_logging

    configure_logging("error", "console")
    print("\nkey rotation at the provider -> first new-key token accepted")
    verifier = TokenVerifier(settings)
    try:
        remote = verifier.remote("oidc")
        await remote.refresh()
        whole, proxy_part = [], []
        for _ in range(rounds):
            remote.last_attempt = 0.0  # the floor has passed since the last fetch
            await provider.rotate()
            t0 = time.perf_counter()
            tok = await provider.token("agent-es")
            t1 = time.perf_counter()
            await verifier.verify(tok)
            t2 = time.perf_counter()
            whole.append((t2 - t0) * 1000)
            proxy_part.append((t2 - t1) * 1000)
        print(f"  (a) floor passed, {rounds} rotations: rotation -> accepted p50 {statistics.median(whole):.1f} ms "
              f"[{min(whole):.1f}–{max(whole):.1f}] (the provider minting the token included); "
              f"the proxy's part (one refetch, then the verification) p50 "
              f"{statistics.median(proxy_part):.1f} ms [{min(proxy_part):.1f}–{max(proxy_part):.1f}]")
        remote.floor_s = 5.0
        await remote.refresh()  # just fetched: the floor starts now
        await provider.rotate()
        t0 = time.perf_counter()
        tok = await provider.token("agent-es")
        refused = 0
        while True:
            try:
                await verifier.verify(tok)
                break
            except Unauthenticated:
                refused += 1
                await asyncio.sleep(0.05)
        print(f"  (b) right after a fetch, floor 5 s: accepted after {time.perf_counter() - t0:.2f} s "
              f"({refused} refusals meanwhile, {remote.fetch_count} fetches in all); the default "
              f"floor (30 s) bounds it the same way")
    finally:
        await verifier.close()


async def main(args: argparse.Namespace) -> None:
    root, reason = install()
    if root is None:
        sys.exit(reason)
    provider = await OidcProvider(root).start()
    tmp = Path(tempfile.mkdtemp(prefix="toolproxy-bench-identity-"))
    try:
        await throughput(args, provider, tmp)
        await rotation(provider, tmp, args.rotations)
    finally:
        await provider.stop()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rotations", type=int, default=10)
    asyncio.run(main(p.parse_args()))

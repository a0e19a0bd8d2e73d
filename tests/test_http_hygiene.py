"""HTTP hygiene (issue 10 §5): read timeouts and a connection cap on the real server, the
Host allowlist, and the headers every response carries."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from proxy.web.app import create_app
from proxy.config import Settings
from infra.embedded.ports import free_port
from proxy.web.http import server
from proxy.allowlists import HostAllowlist, OriginAllowlist, split_host
from tests.support.calls import bearer

BOUND_S = 5.0  # every slow connection must be closed well within this


# --- the real server: timeouts and the cap ------------------------------------------------------


@pytest.fixture
async def served(settings: Settings, builtin: Any) -> AsyncIterator[Settings]:
    s = settings.model_copy(update={"port": free_port(), "http_header_timeout_s": 0.5,
                                    "http_body_timeout_s": 1.0, "http_max_connections": 3})
    runner, _ = await server.start(create_app(s), s)
    try:
        yield s
    finally:
        await runner.cleanup()


async def _closed_within(reader: asyncio.StreamReader, trickle: Any = None) -> float:
    """Seconds until the server closes the connection (reading until EOF)."""
    t0 = time.monotonic()
    task = asyncio.ensure_future(trickle) if trickle is not None else None
    try:
        async with asyncio.timeout(BOUND_S):
            while True:
                try:
                    if not await reader.read(65536):
                        break
                except ConnectionError:
                    break
    finally:
        if task is not None:
            task.cancel()
    return time.monotonic() - t0


async def _trickle(writer: asyncio.StreamWriter, data: bytes, every_s: float) -> None:
    for i in range(len(data)):
        writer.write(data[i:i + 1])
        await writer.drain()
        await asyncio.sleep(every_s)


async def test_idle_connection_is_closed(served: Settings) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    assert await _closed_within(reader) < BOUND_S
    writer.close()


async def test_trickling_request_head_is_closed(served: Settings) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    assert await _closed_within(reader, _trickle(writer, head, 0.05)) < BOUND_S
    writer.close()


async def test_trickling_body_is_closed(served: Settings, token: Any) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    head = (f"POST /v1/tools/invoke HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
            f"Authorization: Bearer {token()}\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n").encode()
    writer.write(head)
    await writer.drain()
    waited = await _closed_within(reader, _trickle(writer, b'{"tool": "math", "args": ' + b" " * 900, 0.05))
    assert 0.5 < waited < BOUND_S  # the body timeout (1 s), not the header one
    writer.close()


async def test_connections_past_the_cap_are_refused(served: Settings) -> None:
    idle = [await asyncio.open_connection("127.0.0.1", served.port) for _ in range(3)]
    await asyncio.sleep(0.05)
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    async with asyncio.timeout(BOUND_S):
        answer = await reader.read()
    assert answer.startswith(b"HTTP/1.1 503") and b"too_many_connections" in answer
    writer.close()
    for _, w in idle:
        w.close()
    await asyncio.sleep(0.1)
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    async with asyncio.timeout(BOUND_S):
        answer = await reader.read()
    assert answer.startswith(b"HTTP/1.1 200")
    writer.close()


async def test_no_server_header_names_the_software(served: Settings) -> None:
    for request in (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                    b"GARBAGE\x00 / HTTP/1.1\r\n\r\n"):  # answered by aiohttp's own parser
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        writer.write(request)
        async with asyncio.timeout(BOUND_S):
            answer = (await reader.read()).lower()
        writer.close()
        assert answer.startswith(b"http/1."), answer
        head = answer.split(b"\r\n\r\n")[0]
        assert b"server: toolproxy" in head and b"aiohttp" not in head and b"python" not in head


# --- headers and Host through the app ------------------------------------------------------------


async def test_every_response_carries_the_hardening_headers(client: Any, token: Any) -> None:
    tok = token()
    responses = [
        await client.get("/healthz"),
        await client.get("/v1/tools"),  # 401
        await client.get("/v1/tools", headers=bearer(tok)),
        await client.post("/v1/tools/invoke", json={"tool": "math", "args": {"expr": "1"}},
                          headers=bearer(tok)),
        await client.get("/no/such/route", headers=bearer(tok)),
    ]
    assert [r.status for r in responses] == [200, 401, 200, 200, 404]
    for r in responses:
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert r.headers["Cache-Control"] == "no-store"
        assert r.headers["Server"] == "toolproxy"


async def test_a_foreign_host_is_misdirected(client: Any, token: Any) -> None:
    tok = token()
    r = await client.post("/v1/tools/invoke", json={"tool": "math", "args": {"expr": "1"}},
                          headers={**bearer(tok), "Host": "evil.example"})
    body = await r.json()
    assert r.status == 421 and body["error"]["code"] == "misdirected_request"
    r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                          headers={"Host": "evil.example:8080"})  # before authentication too
    assert r.status == 421
    for host in ("localhost", f"localhost:{client.port}", f"127.0.0.1:{client.port}"):
        r = await client.get("/v1/tools", headers={**bearer(tok), "Host": host})
        assert r.status == 200, host
    r = await client.get("/healthz", headers={"Host": "evil.example"})  # probes answer anyway
    assert r.status == 200


async def test_a_configured_host_list_replaces_the_default(aiohttp_client: Any, settings: Settings,
                                                           builtin: Any, token: Any) -> None:
    app = create_app(settings.model_copy(update={"allowed_hosts": "api.example.com:443, 10.0.0.0/8"}))
    c = await aiohttp_client(app)
    tok = token()
    for host, status in (("api.example.com:443", 200), ("api.example.com:80", 421),
                         ("10.1.2.3:8080", 200), (f"127.0.0.1:{c.port}", 421)):
        r = await c.get("/v1/tools", headers={**bearer(tok), "Host": host})
        assert r.status == status, host


def test_host_values_parse_strictly() -> None:
    assert split_host("LocalHost:8080") == ("localhost", 8080)
    assert split_host("[::1]:80") == ("::1", 80)
    for bad in ("", "a b", "host:99999", "host:x", "[::1", "[nope]:1", "évil.example", "a:1:2"):
        assert split_host(bad) is None, bad
    wild = HostAllowlist.default("0.0.0.0")
    assert wild.allows("10.0.0.7:8080") and wild.allows("[fe80::1]") and wild.allows("localhost")
    assert not wild.allows("proxy.internal:8080")
    assert HostAllowlist.parse("*").allows("anything")
    with pytest.raises(ValueError):
        Settings(allowed_hosts="bad host")
    origins = OriginAllowlist.parse("https://App.example, http://localhost:6274/")
    assert origins.allows("https://app.example") and origins.allows("http://localhost:6274")
    assert not origins.allows("https://evil.example") and not origins.allows("null")
    own = OriginAllowlist.default("127.0.0.1", 8080)
    assert own.allows("http://127.0.0.1:8080") and own.allows("http://localhost:8080")
    assert not own.allows("http://127.0.0.1:9090") and not own.allows("http://evil.example:8080")
    assert OriginAllowlist.default("10.0.0.5", 80).allows("https://10.0.0.5:80")


# --- a team's large bodies, paced ----------------------------------------------------------------


def test_large_bodies_are_paced_per_team() -> None:
    from proxy.web.http.team_gate import TeamGate

    gate = TeamGate(per_team=2, bytes_per_s=1_000_000)
    # A second's worth passes at once (the burst), then each request waits its turn.
    assert gate.delay("greedy", 600_000) == 0.0
    assert gate.delay("greedy", 600_000) == 0.0
    waits = [gate.delay("greedy", 600_000) for _ in range(3)]
    assert 0.1 < waits[0] < waits[1] < waits[2] and waits[2] == pytest.approx(waits[0] + 1.2, abs=0.05)
    assert gate.delay("other", 600_000) == 0.0  # another team is not held by it


async def test_a_team_holds_only_its_share_of_the_gate() -> None:
    from proxy.web.http.team_gate import TeamGate

    gate = TeamGate(per_team=2, bytes_per_s=1e12)
    release = asyncio.Event()
    inside: list[str] = []

    async def request(team: str) -> None:
        async with gate.hold(team, 100_000):
            inside.append(team)
            await release.wait()

    tasks = [asyncio.create_task(request("greedy")) for _ in range(5)]
    await asyncio.sleep(0.05)
    other = asyncio.create_task(request("other"))
    await asyncio.sleep(0.05)
    assert inside == ["greedy", "greedy", "other"]
    release.set()
    await asyncio.gather(*tasks, other)
    assert inside.count("greedy") == 5

"""Token quotas and metered calls, on both limit stores: llm.chat reserves its estimate (the
messages' size and max_tokens) against the team's daily token quota before it is forwarded,
and settles to the upstream's real usage after."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from proxy.web import keys as appkeys
from proxy.web.app import create_app
from services.builtin import BUILTIN_TOOLS, LLM_TOOLS
from wire.manifest import ToolManifest
from wire.token_estimate import TokenEstimate
from tests.support.c_helpers import granted, tool_code
from tests.support.calls import bearer, invoke
from tests.support.fake_llm import FakeLLM

HELLO = [{"role": "user", "content": "hello"}]  # 35 bytes of JSON: 9 tokens
ESTIMATE = 9 + 100  # with max_tokens 100
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


@pytest.fixture(params=["nats", "postgres"])
async def store_client(request, aiohttp_client, settings, builtin) -> AsyncIterator[TestClient]:
    app = create_app(settings.model_copy(update={"limits_store": request.param}))
    client: TestClient = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available([*BUILTIN_TOOLS, *LLM_TOOLS], timeout=10)
    yield client


@pytest.fixture
async def fake(fake_llm: FakeLLM) -> AsyncIterator[FakeLLM]:
    fake_llm.script.clear()
    yield fake_llm
    fake_llm.script.clear()


async def set_quota(client: Any, token: Any, team: str, **limits: Any) -> None:
    admin = token(agent="root", team="ops", role="admin")
    r = await client.post("/v1/admin/quotas", headers=bearer(admin), json={"team_id": team, **limits})
    assert r.status == 201, await r.text()
    await asyncio.sleep(0.1)  # the quota reaches every replica's cache by NOTIFY


async def tokens_used(client: Any, token: Any, team: str) -> int:
    admin = token(agent="root", team="ops", role="admin")
    r = await client.get(f"/v1/admin/quotas?team_id={team}", headers=bearer(admin))
    (quota,) = (await r.json())["quotas"]
    return int(quota["used_today"]["tokens"])


async def until_used(client: Any, token: Any, team: str, expected: int) -> None:
    """Settlement is off the request path: it lands within a moment."""
    deadline = time.monotonic() + 5
    while (used := await tokens_used(client, token, team)) != expected:
        assert time.monotonic() < deadline, f"tokens used today: {used}, expected {expected}"
        await asyncio.sleep(0.05)


def chat(max_tokens: int = 100) -> dict[str, Any]:
    return {"messages": HELLO, "max_tokens": max_tokens}


async def test_a_quota_that_fits_one_call_refuses_a_concurrent_second(
        store_client, token, team, fake, bus_spy) -> None:
    client = store_client
    tok = await granted(client, token, team, "llm.chat")
    await set_quota(client, token, team, tokens=150)  # one estimate (109) fits, two do not
    gate = asyncio.Event()
    fake.then(gate=gate, usage=USAGE)
    before, published = fake.attempts, len(bus_spy.subjects)
    first = asyncio.ensure_future(invoke(client, tok, "llm.chat", chat()))
    second = asyncio.ensure_future(invoke(client, tok, "llm.chat", chat()))
    done, _ = await asyncio.wait({first, second}, return_when=asyncio.FIRST_COMPLETED, timeout=5)
    assert len(done) == 1, "one of the two must be refused while the other is held upstream"
    refused = done.pop()
    status, body = refused.result()
    assert status == 429 and body["error"]["code"] == "quota_exceeded", body
    assert body["error"]["reasons"] == ["quota_tokens_estimate"]
    deadline = time.monotonic() + 5
    while fake.attempts == before:  # the admitted call reaches the upstream, and waits there
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    await bus_spy.settle()
    assert fake.attempts - before == 1  # only the call that fits reached the upstream
    forwarded = [s for s in bus_spy.subjects[published:] if s == "tools.llm.chat.invoke"]
    assert len(forwarded) == 1
    assert await tokens_used(client, token, team) == ESTIMATE  # held while it runs
    gate.set()
    status, body = await (second if refused is first else first)
    assert status == 200 and body["tokens_used"] == 18, body
    await until_used(client, token, team, 18)  # settled to the upstream's usage


async def test_settled_tokens_make_room_again_and_a_spent_quota_refuses(
        store_client, token, team, fake) -> None:
    client = store_client
    tok = await granted(client, token, team, "llm.chat")
    await set_quota(client, token, team, tokens=150)
    for expected in (18, 36):  # 0 + 109, then 18 + 109: each fits once the last one settled
        fake.then(usage=USAGE)
        status, body = await invoke(client, tok, "llm.chat", chat())
        assert status == 200, body
        await until_used(client, token, team, expected)
    before = fake.attempts
    status, body = await invoke(client, tok, "llm.chat", chat(max_tokens=120))  # 36 + 129 > 150
    assert status == 429 and body["error"]["code"] == "quota_exceeded"
    assert fake.attempts == before
    assert await tokens_used(client, token, team) == 36  # a refusal holds nothing
    fake.then(usage=USAGE)
    status, body = await invoke(client, tok, "llm.chat", chat())  # 36 + 109 = 145: fits
    assert status == 200, body
    await until_used(client, token, team, 54)


async def test_a_failed_upstream_call_gives_its_tokens_back(store_client, token, team, fake) -> None:
    client = store_client
    tok = await granted(client, token, team, "llm.chat")
    await set_quota(client, token, team, tokens=1000)
    fake.then(usage=USAGE)
    assert (await invoke(client, tok, "llm.chat", chat()))[0] == 200
    await until_used(client, token, team, 18)
    fake.then(status=400)  # not retried: the upstream refused the request
    status, body = await invoke(client, tok, "llm.chat", chat())
    assert tool_code(body) == "upstream_error"
    await until_used(client, token, team, 18)


async def test_an_agent_quota_holds_tokens_too(store_client, token, team, fake) -> None:
    client = store_client
    tok = await granted(client, token, team, "llm.chat")
    await set_quota(client, token, team, agent_id="agent-1", tokens=100)  # 109 never fits
    before = fake.attempts
    status, body = await invoke(client, tok, "llm.chat", chat())
    assert status == 429 and body["error"]["reasons"] == ["quota_tokens_estimate"]
    assert fake.attempts == before
    status, body = await invoke(client, tok, "llm.chat", chat(max_tokens=50))
    assert status == 200, body


async def test_without_a_token_quota_nothing_is_held(store_client, token, team, fake) -> None:
    client = store_client
    tok = await granted(client, token, team, "llm.chat")
    await set_quota(client, token, team, invocations=100)  # a quota without a token limit
    fake.then(usage=USAGE)
    status, body = await invoke(client, tok, "llm.chat", chat(max_tokens=4096))
    assert status == 200, body
    await until_used(client, token, team, 18)


def test_the_estimate_is_declared_and_checked_with_the_manifest() -> None:
    est = TokenEstimate(prompt_args=("messages",), completion_arg="max_tokens", default_completion=512)
    assert est.tokens({"messages": HELLO}) == 9 + 512
    assert est.tokens({"messages": HELLO, "max_tokens": 7}) == 9 + 7
    base = {"tool_id": "x.metered", "category": "C", "action": "read", "description": "d"}
    schema = {"type": "object", "properties": {"messages": {"type": "array", "maxItems": 4},
                                               "max_tokens": {"type": "integer", "maximum": 100}}}
    ok = ToolManifest(**base, input_schema=schema, token_estimate=est)
    assert ok.token_estimate == est
    for bad_schema in (
        {"type": "object", "properties": {"max_tokens": {"type": "integer", "maximum": 100}}},
        {"type": "object", "properties": {"messages": {}, "max_tokens": {"type": "integer"}}},
        {"type": "object", "properties": {"messages": {}, "max_tokens": {"type": "string"}}},
    ):
        with pytest.raises(ValueError, match="token_estimate"):
            ToolManifest(**base, input_schema=bad_schema, token_estimate=est)
    with pytest.raises(ValueError):
        TokenEstimate(prompt_args=())

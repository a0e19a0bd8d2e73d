"""llm.chat through the whole pipeline against a local OpenAI-compatible server (tests/support/fake_llm.py):
completions and their usage, the model allowlist, model "auto", tools and tool calls (what the
model agent's steps need), a streamed upstream, upstream failures mapped to stable codes within
the category's deadline, and the upstream key kept out of everything."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from proxy.core.args.checker import ArgsChecker
from proxy.turns import model_call
from proxy.web.keys import CATALOG
from services.llm.config import LlmSettings
from services.llm.errors import REFUSED, UNAVAILABLE
from services.llm.manifests import MAX_TOOL_CALLS, MAX_TOOLS, PARAMETERS_DEPTH, llm_manifest
from services.llm.upstream import attempt_plan
from wire.bounds import unbounded
from tests.support.c_helpers import granted, tighten_timeout, tool_code
from tests.support.calls import bearer, invoke
from tests.support.settings import TEST_LLM_KEY, TEST_LLM_MODELS
from tests.support.fake_llm import FakeLLM
from tests.support.llm_service import llm_settings

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
async def fake(fake_llm: FakeLLM) -> AsyncIterator[FakeLLM]:
    fake_llm.script.clear()
    yield fake_llm
    fake_llm.script.clear()


async def llm_agent(client: Any, token: Any, team: str, agent: str = "agent-1") -> str:
    return await granted(client, token, team, "llm.chat", agent)


async def test_a_chat_completes_with_the_upstreams_usage(client, token, team, fake) -> None:
    tok = await llm_agent(client, token, team)
    fake.then(usage={"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18})
    status, body = await invoke(client, tok, "llm.chat", {"messages": HELLO, "max_tokens": 64})
    assert status == 200, body
    assert body["status"] == "COMPLETED"
    out = body["output"]
    assert out["message"] == {"role": "assistant", "content": "echo: hello"}
    assert out["model"] == "small"  # no model named: the allowlist's first
    assert out["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
                            "estimated": False}
    assert body["tokens_used"] == 18
    assert body["cost_1t"] == pytest.approx(18 * 0.000002)
    sent = fake.requests[-1]
    assert sent["model"] == "small" and sent["max_tokens"] == 64 and sent["messages"] == HELLO


async def test_without_usage_the_estimate_is_charged_and_said(client, token, team, fake) -> None:
    tok = await llm_agent(client, token, team)
    fake.then(omit_usage=True)
    status, body = await invoke(client, tok, "llm.chat", {"messages": HELLO, "max_tokens": 20})
    assert status == 200, body
    # 35 bytes of messages JSON at 4 bytes a token, plus the completion's bound
    assert body["tokens_used"] == 9 + 20
    assert body["output"]["usage"]["estimated"] is True


async def test_nothing_reaches_the_upstream_without_a_grant(client, token, team, fake) -> None:
    before = fake.attempts
    status, body = await invoke(client, token(team=team), "llm.chat", {"messages": HELLO})
    assert status == 403 and body["error"]["code"] == "denied"
    assert fake.attempts == before


@pytest.mark.parametrize("args", [
    {"messages": HELLO, "model": "gpt-unlisted"},
    {"messages": []},
    {"messages": [{"role": "tool", "content": "x"}]},
    {"messages": [{"role": "user", "content": "a\u0000b"}]},
    {"messages": HELLO, "max_tokens": 100_000},
    {"messages": HELLO, "temperature": 3},
    {"messages": HELLO, "extra": 1},
])
async def test_bad_input_is_refused_before_the_upstream(client, token, team, fake, args) -> None:
    tok = await llm_agent(client, token, team)
    before = fake.attempts
    status, body = await invoke(client, tok, "llm.chat", args)
    assert status == 400 and body["error"]["code"] in ("invalid_args", "invalid_request"), body
    assert fake.attempts == before


async def test_the_catalog_shows_the_allowlist_and_the_estimate(client, token, team) -> None:
    tok = await llm_agent(client, token, team)
    r = await client.get("/v1/tools", headers=bearer(tok))
    (entry,) = [t for t in (await r.json())["tools"] if t["tool_id"] == "llm.chat"]
    assert entry["category"] == "C" and entry["action"] == "read" and entry["network"] is True
    assert entry["input_schema"]["properties"]["model"]["enum"] == ["small", "medium", "large", "auto"]
    assert entry["token_estimate"]["completion_arg"] == "max_tokens"


async def test_model_auto_asks_the_routing_rules(client, token, team, fake) -> None:
    tok = await llm_agent(client, token, team)
    status, body = await invoke(client, tok, "llm.chat",
                                {"messages": HELLO, "model": "auto", "task": "code"})
    assert status == 200, body
    assert body["output"]["model"] == "medium"  # code needs quality 2; large is too risky
    assert "chose:medium" in body["output"]["route"]["reasons"]
    assert fake.requests[-1]["model"] == "medium"
    status, body = await invoke(client, tok, "llm.chat",
                                {"messages": HELLO, "model": "auto", "task": "reason"})
    assert status == 200 and tool_code(body) == "no_route", body


async def test_an_upstream_failure_is_upstream_error(client, token, team, fake) -> None:
    tok = await llm_agent(client, token, team)
    await tighten_timeout(client, token, team, "llm.chat", 1_000)  # too short for a retry
    fake.then(status=500)
    status, body = await invoke(client, tok, "llm.chat", {"messages": HELLO})
    assert status == 200 and body["status"] == "FAILED", body
    assert body["error"]["code"] == "tool_error" and tool_code(body) == "upstream_error"
    assert "HTTP 500" in body["error"]["message"]
    assert body["tokens_used"] == 0


async def test_a_failure_is_retried_when_time_allows(client, token, team, fake) -> None:
    tok = await llm_agent(client, token, team)
    fake.then(status=503)
    before = fake.attempts
    status, body = await invoke(client, tok, "llm.chat", {"messages": HELLO})
    assert status == 200 and body["status"] == "COMPLETED", body
    assert fake.attempts - before == 2


async def test_rate_limiting_is_upstream_rate_limited(client, token, team, fake) -> None:
    tok = await llm_agent(client, token, team)
    await tighten_timeout(client, token, team, "llm.chat", 1_000)
    fake.then(status=429)
    status, body = await invoke(client, tok, "llm.chat", {"messages": HELLO})
    assert tool_code(body) == "upstream_rate_limited", body


async def test_a_retry_after_beyond_the_deadline_is_still_rate_limiting(client, token, team, fake) -> None:
    tok = await llm_agent(client, token, team)
    await tighten_timeout(client, token, team, "llm.chat", 2_500)  # enough for a retry: the client waits
    fake.then(status=429, headers={"Retry-After": "30"})
    started = time.perf_counter()
    status, body = await invoke(client, tok, "llm.chat", {"messages": HELLO})
    assert tool_code(body) == "upstream_rate_limited", body
    assert time.perf_counter() - started < 5  # the deadline, not the upstream's 30 s


async def test_a_slow_upstream_ends_as_upstream_timeout_within_the_deadline(client, token, team, fake) -> None:
    tok = await llm_agent(client, token, team)
    await tighten_timeout(client, token, team, "llm.chat", 1_000)
    fake.then(delay_s=3.0)
    started = time.perf_counter()
    status, body = await invoke(client, tok, "llm.chat", {"messages": HELLO})
    elapsed = time.perf_counter() - started
    assert status == 200 and tool_code(body) == "upstream_timeout", body
    assert elapsed < 2.5  # the service answered before the proxy's own deadline passed


def test_timeout_and_retries_follow_the_time_left() -> None:
    assert attempt_plan(5.0) == (pytest.approx(4.85), 1)
    assert attempt_plan(1.0) == (pytest.approx(0.85), 0)
    assert attempt_plan(0.1)[0] < 0.2


def test_settings_validate_the_upstream_and_the_allowlist() -> None:
    ok = LlmSettings(base_url="https://llm.internal/v1/", models="a, b/c:1", api_key="sk-1")
    assert ok.models == ("a", "b/c:1") and ok.base_url == "https://llm.internal/v1"
    assert "sk-1" not in repr(ok) and "sk-1" not in str(ok.redacted())
    assert not LlmSettings().configured
    for bad in ({"base_url": "ftp://x/v1", "models": "a"},
                {"base_url": "https://user:pw@x/v1", "models": "a"},
                {"base_url": "https://x/v1"},  # no allowlist
                {"base_url": "https://x/v1", "models": "auto"},
                {"base_url": "https://x/v1", "models": "a,a"},
                {"base_url": "https://x/v1", "models": "a b"}):
        with pytest.raises(ValueError):
            LlmSettings(**bad)


async def test_the_key_is_never_shown_logged_or_stored(client, token, team, fake, db_pool, caplog,
                                                       capfd) -> None:
    caplog.set_level(logging.DEBUG)  # the openai client's and httpx's own debug logs too
    tok = await llm_agent(client, token, team)
    await tighten_timeout(client, token, team, "llm.chat", 1_000)
    fake.then().then(status=500).then(status=401)  # error bodies quoting the key
    texts: list[str] = []
    call_ids = []
    for _ in range(3):
        r = await client.post("/v1/tools/invoke", headers=bearer(tok),
                              json={"tool": "llm.chat", "args": {"messages": HELLO}})
        texts.append(await r.text())
        call_ids.append((await r.json())["call_id"])
    assert "COMPLETED" in texts[0] and "upstream_error" in texts[1] and "upstream_error" in texts[2]
    admin = token(agent="root", team="ops", role="admin")
    for call_id in call_ids:
        r = await client.get(f"/v1/calls/{call_id}", headers=bearer(tok))
        texts.append(await r.text())
    texts.append(await (await client.get("/v1/tools", headers=bearer(tok))).text())
    # Events and decisions are written shortly after the responses.
    deadline = time.monotonic() + 5
    while True:
        events = await (await client.get("/v1/events", headers=bearer(tok))).text()
        decisions = await (await client.get(f"/v1/admin/decisions?team_id={team}",
                                            headers=bearer(admin))).text()
        if events.count("agent.tool.completed") >= 1 and decisions.count("llm.chat") >= 3:
            break
        assert time.monotonic() < deadline, "events and decisions did not arrive"
        await asyncio.sleep(0.1)
    texts += [events, decisions]
    for table in ("calls", "events", "decisions", "usage_records"):
        rows = await db_pool.fetch(f"SELECT t::text AS row FROM {table} t WHERE team_id = $1", team)
        assert rows, table
        texts += [r["row"] for r in rows]
    texts += [r["row"] for r in await db_pool.fetch("SELECT t::text AS row FROM tools t")]
    out, err = capfd.readouterr()
    texts += [out, err, caplog.text]
    # The client's debug logs were under watch (they name the request it sent).
    assert any(r.name.startswith("openai") for r in caplog.records)
    assert "call_finished" in out + err
    assert all(TEST_LLM_KEY not in text for text in texts)
    assert fake.attempts >= 3  # the upstream did see it: it was sent where it belongs


# --- tools: what the model agent's steps need ------------------------------------------------

MATH_TOOL = {"type": "function", "function": {
    "name": "math", "description": "evaluates an expression",
    "parameters": {"type": "object", "properties": {"expr": {"type": "string", "maxLength": 200}},
                   "required": ["expr"]}}}


def nested(depth: int) -> dict:
    value: dict = {"type": "string"}
    for _ in range(depth):
        value = {"items": value}
    return value


async def test_tools_go_up_and_tool_calls_come_back(client, token, team, fake) -> None:
    tok = await llm_agent(client, token, team)
    fake.then(tool_calls=[("math", {"expr": "2+3"}, "c_1"), ("math", "{bad", "c_2")],
              content="Let me compute.")
    status, body = await invoke(client, tok, "llm.chat", {
        "messages": HELLO, "tools": [MATH_TOOL], "tool_choice": "auto"})
    assert status == 200 and body["status"] == "COMPLETED", body
    message = body["output"]["message"]
    assert message["content"] == "Let me compute."
    assert message["tool_calls"] == [
        {"id": "c_1", "type": "function", "function": {"name": "math", "arguments": '{"expr":"2+3"}'}},
        {"id": "c_2", "type": "function", "function": {"name": "math", "arguments": "{bad"}}]
    assert body["output"]["finish_reason"] == "tool_calls"
    sent = fake.requests[-1]
    assert sent["tools"] == [MATH_TOOL] and sent["tool_choice"] == "auto"
    # The model's reply, tool calls and tool answers go back up as the next request's history.
    history = [*HELLO, message, {"role": "tool", "tool_call_id": "c_1", "content": '{"value": 5}'}]
    status, body = await invoke(client, tok, "llm.chat", {"messages": history, "tools": [MATH_TOOL]})
    assert status == 200 and body["status"] == "COMPLETED", body
    assert fake.requests[-1]["messages"] == history


async def test_a_streamed_answer_is_the_same_answer(client, token, team, fake, llm_served) -> None:
    """TOOLPROXY_LLM_STREAM: server-sent events from the upstream, one JSON result from the tool."""
    tok = await llm_agent(client, token, team)
    answers = []
    for stream in (False, True):
        if stream:
            await llm_served.serve(llm_settings(fake.base_url, stream=True))
            await client.app[CATALOG].wait_available(["llm.chat"], timeout=10)
        fake.then(tool_calls=[("math", {"expr": "2+3"}, "c_1")], content="Computing.",
                  usage={"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13})
        status, body = await invoke(client, tok, "llm.chat", {"messages": HELLO, "tools": [MATH_TOOL]})
        assert status == 200 and body["status"] == "COMPLETED", body
        assert bool(fake.requests[-1].get("stream")) is stream
        answers.append((body["output"], body["tokens_used"]))
    assert answers[0] == answers[1] and answers[0][1] == 13


@pytest.mark.parametrize("args", [
    {"messages": HELLO, "tool_choice": "auto"},  # a choice among no tools
    {"messages": HELLO, "tools": [{"type": "function", "function": {"name": "a.b"}}]},
    {"messages": HELLO, "tools": [MATH_TOOL] * (MAX_TOOLS + 1)},
    {"messages": HELLO, "tools": [{"type": "function", "function": {
        "name": "deep", "parameters": {"properties": nested(PARAMETERS_DEPTH + 1)}}}]},
    {"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                        "function": {"name": "x"}}]}]},
    {"messages": [{"role": "tool", "tool_call_id": "", "content": "x"}]},
])
async def test_tools_and_tool_messages_are_bounded(client, token, team, fake, args) -> None:
    tok = await llm_agent(client, token, team)
    before = fake.attempts
    status, body = await invoke(client, tok, "llm.chat", args)
    assert status == 400 and body["error"]["code"] == "invalid_args", body
    assert fake.attempts == before


def test_the_input_schema_is_bounded_and_takes_its_own_schema_as_parameters() -> None:
    m = llm_manifest(TEST_LLM_MODELS, 512)
    assert unbounded(m.input_schema) == []
    assert m.max_args_bytes == 4 << 20  # references are not sized: bounded explicitly
    # A model agent whose catalog holds llm.chat offers it to its model as a tool.
    tool = {"type": "function", "function": {"name": "llm-chat", "description": m.description,
                                              "parameters": m.input_schema}}
    assert ArgsChecker(m).check({"messages": HELLO, "tools": [tool]}) is None


async def test_an_answer_beyond_the_bounds_is_upstream_error(client, token, team, fake) -> None:
    tok = await llm_agent(client, token, team)
    fake.then(tool_calls=[("math", {"expr": "1"})] * (MAX_TOOL_CALLS + 1))
    status, body = await invoke(client, tok, "llm.chat", {"messages": HELLO, "tools": [MATH_TOOL]})
    assert status == 200 and tool_code(body) == "upstream_error", body
    assert "tool calls at once" in body["error"]["message"]


@pytest.mark.parametrize(("step", "side"), [({"status": 500}, UNAVAILABLE), ({"status": 503}, UNAVAILABLE),
                                            ({"status": 400}, REFUSED), ({"status": 401}, REFUSED)])
async def test_an_upstream_error_says_whether_trying_later_may_work(client, token, team, fake,
                                                                   step, side) -> None:
    """The tool's contract the model agent reads (proxy/turns/model_call.py spells the same)."""
    tok = await llm_agent(client, token, team)
    await tighten_timeout(client, token, team, "llm.chat", 1_000)  # no retry
    fake.then(**step)
    status, body = await invoke(client, tok, "llm.chat", {"messages": HELLO})
    assert tool_code(body) == "upstream_error" and body["error"]["message"].startswith(side), body
    assert model_call._UNAVAILABLE_PREFIX == UNAVAILABLE

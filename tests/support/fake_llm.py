"""A local stand-in for an OpenAI-compatible API (a third party tests cannot reach): an aiohttp
server on loopback speaking POST /v1/chat/completions, started and stopped by the test — the
one fake of the suite, for llm.chat and for the model agent (whose steps are llm.chat calls).

It checks the bearer key like the real API (a wrong key gets a 401 whose message quotes the
key it received, as OpenAI's does) and records every request it accepted, with its headers
and how long it took here. What it answers, in this order: the queued steps (`then`), else the
script (`play`: a function of the request and how many came before, e.g. `scripted(...)`),
else an echo of the last user message. A step may wait (a delay, a gate), fail (a status and
headers), answer text and/or tool calls, and report or omit its usage. A request asking for
`stream` gets server-sent event chunks (text halves, tool call deltas, the usage last)."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.support.loopback import serve


@dataclass
class Step:
    """One answer. `tool_calls`: (name, arguments) with arguments a dict or a raw string,
    optionally an id third. Without content or tool calls: the echo."""

    status: int = 200
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    content: str | None = None
    tool_calls: list[tuple[Any, ...]] = field(default_factory=list)
    usage: dict[str, int] | None = None  # None: counted from the text
    omit_usage: bool = False
    gate: asyncio.Event | None = None  # the answer waits until it is set

    def calls_json(self) -> list[dict[str, Any]]:
        out = []
        for i, spec in enumerate(self.tool_calls):
            name, args = spec[0], spec[1]
            call_id = spec[2] if len(spec) > 2 else f"call_{i}_{uuid.uuid4().hex[:8]}"
            text = args if isinstance(args, str) else orjson.dumps(args).decode()
            out.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": text}})
        return out


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def say(text: str, *, prompt_tokens: int = 10, completion_tokens: int = 5, **kw: Any) -> Step:
    """A text answer (15 tokens unless told)."""
    return Step(content=text, usage=_usage(prompt_tokens, completion_tokens), **kw)


def call(*calls: tuple[Any, ...], content: str | None = None, prompt_tokens: int = 10,
         completion_tokens: int = 5, **kw: Any) -> Step:
    """An answer asking for tool calls (15 tokens unless told)."""
    return Step(content=content, tool_calls=list(calls),
                usage=_usage(prompt_tokens, completion_tokens), **kw)


Script = Callable[[dict[str, Any], int], Step]


def scripted(*steps: Step) -> Script:
    """Steps in order; the last one repeats."""
    def next_step(_request: dict[str, Any], n: int) -> Step:
        return steps[min(n, len(steps) - 1)]
    return next_step


class FakeLLM:
    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []  # accepted request bodies, in order
        self.headers: list[dict[str, str]] = []  # and their headers
        self.durations: list[float] = []  # seconds each accepted request took here
        self.attempts = 0  # every request that reached the server, authorized or not
        self.script: deque[Step] = deque()
        self.player: Script | None = None
        self.latency_s = 0.0  # before every scripted answer
        self._generation = 0  # a request still in flight from before a reset records nothing
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def then(self, **step: Any) -> FakeLLM:
        self.script.append(Step(**step))
        return self

    def play(self, script: Script, *, latency_s: float = 0.0) -> FakeLLM:
        self.player, self.latency_s = script, latency_s
        return self

    def reset(self) -> None:
        """Nothing queued or scripted, nothing recorded (the session's fake, between tests)."""
        self._generation += 1
        self.script.clear()
        self.player, self.latency_s = None, 0.0
        self.requests.clear()
        self.headers.clear()
        self.durations.clear()

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        self._runner, self.port = await serve(app)
        return self.base_url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeLLM:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        self.attempts += 1
        auth = request.headers.get("Authorization", "")
        if auth != f"Bearer {self.api_key}":
            return web.json_response(
                {"error": {"message": f"Incorrect API key provided: {auth.removeprefix('Bearer ')}",
                           "type": "invalid_request_error", "code": "invalid_api_key"}}, status=401)
        t0, generation = time.perf_counter(), self._generation
        try:
            return await self._answer(request, generation)
        finally:
            if generation == self._generation:
                self.durations.append(time.perf_counter() - t0)

    async def _answer(self, request: web.Request, generation: int) -> web.StreamResponse:
        body = await request.json(loads=orjson.loads)
        n = len(self.requests)
        if self.script:
            step = self.script.popleft()
        elif self.player is not None:
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            step = self.player(body, n)
        else:
            step = Step()
        if step.gate is not None:
            await step.gate.wait()
        if step.delay_s:
            await asyncio.sleep(step.delay_s)
        if step.status != 200:
            # An error body quoting the key: the service must never pass it on.
            return web.json_response(
                {"error": {"message": f"fake failure {step.status} for key {self.api_key}",
                           "type": "server_error"}}, status=step.status, headers=step.headers)
        if generation == self._generation:
            self.requests.append(body)
            self.headers.append(dict(request.headers))
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await self._stream(request, body, step, include_usage)
        return web.json_response(self._completion(body, step), headers=step.headers,
                                 dumps=lambda v: orjson.dumps(v).decode())

    @staticmethod
    def _text(body: dict[str, Any], step: Step) -> str | None:
        if step.content is not None or step.tool_calls:
            return step.content
        last_user = next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
        return f"echo: {last_user}"

    def _usage(self, body: dict[str, Any], step: Step) -> dict[str, int]:
        if step.usage is not None:
            return step.usage
        prompt = sum(len(m.get("content") or "") for m in body["messages"]) // 4 + 1
        return _usage(prompt, len(self._text(body, step) or "") // 4 + 1)

    def _completion(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self._text(body, step)}
        calls = step.calls_json()
        if calls:
            message["tool_calls"] = calls
        reply: dict[str, Any] = {
            "id": f"chatcmpl-fake-{len(self.requests)}", "object": "chat.completion",
            "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if calls else "stop"}],
        }
        if not step.omit_usage:
            reply["usage"] = self._usage(body, step)
        return reply

    async def _stream(self, request: web.Request, body: dict[str, Any], step: Step,
                      include_usage: bool) -> web.StreamResponse:
        resp = web.StreamResponse(headers={**step.headers, "Content-Type": "text/event-stream"})
        await resp.prepare(request)
        cid, created = f"chatcmpl-fake-{len(self.requests)}", int(time.time())

        def chunk(delta: dict[str, Any] | None, finish: str | None = None,
                  usage: dict[str, int] | None = None) -> bytes:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            data: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created,
                                    "model": body["model"], "choices": choices}
            if usage is not None:
                data["usage"] = usage
            return b"data: " + orjson.dumps(data) + b"\n\n"

        await resp.write(chunk({"role": "assistant", "content": ""}))
        text = self._text(body, step) or ""
        for piece in (text[: len(text) // 2], text[len(text) // 2:]):
            if piece:
                await resp.write(chunk({"content": piece}))
        calls = step.calls_json()
        for i, c in enumerate(calls):
            await resp.write(chunk({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                                                    "function": {"name": c["function"]["name"],
                                                                 "arguments": ""}}]}))
            args = c["function"]["arguments"]
            size = max(1, len(args) // 3)
            for start in itertools.count(0, size):
                if start >= len(args):
                    break
                await resp.write(chunk({"tool_calls": [{"index": i, "function": {
                    "arguments": args[start:start + size]}}]}))
        await resp.write(chunk({}, "tool_calls" if calls else "stop"))
        if include_usage and not step.omit_usage:
            await resp.write(chunk(None, usage=self._usage(body, step)))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

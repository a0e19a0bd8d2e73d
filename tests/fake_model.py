"""A scripted model behind a real OpenAI-compatible `/v1/chat/completions` endpoint on loopback
(one JSON answer, or server-sent event chunks with tool call deltas), for the turn runtime's
tests and bench. It records every request it receives."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.loopback import serve


@dataclass
class Answer:
    """One assistant message: text and/or tool calls ((name, arguments) with arguments a dict
    or a raw string, optionally an id), and the usage the server reports for it."""

    content: str | None = None
    tool_calls: list[tuple[Any, ...]] = field(default_factory=list)
    prompt_tokens: int = 10
    completion_tokens: int = 5
    status: int = 200  # anything else: an error response instead

    def calls_json(self) -> list[dict[str, Any]]:
        out = []
        for i, spec in enumerate(self.tool_calls):
            name, args = spec[0], spec[1]
            call_id = spec[2] if len(spec) > 2 else f"call_{i}_{uuid.uuid4().hex[:8]}"
            text = args if isinstance(args, str) else orjson.dumps(args).decode()
            out.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": text}})
        return out


def say(text: str, **kw: Any) -> Answer:
    return Answer(content=text, **kw)


def call(*calls: tuple[Any, ...], content: str | None = None, **kw: Any) -> Answer:
    return Answer(content=content, tool_calls=list(calls), **kw)


Script = Callable[[dict[str, Any], int], Answer]


def scripted(*answers: Answer) -> Script:
    """Answers in order; the last one repeats."""
    def next_answer(_request: dict[str, Any], n: int) -> Answer:
        return answers[min(n, len(answers) - 1)]
    return next_answer


class FakeModel:
    def __init__(self, script: Script, *, latency_s: float = 0.0, model: str = "fake-model") -> None:
        self.script = script
        self.latency_s = latency_s
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.durations: list[float] = []  # seconds each request took here (the upstream's own time)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> FakeModel:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        self._runner, self.port = await serve(app)
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeModel:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        t0 = time.perf_counter()
        try:
            return await self._answer(request)
        finally:
            self.durations.append(time.perf_counter() - t0)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        body = await request.json(loads=orjson.loads)
        n = len(self.requests)
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        answer = self.script(body, n)
        if answer.status != 200:
            return web.json_response({"error": {"message": "scripted failure", "type": "server_error"}},
                                     status=answer.status)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await self._stream(request, answer, include_usage)
        return web.json_response(self._completion(answer), dumps=lambda v: orjson.dumps(v).decode())

    def _usage(self, a: Answer) -> dict[str, int]:
        return {"prompt_tokens": a.prompt_tokens, "completion_tokens": a.completion_tokens,
                "total_tokens": a.prompt_tokens + a.completion_tokens}

    def _completion(self, a: Answer) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": a.content}
        calls = a.calls_json()
        if calls:
            message["tool_calls"] = calls
        return {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
                "created": int(time.time()), "model": self.model,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": self._usage(a)}

    async def _stream(self, request: web.Request, a: Answer, include_usage: bool) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        cid, created = f"chatcmpl-{uuid.uuid4().hex[:12]}", int(time.time())

        def chunk(delta: dict[str, Any] | None, finish: str | None = None,
                  usage: dict[str, int] | None = None) -> bytes:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            data: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created,
                                    "model": self.model, "choices": choices}
            if usage is not None:
                data["usage"] = usage
            return b"data: " + orjson.dumps(data) + b"\n\n"

        await resp.write(chunk({"role": "assistant", "content": ""}))
        text = a.content or ""
        for piece in (text[: len(text) // 2], text[len(text) // 2:]):
            if piece:
                await resp.write(chunk({"content": piece}))
        for i, c in enumerate(a.calls_json()):
            await resp.write(chunk({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                                                    "function": {"name": c["function"]["name"],
                                                                 "arguments": ""}}]}))
            args = c["function"]["arguments"]
            step = max(1, len(args) // 3)
            for start in itertools.count(0, step):
                if start >= len(args):
                    break
                await resp.write(chunk({"tool_calls": [{"index": i, "function": {
                    "arguments": args[start:start + step]}}]}))
        await resp.write(chunk({}, "tool_calls" if a.tool_calls else "stop"))
        if include_usage:
            await resp.write(chunk(None, usage=self._usage(a)))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

"""A local stand-in for an OpenAI-compatible API (a third party tests cannot reach): an aiohttp
server on loopback speaking POST /v1/chat/completions, started and stopped by the test.

It checks the bearer key like the real API (a wrong key gets a 401 whose message quotes the
key it received, as OpenAI's does), records every request it accepted, and plays scripted
steps (delay, status, headers, content, usage, a gate to hold the answer) before falling back
to echoing the last user message."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.loopback import serve


@dataclass
class Step:
    status: int = 200
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    content: str | None = None
    usage: dict[str, int] | None = None
    omit_usage: bool = False
    gate: asyncio.Event | None = None  # the answer waits until it is set


class FakeLLM:
    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []  # accepted request bodies, in order
        self.attempts = 0  # every request that reached the server, authorized or not
        self.script: deque[Step] = deque()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def then(self, **step: Any) -> FakeLLM:
        self.script.append(Step(**step))
        return self

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        self._runner, self.port = await serve(app)
        return self.base_url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _completions(self, request: web.Request) -> web.Response:
        self.attempts += 1
        auth = request.headers.get("Authorization", "")
        if auth != f"Bearer {self.api_key}":
            return web.json_response(
                {"error": {"message": f"Incorrect API key provided: {auth.removeprefix('Bearer ')}",
                           "type": "invalid_request_error", "code": "invalid_api_key"}}, status=401)
        body = await request.json()
        step = self.script.popleft() if self.script else Step()
        if step.gate is not None:
            await step.gate.wait()
        if step.delay_s:
            await asyncio.sleep(step.delay_s)
        if step.status != 200:
            # An error body quoting the key: the service must never pass it on.
            return web.json_response(
                {"error": {"message": f"fake failure {step.status} for key {self.api_key}",
                           "type": "server_error"}}, status=step.status, headers=step.headers)
        self.requests.append(body)
        last_user = next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
        content = step.content if step.content is not None else f"echo: {last_user}"
        prompt = sum(len(m["content"]) for m in body["messages"]) // 4 + 1
        usage = step.usage or {"prompt_tokens": prompt, "completion_tokens": len(content) // 4 + 1,
                               "total_tokens": prompt + len(content) // 4 + 1}
        reply: dict[str, Any] = {
            "id": f"chatcmpl-fake-{len(self.requests)}", "object": "chat.completion",
            "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
        }
        if not step.omit_usage:
            reply["usage"] = usage
        return web.json_response(reply, headers=step.headers)

"""The llm service: llm.chat, a completion from the upstream, its model chosen by the caller
or (`model: "auto"`) by the router's rules; with `tools`, the model may answer tool calls
(handed back, never run here)."""

from __future__ import annotations

from typing import Any

import orjson

from services.llm.config import LlmSettings
from services.llm.errors import ModelNotAllowed
from services.llm.manifests import llm_manifest
from services.llm.upstream import Upstream
from services.router.choose import Router, prompt_tokens
from services.router.errors import NoRoute
from services.sdk import CallContext
from services.sdk.lifecycle import ResourcefulService
from services.sdk.service import ToolDef, ToolResult


def service(settings: LlmSettings, router: Router | None = None) -> ResourcefulService:
    if not settings.configured:
        raise ValueError("llm.chat needs TOOLPROXY_LLM_BASE_URL and TOOLPROXY_LLM_MODELS")
    upstream = Upstream(settings)
    models = settings.models
    m = llm_manifest(models, settings.default_max_tokens)
    assert m.token_estimate is not None
    estimate = m.token_estimate

    async def chat(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        messages: list[dict[str, Any]] = args["messages"]
        max_tokens: int = args.get("max_tokens", settings.default_max_tokens)
        model: str = args.get("model") or models[0]
        route: dict[str, Any] | None = None
        if model == "auto":
            if router is None:
                raise NoRoute("model auto needs the router")
            chosen = await router.route(
                team_id=ctx.team_id, agent_id=ctx.agent_id, task=args.get("task"),
                prompt_tokens=prompt_tokens(len(orjson.dumps(messages))
                                            + (len(orjson.dumps(args["tools"])) if "tools" in args else 0)),
                completion_tokens=max_tokens,
                cost_ceiling_1t=args.get("cost_ceiling_1t"), confidential=ctx.confidential,
                kinds=("model",))
            model = chosen.id
            route = {"reasons": chosen.reasons, "policy_revision": chosen.policy_revision}
        if model not in models:  # the schema's enum already said so; never trust the bus
            raise ModelNotAllowed(f"model {model[:128]!r} is not allowed")
        done = await upstream.complete(model=model, messages=messages, max_tokens=max_tokens,
                                       temperature=args.get("temperature"), deadline=ctx.deadline,
                                       tools=args.get("tools"), tool_choice=args.get("tool_choice"))
        total, estimated = done.total_tokens, False
        if total is None:
            if done.prompt_tokens is not None and done.completion_tokens is not None:
                total = done.prompt_tokens + done.completion_tokens
            else:  # no usage reported: charged as estimated, and said so
                total, estimated = estimate.tokens(args), True
        message: dict[str, Any] = {"role": "assistant", "content": done.content}
        if done.tool_calls:
            message["tool_calls"] = list(done.tool_calls)
        output: dict[str, Any] = {
            "message": message,
            "model": model,
            "usage": {"prompt_tokens": done.prompt_tokens, "completion_tokens": done.completion_tokens,
                      "total_tokens": total, "estimated": estimated},
            "finish_reason": done.finish_reason,
            "truncated": done.truncated,
        }
        if route is not None:
            output["route"] = route
        return ToolResult(output=output, tokens_used=total)

    return ResourcefulService(name="llm", tools=[ToolDef(manifest=m, handler=chat)],
                              opened=[upstream.open], closed=[upstream.close])

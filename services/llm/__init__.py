"""Category C `llm.chat`: a chat completion against the configured OpenAI-compatible
upstream (TOOLPROXY_LLM_*). The key stays here; `model: "auto"` asks the router's rules."""

from __future__ import annotations

from typing import Any

import orjson

from services.llm.config import LlmSettings
from services.llm.manifest import llm_manifest
from services.llm.upstream import Upstream
from services.router.choose import Router, prompt_tokens
from services.sdk import CallContext, ToolError
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
        messages: list[dict[str, str]] = args["messages"]
        max_tokens: int = args.get("max_tokens", settings.default_max_tokens)
        model: str = args.get("model") or models[0]
        route: dict[str, Any] | None = None
        if model == "auto":
            if router is None:
                raise ToolError("model auto needs the router", code="no_route")
            chosen = await router.route(
                team_id=ctx.team_id, agent_id=ctx.agent_id, task=args.get("task"),
                prompt_tokens=prompt_tokens(len(orjson.dumps(messages))), completion_tokens=max_tokens,
                cost_ceiling_1t=args.get("cost_ceiling_1t"), confidential=ctx.confidential,
                kinds=("model",))
            model = chosen.id
            route = {"reasons": chosen.reasons, "policy_revision": chosen.policy_revision}
        if model not in models:  # the schema's enum already said so; never trust the bus
            raise ToolError(f"model {model[:128]!r} is not allowed", code="model_not_allowed")
        done = await upstream.complete(model=model, messages=messages, max_tokens=max_tokens,
                                       temperature=args.get("temperature"), deadline=ctx.deadline)
        total, estimated = done.total_tokens, False
        if total is None:
            if done.prompt_tokens is not None and done.completion_tokens is not None:
                total = done.prompt_tokens + done.completion_tokens
            else:  # no usage reported: charged as estimated, and said so
                total, estimated = estimate.tokens(args), True
        output: dict[str, Any] = {
            "message": {"role": "assistant", "content": done.content},
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
                              closed=[upstream.close])

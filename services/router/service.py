"""Category C `router.route`: picks the model (or registered agent) for a request by the
routing rules in policy data (pdp/policies/router.rego) and says why."""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client as NATS

from services.router.choose import Router, prompt_tokens
from services.router.manifests import MANIFEST
from services.sdk import CallContext, ToolError
from services.sdk.lifecycle import ResourcefulService
from services.sdk.service import ToolDef


def service(router: Router) -> ResourcefulService:
    """The router service; it owns the rules' follower (started and stopped with it)."""

    async def opened(nc: NATS) -> None:
        await router.rules.start()

    async def route(args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        if not ctx.team_id:
            raise ToolError("the call carries no team")
        prompt: str = args.get("prompt", "")
        chosen = await router.route(
            team_id=ctx.team_id, agent_id=ctx.agent_id, task=args.get("task"),
            prompt_tokens=prompt_tokens(len(prompt.encode())),
            cost_ceiling_1t=args.get("cost_ceiling_1t"), confidential=ctx.confidential)
        return chosen.output()

    return ResourcefulService(name="router", tools=[ToolDef(manifest=MANIFEST, handler=route)],
                              opened=[opened], closed=[router.rules.close])

"""The deterministic demo agent: USER -> AGENT -> PLAN -> TOOL_REQUEST -> TOOL_RESULT ->
AUTHORIZATION_REQUIRED -> RESULT with the built-in tools, no model involved.

It reads the team's state (tasks, `search.lite` when the catalog has it, the GREENFOOD
inventory), plans an order from the user's words and what it read, requests the critical
`greenfood.order create_order` and stops when governance must decide; on resume it runs the
decided call (or learns its refusal), reads the state again and publishes the result.

A read the policy holds for approval (every category D call, the inventory included, unless a
governance rule lets it through) is withdrawn at once: a read is never worth a human's wait,
and the plan says the inventory could not be read. The same input and the same state give the
same steps and events, ids and times aside. Nothing here can authorize anything: the agent
holds the caller's identity and only calls tools.
"""

from __future__ import annotations

import re
from typing import Any

from proxy.core.outcome import Outcome
from proxy.turns.context import TurnContext
from proxy.turns.models import Done, Held, Verdict

ORDER_TOOL = "greenfood.order"
SEARCH_TOOL = "search.lite"
DEMO_PRODUCTS = ("apple", "bread", "milk")  # the GREENFOOD demo inventory's seed
MAX_QTY = 1000

_WORD = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_NUMBER = re.compile(r"(?<![\w.])(\d{1,4})(?![\w.])")


def _order_from(text: str, products: list[str]) -> dict[str, Any]:
    """The product the user names (a plural names it too) and the first quantity in range;
    otherwise the first product known, one of it."""
    words = _WORD.findall(text.lower())
    known = products or list(DEMO_PRODUCTS)
    product = next((w if w in known else w[:-1] for w in words
                    if w in known or (w.endswith("s") and w[:-1] in known)), sorted(known)[0])
    qty = next((int(n) for n in _NUMBER.findall(text) if 1 <= int(n) <= MAX_QTY), 1)
    return {"product_id": product, "qty": qty}


class DemoAgent:
    name = "demo"

    async def run(self, ctx: TurnContext) -> Verdict:
        s = ctx.state
        if "phase" not in s:
            ctx.step("agent", {"agent": self.name, "message": "reading the team's state, step by step"})
            intent = {"goal": ctx.turn.input[:200],
                      "steps": ["read the team's tasks", *(["search the team's documents"]
                                if self._has_search(ctx) else []),
                                "read the GREENFOOD inventory", "order what the user asked for",
                                "read the state again and report"]}
            await self._plan(ctx, intent)
            s["phase"] = "read"
            await ctx.flush()
        if s["phase"] == "read":
            s["before"] = await self._read_state(ctx)
            order = _order_from(ctx.turn.input, self._products(s["before"]))
            s["order_args"] = order
            await self._plan(ctx, self._concrete_plan(ctx, s["before"], order))
            s["phase"] = "order"
            await ctx.flush()
        if s["phase"] == "order":
            outcome = await ctx.call_tool(ORDER_TOOL, {"op": "create_order", **s["order_args"]})
            if outcome.status == "AUTHORIZATION_REQUIRED":
                s["phase"] = "held"
                return Held([_held(outcome)])
            s["order"] = _summary(outcome)
            s["phase"] = "report"
        if s["phase"] == "held":
            call_id = ctx.turn.held[0]["call_id"]
            outcome = await ctx.resume_call(call_id)
            if outcome.status == "AUTHORIZATION_REQUIRED":
                return Held([_held(outcome)])
            ctx.record_result(ORDER_TOOL, outcome, resumed=True)
            s["order"] = _summary(outcome)
            s["phase"] = "report"
            await ctx.flush()
        # report
        after = await self._read_state(ctx)
        result = {"order": s["order"], "before": s["before"], "after": after,
                  "summary": self._summary_line(s["order"], s["order_args"])}
        return Done(result)

    # --- reading ------------------------------------------------------------------------

    def _has_search(self, ctx: TurnContext) -> bool:
        return ctx.pipeline.catalog.get(SEARCH_TOOL) is not None

    async def _read_state(self, ctx: TurnContext) -> dict[str, Any]:
        state: dict[str, Any] = {}
        tasks = await self._read(ctx, "task.list", {"limit": 50})
        state["tasks"] = tasks
        if self._has_search(ctx):
            state["search"] = await self._read(ctx, SEARCH_TOOL,
                                               {"query": ctx.turn.input[:200], "limit": 5})
        state["inventory"] = await self._read(ctx, ORDER_TOOL, {"op": "get_inventory"})
        await ctx.flush()
        return state

    async def _read(self, ctx: TurnContext, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        outcome = await ctx.call_tool(tool, args)
        if outcome.status == "AUTHORIZATION_REQUIRED":
            withdrawn = await ctx.withdraw(str(outcome.call_id))
            ctx.step("agent", {"message": f"{tool} is held for approval; a read is not worth the "
                               "wait, so the call is withdrawn", "call_id": outcome.call_id,
                               "withdrawn": withdrawn})
            return {"status": "needs_approval", "call_id": outcome.call_id}
        if not outcome.ok:
            return {"status": outcome.status or "ERROR", "code": outcome.code,
                    "call_id": outcome.call_id}
        output = outcome.output or {}
        seen: dict[str, Any] = {"status": "read", "call_id": outcome.call_id}
        if tool == "task.list":
            tasks = output.get("tasks") or []
            seen["count"] = output.get("count", len(tasks))
            seen["open"] = sum(1 for t in tasks if t.get("status") != "done")
        elif tool == SEARCH_TOOL:
            seen["hits"] = [h.get("doc_id") for h in (output.get("hits") or [])][:5]
        else:
            seen["products"] = {p["product_id"]: p["stock"] for p in output.get("products") or []
                                if isinstance(p, dict) and "product_id" in p}
        return seen

    @staticmethod
    def _products(before: dict[str, Any]) -> list[str]:
        return sorted((before.get("inventory") or {}).get("products") or {})

    # --- planning and reporting -----------------------------------------------------------

    async def _plan(self, ctx: TurnContext, plan: dict[str, Any]) -> None:
        ctx.step("plan", {"plan": plan})
        await ctx.emit("agent.plan.updated", {"plan": plan})
        ctx.run_plan = plan  # the run's plan too (GET /v1/runs/{run_id})

    def _concrete_plan(self, ctx: TurnContext, before: dict[str, Any],
                       order: dict[str, Any]) -> dict[str, Any]:
        tasks, inventory = before["tasks"], before["inventory"]
        seen_tasks = (f"{tasks['open']} open of {tasks['count']} tasks" if tasks["status"] == "read"
                      else f"tasks not read ({tasks.get('code') or tasks['status']})")
        if inventory["status"] == "read":
            stock = inventory["products"].get(order["product_id"])
            seen_stock = f"{order['product_id']}: {stock} in stock"
        else:
            seen_stock = f"inventory not read ({inventory.get('code') or inventory['status']})"
        return {"goal": ctx.turn.input[:200],
                "observed": [seen_tasks, seen_stock],
                "order": order,
                "steps": [f"order {order['qty']} x {order['product_id']} with greenfood.order "
                          "create_order (a critical action: governance decides)",
                          "read the state again and report"]}

    @staticmethod
    def _summary_line(order: dict[str, Any], asked: dict[str, Any]) -> str:
        what = f"{asked['qty']} x {asked['product_id']}"
        if order["status"] == "COMPLETED":
            return f"ordered {what}"
        return f"the order of {what} was not placed ({order.get('code') or order['status']})"


def _held(outcome: Outcome) -> dict[str, Any]:
    return {"call_id": outcome.call_id, "approval_id": outcome.approval_id,
            "expires_at": outcome.expires_at, "tool": ORDER_TOOL}


def _summary(outcome: Outcome) -> dict[str, Any]:
    out: dict[str, Any] = {"status": outcome.status or "ERROR", "call_id": outcome.call_id}
    if outcome.ok:
        output = outcome.output or {}
        out.update({k: output.get(k) for k in ("order_id", "product_id", "qty")})
        out["result_id"] = outcome.result_id
    else:
        out["code"] = outcome.code
    return out

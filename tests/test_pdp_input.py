"""The policy input document, pinned exactly (STYLE.md: its JSON is a contract with policy authors)."""

from __future__ import annotations

import orjson

from pdp.input import build_input


def test_input_document_is_exactly_this() -> None:
    doc = build_input(
        agent_id="agent-1",
        team_id="t_555",
        roles=["agent"],
        tool={
            "tool_id": "greenfood.order", "version": "1.0.0", "category": "D", "action": "write",
            "risk": "critical", "network": False, "requires_approval": True, "timeout_ms": 5000,
            "description": "not passed", "input_schema": {"type": "object"}, "cost": {"per_call": 1},
        },
        args={"op": "create_order", "product_id": "milk", "qty": 2},
        context={"agent_run_id": "ar_123", "team_id": "t_555", "unlisted": "dropped"},
        grants=["tool.greenfood.order.invoke", "tool.task.list.invoke", "tool.task.list.invoke"],
        overrides=[
            {"tool": "greenfood.order", "effect": "allow", "timeout_ms": 3000, "rate_per_minute": None},
            {"tool": "math", "effect": "deny", "timeout_ms": None, "rate_per_minute": None},
        ],
        team_rules=[
            {"tool": "greenfood.order", "deny": False, "require_approval": True, "timeout_ms": None,
             "rate_per_minute": 2, "reason": "not passed", "team_id": "not passed"},
            {"tool": "math", "deny": True},
        ],
        approval={"state": "approved", "args_match": True, "approval_id": "not passed"},
        phase="call",
        scopes=["mcp", "tool.greenfood.order.invoke", "mcp"],
    )
    assert orjson.dumps(doc, option=orjson.OPT_SORT_KEYS) == orjson.dumps({
        "version": 1,
        "subject": {"agent_id": "agent-1", "team_id": "t_555", "roles": ["agent"],
                    "scopes": ["mcp", "tool.greenfood.order.invoke"]},
        "action": "tool.greenfood.order.invoke",
        "tool": {
            "tool_id": "greenfood.order", "version": "1.0.0", "category": "D", "action": "write",
            "risk": "critical", "network": False, "requires_approval": True, "timeout_ms": 5000,
            "plugin": False,
        },
        "args": {"op": "create_order", "product_id": "milk", "qty": 2},
        "context": {"team_id": "t_555", "agent_run_id": "ar_123", "confidential": False},
        "grants": ["tool.greenfood.order.invoke", "tool.task.list.invoke"],
        "overrides": [
            {"tool": "greenfood.order", "effect": "allow", "timeout_ms": 3000, "rate_per_minute": None},
        ],
        "team_rules": [
            {"tool": "greenfood.order", "deny": False, "require_approval": True, "timeout_ms": None,
             "rate_per_minute": 2},
        ],
        "approval": {"state": "approved", "args_match": True},
        "phase": "call",
    }, option=orjson.OPT_SORT_KEYS)


def test_list_phase_has_empty_args() -> None:
    doc = build_input(agent_id="a", team_id="t", roles=["agent"],
                      tool={"tool_id": "math", "category": "A", "action": "read"},
                      args=None, context={"team_id": "t"}, grants=[], phase="list")
    assert doc["args"] == {} and doc["phase"] == "list"
    assert doc["overrides"] == [] and doc["team_rules"] == [] and doc["approval"] is None
    assert doc["subject"]["scopes"] == []  # a dev issuer's token: none


def test_a_standing_approval_names_itself_in_the_input() -> None:
    doc = build_input(agent_id="a", team_id="t", roles=["agent"],
                      tool={"tool_id": "energy.meter.read", "category": "D", "action": "read"},
                      args={"meter_id": "em-1"}, context={"team_id": "t"}, grants=[], phase="call",
                      approval={"state": "standing", "args_match": True,
                                "standing_approval_id": "5f0c-id", "other": "dropped"})
    assert doc["approval"] == {"state": "standing", "args_match": True,
                               "standing_approval_id": "5f0c-id"}

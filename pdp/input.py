"""The policy input document, built in one pure function (its exact JSON is pinned by a test)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

INPUT_VERSION = 1

Phase = Literal["list", "call"]


def build_input(
    *,
    agent_id: str,
    team_id: str,
    roles: Iterable[str],
    tool: Mapping[str, Any],
    args: Mapping[str, Any] | None,
    context: Mapping[str, Any],
    grants: Iterable[str],
    phase: Phase,
    overrides: Iterable[Mapping[str, Any]] = (),
    team_rules: Iterable[Mapping[str, Any]] = (),
    approval: Mapping[str, Any] | None = None,
    scopes: Iterable[str] = (),
) -> dict[str, Any]:
    """Only chosen fields: never whole headers, tokens or anything the policy should not see.
    `scopes` are the token's OAuth scopes (none for the dev issuer's tokens)."""
    name = tool["tool_id"]
    return {
        "version": INPUT_VERSION,
        "subject": {"agent_id": agent_id, "team_id": team_id, "roles": sorted(roles),
                    "scopes": sorted(set(scopes))},
        "action": f"tool.{name}.invoke",
        "tool": {
            "tool_id": name,
            "version": tool.get("version"),
            "category": tool["category"],
            "action": tool["action"],
            "risk": tool.get("risk"),
            "network": tool.get("network", False),
            "requires_approval": tool.get("requires_approval", False),
            "timeout_ms": tool.get("timeout_ms"),
            "plugin": tool.get("plugin", False),
        },
        "args": dict(args) if args is not None else {},
        "context": {
            "team_id": context.get("team_id"),
            "agent_run_id": context.get("agent_run_id"),
            "confidential": bool(context.get("confidential", False)),
        },
        "grants": sorted(set(grants)),
        "overrides": [
            {
                "tool": o["tool"],
                "effect": o["effect"],
                "timeout_ms": o.get("timeout_ms"),
                "rate_per_minute": o.get("rate_per_minute"),
            }
            for o in overrides
            if o["tool"] == name
        ],
        # The subject's own team's rules for this tool (pdp/data/team_rules.py): they only tighten.
        "team_rules": [
            {
                "tool": r["tool"],
                "deny": bool(r.get("deny", False)),
                "require_approval": bool(r.get("require_approval", False)),
                "timeout_ms": r.get("timeout_ms"),
                "rate_per_minute": r.get("rate_per_minute"),
            }
            for r in team_rules
            if r["tool"] == name
        ],
        "approval": _approval_view(approval),
        "phase": phase,
    }


def _approval_view(approval: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A per-call approval's state; a standing approval also names itself (so the decision
    log records which one applied)."""
    if approval is None:
        return None
    view: dict[str, Any] = {"state": approval["state"], "args_match": bool(approval["args_match"])}
    if approval.get("standing_approval_id") is not None:
        view["standing_approval_id"] = str(approval["standing_approval_id"])
    return view

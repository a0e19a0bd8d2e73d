"""Preparing a held call (tools.<id>.prepare) and telling its service how it was approved.

For a tool whose manifest says `approval_preview` (a wallet's transfer), the service builds
exactly what it would run — the transaction with its nonce and gas — keeps it, and answers its
decoded form and hash. The approval stores both: governance sees the decoded form, and the
resumed call carries the hash (Toolproxy-Approval-Ref) so the service runs only that.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from proxy.core.call import Call, Ending
from proxy.errors import ApiError
from proxy.core.forward import BadToolReply, CallMeta, forward
from proxy.core.signing import ContextSigner
from infra.nats_inbox import Inbox
from proxy.metrics import Metrics
from wire import protocol as p

MAX_PREVIEW_BYTES = 16 << 10
_HASH = re.compile(r"0x[0-9a-f]{64}", re.ASCII)


class Preview(BaseModel):
    """What a service answers to a prepare request."""

    model_config = ConfigDict(extra="allow")

    kind: str = Field(min_length=1, max_length=64)
    hash: str = Field(min_length=66, max_length=66)


def meta_of(call: Call) -> CallMeta:
    return CallMeta(
        call_id=call.call_id, decision_id=call.decision_id, team_id=call.identity.team_id,
        agent_id=call.identity.agent_id, run_id=call.agent_run_id, confidential=call.confidential,
        **approval_meta(call.approval), turn_id=call.turn_id,
    )


def approval_meta(approval: dict[str, Any] | None) -> dict[str, str | None]:
    """CallMeta's approval fields for the approval a call was decided with."""
    if not approval:
        return {}
    if approval.get("state") == "standing":
        return {"approval": "standing", "approval_ref": str(approval["standing_approval_id"])}
    if approval.get("state") == "approved":
        return {"approval": "per_call", "approval_ref": approval.get("binding")}
    return {}


async def prepare_held(inbox: Inbox, call: Call, metrics: Metrics,
                       signer: ContextSigner) -> tuple[dict[str, Any] | None, Ending | None]:
    """(preview, None) for a call to hold; (None, ending) when it cannot be prepared — the
    service refused it (FAILED, its code as tool_code) or is unreachable; nothing ran.
    Tools without `approval_preview` have no preview: (None, None)."""
    m = call.manifest
    if not m.approval_preview:
        return None, None
    try:
        reply, _ = await forward(inbox, m, call.args, meta_of(call), timeout_s=m.deadline_ms / 1000.0,
                                 max_reply_bytes=MAX_PREVIEW_BYTES, metrics=metrics,
                                 subject=p.prepare_subject(m.tool_id), signer=signer)
    except ApiError as exc:  # no service, timeout, bus down: nothing is held
        return None, Ending(exc.status or "UNAVAILABLE", exc.code,
                            f"{m.tool_id} could not be prepared for approval: {exc.message}")
    except BadToolReply as exc:
        return None, Ending("FAILED", "bad_tool_output", f"prepare: {exc}")
    if not reply.ok:
        assert reply.error is not None
        return None, Ending("FAILED", "tool_error", reply.error.message,
                            tool_code=reply.error.code)
    try:
        preview = Preview.model_validate(reply.output)
    except ValidationError:
        return None, Ending("FAILED", "bad_tool_output", "prepare: not a preview")
    if _HASH.fullmatch(preview.hash) is None:
        return None, Ending("FAILED", "bad_tool_output", "prepare: the hash is not 0x + 64 hex")
    if len(orjson.dumps(reply.output)) > MAX_PREVIEW_BYTES:
        return None, Ending("FAILED", "bad_tool_output", "prepare: the preview is too large")
    return dict(reply.output), None

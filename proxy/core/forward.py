"""Forwarding a decided call to its service over NATS; one place maps NATS outcomes to errors."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import orjson
from nats.aio.client import Client as NATS
from nats.errors import ConnectionClosedError, MaxPayloadError, NoRespondersError, TimeoutError as NatsTimeout
from pydantic import ValidationError

from proxy.core.errors import CallTooLargeForBus, ToolTimeout, ToolUnavailable
from proxy.errors import DependencyUnavailable
from infra.nats_inbox import Inbox, Meanwhile
from proxy.core.signing import ContextSigner
from proxy.metrics import Metrics
from wire.call_context import H_CALL_CONTEXT
from wire import protocol as p
from wire.manifest import ToolManifest


@dataclass(frozen=True, slots=True)
class CallMeta:
    call_id: str
    decision_id: str
    team_id: str
    agent_id: str
    run_id: str | None
    confidential: bool
    approval: str | None = None  # "per_call" | "standing" (proxy.core.binding.approval_meta)
    approval_ref: str | None = None
    replica: str | None = None  # plugin calls: where the plugin's internal() calls come back
    turn_id: str | None = None  # the agent turn that made the call, if any


class BadToolReply(Exception):
    """The service answered something that is not a tool reply."""


def headers_for(meta: CallMeta, deadline_epoch_s: float) -> dict[str, str]:
    h = {
        p.H_CALL_ID: meta.call_id,
        p.H_DECISION_ID: meta.decision_id,
        p.H_TEAM_ID: meta.team_id,
        p.H_AGENT_ID: meta.agent_id,
        p.H_DEADLINE: str(int(deadline_epoch_s * 1000)),
    }
    if meta.run_id:
        h[p.H_RUN_ID] = meta.run_id
    if meta.turn_id:
        h[p.H_TURN_ID] = meta.turn_id
    if meta.confidential:
        h[p.H_CONFIDENTIAL] = "1"
    if meta.approval:
        h[p.H_APPROVAL] = meta.approval
        if meta.approval_ref:
            h[p.H_APPROVAL_REF] = meta.approval_ref
    if meta.replica:
        h[p.H_REPLICA] = meta.replica
    return h


async def cancel(nc: NATS, manifest: ToolManifest, meta: CallMeta) -> None:
    """Tell whichever instance runs the call to stop (best effort: it may already be done)."""
    try:
        await nc.publish(p.cancel_subject(manifest.tool_id), b"", headers={p.H_CALL_ID: meta.call_id})
        await nc.flush(timeout=1)
    except Exception:
        pass


async def forward(
    inbox: Inbox,
    manifest: ToolManifest,
    args: dict[str, Any],
    meta: CallMeta,
    *,
    timeout_s: float,
    max_reply_bytes: int,
    metrics: Metrics,
    subject: str | None = None,
    interrupt: asyncio.Future[Any] | None = None,
    meanwhile: Meanwhile | None = None,
    signer: ContextSigner,
) -> tuple[p.ToolReply, list[str]]:
    """Request/reply on tools.<name>.invoke (or `subject`) within the deadline: (reply, diagnostics).

    Raises ToolUnavailable (no responders), DependencyUnavailable (disconnected), ToolTimeout,
    CallTooLargeForBus (above the server's max_payload: nothing sent),
    BadToolReply, or infra.nats_inbox.Interrupted once `interrupt` is done (nobody waits any more).
    `meanwhile` runs while the service works (see infra.nats_inbox); the caller finishes it.
    The context is signed (`signer`): the service acts on nothing else.
    """
    payload = orjson.dumps(
        {
            "args": args,
            "context": {
                "team_id": meta.team_id,
                "agent_id": meta.agent_id,
                "agent_run_id": meta.run_id,
                "confidential": meta.confidential,
            },
        }
    )
    if not inbox.is_connected:
        metrics.nats_errors.labels(kind="disconnected").inc()
        raise DependencyUnavailable("the message bus is unavailable")
    target = subject or manifest.subject
    deadline = time.time() + timeout_s
    headers = headers_for(meta, deadline)
    headers[H_CALL_CONTEXT] = signer.seal(meta, subject=target, body=payload, deadline_epoch_s=deadline)
    try:
        msg = await inbox.request(
            target,
            payload,
            timeout_s=timeout_s,
            headers=headers,
            interrupt=interrupt,
            meanwhile=meanwhile,
        )
    except NoRespondersError:
        metrics.nats_errors.labels(kind="no_responders").inc()
        raise ToolUnavailable(f"no service is serving {manifest.tool_id} right now") from None
    except NatsTimeout:
        metrics.nats_errors.labels(kind="timeout").inc()
        raise ToolTimeout(
            f"{manifest.tool_id} did not answer within {int(timeout_s * 1000)} ms"
        ) from None
    except ConnectionClosedError:
        metrics.nats_errors.labels(kind="closed").inc()
        raise DependencyUnavailable("the message bus is unavailable") from None
    except MaxPayloadError:  # nothing was sent (pipeline.check_args refuses most before)
        metrics.nats_errors.labels(kind="max_payload").inc()
        raise CallTooLargeForBus(f"the call ({len(payload)} bytes with its context) exceeds what "
                                 "the message bus carries (its max_payload)") from None
    if len(msg.data) > max_reply_bytes:
        raise BadToolReply(f"reply of {len(msg.data)} bytes exceeds {max_reply_bytes}")
    notes: list[str] = []
    try:
        reply = p.ToolReply.model_validate_json(msg.data)
    except ValidationError:
        # Invalid UTF-8 is repaired (replaced with U+FFFD) rather than losing the whole reply.
        repaired = msg.data.decode("utf-8", errors="replace")
        if repaired.encode() == msg.data:
            raise BadToolReply("the service's reply is not a tool reply") from None
        try:
            reply = p.ToolReply.model_validate_json(repaired)
        except ValidationError:
            raise BadToolReply("the service's reply is not a tool reply") from None
        notes.append("the reply held invalid UTF-8, replaced with U+FFFD")
    if reply.ok is False and reply.error is None:
        raise BadToolReply("an error reply without an error")
    return reply, notes

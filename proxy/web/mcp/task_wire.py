"""Tasks on the wire, per era: 2025-11-25's task augmentation (`CreateTaskResult {task}`,
tasks/get, tasks/result, tasks/cancel) and 2026-07-28's `io.modelcontextprotocol/tasks`
extension (`resultType: "task"`, tasks/get with the result inlined, tasks/cancel, tasks/update).
The state itself comes from proxy/web/mcp/tasks.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp_types import CLIENT_CAPABILITIES_META_KEY

from proxy.core.notices import describe
from proxy.core.outcome import Outcome
from proxy.web.mcp.protocol import INVALID_PARAMS, McpError
from proxy.web.mcp.tasks import MAX_TASK_ID, POLL_INTERVAL_MS, TaskState, iso
from proxy.web.mcp.tools import call_result
from wire.manifest import ToolManifest

if TYPE_CHECKING:
    from proxy.web.mcp.handlers import Exchange

EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"
IMMEDIATE_RESPONSE = "io.modelcontextprotocol/model-immediate-response"
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
TASK_METHODS = ("tasks/get", "tasks/result", "tasks/cancel", "tasks/update")

ManifestOf = Callable[[str | None], ToolManifest | None]


def declares_extension(params: dict[str, Any] | None) -> bool:
    """Whether a 2026-07-28 request's own client capabilities name the tasks extension."""
    meta = (params or {}).get("_meta")
    caps = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def missing_capability() -> McpError:
    return McpError(MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client capability",
                    {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}, http_status=400)


def task_id_of(params: dict[str, Any] | None) -> str:
    task_id = (params or {}).get("taskId")
    if not isinstance(task_id, str) or not 0 < len(task_id) <= MAX_TASK_ID:
        raise McpError(INVALID_PARAMS, f"params.taskId must be a string of 1 to {MAX_TASK_ID} characters")
    return task_id


def is_task_result(result: dict[str, Any]) -> bool:
    return result.get("resultType") == "task" or isinstance(result.get("task"), dict)


def _task(ex: Exchange, state: TaskState, status: str) -> dict[str, Any]:
    task: dict[str, Any] = {"taskId": state.task_id, "status": status,
                            "statusMessage": state.message, "createdAt": iso(state.created_at),
                            "lastUpdatedAt": iso(state.updated_at)}
    if ex.modern:
        task.update(ttlMs=state.ttl_ms, pollIntervalMs=POLL_INTERVAL_MS)
    else:
        task.update(ttl=state.ttl_ms, pollInterval=POLL_INTERVAL_MS)
    return task


def _status(ex: Exchange, state: TaskState) -> str:
    """2025-11-25 says `failed` for a tool result with isError; 2026-07-28 keeps `failed` for
    JSON-RPC errors and says `completed` for any tool result."""
    if state.status == "completed" and not ex.modern and state.outcome is not None and not state.outcome.ok:
        return "failed"
    return state.status


def created(ex: Exchange, state: TaskState, outcome: Outcome) -> dict[str, Any]:
    """The answer to a tools/call that became a task."""
    if ex.modern:
        return {"resultType": "task", **_task(ex, state, state.status if state.terminal else "working")}
    # A task begins `working` (2025-11-25), even when the call already ended: tasks/get says so.
    return {"task": _task(ex, state, "working"),
            "_meta": {IMMEDIATE_RESPONSE: describe(outcome, state.tool) if not outcome.ok else
                      "The call ran; its result is ready (tasks/result)."}}


def payload(state: TaskState, manifest_of: ManifestOf) -> dict[str, Any]:
    """What the underlying tools/call would have answered, marked with its task."""
    assert state.outcome is not None
    result = call_result(state.outcome, state.tool or "", protocol_errors=False,
                         manifest=manifest_of(state.tool))
    result["_meta"] = {**result.get("_meta", {}), RELATED_TASK: {"taskId": state.task_id}}
    return result


def detailed(ex: Exchange, state: TaskState, manifest_of: ManifestOf) -> dict[str, Any]:
    """tasks/get: the task (2026-07-28 inlines a completed task's result)."""
    task = _task(ex, state, _status(ex, state))
    if not ex.modern:
        return task
    out: dict[str, Any] = {"resultType": "complete", **task}
    if state.status == "completed" and state.outcome is not None:
        result = payload(state, manifest_of)
        result.pop("resultType", None)
        out["result"] = result
    return out


def cancelled(ex: Exchange, state: TaskState) -> dict[str, Any]:
    """tasks/cancel: the task (2025-11-25), an acknowledgement (2026-07-28)."""
    if ex.modern:
        return {"resultType": "complete"}
    return _task(ex, state, _status(ex, state))

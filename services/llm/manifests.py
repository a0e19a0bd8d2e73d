"""The catalog entry of llm.chat: its model enum is the allowlist (plus "auto"); its messages,
tools and tool calls are OpenAI's chat-completions shapes, each bounded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.router.manifests import TASK_LABEL
from services.sdk import Cost, ToolManifest
from services.sdk.service import make_manifest

# A model agent's conversation (proxy/turns) is 2 messages, one per model step and one per
# tool call: a turn's 256 calls at most, a few more refused, fit.
MAX_MESSAGES = 1_024
MAX_CONTENT = 32_000
MAX_TOKENS = 4_096
MAX_TOOLS = 128  # OpenAI's own bound on a request's tools
MAX_TOOL_CALLS = 128  # in one assistant message
MAX_ARGUMENTS = 64_000  # one tool call's arguments (a JSON text)
MAX_TOOL_CALL_ID = 256
# A function's `parameters` is a JSON Schema: free JSON, bounded structurally (as
# external_api.call's body) — this many levels of objects and arrays, strings, item and key counts.
PARAMETERS_DEPTH = 16
MAX_SCHEMA_STRING = 4_096
MAX_SCHEMA_ITEMS = 256
# The arguments as a whole (the sizes above multiply past any real request): a model agent's
# conversation is bounded at 2 MiB (proxy/turns/store.py), its tools are its catalog's.
MAX_ARGS_BYTES = 4 << 20

TOOL_ID = "llm.chat"
# Served only where TOOLPROXY_LLM_BASE_URL is set; its manifest depends on the settings.
TOOL_IDS = (TOOL_ID,)

NO_NUL = "^[^\\x00]*$"
_TEXT = {"type": "string", "maxLength": MAX_CONTENT, "pattern": NO_NUL}
FUNCTION_NAME = {"type": "string", "maxLength": 64, "pattern": "^[A-Za-z0-9_-]{1,64}$"}
_CALL_ID = {"type": "string", "minLength": 1, "maxLength": MAX_TOOL_CALL_ID, "pattern": NO_NUL}

# An assistant message's tool call, as the model gave it: the name is the model's (checked by
# whoever runs the call), the arguments a JSON text.
TOOL_CALL = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "type", "function"],
    "properties": {
        "id": _CALL_ID,
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "arguments"],
            "properties": {"name": {"type": "string", "maxLength": 256, "pattern": NO_NUL},
                           "arguments": {"type": "string", "maxLength": MAX_ARGUMENTS,
                                         "pattern": NO_NUL}},
        },
    },
}
_TOOL_CALLS = {"type": "array", "minItems": 1, "maxItems": MAX_TOOL_CALLS, "items": TOOL_CALL}

# The shapes, told apart by the role (a tool message answers a tool call by its id); an
# assistant message has its content, its tool calls or both — two branches, each a typed
# object, so the schema stays portable (wire/portable_schema.py: anyOf of types, no oneOf).
_ASSISTANT = {"role": {"const": "assistant"},
              "content": {"anyOf": [_TEXT, {"type": "null"}]}, "tool_calls": _TOOL_CALLS}
MESSAGE = {"anyOf": [
    {"type": "object", "additionalProperties": False, "required": ["role", "content"],
     "properties": {"role": {"enum": ["system", "user"]}, "content": _TEXT}},
    {"type": "object", "additionalProperties": False, "required": ["role", "content"],
     "properties": _ASSISTANT},
    {"type": "object", "additionalProperties": False, "required": ["role", "tool_calls"],
     "properties": _ASSISTANT},
    {"type": "object", "additionalProperties": False, "required": ["role", "content", "tool_call_id"],
     "properties": {"role": {"const": "tool"}, "content": _TEXT, "tool_call_id": _CALL_ID}},
]}


def _schema_level(depth: int) -> dict[str, Any]:
    """A JSON value with at most `depth` levels of arrays and objects: one branch per type,
    each with its own size keywords (portable: anyOf of single types)."""
    branches: list[dict[str, Any]] = [{"type": "string", "maxLength": MAX_SCHEMA_STRING},
                                      {"type": "number"}, {"type": "boolean"}, {"type": "null"}]
    if depth > 0:
        inner = {"$ref": f"#/$defs/json{depth - 1}"}
        branches += [{"type": "array", "maxItems": MAX_SCHEMA_ITEMS, "items": inner},
                     {"type": "object", "maxProperties": MAX_SCHEMA_ITEMS,
                      "propertyNames": {"maxLength": 256}, "additionalProperties": inner}]
    return {"anyOf": branches}


FUNCTION_TOOL = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type", "function"],
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name"],
            "properties": {
                "name": FUNCTION_NAME,
                "description": {"type": "string", "maxLength": MAX_SCHEMA_STRING, "pattern": NO_NUL},
                "parameters": {"type": "object", "maxProperties": MAX_SCHEMA_ITEMS,
                               "propertyNames": {"maxLength": 256},
                               "additionalProperties": {"$ref": f"#/$defs/json{PARAMETERS_DEPTH - 1}"}},
                "strict": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
            },
        },
    },
}

TOOL_CHOICE = {"anyOf": [
    {"enum": ["none", "auto", "required"]},
    {"type": "object", "additionalProperties": False, "required": ["type", "function"],
     "properties": {"type": {"const": "function"},
                    "function": {"type": "object", "additionalProperties": False,
                                 "required": ["name"], "properties": {"name": FUNCTION_NAME}}}},
]}

OUTPUT_TOOL_CALLS = {"type": "array", "maxItems": MAX_TOOL_CALLS, "items": TOOL_CALL}


def input_schema(models: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["messages"],
        "dependentRequired": {"tool_choice": ["tools"]},
        "properties": {
            "messages": {"type": "array", "minItems": 1, "maxItems": MAX_MESSAGES, "items": MESSAGE},
            "model": {"type": "string", "maxLength": 128, "enum": [*models, "auto"]},
            "max_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_TOKENS},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "task": TASK_LABEL,
            "cost_ceiling_1t": {"type": "number", "minimum": 0, "maximum": 1_000_000},
            "tools": {"type": "array", "minItems": 1, "maxItems": MAX_TOOLS, "items": FUNCTION_TOOL,
                      "description": "functions the model may call (OpenAI `tools`); its calls "
                                     "come back in message.tool_calls, never run here"},
            "tool_choice": TOOL_CHOICE,
        },
        "$defs": {f"json{d}": _schema_level(d) for d in range(PARAMETERS_DEPTH)},
    }


def llm_manifest(models: Sequence[str], default_max_tokens: int) -> ToolManifest:
    return make_manifest(
        {
            "tool_id": TOOL_ID,
            "version": "1.1.0",
            "category": "C",
            "action": "read",
            "description": (
                "A chat completion from an allowlisted model (default: the first; \"auto\": "
                "the routing rules choose, from task and cost_ceiling_1t). With tools, the "
                "model may answer with tool_calls instead of text. tokens_used is the model's "
                "own usage, counted against your team's token quota."
            ),
            "input_schema": input_schema(models),
            "max_args_bytes": MAX_ARGS_BYTES,
            "output_schema": {
                "type": "object",
                "required": ["message", "model", "usage", "finish_reason"],
                "properties": {
                    "message": {
                        "type": "object",
                        "required": ["role", "content"],
                        "properties": {"role": {"const": "assistant"}, "content": {"type": "string"},
                                       "tool_calls": OUTPUT_TOOL_CALLS},
                    },
                    "model": {"type": "string"},
                    "usage": {
                        "type": "object",
                        "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
                        "properties": {
                            "prompt_tokens": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                            "completion_tokens": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                            "total_tokens": {"type": "integer", "minimum": 0},
                            "estimated": {"type": "boolean"},
                        },
                    },
                    "finish_reason": {"type": "string", "maxLength": 32},
                    "truncated": {"type": "boolean"},
                    "route": {"type": "object"},
                },
            },
            "cost": Cost(per_token=0.000002),
            "network": True,
            "timeout_ms": 5_000,
            # The messages' and tools' JSON size (4 bytes a token) and the completion's bound.
            "token_estimate": {"prompt_args": ["messages", "tools"], "bytes_per_token": 4.0,
                               "completion_arg": "max_tokens", "default_completion": default_max_tokens},
        }
    )

"""The catalog entry of llm.chat: its model enum is the allowlist (plus "auto")."""

from __future__ import annotations

from collections.abc import Sequence

from services.router.manifest import TASK_LABEL
from services.sdk import Cost, ToolManifest
from services.sdk.service import make_manifest

MAX_MESSAGES = 64
MAX_CONTENT = 32_000
MAX_TOKENS = 4_096

_TEXT = {"type": "string", "maxLength": MAX_CONTENT, "pattern": "^[^\\x00]*$"}


def llm_manifest(models: Sequence[str], default_max_tokens: int) -> ToolManifest:
    return make_manifest(
        {
            "tool_id": "llm.chat",
            "version": "1.0.0",
            "category": "C",
            "action": "read",
            "description": (
                "A chat completion from an allowlisted model (default: the first; \"auto\": "
                "the routing rules choose, from task and cost_ceiling_1t). tokens_used is the "
                "model's own usage, counted against your team's token quota."
            ),
            "input_schema": {
                "type": "object",
                "additionalProperties": False,
                "required": ["messages"],
                "properties": {
                    "messages": {
                        "type": "array", "minItems": 1, "maxItems": MAX_MESSAGES,
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["role", "content"],
                            "properties": {"role": {"enum": ["system", "user", "assistant"]},
                                           "content": _TEXT},
                        },
                    },
                    "model": {"type": "string", "maxLength": 128, "enum": [*models, "auto"]},
                    "max_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_TOKENS},
                    "temperature": {"type": "number", "minimum": 0, "maximum": 2},
                    "task": TASK_LABEL,
                    "cost_ceiling_1t": {"type": "number", "minimum": 0, "maximum": 1_000_000},
                },
            },
            "output_schema": {
                "type": "object",
                "required": ["message", "model", "usage", "finish_reason"],
                "properties": {
                    "message": {
                        "type": "object",
                        "required": ["role", "content"],
                        "properties": {"role": {"const": "assistant"}, "content": {"type": "string"}},
                    },
                    "model": {"type": "string"},
                    "usage": {
                        "type": "object",
                        "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
                        "properties": {
                            "prompt_tokens": {"type": ["integer", "null"]},
                            "completion_tokens": {"type": ["integer", "null"]},
                            "total_tokens": {"type": "integer", "minimum": 0},
                            "estimated": {"type": "boolean"},
                        },
                    },
                    "finish_reason": {"type": "string"},
                    "truncated": {"type": "boolean"},
                    "route": {"type": "object"},
                },
            },
            "cost": Cost(per_token=0.000002),
            "network": True,
            "timeout_ms": 5_000,
            # The messages' JSON size (4 bytes a token) and the completion's bound.
            "token_estimate": {"prompt_args": ["messages"], "bytes_per_token": 4.0,
                               "completion_arg": "max_tokens", "default_completion": default_max_tokens},
        }
    )

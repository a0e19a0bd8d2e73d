"""Arguments against one tool: their size bound first (cheap), then the input schema, sizes
first and stopping early, so a call's validation cost is bounded by the tool's own bounds."""

from __future__ import annotations

from typing import Any

import orjson
from jsonschema import Draft202012Validator

from proxy.errors import InvalidArgs
from services.sdk.bounds import first_error, size_first
from services.sdk.manifest import ToolManifest


def args_size(args: dict[str, Any]) -> int:
    """The arguments' size as compact JSON (orjson's encoding)."""
    try:
        return len(orjson.dumps(args))
    except orjson.JSONEncodeError:
        raise InvalidArgs("args must be JSON with integers within 64 bits") from None


class ArgsChecker:
    """Built once per manifest; `check` raises InvalidArgs for args the tool must not get."""

    def __init__(self, manifest: ToolManifest) -> None:
        self.tool_id = manifest.tool_id
        assert manifest.max_args_bytes is not None
        self.max_bytes = manifest.max_args_bytes
        self._validator = Draft202012Validator(size_first(manifest.input_schema))

    def check(self, args: dict[str, Any], body_bytes: int | None = None) -> None:
        """`body_bytes`, when the surface knows it, is the size of the request body the args
        came in: a body within the bound needs no measuring."""
        if body_bytes is None or body_bytes > self.max_bytes:
            size = args_size(args)
            if size > self.max_bytes:
                raise InvalidArgs(f"args of {size} bytes exceed {self.tool_id}'s bound of "
                                  f"{self.max_bytes} bytes")
        error = first_error(self._validator, args)
        if error is not None:
            message = error.message
            if len(message) > 300:  # the message quotes the whole instance: name the rule
                message = f"fails {error.validator} {str(error.validator_value)[:200]}"
            raise InvalidArgs(
                f"args do not match {self.tool_id}'s input schema at {error.json_path}: {message}"
            )

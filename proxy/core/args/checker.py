"""Arguments against one tool: their size bound first (cheap), then the input schema, so a
call's validation cost is bounded by the tool's own bounds.

The schema is checked by jsonschema-rs (compiled once per manifest; a thousand-item list in
about 70 µs, where the pure-Python validator takes 5-12 ms of the event loop). Its first error
names what is wrong; where that error is only "valid under none of oneOf/anyOf", the Python
validator (sizes first, stopping early) finds the branch's own, clearer message."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import orjson
from jsonschema import Draft202012Validator

from proxy.core.errors import InvalidArgs
from wire.bounds import first_error, size_first
from wire.manifest import ToolManifest

_MESSAGE_MAX = 300


def args_size(args: dict[str, Any]) -> int:
    """The arguments' size as compact JSON (orjson's encoding)."""
    try:
        return len(orjson.dumps(args))
    except orjson.JSONEncodeError:
        raise InvalidArgs("args must be JSON with integers within 64 bits") from None


def json_path(parts: list[str | int]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _short(message: str, rule: str, value: object) -> str:
    if len(message) <= _MESSAGE_MAX:
        return message
    return f"fails {rule} {str(value)[:200]}"  # the message quotes the whole instance


def _at(schema: Any, path: list[str | int]) -> Any:
    for part in path:
        try:
            schema = schema[part]
        except (KeyError, IndexError, TypeError):
            return ""
    return schema


class ArgsChecker:
    """Built once per manifest; `check` raises InvalidArgs for args the tool must not get."""

    def __init__(self, manifest: ToolManifest) -> None:
        self.tool_id = manifest.tool_id
        assert manifest.max_args_bytes is not None
        self.max_bytes = manifest.max_args_bytes
        self._schema = manifest.input_schema
        try:
            self._fast: Any = jsonschema_rs.Draft202012Validator(manifest.input_schema)
        except Exception:  # a construct the Rust validator does not take: Python alone
            self._fast = None
        self._explainer: Draft202012Validator | None = None

    def check(self, args: dict[str, Any], body_bytes: int | None = None) -> None:
        """`body_bytes`, when the surface knows it, is the size of the request body the args
        came in: a body within the bound needs no measuring."""
        if body_bytes is None or body_bytes > self.max_bytes:
            size = args_size(args)
            if size > self.max_bytes:
                raise InvalidArgs(f"args of {size} bytes exceed {self.tool_id}'s bound of "
                                  f"{self.max_bytes} bytes")
        try:
            if self._fast is not None and self._fast.is_valid(args):
                return
        except Exception:  # e.g. an integer beyond 64 bits: the Python validator decides
            self._python_decides(args)
            return
        where, message = self._explain(args)
        raise InvalidArgs(f"args do not match {self.tool_id}'s input schema at {where}: {message}")

    def _python_decides(self, args: dict[str, Any]) -> None:
        if self._explainer is None:
            self._explainer = Draft202012Validator(size_first(self._schema))
        detail = first_error(self._explainer, args)
        if detail is not None:
            raise InvalidArgs(f"args do not match {self.tool_id}'s input schema at "
                              f"{detail.json_path}: "
                              f"{_short(detail.message, str(detail.validator), detail.validator_value)}")

    def _explain(self, args: dict[str, Any]) -> tuple[str, str]:
        error = next(self._fast.iter_errors(args), None) if self._fast is not None else None
        if error is not None and type(error.kind).__name__ not in ("OneOfNotValid", "AnyOf"):
            path = list(error.schema_path)
            return json_path(list(error.instance_path)), _short(
                error.message, str(path[-1]) if path else "schema", _at(self._schema, path))
        if self._explainer is None:
            self._explainer = Draft202012Validator(size_first(self._schema))
        detail = first_error(self._explainer, args)
        if detail is None:  # the two validators disagree: refuse with what the fast one said
            return "$", error.message[:_MESSAGE_MAX] if error is not None else "invalid"
        return detail.json_path, _short(detail.message, str(detail.validator), detail.validator_value)

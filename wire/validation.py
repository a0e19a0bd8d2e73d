"""JSON Schema validation on the hot path: a compiled Rust validator (jsonschema-rs) answers
"valid?" in about a microsecond; only an invalid instance pays for the Python validator's
error, so messages stay those of `jsonschema` — found with bounded work: sizes checked first,
and the most relevant of the first few errors (wire/bounds.py), so an invalid list of
60,000 items is not walked item by item."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from wire.bounds import first_error, size_first


class SchemaValidator:
    def __init__(self, schema: dict[str, Any]) -> None:
        self._py = Draft202012Validator(size_first(schema))
        try:
            self._rs: Any = jsonschema_rs.validator_for(schema)
        except Exception:  # a construct the Rust validator does not take: Python alone
            self._rs = None

    def problem(self, instance: Any) -> ValidationError | None:
        """None when valid, else the most relevant error."""
        if self._rs is not None:
            try:
                if self._rs.is_valid(instance):
                    return None
            except Exception:  # e.g. an integer beyond 64 bits: let the Python one decide
                pass
        return first_error(self._py, instance)

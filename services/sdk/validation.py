"""JSON Schema validation on the hot path: a compiled Rust validator (jsonschema-rs) answers
"valid?" in about a microsecond; only an invalid instance pays for the Python validator's
best-match error, so messages stay those of `jsonschema`."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match


class SchemaValidator:
    def __init__(self, schema: dict[str, Any]) -> None:
        self._py = Draft202012Validator(schema)
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
        return best_match(self._py.iter_errors(instance))

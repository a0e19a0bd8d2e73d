"""The shape of the ids that travel in tokens, NATS headers, log lines and policy input."""

from __future__ import annotations

import re

# Ids travel into NATS headers, log lines and policy input: a tight, ASCII-only alphabet.
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}", re.ASCII)
# For pydantic `pattern=`, which searches (not fullmatch): anchored, and \z-strict in pydantic's
# Rust regex engine (no trailing-newline loophole).
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$"


def is_valid_id(value: object) -> bool:
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None

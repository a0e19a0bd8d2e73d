"""Canonical hashes of arguments: what approvals bind to and confidential logs keep instead."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson


def canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def args_digest(args: Any) -> tuple[str, int]:
    """(sha256 hex of the canonical JSON, its size in bytes)."""
    data = canonical(args)
    return hashlib.sha256(data).hexdigest(), len(data)

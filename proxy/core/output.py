"""Tool outputs made safe to hand back: sanitized text, checked against the tool's output
schema, bounded in size (a larger output is kept whole as an artifact and referenced)."""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import orjson

from wire.validation import SchemaValidator

# C0 controls other than tab, newline and carriage return; DEL; lone UTF-16 surrogates.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def sanitize(value: Any) -> tuple[Any, int]:
    """(the value with unsafe characters replaced by U+FFFD in every string, how many)."""
    if isinstance(value, str):
        cleaned, n = _UNSAFE.subn("\ufffd", value)
        return cleaned, n
    if isinstance(value, list):
        total = 0
        out = []
        for v in value:
            c, n = sanitize(v)
            out.append(c)
            total += n
        return out, total
    if isinstance(value, dict):
        total = 0
        out_d: dict[str, Any] = {}
        for k, v in value.items():
            ck, nk = sanitize(k)
            cv, nv = sanitize(v)
            out_d[ck] = cv
            total += nk + nv
        return out_d, total
    return value, 0


def schema_problem(validator: SchemaValidator, output: Any) -> str | None:
    error = validator.problem(output)
    if error is None:
        return None
    message = error.message if len(error.message) <= 300 else error.message[:299] + "…"
    return f"output does not match the tool's output schema at {error.json_path}: {message}"


@dataclass(slots=True)
class Shaped:
    output: Any
    diagnostics: list[str] = field(default_factory=list)
    artifact: dict[str, Any] | None = None  # the reference, when the output went to storage


async def shape_output(
    pool: asyncpg.Pool,
    output: Any,
    *,
    team_id: str,
    call_id: str,
    max_inline_bytes: int,
) -> Shaped:
    """Sanitize, then keep inline if small enough; else store as an artifact."""
    output, replaced = sanitize(output)
    shaped = Shaped(output)
    if replaced:
        shaped.diagnostics.append(f"{replaced} control or invalid character(s) replaced with U+FFFD")
    encoded = orjson.dumps(output)
    if len(encoded) <= max_inline_bytes:
        return shaped
    artifact_id = uuid.uuid4()
    digest = hashlib.sha256(encoded).hexdigest()
    await pool.execute(
        """INSERT INTO artifacts (artifact_id, team_id, call_id, kind, media_type, bytes, sha256, content)
           VALUES ($1, $2, $3, 'output', 'application/json', $4, $5, $6)""",
        artifact_id, team_id, uuid.UUID(call_id), len(encoded), digest, encoded,
    )
    shaped.output = None
    shaped.artifact = {
        "artifact_id": str(artifact_id),
        "kind": "output",
        "media_type": "application/json",
        "bytes": len(encoded),
        "sha256": digest,
        "href": f"/v1/artifacts/{artifact_id}",
    }
    shaped.diagnostics.append(
        f"output of {len(encoded)} bytes exceeds the {max_inline_bytes}-byte inline bound; "
        f"kept whole as artifact {artifact_id}"
    )
    return shaped


async def read_artifact(pool: asyncpg.Pool, artifact_id: str, team_id: str) -> asyncpg.Record | None:
    try:
        aid = uuid.UUID(artifact_id)
    except ValueError:
        return None
    return await pool.fetchrow(
        "SELECT media_type, content, sha256 FROM artifacts WHERE artifact_id = $1 AND team_id = $2",
        aid, team_id,
    )

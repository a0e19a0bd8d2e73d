"""Upstreams and their tools in Postgres: registrations (the secret sealed, never shown), the
candidates a sync finds, classification and pins."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from services.upstreams.definitions import definition_hash, flags_of

CHANNEL = "toolproxy_upstreams"
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"

_COLUMNS = """name, transport, url, command, args, secret_header, secret_sealed, secret_key_id,
              timeout_ms, max_concurrency, created_by, created_at, synced_at, sync_error,
              document, document_url"""


def sealed_name(name: str) -> str:
    """What an upstream's sealed secret is bound to (never opens as an external API's)."""
    return f"upstream:{name}"


@dataclass(frozen=True, slots=True)
class Upstream:
    name: str
    transport: str
    url: str | None
    command: str | None
    args: tuple[str, ...]
    secret_header: str | None
    secret_sealed: bytes | None
    secret_key_id: str | None
    timeout_ms: int
    max_concurrency: int
    created_by: str
    created_at: datetime
    synced_at: datetime | None
    sync_error: str | None
    document: dict[str, Any] | None = None  # openapi: the document as registered
    document_url: str | None = None  # openapi: where each sync reads it again

    @property
    def credentials(self) -> str | None:
        """How the bridge authenticates: a static header, OAuth client credentials, or nothing."""
        if self.secret_sealed is None:
            return None
        return "header" if self.secret_header else "oauth_client_credentials"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "transport": self.transport, "url": self.url,
                "command": self.command, "args": list(self.args),
                "secret_header": self.secret_header, "has_secret": self.secret_sealed is not None,
                "credentials": self.credentials,
                "timeout_ms": self.timeout_ms, "max_concurrency": self.max_concurrency,
                "created_by": self.created_by, "created_at": self.created_at.isoformat(),
                "synced_at": self.synced_at.isoformat() if self.synced_at else None,
                "sync_error": self.sync_error, "document_url": self.document_url}


def _upstream(r: asyncpg.Record) -> Upstream:
    return Upstream(name=r["name"], transport=r["transport"], url=r["url"], command=r["command"],
                    args=tuple(r["args"]), secret_header=r["secret_header"],
                    secret_sealed=r["secret_sealed"], secret_key_id=r["secret_key_id"],
                    timeout_ms=r["timeout_ms"], max_concurrency=r["max_concurrency"],
                    created_by=r["created_by"], created_at=r["created_at"],
                    synced_at=r["synced_at"], sync_error=r["sync_error"], document=r["document"],
                    document_url=r["document_url"])


async def insert(pool: asyncpg.Pool, *, name: str, transport: str, url: str | None,
                 command: str | None, args: list[str], secret_header: str | None,
                 sealed: tuple[bytes, str] | None, timeout_ms: int, max_concurrency: int,
                 by: str, document: dict[str, Any] | None = None,
                 document_url: str | None = None) -> Upstream | None:
    """None: the name is taken."""
    row = await pool.fetchrow(
        f"""INSERT INTO upstreams (name, transport, url, command, args, secret_header,
                secret_sealed, secret_key_id, timeout_ms, max_concurrency, created_by, document,
                document_url)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
            ON CONFLICT (name) DO NOTHING RETURNING {_COLUMNS}""",
        name, transport, url, command, args, secret_header, sealed[0] if sealed else None,
        sealed[1] if sealed else None, timeout_ms, max_concurrency, by, document, document_url)
    return _upstream(row) if row else None


async def get(pool: asyncpg.Pool, name: str) -> Upstream | None:
    row = await pool.fetchrow(f"SELECT {_COLUMNS} FROM upstreams WHERE name = $1", name)
    return _upstream(row) if row else None


async def list_all(pool: asyncpg.Pool) -> list[Upstream]:
    return [_upstream(r) for r in await pool.fetch(
        f"SELECT {_COLUMNS} FROM upstreams ORDER BY name LIMIT 1000")]


async def delete(pool: asyncpg.Pool, name: str) -> bool:
    return (await pool.execute("DELETE FROM upstreams WHERE name = $1", name)) == "DELETE 1"


# --- tools ---------------------------------------------------------------------------------

_TOOL_COLUMNS = """upstream, tool, tool_id, state, hash, definition, flags, pinned_hash,
                   pinned_definition, classification, classified_by, classified_at, seen_at"""


async def tools(pool: asyncpg.Pool, upstream: str | None = None) -> list[asyncpg.Record]:
    return await pool.fetch(
        f"""SELECT {_TOOL_COLUMNS} FROM upstream_tools
            WHERE ($1::text IS NULL OR upstream = $1) ORDER BY upstream, tool LIMIT 5000""",
        upstream)


async def tool(pool: asyncpg.Pool, upstream: str, name: str) -> asyncpg.Record | None:
    return await pool.fetchrow(
        f"SELECT {_TOOL_COLUMNS} FROM upstream_tools WHERE upstream = $1 AND tool = $2",
        upstream, name)


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    changed: list[str]  # tools whose definition left their pin in this sync
    gone: list[str]
    new: list[str]


async def record_sync(pool: asyncpg.Pool, upstream: str,
                      definitions: list[dict[str, Any]]) -> SyncOutcome:
    """Compare what the upstream lists now with what is kept: new tools become candidates, a
    classified tool whose hash differs from its pin becomes `changed`, one that returns to its
    pin `classified` again, a vanished one `gone` (a gone candidate is forgotten)."""
    current = {d["name"]: d for d in definitions}
    changed, gone, new = [], [], []
    async with pool.acquire() as conn, conn.transaction():
        transport = await conn.fetchval(
            "SELECT transport FROM upstreams WHERE name = $1 FOR UPDATE", upstream)
        source = "openapi" if transport == "openapi" else "upstream"
        kept = {r["tool"]: r for r in await conn.fetch(
            "SELECT tool, state, hash, pinned_hash FROM upstream_tools WHERE upstream = $1", upstream)}
        for name, d in current.items():
            h = definition_hash(d)
            row = kept.get(name)
            if row is None:
                new.append(name)
                await conn.execute(
                    """INSERT INTO upstream_tools (upstream, tool, state, hash, definition, flags, source)
                       VALUES ($1, $2, 'candidate', $3, $4, $5, $6)""",
                    upstream, name, h, d, flags_of(d), source)
                continue
            if row["pinned_hash"] is None:
                state = "candidate"
            else:
                state = "classified" if h == row["pinned_hash"] else "changed"
            if state == "changed" and row["state"] != "changed":
                changed.append(name)
            if row["hash"] != h or row["state"] != state:
                await conn.execute(
                    """UPDATE upstream_tools SET state = $3, hash = $4, definition = $5, flags = $6,
                           seen_at = now() WHERE upstream = $1 AND tool = $2""",
                    upstream, name, state, h, d, flags_of(d))
        for name, row in kept.items():
            if name in current:
                continue
            if row["pinned_hash"] is None:
                await conn.execute(
                    "DELETE FROM upstream_tools WHERE upstream = $1 AND tool = $2", upstream, name)
            elif row["state"] != "gone":
                gone.append(name)
                await conn.execute(
                    "UPDATE upstream_tools SET state = 'gone' WHERE upstream = $1 AND tool = $2",
                    upstream, name)
        await conn.execute(
            "UPDATE upstreams SET synced_at = now(), sync_error = NULL WHERE name = $1", upstream)
    return SyncOutcome(changed=changed, gone=gone, new=new)


async def record_sync_error(pool: asyncpg.Pool, upstream: str, error: str) -> None:
    await pool.execute("UPDATE upstreams SET sync_error = $2 WHERE name = $1", upstream, error[:500])


async def classify(pool: asyncpg.Pool, upstream: str, name: str, *, tool_id: str,
                   classification: dict[str, Any], by: str) -> asyncpg.Record | None:
    """Pin the current definition under `tool_id`; None if the tool is not a candidate or
    classified one (a changed tool is approved, a gone one cannot be). Raises
    asyncpg.UniqueViolationError if another upstream's tool holds the name."""
    return await pool.fetchrow(
        f"""UPDATE upstream_tools SET state = 'classified', tool_id = $3, classification = $4,
                pinned_hash = hash, pinned_definition = definition, classified_by = $5,
                classified_at = now()
            WHERE upstream = $1 AND tool = $2 AND state IN ('candidate', 'classified')
            RETURNING {_TOOL_COLUMNS}""",
        upstream, name, tool_id, classification, by)


async def approve(pool: asyncpg.Pool, upstream: str, name: str, expected_hash: str,
                  by: str) -> asyncpg.Record | None:
    """Re-pin a changed tool to its current definition, only if that is the hash governance saw."""
    return await pool.fetchrow(
        f"""UPDATE upstream_tools SET state = 'classified', pinned_hash = hash,
                pinned_definition = definition, classified_by = $4, classified_at = now()
            WHERE upstream = $1 AND tool = $2 AND state = 'changed' AND hash = $3
            RETURNING {_TOOL_COLUMNS}""",
        upstream, name, expected_hash, by)


async def pin_state(pool: asyncpg.Pool, upstream: str, name: str) -> tuple[str, bool] | None:
    """(state, current hash equals the pin) of one tool, read at call time."""
    row = await pool.fetchrow(
        "SELECT state, hash = pinned_hash AS pinned FROM upstream_tools WHERE upstream = $1 AND tool = $2",
        upstream, name)
    return (row["state"], bool(row["pinned"])) if row else None

"""The SQL of the file service: list, read (with an artifact copy), write and delete in one
transaction each, keeping the team's usage row in step."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from services.files.config import FileSettings
from services.files.errors import TeamFileLimit, TeamStorageFull

_COLUMNS = "path, size, sha256, media_type, tags, updated_at"

LIST = f"""SELECT {_COLUMNS} FROM files
           WHERE team_id = $1 AND path ^@ $2 AND path > $3
           ORDER BY path LIMIT $4"""

# One statement, one snapshot: the file's head, and for a file larger than the inline bound
# (when the call may keep one) the whole file as an artifact, copied inside Postgres rather
# than through this process.
READ = f"""
WITH f AS (SELECT * FROM files WHERE team_id = $1 AND path = $2),
art AS (
    INSERT INTO artifacts (artifact_id, team_id, call_id, kind, media_type, bytes, sha256, content)
    SELECT $4, team_id, $5, 'file', media_type, size, sha256, content FROM f
    WHERE $5::uuid IS NOT NULL AND f.size >= $3
    RETURNING artifact_id
)
SELECT {_COLUMNS}, substring(content FROM 1 FOR $3) AS head, (SELECT count(*) FROM art) AS copied
FROM f
"""

_LOCK_USAGE = """INSERT INTO file_usage AS u (team_id) VALUES ($1)
                 ON CONFLICT (team_id) DO UPDATE SET files = u.files
                 RETURNING files, bytes"""
_EXISTING = "SELECT size FROM files WHERE team_id = $1 AND path = $2"
_UPSERT = """INSERT INTO files AS f (team_id, path, size, sha256, media_type, tags, content,
                                     created_by, updated_by)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
             ON CONFLICT (team_id, path) DO UPDATE
                 SET size = EXCLUDED.size, sha256 = EXCLUDED.sha256,
                     media_type = EXCLUDED.media_type, tags = EXCLUDED.tags,
                     content = EXCLUDED.content, updated_by = EXCLUDED.updated_by,
                     updated_at = now()"""
_USAGE = "UPDATE file_usage SET files = files + $2, bytes = bytes + $3 WHERE team_id = $1"
_DELETE = "DELETE FROM files WHERE team_id = $1 AND path = $2 RETURNING size"


@dataclass(frozen=True, slots=True)
class Blob:
    path: str
    data: bytes
    sha256: str
    media_type: str
    tags: list[str]


async def list_files(pool: asyncpg.Pool, team: str, prefix: str, after: str,
                     limit: int) -> list[asyncpg.Record]:
    return await pool.fetch(LIST, team, prefix, after, limit)


async def read_file(pool: asyncpg.Pool, team: str, path: str, head_bytes: int,
                    artifact_id: uuid.UUID, call_id: uuid.UUID | None) -> asyncpg.Record | None:
    """The file's metadata and first `head_bytes`; a file of `head_bytes` or more is also
    kept whole as artifact `artifact_id` of `call_id` (unless that is None)."""
    return await pool.fetchrow(READ, team, path, head_bytes, artifact_id, call_id)


async def write_file(pool: asyncpg.Pool, team: str, agent: str, blob: Blob,
                     limits: FileSettings) -> bool:
    """Create or replace, all or nothing. True if the file is new. The team's usage row is
    locked first, so a team's writers take turns and its limits hold under concurrency."""
    size = len(blob.data)
    async with pool.acquire() as conn, conn.transaction():
        usage = await conn.fetchrow(_LOCK_USAGE, team)
        old = await conn.fetchval(_EXISTING, team, blob.path)
        new_files = usage["files"] + (1 if old is None else 0)
        new_bytes = usage["bytes"] - (old or 0) + size
        if new_files > limits.team_max_files:
            raise TeamFileLimit(f"your team already stores {usage['files']} files, the most it may")
        if new_bytes > limits.team_max_bytes:
            raise TeamStorageFull(
                f"this write would bring your team's storage to {new_bytes} bytes, over its "
                f"{limits.team_max_bytes}-byte limit")
        await conn.execute(_UPSERT, team, blob.path, size, blob.sha256, blob.media_type,
                           blob.tags, blob.data, agent)
        await conn.execute(_USAGE, team, new_files - usage["files"], new_bytes - usage["bytes"])
    return old is None


async def delete_file(pool: asyncpg.Pool, team: str, path: str) -> bool:
    async with pool.acquire() as conn, conn.transaction():
        await conn.fetchrow(_LOCK_USAGE, team)
        size = await conn.fetchval(_DELETE, team, path)
        if size is None:
            return False
        await conn.execute(_USAGE, team, -1, -size)
    return True

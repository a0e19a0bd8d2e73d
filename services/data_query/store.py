"""data.query's named queries and how one runs: read-only, team-scoped, time-bounded SQL on
Postgres, its values made JSON."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import asyncpg

from services.projects.manifests import STATUSES as PROJECT_STATUSES
from services.sdk import ToolError
from services.sdk.schema import tags
from services.tasks.manifests import STATUSES as TASK_STATUSES

STATEMENT_TIMEOUT_MS = 2_000


@dataclass(frozen=True, slots=True)
class NamedQuery:
    """One query an agent may run: its params schema and SQL.

    The SQL's $1 is always the caller's team and its last parameter the row limit; `args` turns
    validated params into the parameters in between.
    """

    name: str
    description: str
    params_schema: dict[str, Any]
    sql: str
    args: Callable[[dict[str, Any]], list[Any]]


def _usage_day(params: dict[str, Any]) -> list[Any]:
    if "day" not in params:
        return [dt.datetime.now(dt.UTC).date()]
    try:
        return [dt.date.fromisoformat(params["day"])]
    except ValueError:
        raise ToolError(f"bad params for usage_by_tool: {params['day']!r} is not a date") from None


QUERIES: dict[str, NamedQuery] = {
    q.name: q
    for q in (
        NamedQuery(
            name="tasks_by_status",
            description="your team's tasks with one status, newest first",
            params_schema={
                "type": "object",
                "additionalProperties": False,
                "required": ["status"],
                "properties": {"status": {"enum": TASK_STATUSES}},
            },
            sql=(
                "SELECT task_id, title, status, created_by, created_at FROM tasks"
                " WHERE team_id = $1 AND status = $2 ORDER BY created_at DESC LIMIT $3"
            ),
            args=lambda p: [p["status"]],
        ),
        NamedQuery(
            name="usage_by_tool",
            description="your team's usage of one UTC day (default today), summed per tool",
            params_schema={
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "day": {"type": "string", "maxLength": 10,
                            "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                },
            },
            sql=(
                "SELECT tool, sum(calls)::bigint AS calls, sum(invocations)::bigint AS invocations,"
                " sum(tokens_used)::bigint AS tokens_used, sum(cost_1t) AS cost_1t"
                " FROM usage_daily WHERE team_id = $1 AND day = $2"
                " GROUP BY tool ORDER BY tool LIMIT $3"
            ),
            args=_usage_day,
        ),
        NamedQuery(
            name="files_by_tag",
            description="your team's files carrying one tag, in path order",
            params_schema={
                "type": "object",
                "additionalProperties": False,
                "required": ["tag"],
                "properties": {"tag": tags()["items"]},
            },
            sql=(
                "SELECT path, size, media_type, sha256, tags, updated_at FROM files"
                " WHERE team_id = $1 AND tags @> ARRAY[$2]::text[] ORDER BY path LIMIT $3"
            ),
            args=lambda p: [p["tag"]],
        ),
        NamedQuery(
            name="projects_by_status",
            description="your team's projects with one status, most recently updated first, "
            "with their task counts",
            params_schema={
                "type": "object",
                "additionalProperties": False,
                "required": ["status"],
                "properties": {"status": {"enum": PROJECT_STATUSES}},
            },
            sql=(
                "SELECT p.project_id, p.name, p.status, p.version, p.updated_at,"
                " count(t.task_id) AS tasks,"
                " count(t.task_id) FILTER (WHERE t.status <> 'done') AS open_tasks"
                " FROM projects p LEFT JOIN tasks t"
                " ON t.team_id = p.team_id AND t.project_id = p.project_id"
                " WHERE p.team_id = $1 AND p.status = $2"
                " GROUP BY p.project_id ORDER BY p.updated_at DESC, p.project_id LIMIT $3"
            ),
            args=lambda p: [p["status"]],
        ),
    )
}


def json_safe(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


async def fetch(pool: asyncpg.Pool, query: NamedQuery, values: list[Any]) -> list[asyncpg.Record]:
    """The query's rows, in a read-only transaction under its statement timeout."""
    try:
        async with pool.acquire() as conn, conn.transaction(readonly=True):
            await conn.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
            return await conn.fetch(query.sql, *values)  # type: ignore[no-any-return]
    except asyncpg.QueryCanceledError:
        raise ToolError(
            f"query {query.name} exceeded its {STATEMENT_TIMEOUT_MS} ms time limit"
        ) from None

"""Journal entries written to Postgres in one statement per batch: Postgres reads the entries'
JSON itself (usage, call rows, decisions, events) and refuses the whole batch if any field
does not fit its column."""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson

from pdp.decision_log import decisions_ctes
from proxy.records.calls import calls_ctes, fold_docs
from proxy.records.entry import Entry, entry_doc
from proxy.records.events import EVENTS_NOTIFY, events_ctes
from proxy.records.usage import usage_ctes


def _array(part: str) -> str:
    return f"jsonb_array_elements(CASE WHEN jsonb_typeof(j.e->'{part}') = 'array' THEN j.e->'{part}' ELSE '[]' END)"


# A batch of entries in one statement (one round trip, one implicit transaction): Postgres
# reads the entries' JSON itself, nothing is decoded or encoded value by value here. It
# refuses the whole batch if any field does not fit its column.
_WRITE = f"""
WITH journal AS (
    SELECT a.e, a.idx FROM jsonb_array_elements($1::text::jsonb) WITH ORDINALITY AS a(e, idx)
),
{usage_ctes("SELECT j.e->'usage' AS x FROM journal j WHERE jsonb_typeof(j.e->'usage') = 'object'")},
{calls_ctes("SELECT j.e->'call' AS x FROM journal j WHERE jsonb_typeof(j.e->'call') = 'object'")},
{decisions_ctes(f"SELECT d.x FROM journal j, {_array('decisions')} AS d(x)")},
{events_ctes(f"SELECT v.x, j.idx AS o1, v.i AS o2 FROM journal j, {_array('events')} WITH ORDINALITY AS v(x, i)")}
SELECT (SELECT count(*) FROM usage_new) AS usage, {EVENTS_NOTIFY} AS teams_notified
"""


async def write_raw(conn: asyncpg.Connection, messages: list[bytes]) -> int:
    """Journal messages as they came (JSON entries; no call twice): the usage records that
    were new."""
    row = await conn.fetchrow(_WRITE, (b"[" + b",".join(messages) + b"]").decode())
    assert row is not None
    return int(row["usage"])


async def write_docs(conn: asyncpg.Connection, docs: list[dict[str, Any]]) -> int:
    """Entries in their JSON form, a call's records folded into one first."""
    calls = fold_docs([d["call"] for d in docs if d.get("call")])
    if len(calls) < sum(1 for d in docs if d.get("call")):
        docs = [*({k: v for k, v in d.items() if k != "call"} for d in docs), *({"call": c} for c in calls)]
    return await write_raw(conn, [orjson.dumps(d) for d in docs])


async def write_entries(conn: asyncpg.Connection, entries: list[Entry]) -> int:
    return await write_docs(conn, [entry_doc(e) for e in entries])

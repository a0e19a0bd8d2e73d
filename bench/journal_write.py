"""Benchmark: what writing one call's journal entry costs Postgres, in the backend's CPU, by the
writer's own statement (proxy.records.journal.write_raw) at several batch sizes, beside what reading
the same JSON text costs alone (as text, as json, as jsonb). Entries are shaped like a `math`
call's (usage, call row, decision with its input and output, three events: ~3.6 KB), each with
ids of its own, written into an embedded Postgres with the project's migrations. Run by hand:
`python bench/journal_write.py [--entries 3200]`.

What it tells: how much of the ~0.2 ms of Postgres CPU per call under load is the JSON's
conversion and how much the rows and their indexes, and what batching buys.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import asyncpg
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.procs import Sampler  # noqa: E402
from infra.db import migrate  # noqa: E402
from infra.embedded.postgres import EmbeddedPostgres  # noqa: E402
from infra.embedded.ports import free_port  # noqa: E402
from infra.ids import new_id  # noqa: E402
from proxy.records.batch_write import write_raw


def entry(i: int, now: datetime) -> bytes:
    """A completed `math` call's entry, as the proxy journals it (fresh ids, expression i)."""
    call_id, decision_id, result_id = new_id(), new_id(), new_id()
    t0, t1, t2 = (now + timedelta(microseconds=i * 10 + d) for d in (0, 4_000, 7_000))
    expr, value = f"{i}+2*4", i + 8
    common = {"team_id": "bench", "agent_id": "bench-agent"}
    response = {"ok": True, "status": "COMPLETED", "output": {"value": value}, "tokens_used": 0,
                "cost_1t": 0.00002, "call_id": call_id, "result_id": result_id,
                "decision_id": decision_id}
    reasons = ["category_a_default", "override_allow"]

    def event(type_: str, at: datetime, refs: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
        return {"event_id": new_id(), "team_id": "bench", "type": type_, "time": at, "run_id": "run-1",
                "call_id": call_id, "turn_id": None, "refs": refs, "payload": payload}

    doc = {
        "usage": {"call_id": call_id, "result_id": result_id, "decision_id": decision_id, **common,
                  "agent_run_id": "run-1", "tool": "math", "category": "A", "action": "read",
                  "decision": "allow", "status": "COMPLETED", "error_code": None, "http_status": 200,
                  "latency_ms": 7.17, "tokens_used": 0, "compute_units": 0.0, "cost_1t": 0.00002,
                  "started_at": t0, "finished_at": t2},
        "call": {"call_id": call_id, **common, "agent_run_id": "run-1", "tool": "math",
                 "status": "COMPLETED", "owner": "proxy-bench", "args_hash": "0" * 64, "args_size": 16,
                 "confidential": False, "idempotency_key": None, "decision_id": decision_id,
                 "result_id": result_id, "http_status": 200, "response": response, "diagnostic": None,
                 "refs": None, "created_at": t0, "started_at": t1, "deadline_at": None,
                 "finished_at": t2, "latency_ms": 7.17, "turn_id": None},
        "decisions": [{
            "decision_id": decision_id, "time": t0, "policy_revision": "5e00797fbe2246a7",
            "engine": "embedded", **common, "roles": ["agent"], "tool": "math", "phase": "call",
            "result": "allow", "reasons": reasons, "error_code": None, "latency_us": 1469.9,
            "call_id": call_id,
            "input": {"version": 1, "subject": {**common, "roles": ["agent"]},
                      "action": "tool.math.invoke",
                      "tool": {"tool_id": "math", "version": "1.0.0", "category": "A", "action": "read",
                               "risk": "low", "network": False, "requires_approval": False,
                               "timeout_ms": 2000, "plugin": False},
                      "args": {"expr": expr},
                      "context": {"team_id": "bench", "agent_run_id": "run-1", "confidential": False},
                      "grants": [], "overrides": [{"tool": "math", "effect": "allow", "timeout_ms": None,
                                                   "rate_per_minute": 1_000_000}],
                      "team_rules": [], "approval": None, "phase": "call"},
            "output": {"allow": True, "require_approval": False, "reasons": reasons,
                       "obligations": {"timeout_ms": 2000, "rate": {"per_minute": 1_000_000}, "redact": []},
                       "error_code": None}}],
        "events": [
            event("agent.tool.requested", t0, {}, {"tool": "math", "args": {"expr": expr}}),
            event("agent.tool.started", t1, {}, {"tool": "math", "timeout_ms": 2000}),
            event("agent.tool.completed", t2, {"result_id": result_id},
                  {"tool": "math", "status": "COMPLETED", "code": None, "http_status": 200,
                   "latency_ms": 7.17, "output": {"value": value}}),
        ],
        "key": call_id,
    }
    return orjson.dumps(doc, option=orjson.OPT_UTC_Z)


def batched(items: list[bytes], size: int) -> list[list[bytes]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


async def main(n: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-journal-write-"))
    pg = EmbeddedPostgres(root / "postgres", free_port())
    await asyncio.to_thread(pg.prepare)
    pg.start(root / "postgres.log")
    try:
        await pg.wait_ready()
        await migrate(pg.url())
        now = datetime.now(timezone.utc)
        conn = await asyncpg.connect(pg.url())
        backend = Sampler({"backend": await conn.fetchval("SELECT pg_backend_pid()")})
        sizes = (1, 32, 200)
        print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}; "
              f"embedded Postgres on loopback; {n} entries per row, each a fresh call\n")
        sample = entry(0, now)
        print(f"an entry: {len(sample)} bytes of JSON\n")
        print(f"{'per entry':<58} {'backend CPU':>12} {'wall':>10}")

        async def measure(label: str, batches: list[list[bytes]], query: str | None) -> None:
            count = sum(len(b) for b in batches)
            backend.mark()
            t0 = time.perf_counter()
            for b in batches:
                if query is None:
                    await write_raw(conn, b)
                else:
                    await conn.fetchval(query, (b"[" + b",".join(b) + b"]").decode())
            wall = time.perf_counter() - t0
            cpu = backend.since_mark()["backend"]
            print(f"{label:<58} {1e6 * cpu / count:>9.1f} us {1e6 * wall / count:>7.1f} us")

        readers = (("the JSON read as text only", "SELECT length($1::text)"),
                   ("read as json (checked only)", "SELECT json_array_length($1::text::json)"),
                   ("read as jsonb (as the writer's statement does)", "SELECT jsonb_array_length($1::text::jsonb)"))
        for size in sizes:
            entries = [entry(i + size * n, now) for i in range(n)]
            for label, query in readers:
                await measure(f"{label}, {size} a batch", batched(entries, size), query)
            await measure(f"the writer's statement, all rows written, {size} a batch", batched(entries, size), None)
            print()
        await conn.close()
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=3200)
    asyncio.run(main(ap.parse_args().entries))

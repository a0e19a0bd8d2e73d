"""Benchmarks only: the stack's processes with parts of the pipeline replaced, to measure what
they cost — run as a Stack's command (`bench_stack(..., command="bench.without")`), the parts
named in BENCH_WITHOUT (`limits`, `journal`, `writer`). No setting of the product reaches this:
only a bench that starts its processes from this module, in this tree, runs without them.

- `limits`: admission takes no rate limits or token quotas (a run's budget still counts);
- `journal`: nothing is recorded (no usage, no call rows, no decision log);
- `writer`: records are made durable in JetStream but never drained to Postgres.
"""

from __future__ import annotations

import os
from typing import Any

WITHOUT = {p.strip() for p in os.environ.get("BENCH_WITHOUT", "").split(",") if p.strip()}


def replace_parts(without: set[str]) -> None:
    unknown = without - {"limits", "journal", "writer"}
    if unknown:
        raise SystemExit(f"bench.without: unknown parts {sorted(unknown)}")
    if "limits" in without:
        from proxy.core.pipeline.admission import Reservation

        async def no_limits(self: Reservation, decision: Any) -> None:
            return None

        Reservation._hold_limits = no_limits  # type: ignore[method-assign,assignment]
    if "journal" in without:
        from proxy.records.journal import Journal

        async def record(self: Journal, *args: Any, meanwhile: Any = None, **kw: Any) -> None:
            if meanwhile is not None:
                meanwhile()

        async def note(self: Journal, entry: Any) -> None:
            return None

        Journal.record = record  # type: ignore[method-assign]
        Journal.note = note  # type: ignore[method-assign]
    if "writer" in without:
        import proxy.web.app as app_module
        from proxy.records.journal import Journal

        class Undrained(Journal):
            def __init__(self, *args: Any, **kw: Any) -> None:
                super().__init__(*args, **{**kw, "writer": False})

        app_module.Journal = Undrained  # type: ignore[misc]


if __name__ == "__main__":
    replace_parts(WITHOUT)
    from cli.main import main

    main()

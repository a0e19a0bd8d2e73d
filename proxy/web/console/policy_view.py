"""The serving policy revision as the console shows it: its modules (read-only) and the Rego
unit test results it was pushed with — or, for a revision served from a directory (the
shipped policies, TOOLPROXY_POLICY_DIR), of its directory's tests, run here once."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from pdp.policy_set import PolicySet, load_policy_dir
from pdp.policy_store import revision_modules, revision_tests, revisions
from pdp.rego_tests import run_policy_tests
from proxy.web.console.keys import CONSOLE
from proxy.web.keys import PDP, POOL, SETTINGS


def _directory_set(request: web.Request, revision: str) -> PolicySet | None:
    try:
        policies = load_policy_dir(request.app[SETTINGS].policy_dir)
    except (OSError, ValueError):
        return None
    return policies if policies.revision == revision else None


async def _directory_tests(request: web.Request, policies: PolicySet) -> dict[str, Any]:
    console = request.app[CONSOLE]
    async with console.test_lock:  # one run per revision, whoever asks first
        run = console.test_runs.get(policies.revision)
        if run is None:
            results = await asyncio.to_thread(run_policy_tests, policies)
            run = {"tests": sorted(policies.tests), "results": [asdict(r) for r in results],
                   "ran_at": datetime.now(timezone.utc).isoformat()}
            console.test_runs[policies.revision] = run
    return run


async def policy_view(request: web.Request) -> dict[str, Any]:
    pool = request.app[POOL]
    pdp = request.app[PDP]
    revision = pdp.revision
    modules = await revision_modules(pool, revision)
    source = "pushed"
    tests: dict[str, Any] | None
    if modules is not None:
        tests = await revision_tests(pool, revision)
    else:
        directory = _directory_set(request, revision)
        source = "directory" if directory is not None else "unknown"
        modules = directory.modules if directory is not None else {}
        tests = await _directory_tests(request, directory) if directory is not None else None
    if tests is not None:
        tests = {**tests, "passed": sum(1 for r in tests["results"] if r["passed"]),
                 "failed": sum(1 for r in tests["results"] if not r["passed"])}
    return {
        "serving": {"revision": revision, "engine": pdp.engine.name, "source": source},
        "modules": modules,
        "tests": tests,
        "revisions": await revisions(pool),
    }

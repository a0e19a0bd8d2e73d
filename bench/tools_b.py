"""Benchmark: p50/p99 of each category-B data tool through the proxy at 1 client (run by hand:
python bench/tools_b.py). Every call sends the seed's envelope (`context` with `team_id` and
`agent_run_id`); write tools get fresh arguments per call (a new name, the version just read,
an object made beforehand for each delete), so every call does real work.

Everything runs on this machine on loopback: embedded Postgres and NATS, the services and
proxy processes, and this load generator.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402

TOOLS = (
    "search.index", "search.lite",
    "file.write", "file.read", "file.list", "file.delete",
    "project.create", "project.list", "project.get", "project.update",
    "task.create", "task.list", "task.get", "task.update", "task.assign", "task.complete",
    "template.create", "template.list", "template.read", "template.update", "template.delete",
)
CONTEXT = {"team_id": TEAM, "agent_run_id": "ar_bench_tools_b"}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


class Bench:
    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.s = session
        self.url = url

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        body = {"tool": tool, "args": args, "context": CONTEXT}
        async with self.s.post(f"{self.url}/v1/tools/invoke", json=body) as r:
            data = await r.json()
        if r.status != 200 or data.get("status") != "COMPLETED":
            raise RuntimeError(f"{tool} {args}: {r.status} {data}")
        return data["output"]

    async def measure(self, tool: str, make_args: Callable[[int], dict[str, Any]],
                      n: int, warmup: int = 10) -> tuple[float, float]:
        lat = []
        for i in range(warmup + n):
            args = make_args(i)
            t = time.perf_counter()
            await self.call(tool, args)
            if i >= warmup:
                lat.append((time.perf_counter() - t) * 1000)
        return pct(lat, .5), pct(lat, .99)


async def run(b: Bench, n: int) -> dict[str, tuple[float, float]]:
    total = n + 10
    seq = itertools.count()
    text = ("Quarterly planning notes: the launch needs docs, a runbook and a rollback plan. " * 20)
    out: dict[str, tuple[float, float]] = {}

    out["search.index"] = await b.measure("search.index", lambda i: {
        "doc_id": f"doc-{i}", "title": f"Planning note {i}", "text": text, "tags": ["plan"]}, n)
    out["search.lite"] = await b.measure("search.lite", lambda i: {
        "query": ["runbook", "rollback plan", '"launch needs docs"', "quarterly -zebra"][i % 4]}, n)

    content = "# Spec\n" + "The service keeps each team's files apart. " * 40  # ~1.8 KB
    out["file.write"] = await b.measure("file.write", lambda i: {
        "path": f"specs/spec-{i}.md", "content": content, "tags": ["spec"]}, n)
    out["file.read"] = await b.measure("file.read", lambda i: {"path": f"specs/spec-{i}.md"}, n)
    out["file.list"] = await b.measure("file.list", lambda i: {"prefix": "specs/", "limit": 50}, n)
    out["file.delete"] = await b.measure("file.delete", lambda i: {"path": f"specs/spec-{i}.md"}, n)

    out["project.create"] = await b.measure("project.create", lambda i: {
        "name": f"Project {next(seq)}", "description": "bench"}, n)
    project = (await b.call("project.create", {"name": "Bench project"}))
    pid = project["project_id"]
    out["project.list"] = await b.measure("project.list", lambda i: {"limit": 20}, n)
    out["project.get"] = await b.measure("project.get", lambda i: {"project_id": pid}, n)
    version = itertools.count(1)
    out["project.update"] = await b.measure("project.update", lambda i: {
        "project_id": pid, "expected_version": next(version), "description": f"rev {i}"}, n)

    task_ids: list[str] = []
    lat = []
    for i in range(total):
        t = time.perf_counter()
        task_ids.append((await b.call("task.create", {"title": f"Task {i}", "project_id": pid}))
                        ["task_id"])
        if i >= 10:
            lat.append((time.perf_counter() - t) * 1000)
    out["task.create"] = (pct(lat, .5), pct(lat, .99))
    out["task.list"] = await b.measure("task.list", lambda i: {"project_id": pid, "limit": 20}, n)
    out["task.get"] = await b.measure("task.get", lambda i: {"task_id": task_ids[i]}, n)
    # Each task: version 1 -> update (2) -> assign (3) -> complete (4).
    out["task.update"] = await b.measure("task.update", lambda i: {
        "task_id": task_ids[i], "expected_version": 1, "status": "in_progress"}, n)
    out["task.assign"] = await b.measure("task.assign", lambda i: {
        "task_id": task_ids[i], "expected_version": 2, "assignee": "agent-7"}, n)
    out["task.complete"] = await b.measure("task.complete", lambda i: {
        "task_id": task_ids[i], "expected_version": 3}, n)

    template_ids: list[str] = []
    lat = []
    for i in range(total):
        t = time.perf_counter()
        made = await b.call("template.create", {"name": f"Template {i}", "content_md": f"# T{i}\n" + content,
                                                "default_profile_id": "profile-default"})
        template_ids.append(made["template_id"])
        if i >= 10:
            lat.append((time.perf_counter() - t) * 1000)
    out["template.create"] = (pct(lat, .5), pct(lat, .99))
    out["template.list"] = await b.measure("template.list", lambda i: {"limit": 50}, n)
    out["template.read"] = await b.measure("template.read", lambda i: {"template_id": template_ids[i]}, n)
    out["template.update"] = await b.measure("template.update", lambda i: {
        "template_id": template_ids[i], "expected_version": 1, "content_md": f"# v2 {i}"}, n)
    out["template.delete"] = await b.measure("template.delete", lambda i: {
        "template_id": template_ids[i], "expected_version": 2}, n)
    return out


async def main(n: int, workers: int) -> None:
    stack = bench_stack(workers)
    try:
        await stack.start()
        headers = await prepare(stack, tools=TOOLS)
        async with aiohttp.ClientSession(headers=headers) as s:
            results = await run(Bench(s, stack.url), n)
    finally:
        remove(stack)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}; "
          f"proxy workers: {workers}; {n} sequential calls per tool after 10 of warm-up (1 client)\n")
    print(f"{'tool':<18} {'p50':>8} {'p99':>8}")
    for tool in TOOLS:
        p50, p99 = results[tool]
        print(f"{tool:<18} {p50:>6.2f}ms {p99:>6.2f}ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200, help="measured calls per tool")
    ap.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    a = ap.parse_args()
    asyncio.run(main(a.calls, a.workers))

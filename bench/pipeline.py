"""Benchmark: the pipeline as users load it, against the floor its own parts set, in one run.
Run by hand: `python bench/pipeline.py`.

The headline is the **realistic mix** (bench/mix.py): the same `math` calls with new arguments,
from 200 agents in 20 teams with their own tokens rotated per request, each naming its own
registered run with a budget, under the shipped per-agent limits. Beside it, labelled, the
**hot case**: one agent, one token, unregistered runs (every call a token and decision cache
hit, no budget round trip). In every round, interleaved: the bare aiohttp handler, the lean
skeleton of bench/floor.py (aiohttp, the proxy's reply inbox to the real `math` service, a
JetStream-acknowledged record), the same skeleton with the two KV compare-and-set writes a
realistic call makes before it runs (its run's count, its agent's rate bucket: the parts' floor
for the realistic mix, printed beside its goal), the realistic mix and the hot case, at 32
connections and at 1; every ratio is computed within its round. Then the **tools mix** on its
own (mostly `math` and `text`, some granted `task.list`, `search.lite`, `data.query`, a few
denied and rate-limited).

Printed beside every pipeline figure: the share of each status and the decision and token cache
hit rates (the stack's own /metrics); throughput during the run and sustained (until usage has
recorded every call), p50/p99, CPU per call of each process until idle, the stack's peak memory
sampled during the runs (PSS) and Postgres connections; at the end, the agents' run budgets
against the calls on record that reached their tool. The machine may be shared: the figures are
medians of the rounds with the lowest and highest.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import mix  # noqa: E402
from bench.procs import Sampler  # noqa: E402
from bench.scrape import delta, describe, per_call, snapshot, stream_sequences  # noqa: E402
from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402
from infra.embedded.child import Child  # noqa: E402
from infra.embedded.ports import free_port  # noqa: E402

BARE_SERVER = '''
import sys
from aiohttp import web
import orjson
async def handler(request):
    data = orjson.loads(await request.read())
    return web.Response(body=orjson.dumps({"ok": True, "echo": data["args"]}), content_type="application/json")
app = web.Application()
app.router.add_post("/{tail:.*}", handler)
try:
    import uvloop; uvloop.install()
except ImportError:
    pass
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
'''

# A new expression per request (thread id and counter); one run id per wrk thread.
NATIVE_LUA = '''
local counter = 0
local tid = 0
local threads = {}
function setup(thread) thread:set("tid", #threads + 1); table.insert(threads, thread) end
function init(args) tid = tonumber(wrk.thread:get("tid")) end
request = function()
  counter = counter + 1
  local body = string.format(
    '{"tool":"math","args":{"expr":"%d+%d*4"},"context":{"team_id":"%s","agent_run_id":"run-%d"}}',
    tid, counter, "TEAM", tid)
  return wrk.format("POST", "/v1/tools/invoke", nil, body)
end
'''

MCP_LUA = '''
local counter = 0
local tid = 0
local threads = {}
function setup(thread) thread:set("tid", #threads + 1); table.insert(threads, thread) end
function init(args) tid = tonumber(wrk.thread:get("tid")) end
request = function()
  counter = counter + 1
  local body = string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"math","arguments":{"expr":"%d+%d*4"},' ..
    '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},' ..
    '"toolproxy/context":{"agent_run_id":"run-%d"}}}}', counter, tid, counter, tid)
  return wrk.format("POST", "/mcp", nil, body)
end
'''

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
               "Mcp-Method": "tools/call", "Mcp-Name": "math"}


@dataclass
class Wrk:
    label: str
    connections: int
    seconds: float
    requests: int = 0
    load_s: float = 0.0  # from wrk's first request to its last answer, as wrk reports it
    rps: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    non_2xx: int = 0
    sustained_rps: float | None = None
    drain_s: float | None = None
    cpu_ms_per_call: dict[str, float] = field(default_factory=dict)
    counts: dict[str, Counter[str]] = field(default_factory=dict)  # bench.scrape, when measured
    stream_messages: Counter[str] = field(default_factory=Counter)  # bench.scrape, when measured


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    assert m, text
    v, unit = float(m.group(1)), m.group(2)
    return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v


def wrk(label: str, url: str, lua: str, headers: dict[str, str], connections: int,
        seconds: float) -> Wrk:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(lua)
    argv = ["wrk", "-t", str(min(2, connections)), "-c", str(connections), "-d", f"{max(1, round(seconds))}s",
            "--latency", "-s", f.name]
    for k, v in {"Content-Type": "application/json", **headers}.items():
        argv += ["-H", f"{k}: {v}"]
    out = subprocess.run([*argv, url], capture_output=True, text=True, check=True).stdout
    os.unlink(f.name)
    r = Wrk(label, connections, seconds)
    m = re.search(r"(\d+) requests in ([\d.]+)(ms|s|m)\b", out)
    assert m, out
    r.requests = int(m.group(1))
    r.load_s = float(m.group(2)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[m.group(3)]
    r.rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    r.p50_ms = _ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    r.p99_ms = _ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    r.non_2xx = int(m.group(1)) if m else 0
    return r


async def recorded(database_url: str, teams: list[str]) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        return int(await conn.fetchval(
            "SELECT count(*) FROM usage_records WHERE team_id = ANY($1::text[])", teams))
    finally:
        await conn.close()


async def measured(label: str, stack, sampler: Sampler, url: str, lua: str,  # type: ignore[no-untyped-def]
                   headers: dict[str, str], connections: int, seconds: float, *,
                   teams: list[str] | None = None) -> Wrk:
    """A wrk run, then the wait until usage has recorded every call (sustained throughput), with
    each process's CPU time from the start of the run until then, the stack's memory sampled
    during it, and what its metrics counted (statuses, cache hits)."""
    teams = teams or [TEAM]
    before = await recorded(stack.database_url, teams)
    counted = await snapshot(stack.url)
    streams = await stream_sequences(stack.nats_url)
    sampler.mark()
    async with sampler.sampling():
        r = await asyncio.to_thread(wrk, label, url, lua, headers, connections, seconds)
    t_end = time.monotonic()
    while await recorded(stack.database_url, teams) - before < r.requests:
        if time.monotonic() - t_end > 120:
            break
        await asyncio.sleep(0.01)
    done = time.monotonic()
    r.drain_s = done - t_end
    # Over the load and the catch-up after it: wrk's own span of the load (its process's start
    # is no part of the stack's time), then from wrk's exit until usage had every call.
    r.sustained_rps = r.requests / (r.load_s + r.drain_s)
    r.cpu_ms_per_call = {k: 1000 * v / max(1, r.requests) for k, v in sampler.since_mark().items()}
    r.counts = delta(counted, await snapshot(stack.url))
    r.stream_messages = await stream_sequences(stack.nats_url)
    r.stream_messages.subtract(streams)
    return r


def line(r: Wrk) -> str:
    extra = "" if r.sustained_rps is None else (
        f"   sustained {r.sustained_rps:>7.0f} req/s (usage caught up {1000 * r.drain_s:3.0f} ms after)")
    return (f"{r.label:<40} {r.rps:>8.0f} req/s  p50 {r.p50_ms:>7.2f} ms  p99 {r.p99_ms:>7.2f} ms"
            f"  non-2xx {r.non_2xx}{extra}")


@contextlib.asynccontextmanager
async def bare_handler() -> AsyncIterator[str]:
    """The bare aiohttp JSON handler every pipeline figure is compared with, in the same run:
    its URL while it serves."""
    port = free_port()
    bare = Child("bare", [sys.executable, "-c", BARE_SERVER, str(port)],
                 log_path=Path(tempfile.gettempdir()) / f"bench-bare-{os.getpid()}.log")
    bare.start()
    try:
        await _wait_port(port)
        yield f"http://127.0.0.1:{port}/"
    finally:
        bare.stop()


def require_wrk() -> None:
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian: apt-get install wrk)")


async def main(seconds: float, workers: int, rounds: int, with_mcp: bool) -> None:
    from bench.floor import cpu_run, grouped, running_skeleton  # bench.floor imports this module

    require_wrk()
    stack = bench_stack(workers)
    runs: list[dict[str, Wrk]] = []  # one per round: label -> run
    try:
        async with bare_handler() as bare_url:
            await stack.start()
            headers = await prepare(stack)
            auth = {"Authorization": headers["Authorization"]}
            agents = await mix.populate(stack, tools=True)
            teams = mix.teams()
            sampler = Sampler.of_stack(stack)
            hot = NATIVE_LUA.replace("TEAM", TEAM)
            real = mix.realistic_lua(agents)
            wrk("warm-up", stack.url, hot, auth, 8, 2)
            wrk("warm-up", stack.url, real, {}, 8, 2)
            wrk("warm-up", bare_url, real, {}, 8, 1)
            async with running_skeleton(stack, True, True, real) as (floor_url, floor_pids), \
                    running_skeleton(stack, True, True, real, admit=True) as (admit_url, admit_pids):
                async def floor_run(label: str, url: str, pids: dict[str, int], c: int) -> Wrk:
                    # At c=32 with the CPU per call of its processes (theirs, `math`'s, NATS's).
                    if c == 32:
                        return await cpu_run(Sampler(pids), label, url, real, {}, seconds)
                    return await asyncio.to_thread(wrk, label, url, real, {}, c, seconds)

                for n in range(rounds):
                    # Each round measures the bare handler and the lean skeleton beside the
                    # pipeline, so every ratio compares runs seconds apart on a machine whose
                    # speed drifts (and that other work shares).
                    rows: list[Wrk] = []
                    for c in (32, 1):
                        rows.append(await asyncio.to_thread(wrk, f"bare aiohttp handler, c={c}", bare_url, real, {}, c, seconds))
                        rows.append(await floor_run(f"lean skeleton, c={c}", floor_url, floor_pids, c))
                        rows.append(await floor_run(f"lean skeleton + its admission writes, c={c}",
                                                    admit_url, admit_pids, c))
                        rows.append(await measured(f"realistic mix, c={c}", stack, sampler, stack.url, real, {}, c,
                                                   seconds, teams=teams))
                        rows.append(await measured(f"hot case (one agent), c={c}", stack, sampler, stack.url, hot, auth, c,
                                                   seconds))
                        if with_mcp:
                            rows.append(await measured(f"hot case /mcp tools/call, c={c}", stack, sampler, stack.url,
                                                       MCP_LUA, {**auth, **MCP_HEADERS}, c, seconds))
                    runs.append({r.label: r for r in rows})
            tools = mix.tools_lua(agents)
            wrk("warm-up", stack.url, tools, {}, 8, 2)
            tool_runs = [await measured(f"tools mix, c={c}", stack, sampler, stack.url, tools, {}, c, seconds,
                                        teams=teams) for c in (32, 1)]
            budgets = await mix.budgets_against_calls(stack, agents)
            pss_mb = sampler.rss_mb()
            pss_groups = {k: v / (1 << 20) for k, v in sampler.peak_groups.items()}
            pg_conns = await _pg_connections(stack.database_url)
    finally:
        remove(stack)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}; "
          f"wrk, {seconds:.0f}s per run, all on loopback; proxy workers: {workers}; "
          f"{rounds} round{'s' if rounds > 1 else ''} interleaved (bare, lean skeleton, realistic, hot), "
          f"each figure the median of the rounds [lowest–highest]; every ratio within its round")
    print(f"realistic mix: {mix.TEAMS * mix.AGENTS_PER_TEAM} agents in {mix.TEAMS} teams, a token each "
          f"rotated per request, a registered run with a budget each; {mix.RAISED}\n")
    for label in runs[0]:
        print(line(median_run([run[label] for run in runs])))
        if runs[0][label].counts:
            print(f"    {describe(sum_counts([run[label].counts for run in runs]))}")
            messages = sum((run[label].stream_messages for run in runs), Counter())
            print(f"    messages per call to the stack's streams: "
                  f"{per_call(messages, sum(run[label].requests for run in runs))}")

    def each(f: Callable[[dict[str, Wrk]], float]) -> list[float]:
        return [f(run) for run in runs]

    f32, f1 = "lean skeleton, c=32", "lean skeleton, c=1"
    b32 = "bare aiohttp handler, c=32"
    print(f"\nlean skeleton ÷ bare, c=32: {spread(each(lambda r: r[f32].rps / r[b32].rps), 3)}")
    for case, goal_ratio, goal_p50 in (("realistic mix", 0.6, 0.5), ("hot case (one agent)", 0.75, 0.3)):
        p32, p1 = f"{case}, c=32", f"{case}, c=1"
        print(f"\n{case}")
        print(f"  throughput ÷ lean skeleton, c=32, during the run: {spread(each(lambda r: r[p32].rps / r[f32].rps), 3)}   (goal >= {goal_ratio})")
        print(f"  throughput ÷ bare, c=32, during the run:          {spread(each(lambda r: r[p32].rps / r[b32].rps), 3)}")
        print(f"  sustained ÷ during the run, c=32:                 {spread(each(lambda r: (r[p32].sustained_rps or 0) / r[p32].rps), 3)}   (goal >= 0.98)")
        print(f"  added p50 over the lean skeleton, c=1:            {spread(each(lambda r: r[p1].p50_ms - r[f1].p50_ms), 2)} ms (goal <= {goal_p50} ms)")
        if case == "realistic mix":  # against the parts its budgets and per-agent limits add
            a32, a1 = "lean skeleton + its admission writes, c=32", "lean skeleton + its admission writes, c=1"
            print(f"  throughput ÷ lean skeleton + admission writes:    {spread(each(lambda r: r[p32].rps / r[a32].rps), 3)}   (that skeleton ÷ the lean one: {spread(each(lambda r: r[a32].rps / r[f32].rps), 3)})")
            print(f"  added p50 over it, c=1:                           {spread(each(lambda r: r[p1].p50_ms - r[a1].p50_ms), 2)} ms   (it over the lean one: {spread(each(lambda r: r[a1].p50_ms - r[f1].p50_ms), 2)} ms)")
        print(f"  p99 ÷ p50, c=32:                                  {spread(each(lambda r: r[p32].p99_ms / r[p32].p50_ms), 2)}   (goal <= 4)")
        cpu = {k: statistics.median(run[p32].cpu_ms_per_call.get(k, 0.0) for run in runs)
               for k in runs[0][p32].cpu_ms_per_call}
        total = spread(each(lambda r: sum(r[p32].cpu_ms_per_call.values())), 2)
        print("  CPU ms per call until idle, c=32:                 " + ", ".join(
            f"{k} {v:.2f}" for k, v in sorted(cpu.items())) + f"; total {total}")
        # The throughput goal restated in CPU: at c=32 the stack is CPU-bound, so at the cores
        # it uses now, the goal's rate allows this much CPU per call. What the processes besides
        # the proxy take now (the skeleton's record goes to its stream only: the pipeline's
        # Postgres writes, like `math` and NATS, are there whatever the proxy does) leaves the rest.
        cores = each(lambda r: r[p32].rps * sum(r[p32].cpu_ms_per_call.values()) / 1000)
        allowed = [1000 * c / (goal_ratio * run[f32].rps) for c, run in zip(cores, runs)]
        others = each(lambda r: sum(v for k, v in r[p32].cpu_ms_per_call.items() if k != "proxy"))
        proxy_left = [a - o for a, o in zip(allowed, others)]
        floor_groups = {k: statistics.median(grouped(run[f32].cpu_ms_per_call).get(k, 0.0) for run in runs)
                        for k in grouped(runs[0][f32].cpu_ms_per_call)}
        print(f"  the lean skeleton's CPU per call, c=32:           "
              f"{spread(each(lambda r: sum(r[f32].cpu_ms_per_call.values())), 2)} ms (" + ", ".join(
                  f"{k} {v:.2f}" for k, v in sorted(floor_groups.items())) + ")")
        print(f"  the goal in CPU per call, at the {spread(cores, 2)} cores the stack uses: <= {spread(allowed, 2)} ms; "
              f"the processes besides the proxy take {spread(others, 2)} now, leaving the proxy <= "
              f"{spread(proxy_left, 2)} (it takes {cpu.get('proxy', 0.0):.2f})")
    print("\ntools mix (its own; no floor ratio: the skeleton runs only `math`)")
    for r in tool_runs:
        print(line(r))
        print(f"    {describe(r.counts)}; CPU {sum(r.cpu_ms_per_call.values()):.2f} ms/call; "
              f"messages per call to the stack's streams: "
              f"{per_call(r.stream_messages, r.requests)}")
    print(f"\npeak memory of the stack during the runs (PSS, sampled each second): {pss_mb:.0f} MB; "
          f"Postgres connections at the end: {pg_conns}")
    print("  of which, in the sample of the peak: " + ", ".join(
        f"{k} {v:.0f}" for k, v in sorted(pss_groups.items(), key=lambda kv: -kv[1])) + " MB")
    print(f"\n{budgets}")


def sum_counts(counts: list[dict[str, Counter[str]]]) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for c in counts:
        for name, values in c.items():
            out.setdefault(name, Counter()).update(values)
    return out


def spread(values: list[float], digits: int) -> str:
    """The median, and the lowest and highest when there is more than one value."""
    mid = f"{statistics.median(values):.{digits}f}"
    return mid if len(values) == 1 else f"{mid} [{min(values):.{digits}f}–{max(values):.{digits}f}]"


def median_run(rs: list[Wrk]) -> Wrk:
    """One row for several runs of the same label: each figure's median."""
    m = Wrk(rs[0].label, rs[0].connections, rs[0].seconds)
    m.requests = round(statistics.median(r.requests for r in rs))
    m.rps = statistics.median(r.rps for r in rs)
    m.p50_ms = statistics.median(r.p50_ms for r in rs)
    m.p99_ms = statistics.median(r.p99_ms for r in rs)
    m.non_2xx = sum(r.non_2xx for r in rs)
    if all(r.sustained_rps is not None for r in rs):
        m.sustained_rps = statistics.median(r.sustained_rps or 0.0 for r in rs)
        m.drain_s = max(r.drain_s or 0.0 for r in rs)
    return m


async def _wait_port(port: int) -> None:
    for _ in range(200):
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return
        except OSError:
            await asyncio.sleep(0.05)


async def _pg_connections(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"))
    finally:
        await conn.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--workers", type=int, default=2, help="proxy worker processes")
    ap.add_argument("--rounds", type=int, default=3,
                    help="repetitions of the interleaved sequence; each figure is their median")
    ap.add_argument("--mcp", action="store_true", help="the hot case through /mcp tools/call too")
    a = ap.parse_args()
    asyncio.run(main(a.seconds, a.workers, max(1, a.rounds), a.mcp))

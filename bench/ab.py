"""Benchmark: this tree against another revision, paired. Both stacks run at once (one git
worktree of `--base` beside this checkout), and short wrk runs alternate between them and the
bare aiohttp handler, round after round (the order flips every round): each round's figures
are compared within the round, seconds apart, so that a shared VM's drift (its speed moves by
a third within minutes) cancels out of the difference. `math` with the seed's envelope and a
new expression per call, as bench/pipeline.py's hot case, or with `--realistic` its realistic mix
(200 agents, 20 teams, a budgeted run each). Run by hand: `python bench/ab.py --base HEAD~3`;
`--env NAME=VALUE` sets a variable for this tree's proxy, services and plugin host alone
(`--base HEAD --env TOOLPROXY_DB_POOL_MAX=4`: the setting's effect, the code the same), and
TOOLPROXY_NATS_GOMAXPROCS for its embedded NATS. Both stacks' Postgres and NATS are started by
this tree's code (only the proxy, services and plugin host run the other tree's).

Printed, per connection count: each tree's added p50, throughput ÷ bare and CPU per call
(median of the rounds, lowest–highest), and the paired difference (this tree − base: p50, rps
ratio, and the ratio of CPU per call: every process of the stack, from the run's start until
usage has recorded its calls — steadier than throughput on a VM whose speed drifts); and each
tree's messages per call to its streams (the journal, the rate, quota and run-budget buckets:
counted, not timed, so a change to the round trips a call makes shows exactly).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import mix  # noqa: E402
from bench.pipeline import NATIVE_LUA, Wrk, bare_handler, measured, require_wrk, wrk  # noqa: E402
from bench.procs import Sampler  # noqa: E402
from bench.scrape import per_call  # noqa: E402
from bench.setup import TEAM, bench_stack, prepare, remove  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def worktree(rev: str) -> Path:
    """A detached worktree of `rev`, outside this checkout."""
    path = Path(tempfile.mkdtemp(prefix="toolproxy-ab-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev],
                   check=True, capture_output=True)
    return path


def drop_worktree(path: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)],
                   capture_output=True)
    shutil.rmtree(path.parent, ignore_errors=True)


def summary(label: str, runs: list[Wrk], bares: list[Wrk]) -> str:
    added = [r.p50_ms - b.p50_ms for r, b in zip(runs, bares)]
    ratio = [r.rps / b.rps for r, b in zip(runs, bares)]
    cpu = [sum(r.cpu_ms_per_call.values()) for r in runs]
    messages = sum((r.stream_messages for r in runs), Counter())
    return (f"  {label:<6} added p50 {statistics.median(added):.3f} ms [{min(added):.3f}–{max(added):.3f}]"
            f"   ÷ bare {statistics.median(ratio):.3f} [{min(ratio):.3f}–{max(ratio):.3f}]"
            f"   p99 {statistics.median(r.p99_ms for r in runs):.2f} ms"
            f"   CPU {statistics.median(cpu):.2f} ms/call"
            f"   messages per call to its streams: "
            f"{per_call(messages, sum(r.requests for r in runs))}")


async def main(base_rev: str, rounds: int, seconds: float, conns: list[int],
               env: dict[str, str], realistic: bool) -> None:
    require_wrk()
    base_tree = worktree(base_rev)
    # The stacks' processes run `python -m proxy...` from the current directory: run them
    # from one outside both trees, so that PYTHONPATH alone says which tree a stack runs.
    os.chdir(tempfile.gettempdir())
    labels = ("base", "this")
    # A base from before the house (issue 30) has its command in proxy/cli/.
    base_command = "cli.main" if (base_tree / "cli" / "main.py").exists() else "proxy.cli.main"
    stacks = [bench_stack(2, base_command, PYTHONPATH=str(base_tree)),
              bench_stack(2, PYTHONPATH=str(ROOT), **env)]
    try:
        for s in stacks:
            await s.start()
        auths = [{"Authorization": (await prepare(s))["Authorization"]} for s in stacks]
        samplers = [Sampler.of_stack(s) for s in stacks]
        lua = NATIVE_LUA.replace("TEAM", TEAM)
        teams = None
        if realistic:  # each stack its own tokens and runs (the same names), in its own Lua
            luas = [mix.realistic_lua(await mix.populate(s)) for s in stacks]
            auths, teams, lua = [{}, {}], mix.teams(), luas[1]
        else:
            luas = [lua, lua]
        runs: dict[int, dict[str, list[Wrk]]] = {c: {k: [] for k in (*labels, "bare")} for c in conns}
        async with bare_handler() as bare:
            for s, auth in zip(stacks, auths):
                await asyncio.to_thread(wrk, "warm-up", s.url, luas[stacks.index(s)], auth, 8, 3)
            for n in range(rounds):
                for c in conns:
                    runs[c]["bare"].append(await asyncio.to_thread(wrk, "bare", bare, lua, {}, c, seconds))
                    for i in ((0, 1) if n % 2 == 0 else (1, 0)):
                        runs[c][labels[i]].append(await measured(
                            labels[i], stacks[i], samplers[i], stacks[i].url, luas[i], auths[i], c,
                            seconds, teams=teams))
    finally:
        for s in stacks:
            remove(s)
        drop_worktree(base_tree)
    extra = "".join(f", {k}={v}" for k, v in env.items())
    extra += ", the realistic mix (bench/mix.py)" if realistic else ", the hot case (one agent)"
    print(f"\nbase {base_rev} against this tree{extra}; {rounds} rounds of {seconds:.0f} s runs, alternating\n")
    for c in conns:
        r = runs[c]
        print(f"c={c}")
        for label in labels:
            print(summary(label, r[label], r["bare"]))
        d = [x.p50_ms - y.p50_ms for x, y in zip(r["this"], r["base"])]
        q = [x.rps / y.rps for x, y in zip(r["this"], r["base"])]
        cpu = [sum(x.cpu_ms_per_call.values()) / sum(y.cpu_ms_per_call.values())
               for x, y in zip(r["this"], r["base"])]
        print(f"  this − base: p50 {statistics.median(d):+.3f} ms [{min(d):+.3f}…{max(d):+.3f}],"
              f" throughput × {statistics.median(q):.3f} [{min(q):.3f}…{max(q):.3f}],"
              f" CPU per call (every process, until usage has the calls) × {statistics.median(cpu):.3f}"
              f" [{min(cpu):.3f}…{max(cpu):.3f}]")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="HEAD", help="the git revision to compare this tree with "
                    "(HEAD: uncommitted changes; with none, the measurement's own spread)")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--conns", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--realistic", action="store_true",
                    help="the realistic mix of bench/mix.py instead of the hot case's one agent")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="set for this tree's proxy, services and plugin host only (not its "
                    "Postgres or NATS): with --base HEAD and no changes, a setting's effect alone")
    a = ap.parse_args()
    if any("=" not in e for e in a.env):
        ap.error("--env takes NAME=VALUE")
    env = dict(e.split("=", 1) for e in a.env)
    if "PYTHONPATH" in env:
        ap.error("--env cannot set PYTHONPATH: it is what says which tree a stack runs")
    asyncio.run(main(a.base, a.rounds, a.seconds, a.conns, env, a.realistic))

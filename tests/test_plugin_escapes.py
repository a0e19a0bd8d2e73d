"""The escape suite: hostile plugins end with a stable code, their worker is replaced when it
had to be killed, and other plugins and built-in tools go on unaffected meanwhile."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from tests.support.calls import invoke
from tests.support.plugin_harness import (  # noqa: F401  (fixtures)
    example,
    grant,
    install_and_enable,
    pclient,
    plugin_db,
    plugin_files,
    plugin_host,
    tar_gz,
)

# One plugin, many behaviours (args.case). Pure: no internal API, so QuickJS's interrupt
# handler bounds its CPU as well as the host's wall clock.
PURE = r"""
const CASES = {
  ok: () => ({ fine: true }),
  fetch: () => fetch("http://127.0.0.1:1/"),
  xhr: () => new XMLHttpRequest(),
  require: () => require("fs"),
  std: () => std.loadFile("/etc/passwd"),
  os: () => os.exec(["/bin/sh", "-c", "id"]),
  import: async () => { const m = await import("os"); return { keys: Object.keys(m) }; },
  import_file: async () => { const m = await import("/etc/passwd"); return { m: String(m) }; },
  timers: () => { setTimeout(() => 0, 1); return {}; },
  loop: () => { for (;;) {} },
  catch_loop: () => { for (;;) { try { for (;;) {} } catch (e) {} } },
  memory: () => { const a = []; for (;;) a.push("x".repeat(1 << 16) + a.length); },
  recursion: () => { const f = (n) => f(n + 1) + 1; return f(0); },
  huge: () => ({ s: "x".repeat(3 << 20) }),
  not_object: () => 42,
  big_int: () => ({ n: 2 ** 64 }),
  throws: () => { throw new Error("plugin says no"); },
  pollute_result: () => { Object.prototype.toJSON = function () { return "pwned"; }; return { a: 1 }; },
  pollute_json: () => { JSON.stringify = () => "{\"forged\": true}"; return { a: 1 }; },
  clean: () => ({ toJSON: typeof ({}).toJSON, internal: typeof internal,
                  globals: Object.getOwnPropertyNames(globalThis).filter((k) => /^[a-z_]/.test(k)).sort() }),
  context: (args, context) => ({ context, keys: Object.keys(context).sort() }),
};
function invoke(args, context) { return CASES[args.case](args, context); }
"""

# With an internal API (math, text): calls into the host, so no QuickJS time limit (the binding
# forbids it); RLIMIT_CPU and the wall clock bound it. Category B: a 3 s deadline.
BRIDGE = r"""
const CASES = {
  math: () => ({ a: internal("math", { expr: "2+3*4" }), b: internal("math", "math", { expr: "1+1" }) }),
  undeclared: () => { try { internal("task.list", {}); } catch (e) { return { caught: e.code }; } },
  wrong_service: () => { try { internal("math", "task.list", {}); } catch (e) { return { caught: e.code }; } },
  plugin_tool: () => { try { internal("text.wordfreq", { text: "a" }); } catch (e) { return { caught: e.code }; } },
  tamper_internal: () => {
    try { internal = () => ({ value: 99 }); } catch (e) {}
    try { Object.defineProperty(globalThis, "internal", { value: () => ({ value: 99 }) }); } catch (e) {}
    Function.prototype.call = () => ({ value: 99 });
    Object.prototype.ok = true;
    JSON.parse = () => ({ ok: true, output: { value: 99 } });
    return { value: internal("task.list", {}) };
  },
  loop: () => { for (;;) {} },
  bad_args: () => { try { internal("math", { expr: 5 }); } catch (e) { return { caught: e.code }; } },
  nul_args: () => { try { internal("math", { expr: "1\u0000" }); } catch (e) { return { caught: e.code }; } },
};
function invoke(args, context) { return CASES[args.case](args, context); }
"""

EXPECTED = {
    "fetch": "plugin_error", "xhr": "plugin_error", "require": "plugin_error",
    "std": "plugin_error", "os": "plugin_error", "import": "plugin_error",
    "import_file": "plugin_error", "timers": "plugin_error",
    "loop": "plugin_timeout", "catch_loop": "plugin_timeout",
    "memory": "plugin_memory", "recursion": "plugin_memory",
    "huge": "plugin_error", "not_object": "plugin_error", "throws": "plugin_error",
    "big_int": "plugin_error",
    "pollute_result": "plugin_error",
}


@pytest.fixture
async def escapes(pclient, token, team):
    await install_and_enable(pclient, token, tar_gz(plugin_files("escape.pure", PURE)))
    await install_and_enable(pclient, token, tar_gz(plugin_files(
        "escape.bridge", BRIDGE, category="B", internal_api=["math", "text"])))
    await install_and_enable(pclient, token, tar_gz(plugin_files(
        "escape.ok", "function invoke(a){ return {n: a.n} }")))
    await install_and_enable(pclient, token, example("text_wordfreq"))  # a plugin under `text`
    for name in ("escape.pure", "escape.bridge", "escape.ok"):
        await grant(pclient, token, team, f"tool.{name}.invoke")
    return token(team=team)


async def test_each_escape_ends_with_a_stable_code(pclient, escapes, plugin_host) -> None:
    workers = plugin_host.workers
    for case, code in EXPECTED.items():
        status, body = await invoke(pclient, escapes, "escape.pure", {"case": case})
        assert body["status"] == "FAILED" and body["error"]["code"] == code, (case, body)
        assert status == (504 if code == "plugin_timeout" else 200), (case, status)
        # Interrupted (the worker lives on) or killed at the deadline (a fresh one replaces it).
        await workers.wait_full()
        assert len(workers.pids()) == workers.size
    # And every worker still serves.
    for _ in range(workers.size + 1):
        status, body = await invoke(pclient, escapes, "escape.pure", {"case": "ok"})
        assert (status, body["output"]) == (200, {"fine": True})


async def test_a_fresh_context_per_call(pclient, escapes, plugin_host) -> None:
    # Pollution of JSON or prototypes stays in the call that made it.
    status, body = await invoke(pclient, escapes, "escape.pure", {"case": "pollute_json"})
    assert (status, body["output"]) == (200, {"a": 1})  # the runner kept the pristine JSON
    for _ in range(plugin_host.workers.size * 2):
        await invoke(pclient, escapes, "escape.pure", {"case": "pollute_result"})
        status, body = await invoke(pclient, escapes, "escape.pure", {"case": "clean"})
        assert status == 200, body
        out = body["output"]
        assert (out["toJSON"], out["internal"]) == ("undefined", "undefined")
        # No ambient capability: no console, fetch, timers, std/os, performance clock.
        assert not {"console", "fetch", "setTimeout", "std", "os", "require", "performance",
                    "print", "scriptArgs"} & set(out["globals"])


async def test_the_plugin_sees_only_its_context(pclient, escapes, team) -> None:
    status, body = await invoke(pclient, escapes, "escape.pure", {"case": "context"},
                                context={"team_id": team, "agent_run_id": "run-ctx"})
    assert status == 200, body
    assert body["output"]["context"] == {"agent_run_id": "run-ctx", "team_id": team,
                                         "capabilities": ["tool.escape.pure.invoke"]}


async def test_internal_calls_declared_and_undeclared(pclient, escapes) -> None:
    status, body = await invoke(pclient, escapes, "escape.bridge", {"case": "math"})
    assert (status, body["output"]) == (200, {"a": {"value": 14}, "b": {"value": 2}}), body
    for case in ("bad_args", "nul_args"):
        status, body = await invoke(pclient, escapes, "escape.bridge", {"case": case})
        assert (status, body["output"]) == (200, {"caught": "invalid_args"}), (case, body)
    # Refusals end the call plugin_forbidden even when the plugin catches the error.
    for case in ("undeclared", "wrong_service", "plugin_tool", "tamper_internal"):
        status, body = await invoke(pclient, escapes, "escape.bridge", {"case": case})
        assert (status, body["status"], body.get("error", {}).get("code")) == \
            (200, "FAILED", "plugin_forbidden"), (case, body)


async def test_a_worker_killed_mid_call_is_replaced(pclient, escapes, plugin_host) -> None:
    workers = plugin_host.workers
    await workers.wait_full()
    call = asyncio.ensure_future(invoke(pclient, escapes, "escape.bridge", {"case": "loop"}))
    for _ in range(200):
        if workers.busy_pids():
            break
        await asyncio.sleep(0.01)
    victim = workers.busy_pids()[0]
    os.kill(victim, signal.SIGKILL)  # a worker this test's pool started
    status, body = await call
    assert (status, body["error"]["code"]) == (200, "plugin_error"), body
    assert "died" in body["error"]["message"]
    await workers.wait_full()
    assert victim not in workers.pids() and len(workers.pids()) == workers.size
    status, body = await invoke(pclient, escapes, "escape.ok", {"n": 7})
    assert (status, body["output"]) == (200, {"n": 7})


async def test_others_are_unaffected_by_a_hostile_plugin(pclient, escapes, plugin_host) -> None:
    """While a plugin burns its worker up to its 3 s deadline, other plugins and built-in tools
    answer as usual. Bound: generous (half the hostile deadline), not a benchmark."""
    workers = plugin_host.workers
    await workers.wait_full()
    hostile = asyncio.ensure_future(invoke(pclient, escapes, "escape.bridge", {"case": "loop"}))
    for _ in range(200):
        if workers.busy_pids():
            break
        await asyncio.sleep(0.01)
    burning = workers.busy_pids()
    worst = 0.0
    for i in range(10):
        t0 = time.perf_counter()
        s1, b1 = await invoke(pclient, escapes, "escape.ok", {"n": i})
        s2, b2 = await invoke(pclient, escapes, "math", {"expr": f"{i}+1"})
        worst = max(worst, time.perf_counter() - t0)
        assert (s1, b1["output"], s2, b2["output"]) == (200, {"n": i}, 200, {"value": i + 1})
    assert not hostile.done()  # the measurements happened while it was running
    status, body = await hostile
    assert (status, body["error"]["code"]) == (504, "plugin_timeout")
    assert worst < 1.5, f"a call took {worst:.3f}s next to a hostile plugin"
    # No interrupt handler there: its worker was killed at the deadline, and replaced.
    await workers.wait_full()
    assert len(burning) == 1 and burning[0] not in workers.pids()


async def test_a_sandbox_worker_is_locked_down(plugin_host) -> None:
    pid = plugin_host.workers.pids()[0]
    assert os.listdir(f"/proc/{pid}/fd") == ["0"]  # its socket, nothing else
    assert open(f"/proc/{pid}/environ", "rb").read() == b""
    limits = open(f"/proc/{pid}/limits").read()
    assert [line.split()[3:5] for line in limits.splitlines() if line.startswith("Max open files")] \
        == [["1", "1"]]
    assert any(line.startswith("Max file size") and line.split()[3] == "0" for line in limits.splitlines())
    proc = dict(line.split(":\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines()
                if ":\t" in line)
    assert (proc["Seccomp"], proc["NoNewPrivs"]) == ("2", "1")  # its syscall filter (filter mode)
    assert plugin_host.workers.seccomp is True
    if os.geteuid() == 0:  # as root, it runs as nobody in an empty root
        status = open(f"/proc/{pid}/status").read()
        uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
        assert uid_line.split()[1:] == ["65534"] * 4
        assert os.readlink(f"/proc/{pid}/root") != "/"


async def test_an_idle_worker_killed_is_replaced_before_a_call_meets_it(pclient, escapes, plugin_host) -> None:
    workers = plugin_host.workers
    await workers.wait_full()
    victims = workers.pids()
    for pid in victims:  # every worker, while idle
        os.kill(pid, signal.SIGKILL)
    for _ in range(500):
        if not set(victims) & set(workers.pids()):
            break
        await asyncio.sleep(0.01)
    for i in range(workers.size + 1):
        status, body = await invoke(pclient, escapes, "escape.ok", {"n": i})
        assert (status, body["output"]) == (200, {"n": i}), body
    await workers.wait_full()
    assert not set(victims) & set(workers.pids())

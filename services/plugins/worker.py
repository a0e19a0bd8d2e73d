"""The sandbox worker process: one plugin call at a time, each in a fresh QuickJS runtime.

Started by services.plugins.pool with its socket as fd 0, an empty environment and `python -I`.
It imports what it needs, then locks itself down before reading any job: every other fd
closed and no new one possible (RLIMIT_NOFILE=1: no file, socket, pipe or network), no file
writes, no core dumps, no processes (and, when started as root, chrooted into an empty
directory as `nobody`), a bounded address space, a CPU-time limit per call (SIGXCPU ends the
process). Inside, QuickJS has no std/os modules, no module loader (import() fails), no timers
and no host function but `internal` for plugins that declare internal APIs.

Deliberately self-contained (stdlib + the QuickJS binding): nothing of the project is
importable once the filesystem is gone.
"""

from __future__ import annotations

import json
import math
import os
import resource
import struct
import sys
import time
from typing import Any

import _quickjs  # the quickjs-ng wheel's C module (`import quickjs` would start a helper thread)

FD = 0
HEADER = struct.Struct(">I")
MAX_FRAME = 8 << 20
NOBODY = 65534

# Evaluated before the plugin's code, in the plugin's fresh context. It keeps the pristine JSON
# functions and the host bridge in a closure, removes ambient capabilities that are not needed
# (clocks precise enough for timing attacks, shared memory, GC observers), defines `internal`
# as a frozen, non-writable global (tampering with it only harms the plugin's own call: every
# check happens on the host side), and returns the runner that calls `invoke`.
PRELUDE = r"""
(function (G) {
  "use strict";
  const parse = JSON.parse, stringify = JSON.stringify, freeze = Object.freeze;
  const host = G.__toolproxy_host;
  delete G.__toolproxy_host;
  for (const name of ["performance", "SharedArrayBuffer", "Atomics", "WeakRef",
                      "FinalizationRegistry"]) {
    delete G[name];
  }
  if (typeof host === "function") {
    const internal = function internal(a, b, c) {
      const request = arguments.length >= 3 ? [a, b, c] : [null, a, b];
      const reply = parse(host(stringify(request)));
      if (reply.ok === true) return reply.output;
      const error = new Error(String(reply.message));
      error.code = String(reply.code);
      throw error;
    };
    Object.defineProperty(G, "internal", {
      value: freeze(internal), writable: false, enumerable: false, configurable: false,
    });
  }
  const text = (value) => stringify(value === undefined ? null : value);
  return function run(argsText, contextText) {
    const invoke = G.invoke;
    if (typeof invoke !== "function") {
      throw new TypeError("the entry defines no function invoke(args, context)");
    }
    const out = invoke(parse(argsText), freeze(parse(contextText)));
    if (out === null || typeof out !== "object" || typeof out.then !== "function") {
      return text(out);
    }
    const state = { done: false };
    Promise.resolve(out).then(
      (value) => { state.done = true; state.value = value; },
      (error) => { state.done = true; state.failed = true; state.error = error; });
    return function settle() {
      if (!state.done) throw new Error("invoke's promise never settled");
      if (state.failed) throw state.error;
      return text(state.value);
    };
  };
})(globalThis)
"""


class Failure(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message[:1000]


# --- framing on fd 0 ---------------------------------------------------------------------------


def _read_exact(n: int) -> bytes:
    chunks: list[bytes] = []
    while n > 0:
        chunk = os.read(FD, min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv() -> dict[str, Any]:
    (size,) = HEADER.unpack(_read_exact(HEADER.size))
    if size > MAX_FRAME:
        raise EOFError
    value = json.loads(_read_exact(size))
    if not isinstance(value, dict):
        raise EOFError
    return value


def send(message: dict[str, Any]) -> None:
    data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        written = os.write(FD, view)
        view = view[written:]


# --- lockdown ----------------------------------------------------------------------------------


def lockdown(root: str, address_space: int, cpu_lifetime_s: int) -> None:
    if os.geteuid() == 0:
        # Root can do everything a limit does not name: give the process nothing to see and
        # no privilege (rlimits on processes only bind non-root users).
        os.chroot(root)
        os.chdir("/")
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    else:
        os.chdir(root)
    os.closerange(1, 1 << 16)
    sys.stdout = sys.stderr = None  # type: ignore[assignment]
    for limit, value in (
        (resource.RLIMIT_NOFILE, 1),  # fd 0 (the socket) stays; no new fd of any kind
        (resource.RLIMIT_FSIZE, 0),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NPROC, 0),
        (resource.RLIMIT_MEMLOCK, 0),
        (resource.RLIMIT_AS, address_space),
    ):
        resource.setrlimit(limit, (value, value))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_lifetime_s, cpu_lifetime_s))


def cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- one call ----------------------------------------------------------------------------------


def _int64(text: str) -> int:
    value = int(text)
    if not -(1 << 63) <= value < (1 << 63):
        raise Failure("plugin_error", "the output holds an integer beyond 64 bits")
    return value


def _classify(exc: BaseException) -> Failure:
    if isinstance(exc, Failure):
        return exc
    if isinstance(exc, _quickjs.StackOverflow):
        return Failure("plugin_memory", "the plugin exceeded its stack limit (recursion too deep)")
    if isinstance(exc, MemoryError):
        return Failure("plugin_memory", "the plugin exceeded its memory limit")
    text = str(exc)
    if text.startswith("InternalError: interrupted"):
        return Failure("plugin_timeout", "the plugin exceeded its CPU time limit")
    if text.startswith("InternalError: out of memory"):
        return Failure("plugin_memory", "the plugin exceeded its memory limit")
    if text.startswith("RangeError: Maximum call stack size exceeded"):
        return Failure("plugin_memory", "the plugin exceeded its stack limit (recursion too deep)")
    return Failure("plugin_error", f"the plugin failed: {text}")


def _host_bridge() -> Any:
    def host(request: object) -> str:
        # The request is the plugin's JSON text: relayed as is, checked by the host.
        if not isinstance(request, str):
            return json.dumps({"ok": False, "code": "invalid_args", "message": "bad request"})
        try:
            send({"op": "internal", "request": request})
            reply = recv()
        except (EOFError, OSError):
            os._exit(0)  # the host is gone: nothing may go on
        if reply.get("op") != "internal_reply":
            os._exit(0)
        return json.dumps(reply.get("reply"), ensure_ascii=False)

    return host


def run(job: dict[str, Any]) -> dict[str, Any]:
    limits = job["limits"]
    cpu_budget = float(limits["cpu_s"])
    started = cpu_used()
    # A CPU ceiling for this call, enforced by the kernel even if QuickJS never checks.
    soft = min(int(math.ceil(started + cpu_budget)) + 1, resource.getrlimit(resource.RLIMIT_CPU)[1])
    resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.getrlimit(resource.RLIMIT_CPU)[1]))
    ctx = _quickjs.Context()
    ctx.set_memory_limit(int(limits["memory_bytes"]))
    ctx.set_max_stack_size(int(limits["stack_bytes"]))
    if job.get("internal"):
        # The binding refuses calls into Python under a QuickJS time limit: such plugins are
        # bounded by RLIMIT_CPU (above) and the host's wall clock alone.
        ctx.add_callable("__toolproxy_host", _host_bridge())
    else:
        ctx.set_time_limit(cpu_budget)  # the interrupt handler: uncatchable by the plugin
    try:
        runner = ctx.eval(PRELUDE)
        ctx.eval(job["source"])
        result = runner(job["args"], job["context"])
        if isinstance(result, _quickjs.Object):
            jobs = 0
            while ctx.execute_pending_job():
                jobs += 1
                if cpu_used() - started > cpu_budget:
                    raise Failure("plugin_timeout", "the plugin exceeded its CPU time limit")
                if jobs > 1_000_000:
                    raise Failure("plugin_error", "too many promise jobs")
            result = result()
        if not isinstance(result, str):
            raise Failure("plugin_error", "invoke did not return a JSON value")
        if len(result) > int(limits["max_output_chars"]):
            raise Failure("plugin_error", f"the output exceeds {limits['max_output_chars']} characters")
        output = json.loads(result, parse_int=_int64)
        if not isinstance(output, dict):
            raise Failure("plugin_error", "invoke must return an object")
    except BaseException as exc:  # every failure of the plugin ends with a stable code
        failure = _classify(exc)
        return {"op": "result", "ok": False, "code": failure.code, "message": failure.message,
                "cpu_s": round(cpu_used() - started, 6)}
    return {"op": "result", "ok": True, "output": output, "cpu_s": round(cpu_used() - started, 6)}


def main() -> None:
    root, address_space, cpu_lifetime = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    lockdown(root, address_space, cpu_lifetime)
    send({"op": "ready", "pid": os.getpid(), "at": time.time()})
    while True:
        try:
            job = recv()
        except EOFError:
            return
        if job.get("op") != "run":
            return
        try:
            send(run(job))
        except EOFError:
            return


if __name__ == "__main__":
    main()

"""The sandbox worker process: one plugin call at a time, each in a fresh QuickJS runtime.

Started by services.plugins.pool with its socket as fd 0, an empty environment and `python -I`.
It imports what it needs and builds its syscall filter, then locks itself down before reading
any job: every other fd closed and no new one possible (RLIMIT_NOFILE=1: no file, socket, pipe
or network), no file writes, no core dumps, no processes (and, when started as root, chrooted
into an empty directory as `nobody`), a bounded address space, a CPU-time limit per call
(SIGXCPU ends the process). Last, a seccomp filter (libseccomp through pyseccomp, with
no_new_privs) allows only the syscalls it needs from then on: read and write on fd 0; brk,
munmap, mremap, madvise, and mmap/mprotect without PROT_EXEC; rt_sigaction, rt_sigprocmask,
rt_sigreturn; the clocks; getpid, getrusage of itself, its own RLIMIT_CPU (prlimit64 of pid 0);
non-PI futex operations; tgkill of itself (abort); exit and exit_group. Any other syscall
(socket, connect, open, execve, fork/clone, ptrace, kill, mount, setuid, bpf, io_uring...)
fails with EPERM; one through another architecture's ABI (i386) kills the process. With the
argument `required` a worker that cannot build or install the filter refuses to serve (a
`refused` frame, then exit); with `off` it runs without one. Inside, QuickJS has no std/os
modules, no module loader (import() fails), no timers and no host function but `internal`
for plugins that declare internal APIs.

Deliberately self-contained (stdlib, the QuickJS binding and pyseccomp): nothing of the
project is importable once the filesystem is gone.
"""

from __future__ import annotations

import errno
import json
import math
import mmap
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
SECCOMP_MODES = ("required", "off")

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


class SeccompUnavailable(Exception):
    """The syscall filter cannot be built or installed: in `required` mode, no call is served."""

    code = "sandbox_unavailable"


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


# --- syscall filter ----------------------------------------------------------------------------

# Not in the stdlib: futex commands (the low bits of its op) and the flags ignored by the match.
FUTEX_CMD_MASK = 0xFFFF_FFFF & ~(128 | 256)  # ~(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME)
FUTEX_WAIT, FUTEX_WAKE, FUTEX_WAIT_BITSET, FUTEX_WAKE_BITSET = 0, 1, 9, 10

# Allowed without a condition once locked down. Found by tracing workers (strace -ff) through
# the escape suite, both examples and Date/Math/BigInt/typed-array/regex-heavy code: besides
# framing on fd 0 they only manage memory, read the process CPU clock (QuickJS's interrupt
# handler), their rusage and RLIMIT_CPU, and exit; the signal calls serve exit and abort.
PLAIN_SYSCALLS = ("brk", "munmap", "mremap", "madvise", "rt_sigaction", "rt_sigprocmask",
                  "rt_sigreturn", "clock_gettime", "clock_getres", "gettimeofday", "getpid",
                  "exit", "exit_group")


def _conditional_rules(sc: Any) -> list[tuple[str, tuple[Any, ...]]]:
    """(syscall, conditions ANDed): rules of one syscall are ORed."""
    no_exec = sc.Arg(2, sc.MASKED_EQ, mmap.PROT_EXEC, 0)  # no new executable memory
    futex = [("futex", (sc.Arg(1, sc.MASKED_EQ, FUTEX_CMD_MASK, cmd),))
             for cmd in (FUTEX_WAIT, FUTEX_WAKE, FUTEX_WAIT_BITSET, FUTEX_WAKE_BITSET)]
    return [
        ("read", (sc.Arg(0, sc.EQ, FD),)),
        ("write", (sc.Arg(0, sc.EQ, FD),)),
        ("mmap", (no_exec,)),
        ("mprotect", (no_exec,)),
        ("getrusage", (sc.Arg(0, sc.EQ, resource.RUSAGE_SELF),)),
        # glibc's getrlimit/setrlimit are prlimit64(0, ...): only this process's RLIMIT_CPU.
        ("prlimit64", (sc.Arg(0, sc.EQ, 0), sc.Arg(1, sc.EQ, resource.RLIMIT_CPU))),
        ("tgkill", (sc.Arg(0, sc.EQ, os.getpid()),)),  # raise(): abort() of itself only
        *futex,  # glibc aborts on an unexpected futex error; no PI or requeue operation
    ]


def build_filter() -> Any:
    """The allowlist (default: EPERM), built before lockdown: libseccomp is loaded from disk,
    which is gone after the chroot. Raises SeccompUnavailable."""
    try:
        import pyseccomp as sc  # ctypes over the system's libseccomp.so.2
    except Exception as exc:  # ImportError; RuntimeError or OSError without libseccomp
        raise SeccompUnavailable(f"libseccomp cannot be loaded: {exc}") from None
    try:
        syscall_filter = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
        syscall_filter.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)  # e.g. int 0x80 (i386)
        syscall_filter.set_attr(sc.Attr.CTL_NNP, 1)  # no_new_privs (libseccomp's default)
        for name in PLAIN_SYSCALLS:
            syscall_filter.add_rule(sc.ALLOW, name)
        for name, conditions in _conditional_rules(sc):
            syscall_filter.add_rule(sc.ALLOW, name, *conditions)
    except Exception as exc:  # OSError from libseccomp; ctypes errors from an odd build
        raise SeccompUnavailable(f"the syscall filter cannot be built: {exc}") from None
    return syscall_filter


def prepare(mode: str) -> Any | None:
    """The filter to install for `mode` (None when off). Raises SeccompUnavailable."""
    if mode not in SECCOMP_MODES:
        raise SeccompUnavailable(f"unknown seccomp mode {mode[:40]!r}")
    return build_filter() if mode == "required" else None


def install_filter(syscall_filter: Any) -> None:
    try:
        syscall_filter.load()
    except Exception as exc:
        raise SeccompUnavailable(f"the syscall filter cannot be installed: {exc}") from None


# --- lockdown ----------------------------------------------------------------------------------


def lockdown(root: str, address_space: int, cpu_lifetime_s: int,
             syscall_filter: Any | None = None) -> None:
    """Raises SeccompUnavailable if `syscall_filter` (the last step) cannot be installed."""
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
    if syscall_filter is not None:
        install_filter(syscall_filter)


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
    if isinstance(exc, PermissionError):  # EPERM: a syscall the filter (or a limit) refused
        return Failure("plugin_error", "the sandbox refused an operation of the call")
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
    root, mode = sys.argv[1], sys.argv[4]
    address_space, cpu_lifetime = int(sys.argv[2]), int(sys.argv[3])
    try:
        syscall_filter = prepare(mode)
        lockdown(root, address_space, cpu_lifetime, syscall_filter)
    except SeccompUnavailable as exc:
        send({"op": "refused", "code": exc.code, "message": str(exc)[:1000]})
        sys.exit(1)
    send({"op": "ready", "pid": os.getpid(), "at": time.time(), "seccomp": syscall_filter is not None})
    del syscall_filter  # libseccomp's copy; the kernel keeps the installed filter
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

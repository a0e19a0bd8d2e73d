"""A pool of sandbox worker processes: one call per worker at a time; a worker that overruns
its call's deadline, dies or breaks the protocol is killed (by its PID) and replaced."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from services.plugins.config import SandboxLimits
from services.plugins.errors import (
    PLUGIN_ERROR,
    PLUGIN_TIMEOUT,
    PluginFailure,
    SandboxUnavailable,
)

log = structlog.get_logger("toolproxy.plugins.pool")

WORKER_PATH = str(Path(__file__).with_name("worker.py"))
HEADER = struct.Struct(">I")
MAX_FRAME = 8 << 20
READY_TIMEOUT_S = 20.0
REFUSED_RETRY_MAX_S = 60.0  # between tries to start a worker while the sandbox is unavailable

# The host's answer to one internal() request (JSON text from the plugin): a reply object.
InternalHandler = Callable[[Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Job:
    source: str
    args: dict[str, Any]
    context: dict[str, Any]
    internal: bool = False


@dataclass(frozen=True, slots=True)
class RunResult:
    output: dict[str, Any]
    cpu_s: float
    worker_pid: int


class ProtocolError(Exception):
    """The worker sent something that is not a frame of the protocol."""


class Worker:
    def __init__(self, proc: asyncio.subprocess.Process, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.reader = reader
        self.writer = writer
        self.calls = 0
        self.cpu_s = 0.0
        self.busy = False
        self.seccomp = False  # its ready frame said its syscall filter is installed

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    async def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")
        self.writer.write(HEADER.pack(len(data)) + data)
        await self.writer.drain()

    async def recv(self) -> dict[str, Any]:
        (size,) = HEADER.unpack(await self.reader.readexactly(HEADER.size))
        if size > MAX_FRAME:
            raise ProtocolError(f"a frame of {size} bytes")
        try:
            value = json.loads(await self.reader.readexactly(size))
        except ValueError:
            raise ProtocolError("a frame that is not JSON") from None
        if not isinstance(value, dict):
            raise ProtocolError("a frame that is not an object")
        return value

    def kill(self) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        self.writer.close()

    async def exit_code(self, timeout: float = 2.0) -> int | None:
        with contextlib.suppress(asyncio.TimeoutError):
            return await asyncio.wait_for(self.proc.wait(), timeout)
        return None


class WorkerPool:
    """`size` workers started ahead; a call waits (within its deadline) for an idle one."""

    def __init__(self, size: int, limits: SandboxLimits | None = None, *,
                 calls_per_worker: int = 1000, python: str = sys.executable) -> None:
        self.size = size
        self.limits = limits or SandboxLimits()
        self.calls_per_worker = calls_per_worker
        self._python = python
        self._root: str | None = None
        self._workers: set[Worker] = set()
        self._idle: asyncio.Queue[Worker] = asyncio.Queue()
        self._spawning: set[asyncio.Task[None]] = set()
        self._closing = False
        self._changed = asyncio.Condition()
        self.spawned = 0
        self.replaced = 0
        self.unavailable: str | None = None  # why the last worker started refused to serve

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        # An empty directory: the workers' cwd, and their whole filesystem when run as root.
        self._root = tempfile.mkdtemp(prefix="toolproxy-sandbox-")
        started = await asyncio.gather(*(self._spawn() for _ in range(self.size)),
                                       return_exceptions=True)
        for w in started:
            if isinstance(w, Worker):
                self._add(w)
        for exc in started:
            if isinstance(exc, SandboxUnavailable):
                # Not fatal to the host: calls fail closed meanwhile, and the pool keeps
                # trying (slowly), as for a worker that cannot be replaced.
                self._start_replacement()
            elif isinstance(exc, BaseException):
                raise exc

    async def close(self) -> None:
        self._closing = True
        for task in list(self._spawning):
            task.cancel()
        for w in list(self._workers):
            w.kill()
        for w in list(self._workers):
            await w.exit_code()
        self._workers.clear()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)

    def pids(self) -> list[int]:
        return sorted(w.pid for w in self._workers if w.alive)

    def busy_pids(self) -> list[int]:
        return sorted(w.pid for w in self._workers if w.alive and w.busy)

    @property
    def seccomp(self) -> bool:
        """Whether there are live workers and each reported its syscall filter installed."""
        live = [w for w in self._workers if w.alive]
        return bool(live) and all(w.seccomp for w in live)

    async def wait_full(self, timeout: float = 20.0) -> None:
        """Until `size` live workers are ready (after a replacement, for instance)."""
        async def full() -> None:
            async with self._changed:
                await self._changed.wait_for(
                    lambda: sum(1 for w in self._workers if w.alive) >= self.size)

        await asyncio.wait_for(full(), timeout)

    async def _spawn(self) -> Worker:
        assert self._root is not None
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            proc = await asyncio.create_subprocess_exec(
                self._python, "-I", "-B", WORKER_PATH, self._root,
                str(self.limits.address_space_bytes), str(self.limits.cpu_lifetime_s),
                self.limits.seccomp,
                stdin=child.fileno(), stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL, env={}, cwd=self._root, close_fds=True,
            )
        finally:
            child.close()
        reader, writer = await asyncio.open_connection(sock=parent, limit=MAX_FRAME + HEADER.size)
        worker = Worker(proc, reader, writer)
        try:
            hello = await asyncio.wait_for(worker.recv(), READY_TIMEOUT_S)
            worker.seccomp = self._check_ready(hello)
        except SandboxUnavailable as exc:
            worker.kill()
            self.unavailable = str(exc)
            log.error("sandbox_unavailable", reason=self.unavailable, seccomp=self.limits.seccomp,
                      hint="the workers refuse to serve without their syscall filter; "
                           "TOOLPROXY_PLUGIN_SECCOMP=off only where the platform has no seccomp")
            raise
        except BaseException:
            worker.kill()
            raise
        self.spawned += 1
        self.unavailable = None
        return worker

    def _check_ready(self, hello: dict[str, Any]) -> bool:
        """Whether the worker's filter is on. Raises SandboxUnavailable if it refused to serve
        or, when the filter is required, does not say it installed it."""
        if hello.get("op") == "refused":
            raise SandboxUnavailable(str(hello.get("message") or "the worker refused to serve")[:1000])
        if hello.get("op") != "ready":
            raise ProtocolError("no ready frame")
        seccomp = hello.get("seccomp") is True
        if self.limits.seccomp == "required" and not seccomp:
            raise SandboxUnavailable("the worker did not report its syscall filter installed")
        return seccomp

    def _add(self, w: Worker) -> None:
        self._workers.add(w)
        self._idle.put_nowait(w)
        self._notify()
        watch = asyncio.ensure_future(self._watch(w))
        self._spawning.add(watch)
        watch.add_done_callback(self._spawning.discard)

    async def _watch(self, w: Worker) -> None:
        """A worker that dies while idle (killed from outside) is replaced at once, before a
        call is handed to it; one that dies during a call is the call's to report."""
        await w.proc.wait()
        if not w.busy and w in self._workers:
            log.warning("sandbox_worker_died_idle", pid=w.pid, code=w.proc.returncode)
            self._retire(w)

    def _notify(self) -> None:
        async def tell() -> None:
            async with self._changed:
                self._changed.notify_all()

        if not self._closing:
            task = asyncio.ensure_future(tell())
            self._spawning.add(task)
            task.add_done_callback(self._spawning.discard)

    def _retire(self, w: Worker) -> None:
        """Kill the worker (by its PID) and start its replacement."""
        w.kill()
        self._workers.discard(w)
        self._notify()
        if self._closing:
            return
        self.replaced += 1
        self._start_replacement()

    def _start_replacement(self) -> None:
        task = asyncio.ensure_future(self._replace())
        self._spawning.add(task)
        task.add_done_callback(self._spawning.discard)

    async def _replace(self) -> None:
        delay = 0.2
        while not self._closing:
            try:
                self._add(await self._spawn())
                return
            except asyncio.CancelledError:
                raise
            except SandboxUnavailable:  # logged by _spawn; unlikely to change soon
                await asyncio.sleep(delay)
                delay = min(delay * 2, REFUSED_RETRY_MAX_S)
            except Exception as exc:  # keep trying: calls wait for a worker within their deadline
                log.error("sandbox_worker_spawn_failed", error=str(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    # --- calls ------------------------------------------------------------------------------

    async def _acquire(self, deadline: float) -> Worker:
        while True:
            if self.unavailable is not None and not any(w.alive for w in self._workers):
                # Fail closed at once (nothing ran), as for a worker that died: no timeout.
                raise PluginFailure(PLUGIN_ERROR, "no sandbox worker can serve: the sandbox is "
                                    f"unavailable ({self.unavailable})")
            remaining = deadline - time.time()
            if remaining <= 0:
                raise PluginFailure(PLUGIN_TIMEOUT, "no sandbox worker became free before the deadline")
            try:
                w = await asyncio.wait_for(self._idle.get(), remaining)
            except asyncio.TimeoutError:
                raise PluginFailure(PLUGIN_TIMEOUT,
                                    "no sandbox worker became free before the deadline") from None
            if w.alive and w in self._workers and not w.reader.at_eof():
                return w
            if w in self._workers:  # died while idle
                self._retire(w)

    async def run(self, job: Job, *, deadline: float, on_internal: InternalHandler) -> RunResult:
        """Run one call before `deadline` (epoch seconds). Raises PluginFailure."""
        w = await self._acquire(deadline)
        w.busy = True
        healthy = False
        # Below the wall-clock budget, so a busy loop is usually interrupted (the worker
        # survives) before the host has to kill it.
        cpu_budget = max(0.05, 0.8 * (deadline - time.time()))
        try:
            async with asyncio.timeout(max(0.0, deadline - time.time())):
                await w.send({"op": "run", "source": job.source, "internal": job.internal,
                              "args": json.dumps(job.args), "context": json.dumps(job.context),
                              "limits": {"cpu_s": cpu_budget,
                                         "memory_bytes": self.limits.memory_bytes,
                                         "stack_bytes": self.limits.stack_bytes,
                                         "max_output_chars": self.limits.max_output_chars}})
                while True:
                    msg = await w.recv()
                    op = msg.get("op")
                    if op == "internal":
                        reply = await on_internal(msg.get("request"))
                        await w.send({"op": "internal_reply", "reply": reply})
                    elif op == "result":
                        break
                    else:
                        raise ProtocolError(f"unexpected frame {str(op)[:40]!r}")
            healthy = True
        except TimeoutError:
            raise PluginFailure(PLUGIN_TIMEOUT, "the plugin did not finish before its deadline; "
                                "its sandbox worker was stopped") from None
        except ProtocolError as exc:
            raise PluginFailure(PLUGIN_ERROR, f"the sandbox worker broke the protocol: {exc}") from None
        except (asyncio.IncompleteReadError, ConnectionError):
            code = await w.exit_code(1.0)
            if code == -signal.SIGXCPU:
                raise PluginFailure(PLUGIN_TIMEOUT, "the plugin exceeded its CPU time limit") from None
            if code is None:
                raise PluginFailure(PLUGIN_ERROR, "the sandbox worker closed its pipe") from None
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            raise PluginFailure(PLUGIN_ERROR, f"the sandbox worker died during the call ({how})") from None
        finally:
            w.busy = False
            if not healthy:
                self._retire(w)
        w.calls += 1
        cpu = float(msg.get("cpu_s") or 0.0)
        w.cpu_s += cpu
        if w.calls >= self.calls_per_worker or w.cpu_s > self.limits.cpu_lifetime_s / 2:
            self._retire(w)  # recycled: bounded lifetime, and far from its CPU hard limit
        else:
            self._idle.put_nowait(w)
        if msg.get("ok") is True and isinstance(msg.get("output"), dict):
            return RunResult(output=msg["output"], cpu_s=cpu, worker_pid=w.pid)
        code = msg.get("code") if msg.get("code") in PluginFailure.codes else PLUGIN_ERROR
        raise PluginFailure(str(code), str(msg.get("message") or "the plugin failed")[:1000])

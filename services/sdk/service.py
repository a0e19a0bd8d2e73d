"""A service: declared tools served in NATS queue groups, with catalog heartbeats."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from pydantic import ValidationError

from infra import log_context
from wire import protocol as p
from infra.nats_direct import subscribe_direct
from infra.worker_processes import warm, watch_parent
from services.sdk.errors import BadRequest, DeadlineExceeded, InvalidArgs, ManifestError, ToolError
from services.sdk.fairness import TeamSlots
from services.sdk.trust import CallTrust
from wire.call_context import ContextRefused
from wire.manifest import ToolManifest
from wire.validation import SchemaValidator

log = structlog.get_logger("toolproxy.service")


@dataclass(frozen=True, slots=True)
class CallContext:
    """The trusted identity and deadline of one invocation, as the proxy forwarded them."""

    call_id: str
    decision_id: str
    team_id: str
    agent_id: str
    run_id: str | None
    deadline: float  # time.time() seconds
    confidential: bool = False
    approval: str | None = None  # "per_call" | "standing" for calls that needed an approval
    approval_ref: str | None = None  # the approval's binding hash, or the standing approval's id
    replica: str | None = None  # the proxy replica running the call (plugin calls only)
    turn_id: str | None = None  # the agent turn that made the call, if any
    # Where CPU-bound work runs (`await ctx.run_cpu(fn, *args)`): the service's worker
    # processes when it has some (cpu_workers), else a thread.
    executor: Executor | None = None

    def remaining(self) -> float:
        return self.deadline - time.time()

    async def run_cpu(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Off the event loop; in a worker process, the GIL of the service's other tools is
        left alone (fn and args must pickle: a module-level function)."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)


@dataclass(slots=True)
class ToolResult:
    """An output with its metering; a handler may also return a plain dict (no metering)."""

    output: dict[str, Any]
    tokens_used: int = 0
    compute_units: float = 0.0
    object_refs: list[Any] = field(default_factory=list)
    artifacts: list[Any] = field(default_factory=list)
    observations: list[Any] = field(default_factory=list)
    provenance_refs: list[Any] = field(default_factory=list)


Handler = Callable[[dict[str, Any], CallContext], Awaitable["ToolResult | dict[str, Any]"]]


@dataclass(slots=True)
class ToolDef:
    manifest: ToolManifest
    handler: Handler
    _validator: SchemaValidator | None = None
    prepare: Handler | None = None  # required by (and only with) manifest.approval_preview
    # The module of the functions the handler runs with `run_cpu`: the service's worker
    # processes import it as they start (default: the handler's own module). A module of pure
    # logic keeps each worker small: it never loads the SDK, NATS or pydantic.
    cpu_module: str | None = None

    def check_args(self, args: dict[str, Any]) -> None:
        """Defense in depth: the proxy validated already, but a service never trusts the bus."""
        if self._validator is None:
            self._validator = SchemaValidator(self.manifest.input_schema)
        error = self._validator.problem(args)
        if error is not None:
            where = error.json_path
            raise InvalidArgs(f"invalid args: {where}: {_short(error.message)}")


def tool(**manifest: Any) -> Callable[[Handler], ToolDef]:
    """Declare a tool: `@tool(tool_id=..., category=..., action=..., input_schema=..., ...)`.

    Raises ManifestError at import time for an unclassified or malformed declaration.
    """

    def wrap(handler: Handler) -> ToolDef:
        return ToolDef(manifest=make_manifest(manifest), handler=handler)

    return wrap


def make_manifest(fields: dict[str, Any]) -> ToolManifest:
    missing = [k for k in ("category", "action") if k not in fields]
    if missing:
        raise ManifestError(
            f"tool {fields.get('tool_id')!r} is unclassified: {', '.join(missing)} must be explicit"
        )
    try:
        return ToolManifest.model_validate(fields)
    except ValidationError as exc:
        raise ManifestError(f"tool {fields.get('tool_id')!r}: {exc}") from exc


@dataclass
class Service:
    """A named group of tools. `start()` subscribes and announces; `stop()` says goodbye."""

    name: str
    tools: list[ToolDef]
    heartbeat_s: float = 2.0
    # Calls running at once in this instance, and a team's share of them (default: a quarter,
    # at least 1) plus how many more of its calls may wait; past that a team's calls are
    # answered busy at once (the proxy: 503 tool_busy), so no team fills the service.
    max_concurrency: int = 256
    per_team_concurrency: int | None = None
    max_queued_per_team: int = 64
    # Worker processes for CPU-bound work (CallContext.run_cpu); 0: threads of this process.
    cpu_workers: int = 0
    instance: str = field(default_factory=lambda: uuid.uuid4().hex)
    # Resources the tools own (an HTTP session...), released by stop() after the last call.
    on_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    # Tools served but not announced right now (the upstream bridge: a changed tool, a down
    # upstream): their handlers still answer, the catalog shows them unavailable.
    hidden: Callable[[str], bool] | None = None
    _nc: NATS | None = field(default=None, init=False)
    _subs: list[Subscription] = field(default_factory=list, init=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _heartbeat: asyncio.Task[None] | None = field(default=None, init=False)
    _slots: TeamSlots | None = field(default=None, init=False)
    _running: dict[str, asyncio.Task[Any]] = field(default_factory=dict, init=False)
    _executor: ProcessPoolExecutor | None = field(default=None, init=False)
    _trust: CallTrust | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        names = [t.manifest.tool_id for t in self.tools]
        if len(names) != len(set(names)):
            raise ManifestError(f"service {self.name!r} declares a tool twice")
        if self.per_team_concurrency is None:
            self.per_team_concurrency = max(1, self.max_concurrency // 4)
        for t in self.tools:
            if t.manifest.approval_preview != (t.prepare is not None):
                raise ManifestError(
                    f"tool {t.manifest.tool_id!r}: approval_preview needs a prepare handler, "
                    "and a prepare handler needs approval_preview")

    @property
    def manifests(self) -> list[ToolManifest]:
        return [t.manifest for t in self.tools]

    async def start(self, nc: NATS, trust: CallTrust | None = None) -> None:
        """`trust`: the proxy's call-context keys (default: from TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS)."""
        self._nc = nc
        self._trust = trust or self._trust or CallTrust.from_env()
        assert self.per_team_concurrency is not None
        self._slots = TeamSlots(self.max_concurrency, self.per_team_concurrency,
                                self.max_queued_per_team)
        if self.cpu_workers > 0 and self._executor is None:
            self._executor = ProcessPoolExecutor(
                self.cpu_workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=watch_parent, initargs=(os.getpid(),))
        for t in self.tools:
            sub = await subscribe_direct(nc, p.invoke_subject(t.manifest.tool_id),
                                         self._dispatcher(t), queue=p.queue_group(t.manifest.tool_id))
            self._subs.append(sub)
            self._subs.append(
                await nc.subscribe(p.cancel_subject(t.manifest.tool_id), cb=self._on_cancel)
            )
            if t.prepare is not None:
                self._subs.append(await subscribe_direct(
                    nc, p.prepare_subject(t.manifest.tool_id), self._dispatcher(t, t.prepare),
                    queue=p.queue_group(t.manifest.tool_id)))
        self._subs.append(await nc.subscribe(p.DISCOVER_SUBJECT, cb=self._on_discover))
        await nc.flush()
        await self.announce()
        self._heartbeat = asyncio.create_task(self._beat(), name=f"heartbeat:{self.name}")
        if self._executor is not None:
            # The worker processes start (and import the handlers' modules) now, in the
            # background: the first calls queue behind this rather than start them.
            loop = asyncio.get_running_loop()
            modules = sorted({t.cpu_module or t.handler.__module__ for t in self.tools})
            for m in modules:
                for _ in range(self.cpu_workers):
                    loop.run_in_executor(self._executor, warm, m)

    async def stop(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        nc = self._nc
        for sub in self._subs:
            try:
                await sub.unsubscribe()
            except Exception:  # connection already closed: nothing left to unsubscribe
                pass
        self._subs.clear()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        if self._executor is not None:
            # Waits for the worker processes to exit (a running call's work is bounded).
            await asyncio.to_thread(self._executor.shutdown, True, cancel_futures=True)
            self._executor = None
        for close in self.on_stop:
            try:
                await close()
            except Exception as exc:  # one failing release must not skip the goodbye
                log.warning("release_failed", service=self.name, error=str(exc))
        if nc is not None and nc.is_connected:
            body = p.Goodbye(instance=self.instance).model_dump_json().encode()
            await nc.publish(p.GOODBYE_SUBJECT, body)
            await nc.flush()

    async def announce(self) -> None:
        assert self._nc is not None
        body = p.Announcement(
            service=self.name,
            instance=self.instance,
            heartbeat_s=self.heartbeat_s,
            tools=[m.model_dump(mode="json") for m in self.manifests
                   if self.hidden is None or not self.hidden(m.tool_id)],
        )
        await self._nc.publish(p.ANNOUNCE_SUBJECT, body.model_dump_json().encode())

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self.announce()
            except Exception as exc:  # reconnecting: the next beat will tell
                log.warning("announce_failed", service=self.name, error=str(exc))

    async def _on_discover(self, msg: Msg) -> None:
        await self.announce()

    async def _on_cancel(self, msg: Msg) -> None:
        call_id = (msg.headers or {}).get(p.H_CALL_ID, "")
        task = self._running.get(call_id)
        if task is not None and not task.done():
            log.info("call_cancelled", call_id=call_id)
            task.cancel()

    def _dispatcher(self, t: ToolDef, handler: Handler | None = None) -> Callable[[Msg], None]:
        # Run in nats-py's read loop (infra.nats_direct): never wait here (one team's full
        # share would hold up every team's calls, and every other message); each admitted
        # message gets its own task, which waits for a slot of its team.
        run = handler or t.handler

        def dispatch(msg: Msg) -> None:
            assert self._slots is not None and self._nc is not None and self._trust is not None
            # Nothing runs on a context the proxy did not sign for this subject and body.
            try:
                claims = self._trust.verify(msg)
            except ContextRefused as exc:
                log.warning("call_context_refused", tool=t.manifest.tool_id, code=exc.code)
                self._spawn(self._refuse(msg, exc.code, exc.message))
                return
            team = claims["team"]
            if not self._slots.admit(team):
                log.info("call_refused_busy", tool=t.manifest.tool_id, team_id=team)
                self._spawn(self._refuse(msg, p.BUSY, f"{t.manifest.tool_id} is serving this "
                                         "team's share of calls; retry shortly"))
                return
            self._spawn(self._handle(t, msg, claims, run))

        return dispatch

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refuse(self, msg: Msg, code: str, message: str) -> None:
        assert self._nc is not None
        with contextlib.suppress(Exception):
            await p.respond(self._nc, msg, orjson.dumps(_error(code, message)))

    async def _handle(self, t: ToolDef, msg: Msg, claims: dict[str, Any], handler: Handler) -> None:
        assert self._slots is not None and self._nc is not None
        ctx = _context(claims, self._executor)
        team = ctx.team_id
        with log_context.bound(call_id=ctx.call_id, decision_id=ctx.decision_id,
                               tool=t.manifest.tool_id):
            current = asyncio.current_task()
            if ctx.call_id and current is not None:
                self._running[ctx.call_id] = current
            try:
                async with self._slots.slot(team, timeout=max(ctx.remaining(), 0.0)):
                    reply = await self._run(t, msg.data, ctx, handler)
                    # Sent before the slot is given back and the call forgotten: the proxy
                    # waits for nothing else (at one connection, the bookkeeping runs while
                    # the reply travels).
                    await self._reply(msg, reply, ctx)
            except asyncio.CancelledError:
                return  # cancelled by the proxy: nobody waits for a reply any more
            except TimeoutError:
                log.info("deadline_passed_waiting_for_a_slot", team_id=team)
                return  # the proxy has answered 504 already
            finally:
                self._running.pop(ctx.call_id, None)

    async def _reply(self, msg: Msg, reply: dict[str, Any], ctx: CallContext) -> None:
        assert self._nc is not None
        if ctx.remaining() <= 0:
            log.info("reply_after_deadline_dropped")
            return
        try:
            await p.respond(self._nc, msg, orjson.dumps(reply))
        except Exception as exc:
            log.warning("reply_failed", error=str(exc))

    async def _run(self, t: ToolDef, data: bytes, ctx: CallContext,
                   handler: Handler | None = None) -> dict[str, Any]:
        try:
            request = p.ToolRequest.model_validate_json(data)
        except ValidationError:
            return _error(BadRequest.code, "the request is not a tool request")
        try:
            t.check_args(request.args)
            async with asyncio.timeout(max(ctx.remaining(), 0.0)):
                result = await (handler or t.handler)(request.args, ctx)
        except ToolError as exc:
            return _error(exc.code, exc.message)
        except TimeoutError:
            log.info("deadline_exceeded")
            return _error(DeadlineExceeded.code, "the tool did not finish before its deadline")
        except Exception:
            log.exception("tool_crashed")
            return _error(ToolError.code, "the tool failed unexpectedly")
        if isinstance(result, ToolResult):
            return {
                "ok": True,
                "output": result.output,
                "tokens_used": result.tokens_used,
                "compute_units": result.compute_units,
                "object_refs": result.object_refs,
                "artifacts": result.artifacts,
                "observations": result.observations,
                "provenance_refs": result.provenance_refs,
            }
        return {"ok": True, "output": result}


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code[:64], "message": _short(message, 1000)}}


def _context(claims: dict[str, Any], executor: Executor | None = None) -> CallContext:
    """From the verified claims only (services.sdk.trust): the headers are for logs."""
    return CallContext(
        call_id=claims["call"], decision_id=str(claims.get("decision") or ""),
        team_id=claims["team"], agent_id=claims["agent"], run_id=claims.get("run") or None,
        deadline=claims["exp"] / 1000.0, confidential=claims.get("confidential") is True,
        approval=claims.get("approval") or None, approval_ref=claims.get("approval_ref") or None,
        replica=claims.get("replica") or None, turn_id=claims.get("turn") or None,
        executor=executor,
    )

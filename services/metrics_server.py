"""/metrics and /healthz of the processes that serve no HTTP (`services`, `plugin-host`,
`upstream-bridge`), on
TOOLPROXY_METRICS_PORT: their NATS connection, their process, and what each one serves."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

class _Callback(Collector):
    """Reads its values when scraped, so the runner keeps no counters of its own."""

    def __init__(self, families: Callable[[], Iterable[Any]]) -> None:
        self._families = families

    def collect(self) -> Iterator[Any]:
        yield from self._families()


def nats_families(process: str, nc: Any) -> Iterator[Any]:
    """The NATS client's own statistics: messages in are the calls and announcements received."""
    stats: dict[str, int] = getattr(nc, "stats", {}) or {}
    connected = GaugeMetricFamily("toolproxy_process_nats_connected",
                                  "1 while this process's NATS connection is up", labels=["process"])
    connected.add_metric([process], 1.0 if getattr(nc, "is_connected", False) else 0.0)
    yield connected
    # The server's max_payload as announced to this client: a bus below what the product needs
    # (8 MiB, as the embedded NATS) refuses large tool calls and replies.
    payload = GaugeMetricFamily("toolproxy_process_nats_max_payload_bytes",
                                "The largest message the NATS server accepts", labels=["process"])
    payload.add_metric([process], float(getattr(nc, "max_payload", 0) or 0))
    yield payload
    msgs = CounterMetricFamily("toolproxy_process_nats_messages", "NATS messages",
                               labels=["process", "direction"])
    nbytes = CounterMetricFamily("toolproxy_process_nats_bytes", "NATS payload bytes",
                                 labels=["process", "direction"])
    for direction in ("in", "out"):
        msgs.add_metric([process, direction], float(stats.get(f"{direction}_msgs", 0)))
        nbytes.add_metric([process, direction], float(stats.get(f"{direction}_bytes", 0)))
    yield msgs
    yield nbytes
    reconnects = CounterMetricFamily("toolproxy_process_nats_reconnects",
                                     "Reconnections to NATS", labels=["process"])
    reconnects.add_metric([process], float(stats.get("reconnects", 0)))
    yield reconnects


def process_registry(process: str, nc: Any,
                     families: Callable[[], Iterable[Any]] | None = None) -> CollectorRegistry:
    """A registry of its own (no process globals): the process, Python's GC, the NATS client,
    and `families`, what this kind of process serves."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    registry.register(_Callback(lambda: nats_families(process, nc)))
    if families is not None:
        registry.register(_Callback(families))
    return registry


def _gauge(name: str, doc: str, labels: list[str], rows: Iterable[tuple[list[str], float]]) -> Any:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for values, value in rows:
        family.add_metric(values, value)
    return family


def _counter(name: str, doc: str, value: float) -> Any:
    family = CounterMetricFamily(name, doc)
    family.add_metric([], value)
    return family


def services_families(services: Iterable[Any]) -> Callable[[], Iterator[Any]]:
    """`toolproxy services`: the tools each service of this process serves."""
    def families() -> Iterator[Any]:
        yield _gauge("toolproxy_service_tools", "Tools this process serves, by service",
                     ["service"], (([s.name], float(len(s.tools))) for s in services))
    return families


def plugin_host_families(workers: Any, host: Any) -> Callable[[], Iterator[Any]]:
    """`toolproxy plugin-host`: its sandbox workers and the plugins it serves."""
    def families() -> Iterator[Any]:
        yield _gauge("toolproxy_plugin_workers", "Sandbox workers by state", ["state"],
                     [(["live"], float(len(workers.pids()))), (["busy"], float(len(workers.busy_pids())))])
        yield _gauge("toolproxy_plugin_workers_configured", "Sandbox workers the pool keeps", [],
                     [([], float(workers.size))])
        yield _counter("toolproxy_plugin_workers_spawned", "Sandbox workers started", workers.spawned)
        yield _counter("toolproxy_plugin_workers_replaced", "Sandbox workers replaced (died, or "
                       "retired after their calls)", workers.replaced)
        yield _gauge("toolproxy_plugin_seccomp", "1 when every live worker runs its syscall filter",
                     [], [([], 1.0 if workers.seccomp else 0.0)])
        yield _gauge("toolproxy_plugins_served", "Plugin versions served right now", [],
                     [([], float(len(host.serving())))])
    return families


def upstream_bridge_families(bridge: Any) -> Callable[[], Iterator[Any]]:
    """`toolproxy upstream-bridge`: per registered upstream, whether its session is up and the
    classified tools served (`bridge.links()`: name -> (healthy, breaker open, tools))."""
    def families() -> Iterator[Any]:
        links = bridge.links()
        yield _gauge("toolproxy_upstream_link_up", "1 while this bridge's session to the upstream "
                     "is up and its breaker closed", ["upstream"],
                     (([n], 1.0 if up else 0.0) for n, (up, _, _) in links.items()))
        yield _gauge("toolproxy_upstream_breaker_open", "1 while the upstream's breaker is open",
                     ["upstream"], (([n], 1.0 if open_ else 0.0) for n, (_, open_, _) in links.items()))
        yield _gauge("toolproxy_upstream_tools", "Classified tools this bridge serves, by upstream",
                     ["upstream"], (([n], float(tools)) for n, (_, _, tools) in links.items()))
    return families


class MetricsServer:
    """A tiny HTTP server in the process's own event loop: /healthz answering means the loop
    runs (a thread would answer while the loop is stuck), /metrics the registry."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self._registry = registry
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        assert self._runner is not None
        for site in self._runner.sites:
            server = getattr(site, "_server", None)
            if server is not None and server.sockets:
                return int(server.sockets[0].getsockname()[1])
        return self._port

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

"""An OpenAPI service as the bridge reaches it: its document re-read at each sync (from its URL
through netguard, or the stored one), and each call an HTTP request through netguard's fetcher
(every address checked, no redirects, bounded body, a timeout), the sealed secret added here."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from infra.secret_box import SecretBox
from services.netguard.errors import UpstreamUnreachable
from services.netguard.fetch import Fetcher
from services.netguard.guard import Guard
from services.netguard.hosts import HostPattern
from services.netguard.urls import parse_url
from services.sdk.errors import InvalidArgs, ToolError, UpstreamTimeout
from services.sdk.service import ToolResult
from services.upstreams.config import UpstreamSettings
from services.upstreams.errors import OpenApiRefused, UpstreamError, UpstreamUnavailable
from services.upstreams.addresses import admission
from services.upstreams.breaker import Breaker
from services.upstreams.oauth import TokenSource, token_source
from services.upstreams.openapi_doc import MAX_DOCUMENT_BYTES, load, operations
from services.upstreams.store import Upstream, sealed_name

RETRYABLE = frozenset({429, 502, 503, 504})
REDACTED = "[redacted]"


@dataclass(frozen=True, slots=True)
class OpenApiEndpoint:
    name: str
    base_url: str
    document_url: str | None
    document: dict[str, Any] | None
    headers: dict[str, str] | None
    timeout_s: float
    max_bytes: int
    tokens: TokenSource | None = None  # OAuth client credentials: each call carries its token
    max_concurrency: int = 8  # requests in flight to the service from this bridge replica


class OpenApiLink:
    """What the bridge asks of a link, for an OpenAPI service: no session, so healthy unless its
    breaker is open (failures in a row: no connection, timeouts, 429/5xx unavailable answers)."""

    protocol_version = "openapi"

    def __init__(self, endpoint: OpenApiEndpoint, fetcher: Fetcher, allowed: list[HostPattern],
                 breaker: Breaker | None = None) -> None:
        self.endpoint, self._fetcher, self._allowed = endpoint, fetcher, allowed
        self.breaker = breaker or Breaker(5, 10.0)
        self._slots = asyncio.Semaphore(endpoint.max_concurrency)

    @property
    def healthy(self) -> bool:
        return not self.breaker.open

    def start(self) -> None:
        return None

    async def close(self) -> None:
        await self._fetcher.close()
        if self.endpoint.tokens is not None:
            await self.endpoint.tokens.close()

    async def fetch_document(self) -> bytes:
        """The document at its URL, through netguard (no redirects, bounded)."""
        ep = self.endpoint
        assert ep.document_url is not None
        allow, internal_ok = admission(ep.document_url, self._allowed)
        response = await self._fetcher.fetch(
            parse_url(ep.document_url), allow, internal_ok=internal_ok,
            max_bytes=MAX_DOCUMENT_BYTES, timeout_s=max(ep.timeout_s, 5.0), accept=None,
            follow_redirects=False)
        if response.truncated:
            raise UpstreamError(f"the document exceeds {MAX_DOCUMENT_BYTES} bytes")
        if response.status != 200:
            raise UpstreamError(f"the document's URL answered {response.status}")
        return response.body

    async def list_tools(self) -> list[dict[str, Any]]:
        """Each operation's definition, from the document read again (or the stored one)."""
        try:
            # Validating is CPU work (~1-2 s for 500 operations): off the event loop.
            if self.endpoint.document_url is not None:
                raw = await self.fetch_document()
                return await asyncio.to_thread(lambda: operations(load(raw)))
            if self.endpoint.document is None:
                raise UpstreamError("no document")
            return await asyncio.to_thread(operations, self.endpoint.document)
        except OpenApiRefused as exc:
            raise UpstreamError(f"{exc.code}: {exc}") from None

    async def call(self, pinned: dict[str, Any], args: dict[str, Any], timeout_s: float) -> ToolResult:
        """The pinned operation (method, path, parameters' places), never the current document's."""
        if self.breaker.open:
            raise UpstreamUnavailable(f"{self.endpoint.name} failed repeatedly; its breaker is open")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:  # waiting for a slot is this replica's bound, not the service failing: no breaker
            async with asyncio.timeout(timeout_s):
                await self._slots.acquire()
        except TimeoutError:
            raise UpstreamTimeout(f"{self.endpoint.name} is at its concurrency bound "
                                  f"({self.endpoint.max_concurrency})") from None
        try:
            result = await self._call(pinned, args, max(deadline - loop.time(), 0.0))
        except (UpstreamUnavailable, UpstreamTimeout):
            self.breaker.failure()
            raise
        finally:
            self._slots.release()
        self.breaker.success()
        return result

    async def _send(self, target: Any, op: dict[str, Any], headers: dict[str, str],
                    args: dict[str, Any], timeout_s: float) -> Any:
        allow, internal_ok = admission(self.endpoint.base_url, self._allowed)
        try:
            return await self._fetcher.fetch(
                target, allow, internal_ok=internal_ok, max_bytes=self.endpoint.max_bytes,
                timeout_s=timeout_s, accept=None, method=op.get("method", "GET"), headers=headers,
                json_body=args.get("body") if op.get("body") else None, follow_redirects=False)
        except UpstreamUnreachable as exc:
            raise UpstreamUnavailable(exc.message) from None
        except (UpstreamTimeout, UpstreamUnavailable):
            raise
        except ToolError as exc:
            raise UpstreamError(f"{exc.code}: {exc.message}") from None

    async def _call(self, pinned: dict[str, Any], args: dict[str, Any], timeout_s: float) -> ToolResult:
        ep = self.endpoint
        op = (pinned.get("annotations") or {}).get("openapi") or {}
        path = str(op.get("path", "/"))
        query: list[tuple[str, str]] = []
        headers = {"Accept": "application/json"}
        for p in op.get("parameters") or []:
            if p["property"] not in args:
                continue
            value = args[p["property"]]
            # OpenAPI's default styles: a query array repeats the name (form, exploded); a path
            # or header array is comma-separated (simple).
            items = value if isinstance(value, list) else [value]
            texts = [v if isinstance(v, str) else orjson.dumps(v).decode() for v in items]
            if p["in"] == "query":
                query.extend((p["name"], t) for t in texts)
                continue
            text = ",".join(texts)
            if p["in"] == "path":
                path = path.replace("{" + p["name"] + "}", quote(text, safe=""))
            elif not text.isascii() or not text.isprintable() or len(text) > 1024:
                raise InvalidArgs(f"{p['property']}: a header takes printable ASCII, at most 1024 characters")
            else:
                headers[p["name"]] = text
        headers.update(ep.headers or {})  # the credential last: no argument replaces it
        base = parse_url(ep.base_url)
        target = dataclasses.replace(base, path=base.path.rstrip("/") + path, query=urlencode(query))
        deadline = asyncio.get_running_loop().time() + timeout_s
        secrets = list((ep.headers or {}).values())
        token = None
        for _ in range(2):  # with OAuth, a 401 gets one new token and one retry
            if ep.tokens is not None:
                token = await ep.tokens.token(stale=token)
                headers["Authorization"] = f"Bearer {token}"
                secrets.append(token)
            left = max(deadline - asyncio.get_running_loop().time(), 0.0)
            response = await self._send(target, op, headers, args, left)
            if response.status != 401 or ep.tokens is None:
                break
        text = response.text()
        for secret in secrets:
            text = text.replace(secret, REDACTED)
        if response.truncated:
            raise UpstreamError(f"the answer exceeds {ep.max_bytes} bytes")
        if response.status in RETRYABLE:
            raise UpstreamUnavailable(f"{ep.name} answered {response.status}")
        if not 200 <= response.status < 300:
            raise UpstreamError(f"{ep.name} answered {response.status}: {text[:300]}")
        body: Any = text
        if response.content_type == "application/json" or response.content_type.endswith("+json"):
            try:
                body = orjson.loads(text) if text else None
            except orjson.JSONDecodeError:
                raise UpstreamError(f"{ep.name} answered malformed JSON") from None
        output: dict[str, Any] = {"status": response.status}
        if text:
            output["body"] = body
        return ToolResult(output=output, provenance_refs=[
            {"type": "openapi", "upstream": ep.name, "method": op.get("method"), "path": op.get("path"),
             "status": response.status}])


def openapi_link(u: Upstream, settings: UpstreamSettings, box: SecretBox, guard: Guard) -> OpenApiLink:
    """Raises SecretUnavailable when the sealed secret does not open."""
    headers = None
    if u.secret_header and u.secret_sealed is not None and u.secret_key_id is not None:
        headers = {u.secret_header: box.open(sealed_name(u.name), u.secret_sealed, u.secret_key_id)}
    assert u.url is not None
    ep = OpenApiEndpoint(name=u.name, base_url=u.url, document_url=u.document_url,
                         document=u.document, headers=headers, timeout_s=u.timeout_ms / 1000,
                         max_bytes=settings.upstream_max_result_bytes,
                         tokens=token_source(u, settings, box, guard), max_concurrency=u.max_concurrency)
    return OpenApiLink(ep, Fetcher(guard, user_agent="toolproxy-openapi/1.0"), settings.host_patterns(),
                       Breaker(settings.upstream_breaker_failures, settings.upstream_breaker_open_s))

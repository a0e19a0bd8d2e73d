"""OAuth client credentials for an upstream (RFC 6749 §4.4): a token from its authorization
server through netguard's fetcher, cached until shortly before `expires_in`, fetched again on
expiry and once on a 401 from the upstream; the agent's own token never travels."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import httpx2
import orjson

from infra.secret_box import SecretBox
from services.netguard.errors import InvalidUrl, UrlNotAllowed
from services.netguard.fetch import Fetcher
from services.netguard.guard import Guard
from services.netguard.hosts import HostPattern
from services.netguard.urls import parse_url
from services.sdk.errors import ToolError, UpstreamTimeout
from services.upstreams.addresses import admission
from services.upstreams.config import UpstreamSettings
from services.upstreams.errors import AuthorizationUnavailable, GrantRefused
from services.upstreams.store import Upstream, sealed_name

MAX_TOKEN_ANSWER = 64 << 10  # a token answer read at most
MAX_TOKEN = 16 << 10  # an access token's length at most
DEFAULT_LIFETIME_S = 300.0  # an answer without expires_in is kept this long (or until a 401)
TOKEN_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class OAuthConfig:
    token_url: str
    client_id: str
    client_secret: str = field(repr=False)  # never in a log line or a traceback
    scope: str | None = None
    audience: str | None = None
    resource: str | None = None

    def sealed_text(self) -> str:
        """What is sealed, whole (a database writer cannot send the secret elsewhere)."""
        return orjson.dumps({"oauth": {k: getattr(self, k) for k in self.__slots__}}).decode()

    @classmethod
    def from_sealed(cls, text: str) -> OAuthConfig:
        return cls(**orjson.loads(text)["oauth"])


class TokenSource:
    """One upstream's access token: fetched once for any number of concurrent requests, kept
    until `margin` before it expires."""

    def __init__(self, name: str, config: OAuthConfig, fetcher: Fetcher,
                 admission: Callable[[str], tuple[list[HostPattern], bool]], *,
                 timeout_s: float = TOKEN_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name, self.config, self._fetcher, self._admission = name, config, fetcher, admission
        self._timeout_s, self._clock = min(max(timeout_s, 1.0), TOKEN_TIMEOUT_S), clock
        self._token: str | None = None
        self._refresh_at = 0.0
        self._lock = asyncio.Lock()
        self.fetched = 0  # token requests answered with a token (for tests and logs)
        # Why the last token request failed (None once one succeeds): a session the SDK ends
        # for it is answered with this code, whatever the SDK made of the exception.
        self.failure: ToolError | None = None

    async def token(self, *, stale: str | None = None) -> str:
        """The cached token, or a new one when it is near its end, or when `stale` (the token
        an upstream just refused with 401) is still the cached one."""
        async with self._lock:
            current = self._token
            if current is not None and current != stale and self._clock() < self._refresh_at:
                return current
            self._token = None
            try:
                token, lifetime = await self._fetch()
            except ToolError as exc:
                self.failure = exc
                raise
            self.failure = None
            margin = min(60.0, max(1.0, lifetime / 10))
            self._token, self._refresh_at = token, self._clock() + max(lifetime - margin, 0.0)
            self.fetched += 1
            return token

    async def close(self) -> None:
        await self._fetcher.close()

    async def _fetch(self) -> tuple[str, float]:
        c = self.config
        form = {"grant_type": "client_credentials"}
        for key in ("scope", "audience", "resource"):
            if getattr(c, key):
                form[key] = getattr(c, key)
        # RFC 6749 §2.3.1: client_secret_basic, each part form-encoded first.
        basic = base64.b64encode(f"{quote(c.client_id, safe='')}:{quote(c.client_secret, safe='')}"
                                 .encode()).decode()
        try:
            allow, internal_ok = self._admission(c.token_url)
            answer = await self._fetcher.fetch(
                parse_url(c.token_url), allow, internal_ok=internal_ok, max_bytes=MAX_TOKEN_ANSWER,
                timeout_s=self._timeout_s, accept=None, method="POST",
                headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                         "Content-Type": "application/x-www-form-urlencoded"},
                data=urlencode(form).encode(), follow_redirects=False)
        except (UrlNotAllowed, InvalidUrl) as exc:
            raise GrantRefused(f"{self.name}: the token URL is refused: {exc}") from None
        except UpstreamTimeout:
            raise AuthorizationUnavailable(
                f"{self.name}: the authorization server did not answer in time") from None
        except ToolError as exc:
            raise AuthorizationUnavailable(
                f"{self.name}: the authorization server cannot be reached ({exc.code})") from None
        if answer.status == 429 or answer.status >= 500:
            raise AuthorizationUnavailable(
                f"{self.name}: the authorization server answered {answer.status}")
        body = _json(answer.body) if not answer.truncated else None
        if answer.status != 200:
            code = body.get("error") if isinstance(body, dict) else None
            why = code if isinstance(code, str) and code.isascii() and len(code) <= 64 else "refused"
            raise GrantRefused(f"{self.name}: the authorization server refused the client "
                               f"credentials grant ({answer.status} {why})")
        return _token_of(self.name, body)


def _json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _token_of(name: str, body: Any) -> tuple[str, float]:
    if not isinstance(body, dict):
        raise GrantRefused(f"{name}: the token answer is not a JSON object (or too large)")
    token, kind, expires = body.get("access_token"), body.get("token_type"), body.get("expires_in")
    if (not isinstance(token, str) or not token or len(token) > MAX_TOKEN
            or not all(33 <= ord(ch) < 127 for ch in token)):
        raise GrantRefused(f"{name}: the token answer has no usable access_token")
    if not isinstance(kind, str) or kind.lower() != "bearer":
        raise GrantRefused(f"{name}: the token is not a bearer token")
    if expires is None:
        return token, DEFAULT_LIFETIME_S
    if isinstance(expires, bool) or not isinstance(expires, int | float) or expires <= 0:
        raise GrantRefused(f"{name}: the token answer's expires_in is not a positive number")
    return token, float(min(expires, 86_400))


class BearerAuth(httpx2.Auth):
    """Each request to the upstream carries the source's token; a 401 gets one fresh token and
    one retry (its body kept for that), never more."""

    requires_request_body = True

    def __init__(self, source: TokenSource) -> None:
        self.source = source

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        token = await self.source.token()
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:
            token = await self.source.token(stale=token)
            request.headers["Authorization"] = f"Bearer {token}"
            yield request

    def sync_auth_flow(self, request: httpx2.Request) -> Any:  # the bridge is async only
        raise RuntimeError("BearerAuth is async only")


def token_source(u: Upstream, settings: UpstreamSettings, box: SecretBox,
                 guard: Guard | None) -> TokenSource | None:
    """OAuth client credentials (sealed whole, no secret header): the upstream's token source."""
    if u.secret_header or u.secret_sealed is None or u.secret_key_id is None or guard is None:
        return None
    config = OAuthConfig.from_sealed(box.open(sealed_name(u.name), u.secret_sealed, u.secret_key_id))
    allowed = settings.host_patterns()
    return TokenSource(u.name, config, Fetcher(guard, user_agent="toolproxy-upstreams"),
                       lambda url: admission(url, allowed), timeout_s=u.timeout_ms / 1000)

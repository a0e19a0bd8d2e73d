"""What a service believes about a call: only a context the proxy signed, once, in its time."""

from __future__ import annotations

import heapq
import time
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from nats.aio.msg import Msg

from infra.call_keys import trusted_keys_from_env
from wire import call_context as cc

# Nonces seen and not yet expired, per service instance. A full set refuses rather than
# forgets (forgetting would let a replay through): at 100k it holds ~10 MB, far above what
# the calls of one validity window (their deadlines, seconds) reach.
MAX_SEEN = 100_000


class CallTrust:
    """The proxy's public keys and the nonces already acted on."""

    def __init__(self, keys: dict[str, Ed25519PublicKey], *, max_seen: int = MAX_SEEN) -> None:
        if not keys:
            raise ValueError("a service needs at least one trusted call-context key")
        self._keys = cc.verifying_keys(keys)
        self._max_seen = max_seen
        self._seen: set[str] = set()
        self._expiry: list[tuple[int, str]] = []  # (expires ms, nonce), a heap

    @classmethod
    def from_env(cls) -> CallTrust:
        """TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS or _PUBLIC_KEYS_FILE (infra.call_keys)."""
        return cls(trusted_keys_from_env())

    def verify(self, msg: Msg, now_ms: int | None = None) -> dict[str, Any]:
        """The claims of `msg`'s context, recorded as seen; ContextRefused otherwise."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        token = (msg.headers or {}).get(cc.H_CALL_CONTEXT)
        claims = cc.unseal(token, self._keys, subject=msg.subject, body=msg.data, now_ms=now)
        self._forget_expired(now)
        nonce = claims["nonce"]
        if nonce in self._seen:
            raise cc.ContextRefused(cc.REPLAYED, "this call context was already acted on")
        if len(self._seen) >= self._max_seen:
            raise cc.ContextRefused(cc.REPLAYED, "too many calls in the validity window to "
                                    "tell a replay; retry shortly")
        self._seen.add(nonce)
        # Kept until it could no longer pass the expiry check.
        heapq.heappush(self._expiry, (claims["exp"] + cc.CLOCK_SKEW_S * 1000, nonce))
        return claims

    def _forget_expired(self, now_ms: int) -> None:
        while self._expiry and self._expiry[0][0] < now_ms:
            _, nonce = heapq.heappop(self._expiry)
            self._seen.discard(nonce)

    @property
    def seen(self) -> int:
        return len(self._seen)

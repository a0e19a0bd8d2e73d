"""Stateless MCP sessions: the Mcp-Session-Id is a signed token, not a server-side record.

It carries the protocol version negotiated by `initialize` and is bound to the identity that
initialized it, so any worker or replica can serve the next request of the session without
shared state. It is never a credential: every request is authenticated by its bearer token,
and a session id presented with another identity's token is "not found". The MAC key comes
from what the replicas share (the dev key set's session secret, TOOLPROXY_JWT_SECRET, or the
secrets key: proxy/identity/verifier.py); a replica that shares none keys its own, and a client
whose session another replica does not know initializes again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
import weakref
from dataclasses import dataclass

import orjson
from aiohttp import web

from proxy.web.keys import VERIFIER
from proxy.identity.identity import Identity

PREFIX = "tp1"
MAX_AGE_S = 24 * 3600
MAX_LEN = 512


@dataclass(frozen=True, slots=True)
class Session:
    protocol_version: str
    issued_at: int
    tasks: bool = False  # the client declared the tasks capability at initialize


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionCodec:
    def __init__(self, key_material: str | bytes) -> None:
        raw = key_material.encode() if isinstance(key_material, str) else key_material
        self._key = hashlib.sha256(b"toolproxy-mcp-session-v1\0" + raw).digest()

    def _mac(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode("ascii"), hashlib.sha256).digest()[:18])

    def issue(self, identity: Identity, protocol_version: str, *, now: float | None = None,
              tasks: bool = False) -> str:
        claims = {"v": protocol_version, "a": identity.agent_id, "t": identity.team_id,
                  "i": int(now if now is not None else time.time()), "n": secrets.token_hex(6)}
        if tasks:
            claims["k"] = 1
        payload = _b64(orjson.dumps(claims))
        return f"{PREFIX}.{payload}.{self._mac(payload)}"

    def open(self, session_id: str, identity: Identity, *, now: float | None = None) -> Session | None:
        """The session, or None when the id is not one of ours, not this identity's, or too old."""
        if len(session_id) > MAX_LEN:
            return None
        parts = session_id.split(".")
        if len(parts) != 3 or parts[0] != PREFIX:
            return None
        _, payload, mac = parts
        if not hmac.compare_digest(mac, self._mac(payload)):
            return None
        try:
            claims = orjson.loads(_unb64(payload))
            version, agent, team, issued = claims["v"], claims["a"], claims["t"], int(claims["i"])
        except (ValueError, KeyError, TypeError):
            return None
        if (agent, team) != (identity.agent_id, identity.team_id):
            return None
        age = (now if now is not None else time.time()) - issued
        if not -60 <= age <= MAX_AGE_S:
            return None
        return Session(protocol_version=str(version), issued_at=issued, tasks=claims.get("k") == 1)


_codecs: weakref.WeakKeyDictionary[web.Application, SessionCodec] = weakref.WeakKeyDictionary()


def codec_for(app: web.Application) -> SessionCodec:
    """One codec per app, keyed from what the replicas share (read once)."""
    codec = _codecs.get(app)
    if codec is None:
        codec = SessionCodec(app[VERIFIER].session_secret())
        _codecs[app] = codec
    return codec

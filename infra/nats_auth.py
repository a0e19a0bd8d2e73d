"""A process's NATS identity and TLS, as nats-py connect options (never logged, never in a URL)."""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# Each identity's replies come to an inbox of its own (`_INBOX.<user>.…`): the server lets a
# user subscribe to its own inboxes only, so no process reads another one's replies.
INBOX_ROOT = "_INBOX"


class NatsAuthError(ValueError):
    """The NATS credentials or TLS settings are incomplete or unreadable."""


@dataclass(frozen=True, slots=True)
class NatsAuth:
    """User and password (the server's `authorization` users), or a credentials file (an NKey
    seed or a decentralised-auth `.creds`, signed with the `nkeys` package), and
    TLS when the operator gives certificates. Empty: connect without credentials."""

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    creds: Path | None = None
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    inbox_prefix: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> NatsAuth:
        """TOOLPROXY_NATS_USER/_PASSWORD or TOOLPROXY_NATS_CREDS; TOOLPROXY_NATS_TLS_CA, _CERT,
        _KEY; TOOLPROXY_NATS_INBOX_PREFIX (default `_INBOX.<user>`)."""
        e = os.environ if env is None else env

        def path(name: str) -> Path | None:
            value = (e.get(name) or "").strip()
            return Path(value) if value else None

        return cls(user=(e.get("TOOLPROXY_NATS_USER") or "").strip() or None,
                   password=e.get("TOOLPROXY_NATS_PASSWORD") or None,
                   creds=path("TOOLPROXY_NATS_CREDS"), tls_ca=path("TOOLPROXY_NATS_TLS_CA"),
                   tls_cert=path("TOOLPROXY_NATS_TLS_CERT"), tls_key=path("TOOLPROXY_NATS_TLS_KEY"),
                   inbox_prefix=(e.get("TOOLPROXY_NATS_INBOX_PREFIX") or "").strip() or None)

    def check(self) -> None:
        if (self.user is None) != (self.password is None):
            raise NatsAuthError("TOOLPROXY_NATS_USER and TOOLPROXY_NATS_PASSWORD go together")
        if self.user is not None and self.creds is not None:
            raise NatsAuthError("give TOOLPROXY_NATS_USER/_PASSWORD or TOOLPROXY_NATS_CREDS, not both")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise NatsAuthError("TOOLPROXY_NATS_TLS_CERT and TOOLPROXY_NATS_TLS_KEY go together")
        for name, p in (("CREDS", self.creds), ("TLS_CA", self.tls_ca), ("TLS_CERT", self.tls_cert),
                        ("TLS_KEY", self.tls_key)):
            if p is not None and not p.is_file():
                raise NatsAuthError(f"TOOLPROXY_NATS_{name}: no readable file at {p}")

    def options(self, url: str = "") -> dict[str, Any]:
        """Keyword arguments for nats.connect; `url`'s user (nats://user:pass@...) names the
        inbox when no user is given here."""
        self.check()
        opts: dict[str, Any] = {}
        if self.user is not None:
            opts.update(user=self.user, password=self.password)
        if self.creds is not None:
            text = self.creds.read_text(errors="replace")
            # A `.creds` file holds a user JWT and its seed; a bare seed file is an NKey user.
            if "BEGIN NATS USER JWT" in text:
                opts["user_credentials"] = str(self.creds)
            else:
                opts["nkeys_seed"] = str(self.creds)
        user = self.user or _url_user(url)
        prefix = self.inbox_prefix or (f"{INBOX_ROOT}.{user}" if user else None)
        if prefix is not None:
            opts["inbox_prefix"] = prefix
        if self.tls_ca is not None or self.tls_cert is not None:
            ctx = ssl.create_default_context(
                cafile=str(self.tls_ca) if self.tls_ca is not None else None)
            if self.tls_cert is not None and self.tls_key is not None:
                ctx.load_cert_chain(str(self.tls_cert), str(self.tls_key))
            opts["tls"] = ctx
        return opts


def _url_user(url: str) -> str | None:
    first = url.split(",")[0].strip()
    try:
        parts = urlsplit(first)
    except ValueError:
        return None
    # A user with a password (a bare user part is a token, not a user name).
    return parts.username if parts.password is not None and parts.username else None


def redact_url(url: str) -> str:
    """A NATS URL (or a comma-separated list of them) fit for a log line: any password, or a
    token given as the user part, replaced with ***."""
    return ",".join(_redact_one(u.strip()) for u in url.split(","))


def _redact_one(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    if "@" not in parts.netloc:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0] if ":" in userinfo else ""
    masked = f"{user}:***" if user else "***"
    return urlunsplit(parts._replace(netloc=f"{masked}@{host}"))

"""Configuration, loaded once from TOOLPROXY_* variables and validated section by section."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from infra.call_keys import CallKeyError, ensure_pair
from infra.nats_auth import NatsAuth, redact_url
from proxy.allowlists import HostAllowlist
from wire.ids import is_valid_id

# The model agent's own upstream settings (TOOLPROXY_MODEL_BASE_URL, _NAME, _API_KEY, _STREAM,
# _TIMEOUT_S, _MAX_RETRIES), retired for llm.chat's: refused at start, never silently ignored.
RETIRED_MODEL_PREFIX = "TOOLPROXY_MODEL_"


class Settings(BaseSettings):
    """Everything the proxy needs; passed explicitly, never read from globals."""

    model_config = SettingsConfigDict(env_prefix="TOOLPROXY_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    data_dir: Path = Path(".toolproxy")
    workers: int = Field(default=1, ge=1, le=64)  # proxy processes sharing the port
    reuse_port: bool = False  # set for each worker when workers > 1

    database_url: SecretStr | None = None
    nats_url: str | None = None  # one server, or several separated by commas (a cluster's seeds)
    # How many servers keep each JetStream stream and KV bucket (3 on a cluster): assets are
    # made with it and raised to it at start, never lowered (docs/operators/nats-cluster.md).
    jetstream_replicas: int = Field(default=1, ge=1, le=5)
    # This process's NATS identity (infra/nats_auth.py, docs/operators/bus.md): a user of the
    # server's `authorization` block, or an NKey/.creds file; TLS when certificates are given.
    nats_user: str | None = Field(default=None, max_length=256)
    nats_password: SecretStr | None = None
    nats_creds: Path | None = None
    nats_tls_ca: Path | None = None
    nats_tls_cert: Path | None = None
    nats_tls_key: Path | None = None
    nats_inbox_prefix: str | None = Field(default=None, max_length=256)
    # The signed call context (wire/call_context.py): the proxy's Ed25519 private key, and the
    # public keys the services and the plugin host verify with (several while rotating). Unset:
    # the data dir's pair (secrets/call_context.key, .pub), made by the proxy or `toolproxy up`
    # (works where every process shares the data dir, as under `up`).
    call_context_key: SecretStr | None = None
    call_context_key_file: Path | None = None
    call_context_public_keys: str | None = Field(default=None, max_length=16_384)
    call_context_public_keys_file: Path | None = None
    db_pool_min: int = Field(default=2, ge=1)
    db_pool_max: int = Field(default=10, ge=1)  # per worker process
    # /metrics (and /healthz) on a port of their own, and not on the API port: a network
    # policy then keeps /metrics for Prometheus. Unset: /metrics on the API port.
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    # On SIGTERM: /readyz answers 503 at once and calls keep being served for drain_delay_s
    # (a load balancer's health checks take the replica out meanwhile: at least its interval
    # times its fall count), then no new connection is taken and the calls in flight have
    # drain_timeout_s to finish (the longest category timeout is 10 s), then the replica stops.
    drain_delay_s: float = Field(default=0.0, ge=0, le=300)
    drain_timeout_s: float = Field(default=15.0, gt=0, le=600)

    # Identity (proxy/identity/; docs/operators/identity.md). The dev issuer: tokens of
    # `toolproxy token`, with a `kid`, signed by a key of the key set TOOLPROXY_JWT_KEYS_FILE
    # (ES256 by default, rotated by `toolproxy keys rotate`), or with TOOLPROXY_JWT_SECRET
    # (HS256, one key: existing deployments), or by the data dir's key set (development).
    # TOOLPROXY_JWT_ALGORITHM=RS256/ES256 with TOOLPROXY_JWT_PUBLIC_KEY_FILE: one static public
    # key for the dev issuer's name (kept for existing setups; an OpenID provider's JWKS is the
    # way now). TOOLPROXY_DEV_ISSUER=off trusts the OpenID providers below only.
    jwt_algorithm: Literal["HS256", "HS384", "HS512", "RS256", "ES256"] = "HS256"
    jwt_secret: SecretStr | None = None
    jwt_public_key_file: Path | None = None
    jwt_keys_file: Path | None = None
    jwt_issuer: str = "toolproxy"
    jwt_audience: str = "toolproxy"
    jwt_leeway_s: int = Field(default=30, ge=0, le=300)
    # The longest lifetime (exp - iat) a token may claim, enforced on verification too: a
    # token "valid until 9999" is refused, whoever signed it. Minting is capped the same.
    jwt_max_ttl_s: int = Field(default=30 * 24 * 3600, ge=60, le=365 * 24 * 3600)
    dev_issuer: Literal["on", "off"] = "on"
    # `serve` refuses to start without a key every replica shares (TOOLPROXY_JWT_SECRET,
    # TOOLPROXY_JWT_KEYS_FILE, or only OpenID providers) unless this is a development run.
    development: bool = False
    # One OpenID provider (the single-issuer form): its issuer URL (keys found by discovery,
    # or at TOOLPROXY_JWKS_URL), the audiences its tokens must carry (comma-separated; default
    # TOOLPROXY_PUBLIC_URL and its /mcp), how claims map to the identity (JSON), the signing
    # algorithms accepted, and the console's sign-in client (authorization code + PKCE).
    oidc_issuer: str | None = Field(default=None, max_length=2048)
    jwks_url: str | None = Field(default=None, max_length=2048)
    oidc_audience: str | None = Field(default=None, max_length=4096)
    oidc_claims: dict[str, Any] | None = None
    oidc_algorithms: str = Field(default="RS256,PS256,ES256,EdDSA", max_length=256)
    oidc_client_id: str | None = Field(default=None, max_length=512)
    oidc_client_secret: SecretStr | None = None
    oidc_console_scopes: str = Field(default="openid profile", max_length=1024)
    # Several providers at once: a JSON list of issuer objects, the same fields by name
    # (docs/operators/identity.md); the single-issuer form adds one more.
    oidc_issuers: list[dict[str, Any]] | None = None
    # The externally visible base URL (https://tools.example.com): the protected resource's
    # identifier (RFC 9728), /mcp's is it plus /mcp; the console's sign-in redirect.
    public_url: str | None = Field(default=None, max_length=2048, pattern=r"^https?://[^\s]+$")
    # The scope a provider's token needs for /mcp (announced in the metadata and the 401
    # challenge; "" needs none). Dev issuer tokens carry no scopes and need none.
    mcp_scope: str = Field(default="mcp", max_length=256, pattern=r"^[\x21\x23-\x5b\x5d-\x7e]*$")
    # Key sets: an unknown `kid` refetches at most once per floor; a provider that cannot be
    # reached leaves the last key set valid this long past its freshness, then fails closed.
    jwks_refresh_floor_s: float = Field(default=30.0, ge=0.1, le=3600)
    jwks_max_stale_s: float = Field(default=3600.0, ge=0, le=7 * 24 * 3600)

    # Seals external APIs' secrets at rest (urlsafe base64 of 32 bytes); the services read the
    # same variable. Unset: a key generated into <data_dir>/secrets/external_apis.key.
    secrets_key: SecretStr | None = None

    pdp: Literal["embedded", "opa"] = "embedded"
    opa_url: str | None = None
    opa_check_every_s: float = Field(default=1.0, gt=0, le=3600)  # is the server still holding our policy?
    policy_dir: Path | None = None  # pins this replica to a directory of policies
    pdp_budget_ms: float = Field(default=50.0, gt=0, le=5_000)  # over budget: a denial
    # How long a decision is reused for an identical input (0: never). Also how long cached
    # allows outlive a PDP that died; never across a policy revision.
    pdp_cache_ttl_s: float = Field(default=5.0, ge=0, le=300)
    approval_ttl_s: int = Field(default=900, ge=1, le=7 * 24 * 3600)

    # Where rate buckets and quota counters live: "nats" (JetStream KV, the default: concurrent
    # admissions on one key are combined into one write, and calls keep being admitted while
    # Postgres is down) or "postgres" (one function call per admission, a row lock per bucket:
    # cheaper alone, but a team's hot bucket serializes under load). See bench/limits.py.
    limits_store: Literal["postgres", "nats"] = "nats"
    # How long a replica admits from the tokens it leased from a shared rate bucket (the NATS
    # store). Over any window W a bucket admits at most rate × (W + this) + burst, and a token a
    # replica holds unused is out of the others' reach this long: a longer lease costs a quiet
    # key fewer round trips and widens both by as much (docs/operators/limits-store.md).
    limits_lease_s: float = Field(default=0.1, ge=0.01, le=1.0)
    # Team-wide ceilings per category, per minute (agent+tool rates come from the policy).
    team_rate_per_minute: dict[Literal["A", "B", "C", "D"], float] = Field(
        default_factory=lambda: {"A": 6000.0, "B": 1200.0, "C": 300.0, "D": 50.0}
    )

    max_body_bytes: int = Field(default=1 << 20, ge=1024)
    # HTTP hygiene (per worker). A connection is closed when a complete request head has not
    # arrived this long after it opened or after its previous response (idle keep-alive
    # included), or when a request's body has not arrived whole this long after its head.
    http_header_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    http_body_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    http_max_connections: int = Field(default=512, ge=1, le=1_000_000)
    # A team's requests with bodies larger than this are read at most this many bytes per
    # second (after a second's burst) and handled this many at a time, per worker (the rest
    # wait, unread), so one team's large bodies cannot monopolize a worker.
    large_body_bytes: int = Field(default=64 << 10, ge=1024)
    large_body_bytes_per_s: float = Field(default=float(4 << 20), gt=0)
    large_bodies_per_team: int = Field(default=2, ge=1, le=1024)
    # Host values served (comma-separated: a name or IP, optionally :port, or an IP network;
    # "*" serves any). Default: the address the proxy listens on and localhost, any port (on a
    # wildcard address: any IP literal). Others get 421 misdirected_request (probes excepted).
    allowed_hosts: str | None = None
    # Browser origins allowed on /mcp (comma-separated "scheme://host[:port]", or "*"); a
    # request carrying any other Origin gets 403 (DNS rebinding); no Origin: unaffected.
    # Default: the proxy's own origins (localhost and the listen address, at its port).
    allowed_origins: str | None = None
    # Teams whose governance tokens may enable and disable plugins (comma-separated team ids).
    # The catalog is platform-wide, so a plugin switch changes what every team may run: by
    # default only admins do it; list the platform's own governance team here.
    plugin_governance_teams: str = Field(default="", max_length=4096)
    max_output_bytes: int = Field(default=256 << 10, ge=1024)  # inline; larger: an artifact
    max_artifact_bytes: int = Field(default=4 << 20, ge=1024)  # a reply larger is refused
    idempotency_ttl_s: int = Field(default=24 * 3600, ge=1, le=30 * 24 * 3600)
    events_retention_days: float = Field(default=7.0, gt=0, le=3650)
    # An SSE stream (GET /v1/events/stream) ends after this long; the client reconnects with
    # Last-Event-ID (below a load balancer's own connection age, where there is one).
    events_stream_max_s: float = Field(default=3600.0, gt=0, le=86_400)
    # A call still running after this long is put on record as RUNNING (seen by every replica,
    # resolved if its replica dies); a shorter one is recorded once, when it ends. 0: at once.
    start_note_after_ms: float = Field(default=250.0, ge=0, le=60_000)
    # A replica silent this long is gone: its RUNNING calls past their deadline are resolved.
    lost_after_s: float = Field(default=10.0, ge=1)
    housekeeping_every_s: float = Field(default=5.0, gt=0)

    # Turns (proxy/turns): the agent runtime above the gateway. A turn makes at most
    # turn_max_calls tool calls; POST /v1/turns and resume answer once the turn rests (held,
    # finished) or after turn_wait_s, whichever comes first (the turn goes on either way).
    turn_max_calls: int = Field(default=16, ge=1, le=256)
    turn_wait_s: float = Field(default=30.0, ge=0, le=600)
    # The model agent's steps are llm.chat calls of the turn's agent (the one OpenAI-compatible
    # client, configured by TOOLPROXY_LLM_* on the services): its model is one of llm.chat's
    # allowlist or "auto" (the routing rules choose); unset, llm.chat's default (the first).
    turn_model: str | None = Field(default=None, max_length=128,
                                   pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")

    # The governance console (proxy/console): how long a session lives at most (never past
    # the token it was opened with), and the per-identity rate guard on its mutations.
    console_session_ttl_s: int = Field(default=8 * 3600, ge=60, le=7 * 24 * 3600)
    console_mutations_per_minute: float = Field(default=60.0, gt=0, le=60_000)
    console_mutations_burst: int = Field(default=20, ge=1, le=10_000)

    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["json", "console"] = "json"

    @field_validator("oidc_issuer", "jwks_url", "oidc_audience", "oidc_client_id",
                     "oidc_client_secret", "public_url", "jwt_keys_file", "oidc_claims",
                     "oidc_issuers", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        """An identity variable set to "" (a compose default, an empty ConfigMap key) is unset."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("metrics_port", mode="before")
    @classmethod
    def _port(cls, value: object) -> object:
        if isinstance(value, str):
            raw = value.strip()
            if not raw:
                return None
            if not raw.isdigit() or not 0 < int(raw) < 65536:
                raise ValueError(f"TOOLPROXY_METRICS_PORT must be a port number (1-65535), not {raw!r}")
        return value

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.jwt_algorithm.startswith("HS") and self.jwt_public_key_file is not None:
            raise ValueError("jwt_public_key_file needs an asymmetric jwt_algorithm (RS256/ES256)")
        if not self.jwt_algorithm.startswith("HS") and self.jwt_public_key_file is None:
            raise ValueError(f"{self.jwt_algorithm} needs TOOLPROXY_JWT_PUBLIC_KEY_FILE")
        if self.pdp == "opa" and not self.opa_url:
            raise ValueError("TOOLPROXY_PDP=opa needs TOOLPROXY_OPA_URL")
        for team in self.plugin_governors:
            if not is_valid_id(team):
                raise ValueError(f"TOOLPROXY_PLUGIN_GOVERNANCE_TEAMS: {team!r} is not a team id")
        if self.allowed_hosts is not None:
            HostAllowlist.parse(self.allowed_hosts)  # a malformed entry fails at start
        retired = sorted(k for k in os.environ if k.startswith(RETIRED_MODEL_PREFIX))
        if retired:
            # Ignoring them would send the model agent to another endpoint than the operator's.
            raise ValueError(
                f"{', '.join(retired)}: retired. The model agent's steps are llm.chat calls: "
                "configure TOOLPROXY_LLM_BASE_URL, TOOLPROXY_LLM_MODELS, TOOLPROXY_LLM_API_KEY "
                "(and TOOLPROXY_LLM_STREAM) on the services, TOOLPROXY_TURN_MODEL here, and "
                "grant the turns' agents tool.llm.chat.invoke")
        return self

    @property
    def plugin_governors(self) -> frozenset[str]:
        return frozenset(t.strip() for t in self.plugin_governance_teams.split(",") if t.strip())

    def require_database_url(self) -> str:
        if self.database_url is None:
            raise ValueError("TOOLPROXY_DATABASE_URL is not set")
        return self.database_url.get_secret_value()

    def require_nats_url(self) -> str:
        if self.nats_url is None:
            raise ValueError("TOOLPROXY_NATS_URL is not set")
        return self.nats_url

    def nats_auth(self) -> NatsAuth:
        return NatsAuth(user=self.nats_user,
                        password=self.nats_password.get_secret_value() if self.nats_password else None,
                        creds=self.nats_creds, tls_ca=self.nats_tls_ca, tls_cert=self.nats_tls_cert,
                        tls_key=self.nats_tls_key, inbox_prefix=self.nats_inbox_prefix)

    def call_context_key_text(self) -> str:
        """The proxy's signing key: given, or the data dir's (made on first use)."""
        if self.call_context_key is not None:
            return self.call_context_key.get_secret_value()
        path = self.call_context_key_file or ensure_pair(self.data_dir / "secrets")[0]
        return path.read_text()

    def call_context_public_text(self) -> str:
        """The public keys a service trusts: given, or the data dir's."""
        if self.call_context_public_keys:
            return self.call_context_public_keys
        path = self.call_context_public_keys_file or self.data_dir / "secrets" / "call_context.pub"
        try:
            return path.read_text()
        except OSError:
            raise CallKeyError("TOOLPROXY_CALL_CONTEXT_PUBLIC_KEYS (or _FILE) is not set and the "
                               f"data dir has no {path.name}: services verify every call's context "
                               "with the proxy's public key (docs/operators/bus.md)") from None

    def redacted(self) -> dict[str, Any]:
        """For the startup log: secrets and URL passwords never printed."""
        data = self.model_dump(mode="json")
        data["jwt_secret"] = "***" if self.jwt_secret else None
        data["oidc_client_secret"] = "***" if self.oidc_client_secret else None
        if self.oidc_issuers is not None:
            data["oidc_issuers"] = [{k: ("***" if "secret" in k else v) for k, v in i.items()}
                                    for i in self.oidc_issuers]
        data["secrets_key"] = "***" if self.secrets_key else None
        data["nats_password"] = "***" if self.nats_password else None
        data["call_context_key"] = "***" if self.call_context_key else None
        if self.nats_url is not None:
            data["nats_url"] = redact_url(self.nats_url)
        if self.database_url is not None:
            data["database_url"] = _strip_password(self.database_url.get_secret_value())
        return data


def _strip_password(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url

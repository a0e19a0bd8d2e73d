"""Configuration, loaded once from TOOLPROXY_* variables and validated section by section."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from proxy.http.allowlists import HostAllowlist
from proxy.identity import is_valid_id


class Settings(BaseSettings):
    """Everything the proxy needs; passed explicitly, never read from globals."""

    model_config = SettingsConfigDict(env_prefix="TOOLPROXY_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    data_dir: Path = Path(".toolproxy")
    workers: int = Field(default=1, ge=1, le=64)  # proxy processes sharing the port
    reuse_port: bool = False  # set for each worker when workers > 1

    database_url: SecretStr | None = None
    nats_url: str | None = None
    db_pool_min: int = Field(default=2, ge=1)
    db_pool_max: int = Field(default=10, ge=1)  # per worker process

    # Tokens: HS256 with a secret (from here, or generated into the data dir for dev),
    # or RS256/ES256 with a public key file (production, tokens minted by your IdP).
    jwt_algorithm: Literal["HS256", "HS384", "HS512", "RS256", "ES256"] = "HS256"
    jwt_secret: SecretStr | None = None
    jwt_public_key_file: Path | None = None
    jwt_issuer: str = "toolproxy"
    jwt_audience: str = "toolproxy"
    jwt_leeway_s: int = Field(default=30, ge=0, le=300)
    # The longest lifetime (exp - iat) a token may claim, enforced on verification too: a
    # token "valid until 9999" is refused, whoever signed it. Minting is capped the same.
    jwt_max_ttl_s: int = Field(default=30 * 24 * 3600, ge=60, le=365 * 24 * 3600)

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
    # The model agent's OpenAI-compatible chat-completions endpoint (e.g. http://host/v1).
    model_base_url: str | None = Field(default=None, max_length=2048, pattern=r"^https?://[^\s]+$")
    model_name: str | None = Field(default=None, min_length=1, max_length=256)
    model_api_key: SecretStr | None = None
    model_stream: bool = False  # ask for server-sent events instead of one JSON answer
    model_timeout_s: float = Field(default=60.0, gt=0, le=600)
    model_max_retries: int = Field(default=1, ge=0, le=5)

    # The governance console (proxy/console): how long a session lives at most (never past
    # the token it was opened with), and the per-identity rate guard on its mutations.
    console_session_ttl_s: int = Field(default=8 * 3600, ge=60, le=7 * 24 * 3600)
    console_mutations_per_minute: float = Field(default=60.0, gt=0, le=60_000)
    console_mutations_burst: int = Field(default=20, ge=1, le=10_000)

    # Benchmarks only ("limits", "journal", "writer"): switches parts of the pipeline off to
    # measure what they cost. With "journal" off nothing is billed or logged; with "writer" off
    # records are made durable in JetStream but never reach Postgres. Never set in production.
    bench_disable: str = ""

    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["json", "console"] = "json"

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

    def disabled_parts(self) -> set[str]:
        """The parts `bench_disable` switches off (benchmarks only)."""
        return {p.strip() for p in self.bench_disable.split(",") if p.strip()}

    def redacted(self) -> dict[str, Any]:
        """For the startup log: secrets and URL passwords never printed."""
        data = self.model_dump(mode="json")
        data["jwt_secret"] = "***" if self.jwt_secret else None
        data["model_api_key"] = "***" if self.model_api_key else None
        data["secrets_key"] = "***" if self.secrets_key else None
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

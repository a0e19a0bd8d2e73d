"""Configuration of the upstream bridge (TOOLPROXY_UPSTREAM_* variables), read once."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.netguard.hosts import HostPattern, PatternError, parse_patterns


class UpstreamSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TOOLPROXY_", extra="ignore")

    data_dir: Path = Path(".toolproxy")
    secrets_key: SecretStr | None = None
    # host[:port] patterns of the non-public addresses upstreams may use (public ones need none).
    upstream_hosts: str = ""
    # The operator's stdio allowlist file (services/upstreams/commands.py); none: no stdio upstream.
    upstream_commands: Path | None = None
    upstream_sync_every_s: float = Field(default=60.0, gt=0, le=86_400)
    # Syncs a flood of list_changed notifications may cause: at most one per this interval.
    upstream_list_changed_min_s: float = Field(default=1.0, ge=0, le=3_600)
    # Stdio servers' limits: address space, CPU seconds, open files, processes of their user.
    upstream_stdio_memory_mb: int = Field(default=8192, ge=64, le=65_536)
    upstream_stdio_cpu_s: int = Field(default=3_600, ge=1)
    upstream_stdio_nofile: int = Field(default=256, ge=16, le=65_536)
    upstream_stdio_nproc: int = Field(default=256, ge=8, le=65_536)
    # The unprivileged user stdio servers run as when the bridge runs as root.
    upstream_stdio_user: str = "nobody"
    # An upstream's HTTP answer read at most (larger: upstream_error, the session started again),
    # and a result's JSON handed to the proxy (below its MAX_ARTIFACT_BYTES, 4 MiB by default).
    upstream_max_answer_bytes: int = Field(default=16 << 20, ge=1024, le=256 << 20)
    upstream_max_result_bytes: int = Field(default=2 << 20, ge=1024, le=64 << 20)
    upstream_ping_every_s: float = Field(default=10.0, gt=0, le=3_600)
    upstream_breaker_failures: int = Field(default=5, ge=1, le=1000)
    upstream_breaker_open_s: float = Field(default=10.0, gt=0, le=3_600)

    @field_validator("upstream_hosts")
    @classmethod
    def _hosts(cls, value: str) -> str:
        try:
            parse_patterns(value.split(","))
        except PatternError as exc:
            raise ValueError(f"TOOLPROXY_UPSTREAM_HOSTS: {exc}") from None
        return value

    def host_patterns(self) -> list[HostPattern]:
        return parse_patterns(self.upstream_hosts.split(","))

    def work_dir(self, upstream: str) -> Path:
        return self.data_dir / "upstreams" / upstream

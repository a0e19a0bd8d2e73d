"""Configuration of the network tools (TOOLPROXY_* variables), read once by the services."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.netguard.hosts import HostPattern, PatternError, parse_patterns
from services.netguard.resolver import Resolver, SystemResolver


class NetSettings(BaseSettings):
    """What browser.lite may reach, where the external APIs' secrets are kept."""

    model_config = SettingsConfigDict(env_prefix="TOOLPROXY_", extra="ignore")

    data_dir: Path = Path(".toolproxy")
    # Comma-separated host[:port] patterns browser.lite may fetch (internal hosts).
    browser_lite_hosts: str = ""
    # The key encrypting external APIs' secrets at rest (urlsafe base64 of 32 bytes); else
    # generated into <data_dir>/secrets/external_apis.key on first use.
    secrets_key: SecretStr | None = None
    # Where `secret_file` names are looked up (default <data_dir>/secrets/external_apis/).
    external_api_secret_dir: Path | None = None
    dns_timeout_s: float = Field(default=2.0, gt=0, le=30)

    @field_validator("browser_lite_hosts")
    @classmethod
    def _hosts(cls, value: str) -> str:
        try:
            parse_patterns(value.split(","))
        except PatternError as exc:
            raise ValueError(f"TOOLPROXY_BROWSER_LITE_HOSTS: {exc}") from None
        return value

    def lite_patterns(self) -> list[HostPattern]:
        return parse_patterns(self.browser_lite_hosts.split(","))

    def secret_dir(self) -> Path:
        return self.external_api_secret_dir or self.data_dir / "secrets" / "external_apis"


@dataclass(frozen=True)
class NetOptions:
    """How the network services are built. `unsafe_allow_loopback_for_tests` exists for the
    test suite's local servers only: it is not a setting (no variable, route or argument
    reaches it), and it never opens private, link-local or metadata addresses."""

    settings: NetSettings = field(default_factory=NetSettings)
    resolver: Resolver | None = None
    unsafe_allow_loopback_for_tests: bool = False

    def the_resolver(self) -> Resolver:
        return self.resolver or SystemResolver(self.settings.dns_timeout_s)

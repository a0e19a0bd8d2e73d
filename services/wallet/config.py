"""The wallet's settings (TOOLPROXY_CHAIN_RPC_URL, TOOLPROXY_WALLET_KEYS_FILE, ...)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class WalletSettings(BaseSettings):
    """Unset RPC URL: no wallet (the chain tools are not served)."""

    model_config = SettingsConfigDict(env_prefix="TOOLPROXY_", extra="ignore")

    chain_rpc_url: str | None = None  # an Ethereum JSON-RPC endpoint: anvil, geth, a provider
    wallet_keys_file: Path | None = None  # JSON {"team_id": "0x<private key>"}, mode 0600
    chain_rpc_timeout_s: float = Field(default=5.0, gt=0, le=60)
    chain_gas_margin: float = Field(default=1.2, ge=1.0, le=3.0)  # times the node's estimate

    @field_validator("chain_rpc_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).scheme not in ("http", "https"):
            raise ValueError("TOOLPROXY_CHAIN_RPC_URL must be an http(s) URL")
        return value

    @property
    def enabled(self) -> bool:
        return self.chain_rpc_url is not None

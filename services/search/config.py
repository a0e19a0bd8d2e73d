"""The search service's bounds per team, read once from TOOLPROXY_SEARCH_* variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

MiB = 1 << 20


class SearchSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TOOLPROXY_SEARCH_", extra="ignore")

    team_max_docs: int = Field(default=200_000, ge=1, le=100_000_000)  # documents of one team
    team_max_bytes: int = Field(default=1024 * MiB, ge=1)  # UTF-8 bytes of titles and texts

"""The file service's limits, read once from TOOLPROXY_FILE_* variables."""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

MiB = 1 << 20


class FileSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TOOLPROXY_FILE_", extra="ignore")

    max_bytes: int = Field(default=1 * MiB, ge=1, le=64 * MiB)  # one file
    team_max_bytes: int = Field(default=256 * MiB, ge=1)  # all of a team's files
    team_max_files: int = Field(default=10_000, ge=1, le=10_000_000)
    # file.read answers with the whole content up to this size; beyond, an excerpt of
    # excerpt_bytes and the whole file as an artifact.
    inline_bytes: int = Field(default=64 << 10, ge=1, le=128 << 10)
    excerpt_bytes: int = Field(default=16 << 10, ge=1, le=128 << 10)

    @model_validator(mode="after")
    def _check(self) -> FileSettings:
        if self.max_bytes > self.team_max_bytes:
            raise ValueError("TOOLPROXY_FILE_MAX_BYTES exceeds TOOLPROXY_FILE_TEAM_MAX_BYTES")
        if self.excerpt_bytes > self.inline_bytes:
            raise ValueError("TOOLPROXY_FILE_EXCERPT_BYTES exceeds TOOLPROXY_FILE_INLINE_BYTES")
        return self

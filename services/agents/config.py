"""Settings of agent.invoke (TOOLPROXY_AGENT_*)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class AgentSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TOOLPROXY_AGENT_", extra="ignore")

    # How many agents deep an invocation chain may go (A invoking B is depth 1).
    max_depth: int = Field(default=3, ge=1, le=10)

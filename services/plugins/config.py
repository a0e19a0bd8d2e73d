"""Sandbox limits and the plugin host's settings (TOOLPROXY_PLUGIN_* variables)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# The workers' syscall filter: `required` (a worker that cannot install it refuses to serve)
# or `off` (no filter: only for platforms without seccomp; the rest of the lockdown applies).
SeccompMode = Literal["required", "off"]


class SandboxLimits(BaseModel):
    """What one plugin call may use inside its worker (the wall clock is the category's), and
    whether the worker must filter its syscalls."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_bytes: int = Field(default=32 << 20, ge=1 << 20, le=1 << 30)
    stack_bytes: int = Field(default=256 << 10, ge=32 << 10, le=8 << 20)
    max_output_chars: int = Field(default=1 << 20, ge=1024, le=4 << 20)
    max_internal_calls: int = Field(default=16, ge=0, le=256)
    cpu_lifetime_s: int = Field(default=600, ge=30)  # a worker is replaced before it uses this
    seccomp: SeccompMode = "required"

    @property
    def address_space_bytes(self) -> int:
        # The interpreter needs ~20 MiB of address space; QuickJS's own limit comes first.
        return (256 << 20) + 2 * self.memory_bytes


class PluginSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TOOLPROXY_PLUGIN_", extra="ignore")

    workers: int = Field(default=2, ge=1, le=64)
    memory_mb: int = Field(default=32, ge=1, le=1024)
    stack_kb: int = Field(default=256, ge=32, le=8192)
    max_output_bytes: int = Field(default=1 << 20, ge=1024, le=4 << 20)
    max_internal_calls: int = Field(default=16, ge=0, le=256)
    calls_per_worker: int = Field(default=1000, ge=1)  # then the worker is replaced
    refresh_s: float = Field(default=5.0, gt=0)  # registry re-read, besides notifications
    seccomp: SeccompMode = "required"

    def limits(self) -> SandboxLimits:
        return SandboxLimits(memory_bytes=self.memory_mb << 20, stack_bytes=self.stack_kb << 10,
                             max_output_chars=self.max_output_bytes,
                             max_internal_calls=self.max_internal_calls, seccomp=self.seccomp)

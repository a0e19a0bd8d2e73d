"""Settings of llm.chat (TOOLPROXY_LLM_*): the OpenAI-compatible upstream, its key (held by
the service only), the model allowlist and how the answer is read. The model agent's steps are
llm.chat calls, so these are its model settings too."""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

MODEL_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$"
_MODEL_ID_RE = re.compile(MODEL_ID_PATTERN[1:-1], re.ASCII)
MAX_MODELS = 32


class LlmSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TOOLPROXY_LLM_", extra="ignore")

    # e.g. https://api.openai.com/v1 ; unset: llm.chat is not served.
    base_url: str | None = None
    api_key: SecretStr | None = None
    # Comma-separated; the first is the default when a call names no model.
    models: Annotated[tuple[str, ...], NoDecode] = ()
    default_max_tokens: int = Field(default=512, ge=1, le=4096)
    # Ask for server-sent events instead of one JSON answer (the tool still answers one result).
    stream: bool = False

    @field_validator("models", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(m.strip() for m in value.split(",") if m.strip())
        return value

    @field_validator("models")
    @classmethod
    def _model_ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > MAX_MODELS:
            raise ValueError(f"at most {MAX_MODELS} models")
        for m in value:
            if _MODEL_ID_RE.fullmatch(m) is None or m == "auto":
                raise ValueError(f"not a model id: {m[:64]!r}")
        if len(set(value)) != len(value):
            raise ValueError("a model is listed twice")
        return value

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        """Operator configuration, never caller input; still only a plain http(s) base URL
        (no credentials in it: the key goes in TOOLPROXY_LLM_API_KEY)."""
        if value is None or not value.strip():
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("TOOLPROXY_LLM_BASE_URL must be an http(s) URL")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError("TOOLPROXY_LLM_BASE_URL takes no credentials, query or fragment")
        return value.strip().rstrip("/")

    @model_validator(mode="after")
    def _complete(self) -> LlmSettings:
        if self.base_url is not None and not self.models:
            raise ValueError("TOOLPROXY_LLM_BASE_URL needs TOOLPROXY_LLM_MODELS (the allowlist)")
        return self

    @property
    def configured(self) -> bool:
        return self.base_url is not None

    def redacted(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "api_key": "***" if self.api_key else None,
                "models": list(self.models), "default_max_tokens": self.default_max_tokens,
                "stream": self.stream}

"""The session's llm service restarted with other settings for one test (another upstream
address, server-sent events) or stopped (no llm.chat served), as an operator would with
TOOLPROXY_LLM_*; `restore` brings the session's own back."""

from __future__ import annotations

from pydantic import SecretStr

from nats.aio.client import Client as NATS
from services.llm import service as llm_service
from services.llm.config import LlmSettings
from services.sdk import Service
from tests.support.settings import TEST_LLM_KEY, TEST_LLM_MODELS


def llm_settings(base_url: str, **overrides: object) -> LlmSettings:
    return LlmSettings(base_url=base_url, api_key=SecretStr(TEST_LLM_KEY), models=TEST_LLM_MODELS,
                       **overrides)  # type: ignore[arg-type]


class LlmServed:
    def __init__(self, services: list[Service], nc: NATS) -> None:
        self._nc = nc
        self._original = next(s for s in services if s.name == "llm")
        self._current: Service | None = self._original

    async def serve(self, settings: LlmSettings | None) -> None:
        """The running llm service stops (its goodbye tells the catalogs); one with `settings`
        starts in its place, unless None."""
        if self._current is not None:
            await self._current.stop()
            self._current = None
        if settings is not None:
            self._current = llm_service.service(settings)
            await self._current.start(self._nc)

    async def restore(self) -> None:
        if self._current is self._original:
            return
        if self._current is not None:
            await self._current.stop()
        await self._original.start(self._nc)
        self._current = self._original

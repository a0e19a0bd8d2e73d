"""The built-in services: five category-A tools and the tools of categories B, C and D
(the DAARION platforms; the wallet's chain tools start with them when a chain is configured;
llm.chat where an upstream is configured)."""

from __future__ import annotations

from types import ModuleType

import asyncpg

from services.agents import service as agents_service
from services.agents.config import AgentSettings
from services.agents.store import AgentRepository
from services.browser import service as browser_service
from services.calendar import service as calendar_service
from services.data_query import service as data_query_service
from services.embeddings import service as embeddings_service
from services.external_api import service as external_api_service
from services.files import service as files_service
from services.llm import service as llm_service
from services.llm.config import LlmSettings
from services.math import service as math_service
from services.memory import service as memory_service
from services.netguard.settings import NetOptions
from services.platforms.energy import service as energy_service
from services.platforms.greenfood import service as greenfood_service
from services.platforms.water import service as water_service
from services.projects import service as projects_service
from services.router import service as router_service
from services.router.choose import Router
from services.router.rules import RouterRules
from services.sdk import Service
from services.served import BUILTIN_TOOLS, FAMILIES, LLM_TOOLS  # noqa: F401 (the names builtin always had)
from services.search import service as search_service
from services.tasks import service as tasks_service
from services.templates import service as templates_service
from services.text import service as text_service


def builtin_services(pool: asyncpg.Pool, net: NetOptions | None = None, *,
                     llm_settings: LlmSettings | None = None,
                     agent_settings: AgentSettings | None = None) -> list[Service]:
    """`net`: how the network tools resolve and what they may reach (default: from the
    environment, the system resolver). llm.chat is served only with an upstream configured
    (`llm_settings.configured`)."""
    net = net or NetOptions()
    serve_llm = llm_settings is not None and llm_settings.configured
    # One router for router.route and llm.chat's `model: "auto"`; the agents it may choose
    # come from the agents' store.
    chooser = Router(RouterRules(pool), AgentRepository(pool),
                     llm_settings.models if serve_llm and llm_settings is not None else ())
    extra: list[Service] = []
    if serve_llm:
        assert llm_settings is not None
        extra.append(llm_service.service(llm_settings, chooser))
    return [
        math_service.service(),
        text_service.service(),
        calendar_service.service(),
        memory_service.service(),
        embeddings_service.service(),
        tasks_service.service(pool),
        projects_service.service(pool),
        search_service.service(pool),
        files_service.service(pool),
        templates_service.service(pool),
        data_query_service.service(pool),
        greenfood_service.service(pool),
        energy_service.service(pool),
        water_service.service(pool),
        browser_service.service(pool, net),
        external_api_service.service(pool, net),
        router_service.service(chooser),
        agents_service.service(pool, agent_settings),
        *extra,
    ]


# FAMILIES, BUILTIN_TOOLS, LLM_TOOLS: services.served (the NATS users' permissions read them too).

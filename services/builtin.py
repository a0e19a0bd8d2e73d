"""The built-in services: five category-A tools and the tools of categories B, C and D
(the DAARION platforms; the wallet's chain tools start with them when a chain is configured;
llm.chat where an upstream is configured)."""

from __future__ import annotations

import asyncpg

from services import (
    agents,
    browser,
    calendar_service,
    data_query_service,
    embeddings_service,
    external_api,
    files,
    llm,
    math_service,
    memory_service,
    projects,
    router,
    search,
    tasks,
    templates,
    text_service,
)
from services.agents.config import AgentSettings
from services.agents.registry import AgentRepository
from services.llm.config import LlmSettings
from services.platforms import energy, greenfood, water
from services.netguard.settings import NetOptions
from services.router.choose import Router
from services.router.rules import RouterRules
from services.sdk import Service


def builtin_services(pool: asyncpg.Pool, net: NetOptions | None = None, *,
                     llm_settings: LlmSettings | None = None,
                     agent_settings: AgentSettings | None = None) -> list[Service]:
    """`net`: how the network tools resolve and what they may reach (default: from the
    environment, the system resolver). llm.chat is served only with an upstream configured
    (`llm_settings.configured`)."""
    net = net or NetOptions()
    serve_llm = llm_settings is not None and llm_settings.configured
    chooser = Router(RouterRules(pool), AgentRepository(pool),
                     llm_settings.models if serve_llm and llm_settings is not None else ())
    extra: list[Service] = []
    if serve_llm:
        assert llm_settings is not None
        extra.append(llm.service(llm_settings, chooser))
    return [
        math_service.service(),
        text_service.service(),
        calendar_service.service(),
        memory_service.service(),
        embeddings_service.service(),
        tasks.service(pool),
        projects.service(pool),
        search.service(pool),
        files.service(pool),
        templates.service(pool),
        data_query_service.service(pool),
        greenfood.service(pool),
        energy.service(pool),
        water.service(pool),
        browser.service(pool, net),
        external_api.service(pool, net),
        router.service(chooser),
        agents.service(pool, agent_settings),
        *extra,
    ]


BUILTIN_TOOLS = (
    "math",
    "text",
    "calendar",
    "memory",
    "embeddings",
    "task.list",
    "task.create",
    "task.get",
    "task.update",
    "task.complete",
    "task.assign",
    "project.list",
    "project.get",
    "project.create",
    "project.update",
    "search.index",
    "search.lite",
    "file.list",
    "file.read",
    "file.write",
    "file.delete",
    "template.list",
    "template.read",
    "template.create",
    "template.update",
    "template.delete",
    "data.query",
    "greenfood.order",
    "energy.meter.read",
    "water.usage.read",
    "water.valve.set",
    "browser.lite",
    "browser.full",
    "external_api.call",
    "router.route",
    "agent.invoke",
)
# Served only where TOOLPROXY_LLM_BASE_URL is set.
LLM_TOOLS = ("llm.chat",)

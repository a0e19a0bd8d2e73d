"""The built-in services: five category-A tools and the tools of categories B, C and D
(the DAARION platforms; the wallet's chain tools start with them when a chain is configured)."""

from __future__ import annotations

import asyncpg

from services import (
    browser,
    calendar_service,
    data_query_service,
    embeddings_service,
    external_api,
    files,
    math_service,
    memory_service,
    projects,
    search,
    tasks,
    templates,
    text_service,
)
from services.platforms import energy, greenfood, water
from services.netguard.settings import NetOptions
from services.sdk import Service


def builtin_services(pool: asyncpg.Pool, net: NetOptions | None = None) -> list[Service]:
    """`net`: how the network tools resolve and what they may reach (default: from the
    environment, the system resolver)."""
    net = net or NetOptions()
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
)

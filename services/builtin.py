"""The built-in services: five category-A tools, one real tool in categories B and C, and the
DAARION platforms in D (the wallet's chain tools start with it when a chain is configured)."""

from __future__ import annotations

import asyncpg

from services import (
    calendar_service,
    data_query_service,
    embeddings_service,
    math_service,
    memory_service,
    task_service,
    text_service,
)
from services.platforms import energy, greenfood, water
from services.sdk import Service


def builtin_services(pool: asyncpg.Pool) -> list[Service]:
    return [
        math_service.service(),
        text_service.service(),
        calendar_service.service(),
        memory_service.service(),
        embeddings_service.service(),
        task_service.service(pool),
        data_query_service.service(pool),
        greenfood.service(pool),
        energy.service(pool),
        water.service(pool),
    ]


BUILTIN_TOOLS = (
    "math",
    "text",
    "calendar",
    "memory",
    "embeddings",
    "task.list",
    "task.create",
    "data.query",
    "greenfood.order",
    "energy.meter.read",
    "water.usage.read",
    "water.valve.set",
)

"""The tools `toolproxy services` serves, by family: the catalog's built-in tools, and the
subjects the services' NATS user may subscribe to (infra/embedded/nats_auth.py)."""

from __future__ import annotations

from types import ModuleType

from services.agents import manifests as agents_manifests
from services.browser import manifests as browser_manifests
from services.calendar import manifests as calendar_manifests
from services.data_query import manifests as data_query_manifests
from services.embeddings import manifests as embeddings_manifests
from services.external_api import manifests as external_api_manifests
from services.files import manifests as files_manifests
from services.llm import manifests as llm_manifests
from services.math import manifests as math_manifests
from services.memory import manifests as memory_manifests
from services.platforms.energy import manifests as energy_manifests
from services.platforms.greenfood import manifests as greenfood_manifests
from services.platforms.water import manifests as water_manifests
from services.projects import manifests as projects_manifests
from services.router import manifests as router_manifests
from services.search import manifests as search_manifests
from services.tasks import manifests as tasks_manifests
from services.templates import manifests as templates_manifests
from services.text import manifests as text_manifests
from services.wallet import manifests as wallet_manifests

# The families services.builtin.builtin_services always serves, in its order: what their
# manifests declare is what the catalog shows once the services have started.
FAMILIES: tuple[ModuleType, ...] = (
    math_manifests,
    text_manifests,
    calendar_manifests,
    memory_manifests,
    embeddings_manifests,
    tasks_manifests,
    projects_manifests,
    search_manifests,
    files_manifests,
    templates_manifests,
    data_query_manifests,
    greenfood_manifests,
    energy_manifests,
    water_manifests,
    browser_manifests,
    external_api_manifests,
    router_manifests,
    agents_manifests,
)
BUILTIN_TOOLS: tuple[str, ...] = tuple(t for family in FAMILIES for t in family.TOOL_IDS)
# Served only where TOOLPROXY_LLM_BASE_URL is set.
LLM_TOOLS: tuple[str, ...] = llm_manifests.TOOL_IDS
# Served only where TOOLPROXY_CHAIN_RPC_URL is set (services.wallet).
WALLET_TOOLS: tuple[str, ...] = wallet_manifests.TOOL_IDS
# Everything a `toolproxy services` process may serve.
SERVED_TOOLS: tuple[str, ...] = (*BUILTIN_TOOLS, *LLM_TOOLS, *WALLET_TOOLS)

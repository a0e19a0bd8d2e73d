"""external_api.call: requests to APIs an admin registered, with their secret injected."""

from __future__ import annotations

import asyncpg

from services.external_api import call
from services.external_api.secret_box import SecretBox
from services.netguard.fetch import Fetcher
from services.netguard.guard import Guard
from services.netguard.settings import NetOptions
from services.sdk import Service


def service(pool: asyncpg.Pool, options: NetOptions) -> Service:
    s = options.settings
    fetcher = Fetcher(
        Guard(options.the_resolver(),
              unsafe_allow_loopback_for_tests=options.unsafe_allow_loopback_for_tests),
        user_agent="toolproxy-external-api/1.0",
    )
    box = SecretBox(s.secrets_key, s.data_dir)
    return Service(name="external_api", tools=[call.tool(fetcher, pool, box, s.secret_dir())],
                   on_stop=[fetcher.close])

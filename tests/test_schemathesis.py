"""Every operation of /openapi.json, fuzzed by schemathesis against the real app (real Postgres,
NATS and Rego), with an agent and an admin token: no server error, and every response
conforms to the document (status code, content type, body schema). Bounded: a fixed number
of examples per operation and mode, derandomized (the same cases every run), no shrinking.
A bigger run by hand: docs/agents/input-rules.md."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from proxy.web import keys as appkeys
from proxy.web.app import create_app
from services.builtin import BUILTIN_TOOLS, LLM_TOOLS

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]
EXAMPLES = 30  # per operation and generation mode: ~3,500 requests
MAX_FAILURES = 20


def fuzz(base_url: str, tokens: dict[str, str]) -> tuple[int, list[str], dict[int, int]]:
    """Runs in a worker thread (schemathesis is synchronous); the app keeps serving on the
    test's event loop. Returns (requests sent, failures, count per status)."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    session = requests.Session()
    failures: list[str] = []
    statuses: dict[int, int] = {}
    sent = 0
    operations = [r.ok() for r in schema.get_all_operations()]
    assert len(operations) >= 30, "the document lost operations"
    for operation in operations:
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                      phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode), who=st.sampled_from(sorted(tokens)))
            def run(case: Any, who: str) -> None:
                nonlocal sent
                if len(failures) >= MAX_FAILURES:
                    return
                headers = {"Authorization": f"Bearer {tokens[who]}"}
                response = case.call(base_url=base_url, session=session, headers=headers, timeout=15)
                sent += 1
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                try:
                    case.validate_response(response, checks=CHECKS, headers=headers)
                except (Exception, BaseExceptionGroup) as exc:  # a failed check: keep it, and its request
                    failures.append(f"{who} {case.method} {case.formatted_path} "
                                    f"[{response.status_code}] {str(exc)[:1500]}\n  "
                                    f"{case.as_curl_command(headers)[:600]}")

            try:
                run()
            except Unsatisfiable:  # nothing to make invalid (an operation without inputs)
                assert mode == schemathesis.GenerationMode.NEGATIVE, operation.label
    return sent, failures, statuses


# Its own bound: ~3,500 requests take 90 s on a 2-core machine and 120 s on a slower one (seen
# in CI, where the suite's 120 s default then expired in teardown), and it stops by itself.
@pytest.mark.timeout(420)
async def test_every_operation_conforms_to_the_document(aiohttp_client, isolated_settings, builtin,
                                                        token, team, llm_upstream) -> None:
    # A database of its own: an admin token pushes random policies and quotas. The model
    # agent's steps are llm.chat calls, answered at once by the session's fake upstream (or
    # refused by the policy): turns end.
    app = create_app(isolated_settings.model_copy(update={"events_stream_max_s": 0.2}))
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available([*BUILTIN_TOOLS, *LLM_TOOLS], timeout=10)
    tokens = {"agent": token(agent="st-agent", team=team),
              "admin": token(agent="st-admin", team="st-ops", role="admin")}
    base = str(client.make_url("")).rstrip("/")
    started = time.monotonic()
    sent, failures, statuses = await asyncio.to_thread(fuzz, base, tokens)
    took = time.monotonic() - started
    print(f"schemathesis: {sent} requests in {took:.1f} s; statuses {dict(sorted(statuses.items()))}")
    assert sent > 300
    assert not [s for s in statuses if s >= 500 and s != 503], statuses
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("path", ["/v1/runs", "/v1/tools/invoke", "/v1/admin/quotas"])
async def test_the_document_states_the_created_status_and_bounds(client, path) -> None:
    doc = await (await client.get("/openapi.json")).json()
    op = doc["paths"][path]["post"]
    expected = "201" if path != "/v1/tools/invoke" else "202"
    assert expected in op["responses"] and "default" not in op["responses"]
    assert op["responses"]["400"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    budget = doc["components"]["schemas"]["Budget"]["properties"]["max_calls"]["anyOf"][0]
    assert budget["maximum"] == 2**63 - 1

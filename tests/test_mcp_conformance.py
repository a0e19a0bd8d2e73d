"""The official MCP conformance suite (@modelcontextprotocol/conformance, run by Node 22; both
from the npm registry, cached outside the repo by tests/support/npm/install.sh) against /mcp.

The suite cannot send a bearer token (0.1.16), so it talks to a loopback shim that adds one
and passes everything else — Host and Origin included — through as sent
(tests/support/mcp_clients.py). The proxy under test lists the shim's origin as allowed, as an
operator does for a reverse proxy on another port (TOOLPROXY_ALLOWED_ORIGINS).

Every scenario of the suite is classified here: applicable ones must pass; the others test
features Toolproxy does not offer (resources, prompts, logging, completions, sampling,
elicitation, SSE streams, non-text content), each with its reason. A scenario a newer suite
adds fails the test until it is classified.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.bus import close as close_nats
from infra.bus import connect
from proxy.web import keys as appkeys
from proxy.web.app import create_app
from tests.support.mcp_clients import CONFORMANCE, NODE, bearer_shim, missing, run
from tests.support.mcp_conformance import TOOLS, conformance_service

APPLICABLE = (
    "server-initialize", "ping", "tools-list", "tools-call-simple-text", "tools-call-error",
    "json-schema-2020-12", "server-sse-multiple-streams", "dns-rebinding-protection",
)
NOT_OFFERED = {
    "logging-set-level": "no logging capability: the proxy logs for operators, not to clients",
    "completion-complete": "no prompts or resource templates to complete",
    "tools-call-image": "tool results are JSON (text and structuredContent), never images",
    "tools-call-audio": "tool results are JSON, never audio",
    "tools-call-embedded-resource": "tool results are JSON, never embedded resources",
    "tools-call-mixed-content": "tool results are JSON, one text block",
    "tools-call-with-logging": "tools send no log notifications to clients",
    "tools-call-with-progress": "no progress notifications: each POST answers one JSON body",
    "tools-call-sampling": "tools never ask the client's model (no sampling)",
    "tools-call-elicitation": "tools never ask the client's user (no elicitation)",
    "elicitation-sep1034-defaults": "no elicitation",
    "elicitation-sep1330-enums": "no elicitation",
    "server-sse-polling": "no SSE streams: every POST is answered with one JSON body",
    "resources-list": "no resources", "resources-read-text": "no resources",
    "resources-read-binary": "no resources", "resources-templates-read": "no resources",
    "resources-subscribe": "no resources", "resources-unsubscribe": "no resources",
    "prompts-list": "no prompts", "prompts-get-simple": "no prompts",
    "prompts-get-with-args": "no prompts", "prompts-get-embedded-resource": "no prompts",
    "prompts-get-with-image": "no prompts",
}

pytestmark = pytest.mark.skipif(bool(missing(NODE, CONFORMANCE)), reason=str(missing(NODE, CONFORMANCE)))


async def test_every_server_scenario_is_classified() -> None:
    code, out, err = await run(str(NODE), str(CONFORMANCE), "list", "--server", timeout=60)
    assert code == 0, err
    listed = {line.strip()[2:].split(" ")[0] for line in out.splitlines() if line.strip().startswith("- ")}
    assert listed, out
    assert listed - set(APPLICABLE) - set(NOT_OFFERED) == set(), "classify the new scenarios"


async def test_the_official_conformance_suite_passes(aiohttp_client, settings, builtin, nats_url,
                                                     token, team, tmp_path: Path) -> None:
    nc = await connect(nats_url, name="conformance-fixtures")
    fixtures = conformance_service()
    await fixtures.start(nc)
    try:
        async with bearer_shim("http://upstream.invalid", token(agent="conformance", team=team)) as shim:
            app = create_app(settings.model_copy(update={"allowed_origins": shim.origin}))
            client = await aiohttp_client(app)
            await app[appkeys.CATALOG].wait_available(list(TOOLS), timeout=10)
            shim.upstream = str(client.make_url("")).rstrip("/")
            failures = {}
            for scenario in APPLICABLE:
                out_dir = tmp_path / scenario
                code, out, err = await run(str(NODE), str(CONFORMANCE), "server", "--url", shim.url,
                                           "--scenario", scenario, "-o", str(out_dir), timeout=120)
                checks = [c for f in out_dir.rglob("checks.json") for c in json.loads(f.read_text())]
                bad = [c for c in checks if c["status"] not in ("SUCCESS", "INFO", "SKIPPED")]
                if code != 0 or not checks or bad:
                    failures[scenario] = [(c["id"], c.get("errorMessage")) for c in bad] or out[-800:] + err[-800:]
            assert failures == {}
    finally:
        await fixtures.stop()
        await close_nats(nc)

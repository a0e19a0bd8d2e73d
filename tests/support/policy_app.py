"""The app under test on a Rego policy of the test's own, and two policies made to fail (one
overruns its budget, one raises a built-in error)."""

from __future__ import annotations

from pathlib import Path

from proxy.web import keys as appkeys
from proxy.web.app import create_app

SLOW = (
    "package toolproxy.authz\nimport rego.v1\n"
    'decision := {"allow": true, "reasons": ["slow"], "obligations": {}} if {\n'
    "  count([x | some x in numbers.range(1, 100000)]) > 0\n}\n"
)
RAISES = (
    "package toolproxy.authz\nimport rego.v1\n"
    'decision := {"allow": to_number(input.args.expr) > 0, "reasons": [], "obligations": {}}\n'
)


async def app_with_policy(aiohttp_client, settings, tmp_path: Path, source: str, **extra: object):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "authz.rego").write_text(source)
    app = create_app(settings.model_copy(update={"policy_dir": policies, **extra}))
    client = await aiohttp_client(app)
    await app[appkeys.CATALOG].wait_available(["math"])
    return client

"""`toolproxy egress` and `toolproxy external-apis` against a running proxy (subprocesses)."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

from tests.support.calls import bearer
from tests.support.settings import TEST_SECRET


async def cli(*args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLPROXY_")}
    env["TOOLPROXY_JWT_SECRET"] = TEST_SECRET
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli.main", *args, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_egress_commands(client, team) -> None:
    url = str(client.make_url("")).rstrip("/")
    code, out, err = await cli("egress", "set", "--team", team, "--host", "Example.com",
                               "--host", "*.docs.example.org:*", "--url", url)
    assert code == 0, err
    assert out.strip() == f"egress of team {team}: example.com, *.docs.example.org:*"
    code, out, err = await cli("egress", "list", "--team", team, "--url", url)
    assert code == 0 and out.split() == [team, "example.com,", "*.docs.example.org:*"], (out, err)
    code, _, err = await cli("egress", "set", "--team", team, "--host", "127.0.0.1", "--url", url)
    assert code == 1 and err.startswith("toolproxy: invalid_host_pattern:")
    code, out, _ = await cli("egress", "set", "--team", team, "--url", url)
    assert code == 0 and out.strip() == f"egress of team {team}: nothing"


async def test_external_api_commands(client, token, web_site) -> None:
    url = str(client.make_url("")).rstrip("/")
    name = f"cli-{uuid.uuid4().hex[:8]}"
    secret = "sk-" + uuid.uuid4().hex
    base = web_site.url("/api", host="public.test")
    code, out, err = await cli("external-apis", "add", "--name", name, "--base-url", base,
                               "--method", "GET", "--path", "/items/*", "--secret-header", "X-Api-Key",
                               "--secret-stdin", "--url", url, stdin=secret.encode() + b"\n")
    assert code == 0, err
    assert out.strip() == f"registered external API {name} at {base} (GET /items/*)"
    code, out, err = await cli("external-apis", "list", "--url", url)
    line = next(row for row in out.splitlines() if row.startswith(name))
    assert code == 0 and "[X-Api-Key: stored (sealed)]" in line and secret not in out
    r = await client.get("/v1/admin/external-apis", headers=bearer(token(agent="r", team="ops", role="admin")))
    assert name in [a["name"] for a in (await r.json())["external_apis"]]
    code, _, err = await cli("external-apis", "add", "--name", name, "--base-url", base, "--method", "GET",
                             "--path", "/x", "--secret-header", "X-Api-Key", "--url", url)
    assert code == 1 and "one of --secret-stdin and --secret-file" in err
    code, out, _ = await cli("external-apis", "remove", "--name", name, "--url", url)
    assert code == 0 and out.strip() == f"removed external API {name}"
    code, _, err = await cli("external-apis", "remove", "--name", name, "--url", url)
    assert code == 1 and err.startswith("toolproxy: not_found:")

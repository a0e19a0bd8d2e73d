"""From a registration to how the bridge reaches it over MCP: its URL with its header secret or
OAuth token source, or the allowlisted command, confined."""

from __future__ import annotations

import os
import pwd
import sys
from pathlib import Path

import orjson
from mcp.client.stdio import StdioServerParameters

from infra.secret_box import SecretBox
from services.netguard.guard import Guard
from services.upstreams import commands
from services.upstreams.config import UpstreamSettings
from services.upstreams.link import Endpoint
from services.upstreams.oauth import token_source
from services.upstreams.store import Upstream, sealed_name

CONFINE = Path(__file__).with_name("confine.py")


def endpoint(u: Upstream, settings: UpstreamSettings, box: SecretBox,
             guard: Guard | None = None) -> Endpoint:
    """Raises CommandNotAllowed (stdio outside the allowlist) or SecretUnavailable."""
    headers = None
    if u.secret_header and u.secret_sealed is not None and u.secret_key_id is not None:
        headers = {u.secret_header: box.open(sealed_name(u.name), u.secret_sealed, u.secret_key_id)}
    common = {"max_bytes": settings.upstream_max_answer_bytes, "timeout_s": u.timeout_ms / 1000,
              "max_concurrency": u.max_concurrency, "ping_every_s": settings.upstream_ping_every_s}
    if u.transport == "streamable_http":
        return Endpoint(name=u.name, url=u.url, headers=headers,
                        tokens=token_source(u, settings, box, guard), **common)
    assert u.command is not None
    cmd = commands.resolve(settings.upstream_commands, u.command, list(u.args))
    work = settings.work_dir(u.name).resolve()
    work.mkdir(parents=True, exist_ok=True, mode=0o700)
    uid = gid = None
    if os.geteuid() == 0 and settings.upstream_stdio_user:
        try:
            entry = pwd.getpwnam(settings.upstream_stdio_user)
            uid, gid = entry.pw_uid, entry.pw_gid
            os.chown(work, uid, gid)
        except KeyError:
            uid = gid = None  # no such user here: stays as the bridge's (the docs say so)
    spec = {"executable": cmd.executable, "argv": list(cmd.argv), "env": cmd.env, "cwd": str(work),
            "uid": uid, "gid": gid, "no_network": not cmd.network,
            "memory_bytes": settings.upstream_stdio_memory_mb << 20,
            "cpu_s": settings.upstream_stdio_cpu_s, "nofile": settings.upstream_stdio_nofile,
            "nproc": settings.upstream_stdio_nproc, "fsize_bytes": 256 << 20}
    params = StdioServerParameters(
        command=sys.executable, args=["-I", "-S", str(CONFINE)],
        env={"TOOLPROXY_CONFINE": orjson.dumps(spec).decode()}, cwd=str(work))
    return Endpoint(name=u.name, stdio=params, **common)

"""The bus's identities: one NATS user per kind of process, each allowed only its own subjects.

One list of permissions serves `toolproxy up` (passwords generated into the data dir), the
tests, and the deployments (`python deploy/nats_auth_conf.py` writes their auth.conf, the
passwords then read by the server from its environment: `$TOOLPROXY_NATS_<ROLE>_PASSWORD`).
docs/operators/bus.md says what each may do and how to rotate.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Subjects of the product (wire/protocol.py, proxy/records, proxy/core): kept here as literals
# (infra sits below them); tests/test_bus_auth.py checks these against the modules' own names.
_TOOLS = "tools.>"  # tools.<name>.invoke | .cancel | .prepare
_ANNOUNCE = "toolproxy.catalog.announce"
_GOODBYE = "toolproxy.catalog.goodbye"
_DISCOVER = "toolproxy.catalog.discover"
_PLUGIN_INTERNAL = "toolproxy.plugins.internal.*"
_AGENTS = "agents.>"  # agents.<id>.invoke: agent runtimes (services/agents)
_UPSTREAM_SYNC = "toolproxy.upstreams.sync"  # the proxy asks the upstream bridge to sync
_GOVERNANCE_UPSTREAMS = "toolproxy.governance.upstreams"  # the bridge's pin events
# The proxy's JetStream assets: the journal, the dead letters, and its KV buckets.
PROXY_BUCKETS = ("toolproxy_rate", "toolproxy_quota", "toolproxy_idempotency", "toolproxy_runs")
SERVICES_BUCKETS = ("toolproxy_agent_invocations",)


def _inbox(role: str) -> str:
    return f"_INBOX.{role}.>"


def _kv_api(bucket: str) -> list[str]:
    """What a client needs to create, read and write one KV bucket, and nothing of any other
    stream (`$JS.API.>` would let it delete the journal)."""
    stream = f"KV_{bucket}"
    return [f"$JS.API.STREAM.INFO.{stream}", f"$JS.API.STREAM.CREATE.{stream}",
            f"$JS.API.STREAM.UPDATE.{stream}", f"$JS.API.STREAM.MSG.GET.{stream}",
            f"$JS.API.DIRECT.GET.{stream}", f"$JS.API.DIRECT.GET.{stream}.>",
            f"$JS.API.CONSUMER.CREATE.{stream}", f"$JS.API.CONSUMER.CREATE.{stream}.>",
            f"$JS.API.CONSUMER.DELETE.{stream}.>", f"$KV.{bucket}.>"]


Permissions = dict[str, Any]


def _own_tools(tools: Sequence[str]) -> list[str]:
    """A tool's subjects: tools.<name>.invoke, .cancel and .prepare."""
    return [f"tools.{t}.*" for t in tools]


def roles(service_tools: Sequence[str] | None = None) -> dict[str, Permissions]:
    """Each user's permissions. `service_tools`: the tools the services process serves (all
    of services.served.SERVED_TOOLS in a deployment): its user subscribes to those tools'
    subjects only, and the plugin host to every other tool's (a plugin cannot take a built-in
    tool's calls, nor a service a plugin's). None: both to `tools.>`.

    Every user may answer the requests it receives (allow_responses), and nothing else.
    "admin" is the operator's (and the tests') identity for inspection and repair, never given
    to a Toolproxy process."""
    service_sub = _own_tools(service_tools) if service_tools is not None else [_TOOLS]
    plugin_sub: dict[str, list[str]] = {"allow": [_TOOLS, _DISCOVER, _inbox("plugins")]}
    if service_tools is not None:
        plugin_sub["deny"] = _own_tools(service_tools)
    return {
        "proxy": {"publish": {"allow": [
            _TOOLS, "toolproxy.>", "$JS.API.>", "$JS.ACK.>", "$JS.FC.>",
            *(f"$KV.{b}.>" for b in PROXY_BUCKETS)]},
                  "subscribe": {"allow": [_ANNOUNCE, _GOODBYE, "toolproxy.calls.cancel",
                                          _PLUGIN_INTERNAL, _inbox("proxy")]}},
        "services": {"publish": {"allow": [
            _ANNOUNCE, _GOODBYE, _AGENTS, "$JS.API.INFO",
            *(s for b in SERVICES_BUCKETS for s in _kv_api(b))]},
                     "subscribe": {"allow": [*service_sub, _DISCOVER, _inbox("services")]}},
        "plugins": {"publish": {"allow": [_ANNOUNCE, _GOODBYE, _PLUGIN_INTERNAL]},
                    "subscribe": plugin_sub},
        # The upstream bridge: as the plugin host, any tool but the services' (its tools are
        # <upstream>.<tool>, classified by governance), its sync requests and its pin events.
        "upstreams": {"publish": {"allow": [_ANNOUNCE, _GOODBYE, _GOVERNANCE_UPSTREAMS]},
                      "subscribe": {**plugin_sub, "allow": [_TOOLS, _DISCOVER, _UPSTREAM_SYNC,
                                                            _inbox("upstreams")]}},
        "agents": {"publish": {"deny": [">"]}, "subscribe": {"allow": [_AGENTS, _inbox("agents")]}},
        "admin": {"publish": {"allow": [">"]}, "subscribe": {"allow": [">"]}},
    }


ROLES = tuple(roles())


def password_variable(role: str) -> str:
    return f"TOOLPROXY_NATS_{role.upper()}_PASSWORD"


def authorization_block(passwords: dict[str, str] | None = None,
                        service_tools: Sequence[str] | None = None) -> str:
    """The server's `authorization` block: with the given passwords (quoted), or, for the
    deployments, each read from the server's environment ($TOOLPROXY_NATS_<ROLE>_PASSWORD)."""
    users = []
    for role, perms in roles(service_tools).items():
        if passwords is not None and role not in passwords:
            continue
        secret = json.dumps(passwords[role]) if passwords is not None else f"${password_variable(role)}"
        if role != "admin":
            perms = {**perms, "allow_responses": True}
        users.append(f"    {{user: {json.dumps(role)}, password: {secret},\n"
                     f"     permissions: {json.dumps(perms)}}}")
    return "authorization {\n  users = [\n" + ",\n".join(users) + "\n  ]\n}\n"


def credentials(data_dir: Path) -> dict[str, str]:
    """The data dir's password per role (secrets/nats_users.json, 0600), made on first use."""
    path = data_dir / "secrets" / "nats_users.json"
    if path.exists():
        stored = json.loads(path.read_text())
        if set(stored) >= set(ROLES):
            return {r: str(stored[r]) for r in ROLES}
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    made = {role: secrets.token_urlsafe(32) for role in ROLES}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(made, f)
    return made


def client_env(role: str, passwords: dict[str, str]) -> dict[str, str]:
    """The environment a process of `role` connects with."""
    return {"TOOLPROXY_NATS_USER": role, "TOOLPROXY_NATS_PASSWORD": passwords[role]}

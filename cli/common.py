"""Shared by commands that talk to a running stack: where it is and an admin credential."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import aiohttp

from cli.errors import CliError
from proxy.config import Settings
from proxy.identity.dev import keys_file
from proxy.identity.devkeys import LEGACY_KEY_FILE
from proxy.identity.tokens import mint

RUNTIME_FILE = "runtime.json"
CLI_AGENT = "toolproxy-cli"
CLI_TEAM = "toolproxy-admin"


def fail(message: str, code: int = 1) -> NoReturn:
    print(f"toolproxy: {message}", file=sys.stderr)
    raise SystemExit(code)


def data_dir_of(arg: str | None) -> Path:
    return Path(arg or os.environ.get("TOOLPROXY_DATA_DIR") or ".toolproxy")


def read_runtime(data_dir: Path) -> dict[str, Any]:
    path = data_dir / RUNTIME_FILE
    try:
        return dict(json.loads(path.read_text()))
    except FileNotFoundError:
        return {}


def write_runtime(data_dir: Path, info: dict[str, Any]) -> None:
    path = data_dir / RUNTIME_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f, indent=2)
    os.replace(tmp, path)


def stack_url(url: str | None, data_dir: Path) -> str:
    found = url or os.environ.get("TOOLPROXY_URL") or read_runtime(data_dir).get("url")
    if not found:
        raise CliError(
            f"no running stack found in {data_dir}: pass the data dir `toolproxy up` runs with "
            "(--data-dir DIR or TOOLPROXY_DATA_DIR=DIR, as given to `make up DATA_DIR=`), "
            "or the proxy's URL (--url or TOOLPROXY_URL)"
        )
    return str(found).rstrip("/")


def settings_for(data_dir: Path) -> Settings:
    return Settings(data_dir=data_dir)


def require_signing_key(settings: Settings) -> None:
    """A token is signed with the key set (TOOLPROXY_JWT_KEYS_FILE, or the one `toolproxy up`
    made in its data dir) or TOOLPROXY_JWT_SECRET. A missing key is never created here: a key of
    a data dir no stack uses signs tokens the running stack refuses (401), which is how a wrong
    data dir used to show."""
    if settings.jwt_keys_file is None and (settings.jwt_secret is not None
                                           or settings.jwt_public_key_file is not None):
        return
    key = keys_file(settings)
    legacy = settings.data_dir / LEGACY_KEY_FILE
    if not key.exists() and (settings.jwt_keys_file is not None or not legacy.exists()):
        raise CliError(
            f"no signing key at {key}: pass the running stack's data dir (--data-dir DIR or "
            "TOOLPROXY_DATA_DIR=DIR, as given to `toolproxy up --data-dir` / `make up DATA_DIR=`), "
            "or set TOOLPROXY_JWT_KEYS_FILE (or TOOLPROXY_JWT_SECRET) to the deployment's")
    if key.exists() and not os.access(key, os.R_OK):
        raise CliError(f"cannot read the signing key {key}: permission denied")


def mint_token(settings: Settings, **claims: Any) -> str:
    require_signing_key(settings)
    try:
        return mint(settings, **claims)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot read the signing key: {exc.strerror or exc}") from None


def admin_token(data_dir: Path, role: str = "admin") -> str:
    """The dev admin credential: minted from the data dir's signing key (or TOOLPROXY_JWT_SECRET)."""
    return mint_token(settings_for(data_dir), agent_id=CLI_AGENT, team_id=CLI_TEAM, role=role, ttl_s=300)


def print_list(url: str, token: str, path: str, key: str, team: str | None, *, empty: str,
               line: Callable[[dict[str, Any]], str]) -> int:
    """An admin list (GET `path`, of one team if given): a line per row, or `empty`."""
    params = {"team_id": team} if team else None
    rows = asyncio.run(call_api("GET", f"{url}{path}", token, params=params))[key]
    if not rows:
        print(empty)
    for row in rows:
        print(line(row))
    return 0


async def call_api(
    method: str, url: str, token: str, *, json_body: Any = None, params: dict[str, str] | None = None
) -> Any:
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            async with session.request(
                method, url, json=json_body, params=params,
                headers={"Authorization": f"Bearer {token}"},
            ) as resp:
                try:
                    body = await resp.json(content_type=None)
                except (ValueError, aiohttp.ContentTypeError):
                    raise CliError(f"{method} {url}: HTTP {resp.status}, not JSON") from None
                if resp.status >= 400:
                    err = body.get("error", {}) if isinstance(body, dict) else {}
                    raise CliError(
                        f"{err.get('code', resp.status)}: {err.get('message', 'request failed')}"
                    )
                return body
    except aiohttp.ClientConnectionError as exc:
        raise CliError(f"cannot reach {url}: {exc}") from None

"""Shared by commands that talk to a running stack: where it is and an admin credential."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import aiohttp

from proxy.config import Settings
from proxy.tokens import mint

RUNTIME_FILE = "runtime.json"
CLI_AGENT = "toolproxy-cli"
CLI_TEAM = "toolproxy-admin"


class CliError(Exception):
    """Printed as one line on stderr, exit code 1."""


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
            f"no running stack found: pass --url, set TOOLPROXY_URL, or run `toolproxy up` "
            f"with --data-dir {data_dir}"
        )
    return str(found).rstrip("/")


def settings_for(data_dir: Path) -> Settings:
    return Settings(data_dir=data_dir)


def admin_token(data_dir: Path, role: str = "admin") -> str:
    """The dev admin credential: minted from the data dir's signing key (or TOOLPROXY_JWT_SECRET)."""
    return mint(settings_for(data_dir), agent_id=CLI_AGENT, team_id=CLI_TEAM, role=role, ttl_s=300)  # type: ignore[arg-type]


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

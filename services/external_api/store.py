"""Registered external APIs: what an admin allowed (base URL, methods, paths, the header the
secret goes into) and where the secret is; the secret itself never leaves this module."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg

from infra.secret_box import SecretBox, SecretUnavailable

NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
HEADER_PATTERN = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$"
SECRET_FILE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
MAX_SECRET = 4096
# Headers the HTTP client or the request's own framing owns: never replaced by a secret.
RESERVED_HEADERS = frozenset({
    "host", "content-length", "content-type", "content-encoding", "transfer-encoding",
    "connection", "keep-alive", "upgrade", "te", "trailer", "expect", "cookie", "accept",
    "accept-encoding", "user-agent", "forwarded", "via",
})
_SECRET_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?", re.ASCII)


def secret_problem(value: str) -> str | None:
    """Why this secret cannot go into a header (None: it can)."""
    if not 0 < len(value) <= MAX_SECRET:
        return f"a secret is 1 to {MAX_SECRET} characters"
    if not _SECRET_VALUE.fullmatch(value):
        return "a secret is printable ASCII without leading or trailing spaces"
    return None


def header_problem(name: str) -> str | None:
    if not re.fullmatch(HEADER_PATTERN, name, re.ASCII):
        return "secret_header must be an HTTP header name"
    lowered = name.lower()
    if lowered in RESERVED_HEADERS or lowered.startswith(("proxy-", "sec-", "x-forwarded-")):
        return f"secret_header {name!r} is reserved"
    return None


@dataclass(frozen=True, slots=True)
class ExternalApi:
    name: str
    base_url: str
    methods: tuple[str, ...]
    paths: tuple[str, ...]
    secret_header: str
    secret_sealed: bytes | None
    secret_key_id: str | None
    secret_file: str | None
    created_by: str
    created_at: datetime
    updated_at: datetime

    def as_json(self) -> dict[str, Any]:
        """What the API shows: never the secret, sealed or not."""
        return {
            "name": self.name, "base_url": self.base_url, "methods": list(self.methods),
            "paths": list(self.paths), "secret_header": self.secret_header,
            "secret_source": "file" if self.secret_file else "stored",
            "secret_file": self.secret_file, "created_by": self.created_by,
            "created_at": self.created_at.isoformat(), "updated_at": self.updated_at.isoformat(),
        }

    def secret(self, box: SecretBox, secret_dir: Path) -> str:
        """The secret, recovered at call time; SecretUnavailable if it cannot be."""
        if self.secret_sealed is not None and self.secret_key_id is not None:
            value = box.open(self.name, self.secret_sealed, self.secret_key_id)
        elif self.secret_file is not None:
            value = read_secret_file(secret_dir, self.secret_file)
        else:
            raise SecretUnavailable("no secret is registered")
        if secret_problem(value) is not None:
            raise SecretUnavailable("the secret is not usable as a header value")
        return value


def read_secret_file(secret_dir: Path, name: str) -> str:
    if not re.fullmatch(SECRET_FILE_PATTERN, name, re.ASCII):
        raise SecretUnavailable("not a secret file name")
    root = secret_dir.resolve()
    path = (root / name).resolve()
    if path.parent != root and root not in path.parents:
        raise SecretUnavailable("the secret file is outside the secret directory")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SECRET + 3)
    except OSError:
        raise SecretUnavailable("the secret file cannot be read") from None
    try:
        return data.decode("ascii").rstrip("\r\n")
    except UnicodeDecodeError:
        raise SecretUnavailable("the secret file is not ASCII") from None


_COLUMNS = ("name, base_url, methods, paths, secret_header, secret_sealed, secret_key_id,"
            " secret_file, created_by, created_at, updated_at")


def _api(row: asyncpg.Record) -> ExternalApi:
    return ExternalApi(
        name=row["name"], base_url=row["base_url"], methods=tuple(row["methods"]),
        paths=tuple(row["paths"]), secret_header=row["secret_header"],
        secret_sealed=row["secret_sealed"], secret_key_id=row["secret_key_id"],
        secret_file=row["secret_file"], created_by=row["created_by"],
        created_at=row["created_at"], updated_at=row["updated_at"],
    )


async def put(
    pool: asyncpg.Pool, *, name: str, base_url: str, methods: list[str], paths: list[str],
    secret_header: str, sealed: tuple[bytes, str] | None, secret_file: str | None, by: str,
) -> ExternalApi:
    """Register or replace (the secret too) the API called `name`."""
    row = await pool.fetchrow(
        f"""INSERT INTO external_apis (name, base_url, methods, paths, secret_header,
                secret_sealed, secret_key_id, secret_file, created_by)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
            ON CONFLICT (name) DO UPDATE SET base_url = EXCLUDED.base_url,
                methods = EXCLUDED.methods, paths = EXCLUDED.paths,
                secret_header = EXCLUDED.secret_header, secret_sealed = EXCLUDED.secret_sealed,
                secret_key_id = EXCLUDED.secret_key_id, secret_file = EXCLUDED.secret_file,
                created_by = EXCLUDED.created_by, updated_at = now()
            RETURNING {_COLUMNS}""",
        name, base_url, methods, paths, secret_header,
        sealed[0] if sealed else None, sealed[1] if sealed else None, secret_file, by,
    )
    return _api(row)


async def get(pool: asyncpg.Pool, name: str) -> ExternalApi | None:
    row = await pool.fetchrow(f"SELECT {_COLUMNS} FROM external_apis WHERE name = $1", name)
    return _api(row) if row is not None else None


async def list_all(pool: asyncpg.Pool) -> list[ExternalApi]:
    rows = await pool.fetch(f"SELECT {_COLUMNS} FROM external_apis ORDER BY name LIMIT 1000")
    return [_api(r) for r in rows]


async def delete(pool: asyncpg.Pool, name: str) -> bool:
    return (await pool.execute("DELETE FROM external_apis WHERE name = $1", name)) == "DELETE 1"

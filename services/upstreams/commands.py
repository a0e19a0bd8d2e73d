"""The operator's stdio allowlist (TOOLPROXY_UPSTREAM_COMMANDS): the only programs an upstream
may start. A JSON file, name → {executable (absolute path), args (fixed), allow_args (a regular
expression each registration argument must match whole; absent: none allowed), max_args, env
(the declared variables, the only ones the server gets)}."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from services.upstreams.errors import CommandNotAllowed

MAX_FILE_BYTES = 256 * 1024
MAX_ARG = 256


class CommandSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    executable: str = Field(min_length=1, max_length=4096)
    args: list[str] = Field(default_factory=list, max_length=64)
    allow_args: str | None = Field(default=None, max_length=512)
    max_args: int = Field(default=8, ge=0, le=32)
    env: dict[str, str] = Field(default_factory=dict, max_length=64)
    # False: a network namespace of its own, with nothing in it (only when the bridge is root).
    network: bool = True

    @field_validator("executable")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not os.path.isabs(value):
            raise ValueError("executable must be an absolute path (no PATH lookup)")
        return value

    @field_validator("allow_args")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None:
            re.compile(value)
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for k in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", k):
                raise ValueError(f"env: {k!r} is not a variable name")
        return value


@dataclass(frozen=True, slots=True)
class Command:
    """A command the allowlist admits: what will run, exactly."""

    name: str
    executable: str
    argv: tuple[str, ...]  # after the executable
    env: dict[str, str]
    network: bool = True


def load(path: Path | None) -> dict[str, CommandSpec]:
    """The allowlist; an empty one when none is configured (no stdio upstream can be used)."""
    if path is None:
        return {}
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise CommandNotAllowed(f"the stdio allowlist cannot be read: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise CommandNotAllowed("the stdio allowlist is too large")
    try:
        raw = orjson.loads(data)
        if not isinstance(raw, dict):
            raise ValueError("not an object")
        return {str(k): CommandSpec.model_validate(v) for k, v in raw.items()}
    except (ValueError, ValidationError) as exc:
        raise CommandNotAllowed(f"the stdio allowlist is invalid: {str(exc)[:300]}") from None


def resolve(path: Path | None, name: str, args: list[str]) -> Command:
    """The command `name` with the registration's `args`, or CommandNotAllowed: nothing outside
    the allowlist can be started, whoever registered it."""
    spec = load(path).get(name)
    if spec is None:
        raise CommandNotAllowed(f"{name[:64]!r} is not in the operator's stdio allowlist")
    if len(args) > spec.max_args or (args and spec.allow_args is None):
        raise CommandNotAllowed(f"{name!r} takes at most {spec.max_args if spec.allow_args else 0} arguments")
    for a in args:
        if len(a) > MAX_ARG or "\x00" in a or spec.allow_args is None \
                or re.fullmatch(spec.allow_args, a) is None:
            raise CommandNotAllowed(f"argument {a[:64]!r} does not match {name!r}'s pattern")
    if not os.access(spec.executable, os.X_OK):
        raise CommandNotAllowed(f"{name!r}'s executable is not there or not executable")
    return Command(name=name, executable=spec.executable, argv=(*spec.args, *args), env=dict(spec.env),
                   network=spec.network)

"""From a verified token's claims to an identity, by configuration (TOOLPROXY_OIDC_CLAIMS).

A mapping names which claim is the agent, the team, the role and the scopes. Each is a claim
path: `team`, a dotted path into nested objects (`realm_access.roles`), or a JSON Pointer for
names that hold dots or slashes (`/https:~1~1example.com~1team`); a list of paths is tried in
order (`["azp", "client_id", "sub"]`). The role claim may hold one string, a space-separated
string (a `scope` claim) or a list (`roles`, `groups`); its values are mapped to the roles by
`role_values`, and the highest mapped role wins. A token without a mappable agent, team or role
is refused, naming the claim it lacks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy.errors import Unauthenticated
from proxy.identity.identity import ROLES, Identity, Role
from wire.ids import is_valid_id

Path = tuple[str, ...]
# The dev issuer's own claim names (the contract's default).
DEFAULT = {"agent": "sub", "team": "team", "role": "role"}
MAX_SCOPES = 256
MAX_SCOPE_LEN = 200
_RANK = {role: i for i, role in enumerate(ROLES)}
# Agent ids of this form belong to plugins' internal calls (made by the proxy itself): no
# token ever carries one.
RESERVED_AGENT_PREFIX = "plugin:"


def parse_path(text: str) -> Path:
    if not isinstance(text, str) or not text:
        raise ValueError("a claim path is a non-empty string")
    if text.startswith("/"):  # RFC 6901
        return tuple(p.replace("~1", "/").replace("~0", "~") for p in text[1:].split("/"))
    parts = tuple(text.split("."))
    if any(not p for p in parts):
        raise ValueError(f"claim path {text!r} has an empty segment")
    return parts


def _paths(value: Any, what: str) -> tuple[Path, ...]:
    items = value if isinstance(value, list) else [value]
    if not items or len(items) > 8:
        raise ValueError(f"claims.{what}: one claim path or a list of 1 to 8")
    try:
        return tuple(parse_path(v) for v in items)
    except ValueError as exc:
        raise ValueError(f"claims.{what}: {exc}") from None


def _show(path: Path) -> str:
    return ".".join(path)


def lookup(claims: Mapping[str, Any], path: Path) -> Any:
    node: Any = claims
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


@dataclass(frozen=True, slots=True)
class ClaimMapping:
    agent: tuple[Path, ...]
    team: tuple[Path, ...]
    role: tuple[Path, ...]
    scope: tuple[Path, ...]
    role_values: Mapping[str, Role] = field(default_factory=lambda: {r: r for r in ROLES})
    default_role: Role | None = None  # when the role claim is absent (never when it is unmapped)

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None, *, default_role: Role | None = None) -> ClaimMapping:
        """From the JSON form; unknown keys and unknown roles are refused at start."""
        data = dict(DEFAULT)
        data.update(raw or {})
        known = {"agent", "team", "role", "scope", "role_values", "default_role"}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"claims: unknown key(s) {sorted(unknown)} (known: {sorted(known)})")
        values = data.get("role_values")
        if values is None:
            role_values: dict[str, Role] = {r: r for r in ROLES}
        else:
            if not isinstance(values, Mapping) or not values:
                raise ValueError("claims.role_values: an object of claim value -> role")
            bad = {v for v in values.values() if v not in ROLES}
            if bad:
                raise ValueError(f"claims.role_values: roles are {', '.join(ROLES)}, not {sorted(bad)}")
            role_values = dict(values)
        fallback = data.get("default_role", default_role)
        if fallback is not None and fallback not in ROLES:
            raise ValueError(f"claims.default_role must be one of {', '.join(ROLES)}")
        return cls(agent=_paths(data["agent"], "agent"), team=_paths(data["team"], "team"),
                   role=_paths(data["role"], "role"),
                   scope=_paths(data.get("scope", ["scope", "scp"]), "scope"),
                   role_values=role_values, default_role=fallback)

    def identity(self, claims: Mapping[str, Any], *, issuer: str) -> Identity:
        agent = self._id(claims, self.agent, "agent")
        if agent.startswith(RESERVED_AGENT_PREFIX):
            raise Unauthenticated("invalid token: the subject is reserved for plugins")
        team = self._id(claims, self.team, "team")
        return Identity(agent_id=agent, team_id=team, role=self._role(claims),
                        token_id=_token_id(claims), scopes=scopes_of(claims, self.scope),
                        issuer=issuer)

    def _id(self, claims: Mapping[str, Any], paths: tuple[Path, ...], what: str) -> str:
        for path in paths:
            value = lookup(claims, path)
            if value is None:
                continue
            if isinstance(value, str) and is_valid_id(value):
                return value
            raise Unauthenticated(f"invalid token: claim {_show(path)!r} ({what}) is not an id "
                                  "(1-64 chars of A-Z a-z 0-9 _ . : @ -)")
        names = " or ".join(repr(_show(p)) for p in paths)
        raise Unauthenticated(f"invalid token: no {what} claim: the token has no {names}")

    def _role(self, claims: Mapping[str, Any]) -> Role:
        seen = False
        best: Role | None = None
        for path in self.role:
            value = lookup(claims, path)
            if value is None:
                continue
            seen = True
            for item in _values(value):
                role = self.role_values.get(item)
                if role is not None and (best is None or _RANK[role] > _RANK[best]):
                    best = role
        if best is not None:
            return best
        if self.default_role is not None and not seen:  # absent, not unmapped
            return self.default_role
        names = " or ".join(repr(_show(p)) for p in self.role)
        if seen:
            raise Unauthenticated(f"invalid token: the role claim {names} holds no value mapped "
                                  f"to a role ({', '.join(ROLES)})")
        raise Unauthenticated(f"invalid token: no role claim: the token has no {names}")


def _values(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def scopes_of(claims: Mapping[str, Any], paths: tuple[Path, ...]) -> tuple[str, ...]:
    for path in paths:
        value = lookup(claims, path)
        if value is None:
            continue
        items = _values(value)
        if len(items) > MAX_SCOPES or any(len(s) > MAX_SCOPE_LEN for s in items):
            raise Unauthenticated(f"invalid token: more than {MAX_SCOPES} scopes, or one longer "
                                  f"than {MAX_SCOPE_LEN} characters")
        return tuple(sorted(set(items)))
    return ()


def _token_id(claims: Mapping[str, Any]) -> str:
    jti = claims.get("jti")
    return jti[:128] if isinstance(jti, str) else ""

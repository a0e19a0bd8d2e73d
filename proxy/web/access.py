"""Who may use a governance route, for which team, and seeing a change applied here first."""

from __future__ import annotations

from aiohttp import web

from proxy.errors import Forbidden, InvalidRequest
from proxy.identity.identity import Identity
from proxy.web.keys import GRANTS, SETTINGS
from wire.ids import is_valid_id


def require_governance(identity: Identity, team_id: str | None) -> None:
    if not identity.is_governance:
        raise Forbidden("this route needs a governance or admin token")
    if team_id is not None and team_id != identity.team_id and not identity.is_admin:
        raise Forbidden("governance tokens manage their own team only")


def governed_team(request: web.Request, identity: Identity) -> str | None:
    """The team a governance read covers: `?team_id=` (validated), else the caller's own team;
    None (every team) only for admins. Raises unless the caller may read it."""
    team = request.query.get("team_id")  # given but empty is not "every team": invalid
    if team is None and not identity.is_admin:
        team = identity.team_id
    if team is not None and not is_valid_id(team):
        raise InvalidRequest("team_id is not a valid id")
    require_governance(identity, team)
    return team


async def applied_here(request: web.Request, team_id: str) -> None:
    """After a change to a team's access data: this replica enforces it before answering (the
    others follow their NOTIFY within milliseconds)."""
    await request.app[GRANTS].reload_team(team_id)


def require_platform_governance(request: web.Request, identity: Identity, what: str) -> None:
    """A change to every team's catalog (a plugin enabled, an upstream tool classified): an
    admin, or the governance of a team the operator named (TOOLPROXY_PLUGIN_GOVERNANCE_TEAMS)."""
    if identity.is_admin:
        return
    if identity.is_governance and identity.team_id in request.app[SETTINGS].plugin_governors:
        return
    raise Forbidden(f"{what} changes every team's catalog: it needs an admin token, or "
                    "governance of a team in TOOLPROXY_PLUGIN_GOVERNANCE_TEAMS")

"""/v1/admin/journal/dead-letters: the journal records Postgres refused for their data, kept
whole in their own stream (proxy/records/dead_letters.py), listed and replayed by admins only
(a dead letter may hold any team's records). `toolproxy journal dead-letters` calls them."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, model_validator

from proxy.errors import DependencyUnavailable, Forbidden
from proxy.records.dead_letters import MAX_LIST
from proxy.web.body import read_model
from proxy.web.keys import JOURNAL, identity_of
from proxy.web.params import query_int
from proxy.web.responses import json_response

routes = web.RouteTableDef()

MAX_REPLAY = 1000  # dead letters one replay request names at most


class Replay(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sequences: list[int] = Field(default_factory=list, max_length=MAX_REPLAY)
    all: bool = False  # every dead letter there is (MAX_REPLAY at a time)

    @model_validator(mode="after")
    def _one(self) -> Replay:
        if bool(self.sequences) == self.all:
            raise ValueError("name the dead letters to replay (sequences) or ask for all of them (all)")
        if any(s < 1 for s in self.sequences):
            raise ValueError("a dead letter's sequence is a positive integer")
        return self


def _require_admin(request: web.Request) -> None:
    if not identity_of(request).is_admin:
        raise Forbidden("dead letters may hold any team's records: admins only")


@routes.get("/v1/admin/journal/dead-letters")
async def list_dead_letters(request: web.Request) -> web.Response:
    _require_admin(request)
    after = query_int(request.query, "after", 0)
    limit = query_int(request.query, "limit", 100, lo=1, hi=MAX_LIST)
    full = request.query.get("full") in ("1", "true")
    letters = request.app[JOURNAL].dead_letters
    try:
        found = await letters.list(limit=limit, after=after)
        count = await letters.count()
    except Exception as exc:
        raise DependencyUnavailable("the dead-letter stream cannot be read now (NATS)") from exc
    body: dict[str, Any] = {"dead_letters": [d.view(full=full) for d in found], "count": count}
    return json_response(200, body)


@routes.post("/v1/admin/journal/dead-letters/replay")
async def replay_dead_letters(request: web.Request) -> web.Response:
    """Each back into the journal (the writer takes it as any record; refused again, it comes
    back here after five refusals), then removed."""
    _require_admin(request)
    body = await read_model(request, Replay)
    letters = request.app[JOURNAL].dead_letters
    try:
        sequences = body.sequences or [d.sequence for d in await letters.list(limit=MAX_REPLAY)]
        replayed = await letters.replay(sequences)
    except Exception as exc:
        raise DependencyUnavailable("the dead letters cannot be replayed now (NATS)") from exc
    return json_response(200, {"replayed": replayed, "missing": sorted(set(sequences) - set(replayed))})

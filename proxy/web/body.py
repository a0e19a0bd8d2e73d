"""Reading JSON request bodies into pydantic models, with bounded size and clear errors."""

from __future__ import annotations

from typing import TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from proxy.web.keys import SETTINGS
from proxy.errors import InvalidRequest, PayloadTooLarge, UnsupportedMediaType
from proxy.core.input_rules import describe, json_text_problem

M = TypeVar("M", bound=BaseModel)


async def read_model(request: web.Request, model: type[M]) -> M:
    ctype = request.content_type
    if request.body_exists and ctype not in ("application/json", "application/octet-stream", ""):
        raise UnsupportedMediaType("send the body as application/json")
    try:
        data = await request.read()
    except web.HTTPRequestEntityTooLarge:
        limit = request.app[SETTINGS].max_body_bytes
        raise PayloadTooLarge(f"the body exceeds {limit} bytes") from None
    if not data:
        raise InvalidRequest("a JSON body is required")
    try:
        parsed = model.model_validate_json(data)
    except ValidationError as exc:
        raise InvalidRequest(describe(exc)) from None
    # What Postgres and orjson cannot keep (NUL, integers beyond 64 bits, NaN/Infinity), in
    # any value (tool arguments, plans): refused before anything runs.
    problem = json_text_problem(data)
    if problem is not None:
        raise InvalidRequest(problem)
    return parsed

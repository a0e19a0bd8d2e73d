"""External API registrations: admins register and remove them; governance may read them.
Secrets go in (sealed at once) and never come out."""

from __future__ import annotations

from typing import Annotated, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from proxy.web.admin.keys import SECRET_BOX
from proxy.web.keys import POOL, identity_of
from proxy.web.body import read_model
from proxy.web.admin.errors import SecretsUnavailable, UrlNotAllowed
from proxy.errors import Forbidden, InvalidRequest, NotFound
from proxy.web.access import require_governance
from proxy.web.responses import json_response
from services.external_api import store as registry
from infra.secret_box import SecretUnavailable
from services.external_api.paths import MAX_PATTERN_LENGTH, MAX_PATTERNS, PathPatternError, parse_patterns
from infra.netaddr import classify
from services.netguard.urls import MAX_URL_LENGTH, parse_url
from services.sdk import ToolError

routes = web.RouteTableDef()


class ExternalApiBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=registry.NAME_PATTERN, max_length=64)
    base_url: str = Field(min_length=1, max_length=MAX_URL_LENGTH)
    methods: list[Literal["GET", "POST", "PUT", "PATCH", "DELETE"]] = Field(min_length=1, max_length=5)
    paths: list[Annotated[str, Field(min_length=1, max_length=MAX_PATTERN_LENGTH)]] = Field(
        min_length=1, max_length=MAX_PATTERNS,
        description="/literal, * or {name} for one segment, a final ** for the rest",
    )
    secret_header: str = Field(min_length=1, max_length=64)
    # SecretStr: the value never shows in a repr, a log line or a validation message.
    secret: SecretStr | None = Field(default=None, max_length=registry.MAX_SECRET)
    secret_file: str | None = Field(default=None, pattern=registry.SECRET_FILE_PATTERN, max_length=128,
                                    description="a file name in the services' secret directory")

    @field_validator("secret_header")
    @classmethod
    def _header(cls, value: str) -> str:
        problem = registry.header_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            problem = registry.secret_problem(value.get_secret_value())
            if problem is not None:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _one_secret(self) -> ExternalApiBody:
        if (self.secret is None) == (self.secret_file is None):
            raise ValueError("give exactly one of secret and secret_file")
        return self


class ExternalApiKey(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=registry.NAME_PATTERN, max_length=64)


def _checked_base_url(text: str) -> str:
    try:
        base = parse_url(text)
    except ToolError as exc:
        raise UrlNotAllowed(f"base_url: {exc.message}") from None
    if base.query or "#" in text:
        raise InvalidRequest("base_url: no query or fragment (paths are given per call)")
    if base.ip is not None and classify(base.ip) is not None:
        raise UrlNotAllowed("base_url: not a public address (external APIs are on the internet)")
    return base.url


def _require_admin(request: web.Request) -> str:
    identity = identity_of(request)
    if not identity.is_admin:
        raise Forbidden("external APIs are registered by admin tokens")
    return identity.actor


@routes.post("/v1/admin/external-apis")
async def register_api(request: web.Request) -> web.Response:
    by = _require_admin(request)
    body = await read_model(request, ExternalApiBody)
    base_url = _checked_base_url(body.base_url)
    try:
        parse_patterns(body.paths)
    except PathPatternError as exc:
        raise InvalidRequest(f"paths: {exc}") from None
    sealed = None
    if body.secret is not None:
        box = request.app[SECRET_BOX]
        try:
            sealed = (box.seal(body.name, body.secret.get_secret_value()), box.key_id)
        except SecretUnavailable as exc:
            raise SecretsUnavailable(str(exc)) from None
    api = await registry.put(
        request.app[POOL], name=body.name, base_url=base_url,
        methods=list(dict.fromkeys(body.methods)), paths=list(dict.fromkeys(body.paths)),
        secret_header=body.secret_header, sealed=sealed, secret_file=body.secret_file, by=by,
    )
    return json_response(201, {"external_api": api.as_json()})


@routes.get("/v1/admin/external-apis")
async def list_apis(request: web.Request) -> web.Response:
    require_governance(identity_of(request), None)
    apis = await registry.list_all(request.app[POOL])
    return json_response(200, {"external_apis": [a.as_json() for a in apis]})


@routes.post("/v1/admin/external-apis/delete")
async def delete_api(request: web.Request) -> web.Response:
    _require_admin(request)
    body = await read_model(request, ExternalApiKey)
    if not await registry.delete(request.app[POOL], body.name):
        raise NotFound("no such external API")
    return json_response(200, {"deleted": True, "name": body.name})

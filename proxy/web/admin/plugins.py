"""Plugin registry routes under /v1/admin/plugins: installing and removing are admin acts;
enabling and disabling (platform-wide: the catalog is global) are governance acts."""

from __future__ import annotations

import base64
import binascii

import structlog
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from proxy.web.admin.keys import PLUGIN_DIRECTORY, PLUGIN_REGISTRY
from proxy.web.access import require_platform_governance
from proxy.web.keys import CATALOG, identity_of
from proxy.web.body import read_model
from proxy.web.admin.errors import (
    InvalidBundle,
    InvalidPlugin,
    PluginIsEnabled,
    PluginNameTaken,
    PluginVersionExists,
)
from proxy.errors import Forbidden, InvalidRequest, NotFound
from proxy.identity.identity import Identity
from proxy.web.responses import json_response
from services.plugins.bundle import MAX_ARCHIVE_BYTES, check_plugin, read_archive
from services.plugins.errors import BundleError, ManifestProblem
from services.plugins.manifest import SEMVER_RE
from services.plugins.registry import PluginEnabled, VersionExists
from wire.manifest import is_valid_tool_name

log = structlog.get_logger("toolproxy.plugins")
routes = web.RouteTableDef()

_NAME = Field(max_length=64)
_VERSION = Field(max_length=64)


class PluginInstall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    bundle_base64: str = Field(min_length=4, max_length=(MAX_ARCHIVE_BYTES * 4) // 3 + 8)


class PluginVersion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = _NAME
    version: str = _VERSION


class PluginName(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = _NAME


def _require_admin(identity: Identity) -> None:
    if not identity.is_admin:
        raise Forbidden("installing and removing plugins needs an admin token")


def _require_governance(identity: Identity) -> None:
    if not identity.is_governance:
        raise Forbidden("this route needs a governance or admin token")


def _require_platform_governance(request: web.Request, identity: Identity) -> None:
    require_platform_governance(request, identity, "enabling and disabling plugins")


def _check_name(name: str, version: str | None = None) -> None:
    if not is_valid_tool_name(name):
        raise InvalidRequest("name is not a plugin (tool) name")
    if version is not None and SEMVER_RE.fullmatch(version) is None:
        raise InvalidRequest("version is not a semantic version")


def _name_taken(request: web.Request, name: str) -> bool:
    existing = request.app[CATALOG].get(name)
    return existing is not None and not existing.plugin


@routes.post("/v1/admin/plugins")
async def install(request: web.Request) -> web.Response:
    identity = identity_of(request)
    _require_admin(identity)
    body = await read_model(request, PluginInstall)
    try:
        archive = base64.b64decode(body.bundle_base64, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidBundle("bundle_base64 is not base64") from None
    catalog = request.app[CATALOG]
    try:
        plugin = check_plugin(read_archive(archive), known_services=catalog.internal_services())
    except BundleError as exc:
        raise InvalidBundle(str(exc)) from None
    except ManifestProblem as exc:
        raise InvalidPlugin(str(exc), extra={"field": f"{exc.file}:{exc.field}"}) from None
    if _name_taken(request, plugin.manifest.name):
        raise PluginNameTaken(f"{plugin.manifest.name!r} is a built-in tool's name")
    try:
        installed = await request.app[PLUGIN_REGISTRY].install(plugin, installed_by=identity.actor)
    except VersionExists as exc:
        raise PluginVersionExists(str(exc)) from None
    report = installed.plugin["schema_portability"]
    if not report["portable"]:  # installed all the same: reported to the admin, and logged
        log.warning("plugin_schema_not_portable", plugin=plugin.manifest.name,
                    version=plugin.manifest.version, problems=report["problems"][:10])
    return json_response(201 if installed.created else 200,
                         {"plugin": installed.plugin, "created": installed.created})


@routes.get("/v1/admin/plugins")
async def list_plugins(request: web.Request) -> web.Response:
    _require_governance(identity_of(request))
    name = request.query.get("name")
    if name is not None:
        _check_name(name)
    rows = await request.app[PLUGIN_REGISTRY].list(name)
    catalog = request.app[CATALOG]
    for row in rows:
        row["available"] = bool(row["enabled"]) and catalog.available(row["name"])
    return json_response(200, {"plugins": rows})


@routes.post("/v1/admin/plugins/enable")
async def enable(request: web.Request) -> web.Response:
    identity = identity_of(request)
    _require_platform_governance(request, identity)
    body = await read_model(request, PluginVersion)
    _check_name(body.name, body.version)
    if _name_taken(request, body.name):
        raise PluginNameTaken(f"{body.name!r} is a built-in tool's name")
    row = await request.app[PLUGIN_REGISTRY].enable(body.name, body.version, by=identity.actor)
    if row is None:
        raise NotFound(f"{body.name} {body.version} is not installed")
    await request.app[PLUGIN_DIRECTORY].refresh()  # this replica at once; others on NOTIFY
    return json_response(200, {"plugin": row})


@routes.post("/v1/admin/plugins/disable")
async def disable(request: web.Request) -> web.Response:
    _require_platform_governance(request, identity_of(request))
    body = await read_model(request, PluginName)
    _check_name(body.name)
    row = await request.app[PLUGIN_REGISTRY].disable(body.name)
    if row is None:
        raise NotFound(f"no version of {body.name} is enabled")
    await request.app[PLUGIN_DIRECTORY].refresh()
    return json_response(200, {"plugin": row})


@routes.post("/v1/admin/plugins/remove")
async def remove(request: web.Request) -> web.Response:
    _require_admin(identity_of(request))
    body = await read_model(request, PluginVersion)
    _check_name(body.name, body.version)
    try:
        row = await request.app[PLUGIN_REGISTRY].remove(body.name, body.version)
    except PluginEnabled as exc:
        raise PluginIsEnabled(str(exc)) from None
    if row is None:
        raise NotFound(f"{body.name} {body.version} is not installed")
    return json_response(200, {"plugin": row, "removed": True})

"""The service SDK: declare classified tools and serve them over NATS in a queue group."""

from wire.categories import CATEGORIES, CategorySpec
from services.sdk.errors import ToolError
from wire.manifest import Cost, ToolManifest
from services.sdk.service import CallContext, Service, tool

__all__ = [
    "CATEGORIES",
    "CallContext",
    "CategorySpec",
    "Cost",
    "Service",
    "ToolError",
    "ToolManifest",
    "tool",
]

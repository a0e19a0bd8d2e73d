"""The catalog entries of search.index (write) and search.lite (read)."""

from __future__ import annotations

from services.sdk import Cost
from services.search.store import MAX_RANKED
from wire.manifest import ToolManifest
from services.sdk.service import make_manifest
from services.sdk.schema import OBJECT, identifier, limit, tags, text

TITLE_MAX = 300
TEXT_MAX = 100_000  # characters; Postgres refuses a tsvector over 1 MB, this stays well under
QUERY_MAX = 500
LIMIT_DEFAULT = 10
LIMIT_MAX = 50

INDEX: ToolManifest = make_manifest({
    "tool_id": "search.index",
    "category": "B",
    "action": "write",
    "description": "Add a document to your team's search index, or replace the one with the "
                   "same doc_id (title, text and tags are all replaced).",
    "input_schema": {
        **OBJECT,
        "required": ["doc_id", "title", "text"],
        "properties": {
            "doc_id": identifier(128),
            "title": text(TITLE_MAX, non_blank=True),
            "text": text(TEXT_MAX),
            "tags": tags(),
        },
    },
    "output_schema": {
        "type": "object",
        "required": ["doc_id", "indexed", "replaced"],
        "properties": {
            "doc_id": {"type": "string"},
            "indexed": {"const": True},
            "replaced": {"type": "boolean", "description": "a document with this id existed"},
        },
    },
    "cost": Cost(per_call=0.0002),
    "network": False,
})

LITE: ToolManifest = make_manifest({
    "tool_id": "search.lite",
    "category": "B",
    "action": "read",
    "description": "Full-text search over your team's indexed documents (web-search syntax: "
                   'words, "quoted phrases", OR, -excluded). Best matches first, each with a '
                   "snippet where the matched words are marked **like this**.",
    "input_schema": {
        **OBJECT,
        "required": ["query"],
        "properties": {
            "query": text(QUERY_MAX, non_blank=True),
            "limit": limit(LIMIT_DEFAULT, LIMIT_MAX),
            "tags": {**tags(), "description": "only documents carrying all of these tags"},
        },
    },
    "output_schema": {
        "type": "object",
        "required": ["hits", "count", "capped"],
        "properties": {
            "capped": {"type": "boolean",
                       "description": f"the query matched more than {MAX_RANKED} documents: "
                                      "the hits are the best of the first ones found; "
                                      "narrow the query"},
            "hits": {
                "type": "array",
                "maxItems": LIMIT_MAX,
                "items": {
                    "type": "object",
                    "required": ["doc_id", "title", "rank", "snippet", "tags"],
                    "properties": {
                        "doc_id": {"type": "string"},
                        "title": {"type": "string"},
                        "rank": {"type": "number", "minimum": 0},
                        "snippet": {"type": "string"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
            "count": {"type": "integer", "minimum": 0},
        },
    },
    "cost": Cost(per_call=0.0001),
    "network": False,
})

# In the order the service serves them.
MANIFESTS = (INDEX, LITE)
TOOL_IDS = tuple(m.tool_id for m in MANIFESTS)

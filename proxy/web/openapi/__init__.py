"""The OpenAPI document: every route with its statuses, bodies and parameters (operations.py), their response schemas (schemas.py), rendered and served at /openapi.json (document.py)."""

"""The MCP surface: JSON-RPC framing, signed sessions, the tool mapping and the method handlers.

Served natively by aiohttp (proxy/web/mcp/routes.py); requests and results are validated with the
official SDK's wire types (`mcp-types`), and every tool call goes through the one Pipeline.
"""

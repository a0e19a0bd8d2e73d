"""The MCP surface: JSON-RPC framing, signed sessions, the tool mapping and the method handlers.

Served natively by aiohttp (proxy/routes/mcp.py); requests and results are validated with the
official SDK's wire types (`mcp-types`), and every tool call goes through the one Pipeline.
"""

"""The upstream bridge: existing MCP servers, classified by governance and pinned, served as tools."""

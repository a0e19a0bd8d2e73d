"""The HTTP side (aiohttp): the app factory, its keys, bodies, parameters, the OpenAPI document, middlewares, and one folder per surface (api, admin, mcp, openai, console)."""

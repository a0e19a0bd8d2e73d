"""langchain-mcp-adapters against a running proxy, in its own venv (it pins mcp<2): argv = the
/mcp URL; the bearer token in TOOLPROXY_TOKEN. Loads the tools as LangChain tools, converts each
with LangChain's own `convert_to_openai_tool`, calls math, and prints one JSON line."""

import asyncio
import json
import os
import sys

from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_mcp_adapters.client import MultiServerMCPClient


async def main(url: str) -> None:
    client = MultiServerMCPClient({"toolproxy": {
        "transport": "streamable_http", "url": url,
        "headers": {"Authorization": f"Bearer {os.environ['TOOLPROXY_TOKEN']}"}}})
    tools = await client.get_tools()
    converted = [convert_to_openai_tool(t) for t in tools]
    math = next(t for t in tools if t.name == "math")
    value = await math.ainvoke({"expr": "2+3*4"})
    print(json.dumps({"functions": [c["function"] for c in converted], "math": str(value)}))


asyncio.run(main(sys.argv[1]))

"""Drive a builtin (`gosling mcp NAME`) with the official MCP Python SDK client.

usage: python sdk_client.py GOSLING_BIN NAME TOOL ARGS_JSON
Prints one JSON line: {"protocolVersion", "serverName", "tools": [names], "result": CallToolResult}.
"""
import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    binary, name, tool, args = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    params = StdioServerParameters(command=binary, args=["mcp", name])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            result = await session.call_tool(tool, args)
            print(json.dumps({
                "protocolVersion": str(init.protocol_version),
                "serverName": init.server_info.name,
                "tools": [t.name for t in tools.tools],
                "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
            }))


asyncio.run(main())

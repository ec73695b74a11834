#!/usr/bin/env python3
"""A stdio MCP server on the real Python SDK (the peers' venv) for `gosling probe`'s edge cases.

    sdk_probe_server.py [no_templates|needs_token]

no_templates  declares resources and answers resources/list and resources/read, but has no
              resources/templates/list (the SDK answers -32601, as mcp-server-sqlite does)
needs_token   the same, but exits at start unless PROBE_DEMO_TOKEN is set in its
              environment; the tool `token_length` tells its length (never the value)
"""
import os
import sys
import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

MODE = sys.argv[1] if len(sys.argv) > 1 else "no_templates"

if MODE == "needs_token" and not os.environ.get("PROBE_DEMO_TOKEN"):
    sys.stderr.write("PROBE_DEMO_TOKEN is not set\n")
    sys.exit(2)

async def list_resources(ctx, params):
    return types.ListResourcesResult(resources=[types.Resource(uri="memo://one", name="one")])

async def read_resource(ctx, params):
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, text="memo one")])

async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(name="token_length", input_schema={"type": "object"})])

async def call_tool(ctx, params):
    n = len(os.environ.get("PROBE_DEMO_TOKEN", ""))
    return types.CallToolResult(content=[types.TextContent(text=f"token length {n}")])

server = Server("sdk-probe", on_list_resources=list_resources, on_read_resource=read_resource,
                on_list_tools=list_tools, on_call_tool=call_tool)

async def main():
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())

anyio.run(main)

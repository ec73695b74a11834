#!/usr/bin/env python3
"""A minimal MCP server on stdio offering an MCP App: a `ui://` HTML resource next to an
ordinary one, so `/agent/list_apps` has something to list.

    ui_app_mcp.py
"""
import json
import sys

RESOURCES = [
    {"uri": "ui://clock/app", "name": "clock", "description": "A clock", "mimeType": "text/html;profile=mcp-app"},
    {"uri": "file:///notes.txt", "name": "notes", "mimeType": "text/plain"},
]


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "id" not in msg or "method" not in msg:
        continue
    method, rid = msg["method"], msg["id"]
    if method == "initialize":
        result = {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"resources": {}, "tools": {}},
            "serverInfo": {"name": "ui-app", "version": "1"},
        }
    elif method == "resources/list":
        result = {"resources": RESOURCES}
    elif method == "resources/read":
        result = {"contents": [{"uri": msg["params"]["uri"], "mimeType": "text/html;profile=mcp-app", "text": "<p>12:00</p>"}]}
    elif method == "tools/list":
        result = {"tools": []}
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found: " + method}})
        continue
    send({"jsonrpc": "2.0", "id": rid, "result": result})

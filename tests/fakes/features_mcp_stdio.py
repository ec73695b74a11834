#!/usr/bin/env python3
"""A stdio MCP server for the client features servers rely on (stdlib only).

    features_mcp_stdio.py RECORD_FILE

Declares `tools` and `logging`; every message received is appended to RECORD_FILE (one JSON
line each). Tools:
  weather        outputSchema {temp: number, required}; answers structuredContent {"temp": "warm"}
                 (does not match)
  good_weather   the same schema; answers {"temp": 21.5} (matches)
  task_only      execution.taskSupport "required": a client without tasks must not list it
"""
import json
import sys

RECORD = sys.argv[1]
SCHEMA = {"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]}


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    msg = json.loads(line)
    with open(RECORD, "a") as f:
        f.write(json.dumps(msg) + "\n")
    if "id" not in msg or "method" not in msg:
        continue
    method, mid = msg["method"], msg["id"]
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}, "logging": {}},
            "serverInfo": {"name": "features", "version": "1"}}})
    elif method == "logging/setLevel":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "weather", "inputSchema": {"type": "object"}, "outputSchema": SCHEMA},
            {"name": "good_weather", "inputSchema": {"type": "object"}, "outputSchema": SCHEMA},
            {"name": "task_only", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
        ]}})
    elif method == "tools/call":
        temp = "warm" if msg["params"]["name"] == "weather" else 21.5
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "content": [{"type": "text", "text": json.dumps({"temp": temp})}],
            "structuredContent": {"temp": temp}}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})

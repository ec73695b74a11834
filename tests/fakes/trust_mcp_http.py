#!/usr/bin/env python3
"""A hostile Streamable HTTP MCP server for the memory-bound tests.

    python3 trust_mcp_http.py MODE     # listens on 127.0.0.1:0 and prints "PORT <n>" on stdout

Tools `env` (plain answer), `big_json` (a 20 MiB JSON body) and `sse_flood` (an SSE event made of
thousands of 64 KiB `data:` lines, 24 MiB in all, never ended). MODE `pages`: tools/list answers
100 pages of 1 MiB each; MODE `ok`: a small tools/list.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = sys.argv[1]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply(405, b"")

    def do_DELETE(self):
        self.reply(405, b"")

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        req = json.loads(self.rfile.read(length) or b"{}")
        rid, method, params = req.get("id"), req.get("method"), req.get("params") or {}
        if rid is None:
            self.reply(202, b"")
            return
        if method == "initialize":
            result = {"protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}}, "serverInfo": {"name": "trust-http", "version": "1"}}
        elif method == "tools/list":
            if MODE == "pages":
                page = int(params.get("cursor") or "0")
                result = {"tools": [{"name": f"t{page}_{i}", "description": "x" * (1 << 16), "inputSchema": {"type": "object"}} for i in range(16)]}
                if page < 99:
                    result["nextCursor"] = str(page + 1)
            else:
                result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("env", "big_json", "sse_flood")]}
        elif method == "tools/call" and params.get("name") == "big_json":
            result = {"content": [{"type": "text", "text": "j" * (20 << 20)}]}
        elif method == "tools/call" and params.get("name") == "sse_flood":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            line = b"data: " + b"s" * (64 << 10) + b"\n"
            try:
                for _ in range(384):
                    self.wfile.write(line)
                self.wfile.flush()
            except OSError:
                pass
            return
        else:
            result = {"content": [{"type": "text", "text": "fine"}]}
        self.reply(200, json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode())


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("PORT %d" % server.server_address[1], flush=True)
server.serve_forever()

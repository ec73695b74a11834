"""Misbehaving Streamable HTTP "MCP servers" for the client's error tests.

    python3 bad_mcp_http.py MODE     # listens on 127.0.0.1:0 and prints "PORT <n>" on stdout

MODE: 401 (with WWW-Authenticate), 403, 404, html, 500, redirect (a loop to itself),
stall (accepts, never answers), truncated (an SSE answer cut off mid-event),
version (a protocol version counter-offer no client knows), ok (a minimal correct
server answering initialize/tools/list with JSON), and resume (like ok, but tools/call answers
on an SSE stream that drops before the response; the GET resumption with Last-Event-ID
replays an event already sent, then sends the response twice).
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = sys.argv[1]
# "ok-tls": the ok server over HTTPS, with the test CA's certificate from tests/fakes/tls.
TLS = MODE.endswith("-tls")
MODE = MODE[: -len("-tls")] if TLS else MODE
PENDING = None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", ctype=None, headers=()):
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def sse_head(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def do_GET(self):
        last = self.headers.get("Last-Event-ID")
        if MODE != "resume" or last != "s1-1":
            self.reply(405)
            return
        global PENDING
        self.sse_head()
        progress = json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}})
        answer = json.dumps({"jsonrpc": "2.0", "id": PENDING, "result": {"content": [{"type": "text", "text": "resumed"}]}})
        self.wfile.write(b"id: s1-1\ndata: %s\n\n" % progress.encode())  # a replay of what we already sent
        self.wfile.write(b"id: s1-2\ndata: %s\n\n" % answer.encode())
        self.wfile.write(b"id: s1-2\ndata: %s\n\n" % answer.encode())  # and a duplicate
        self.wfile.flush()

    def do_DELETE(self):
        self.reply(405)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        req = json.loads(self.rfile.read(length) or b"{}")
        rid = req.get("id")
        if MODE == "401":
            self.reply(401, b"unauthorized", "text/plain", [("WWW-Authenticate", 'Bearer realm="fake", error="invalid_token"')])
        elif MODE == "403":
            self.reply(403, b"forbidden", "text/plain")
        elif MODE == "404":
            self.reply(404, b"<html><body>Not Found</body></html>", "text/html")
        elif MODE == "html":
            self.reply(200, b"<!doctype html><html><head><title>Welcome</title></head><body>Login</body></html>", "text/html; charset=utf-8")
        elif MODE == "500":
            self.reply(500, b"Internal Server Error: database is down", "text/plain")
        elif MODE == "redirect":
            self.reply(307, b"", None, [("Location", self.path)])
        elif MODE == "stall":
            time.sleep(120)
        elif MODE == "truncated":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b'event: message\ndata: {"jsonrpc":"2.0","id":%s,"resu' % json.dumps(rid).encode())
            self.wfile.flush()
            self.close_connection = True
        elif MODE == "resume" and req.get("method") == "tools/call":
            global PENDING
            PENDING = rid
            self.sse_head()
            progress = json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}})
            self.wfile.write(b"retry: 100\nid: s1-1\ndata: %s\n\n" % progress.encode())
            self.wfile.flush()
        elif MODE in ("version", "ok", "resume"):
            if rid is None:
                self.reply(202)
                return
            version = "1999-01-01" if MODE == "version" else "2025-06-18"
            if req.get("method") == "initialize":
                result = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "0"}}
            elif req.get("method") == "tools/list":
                result = {"tools": []}
            else:
                result = {}
            body = json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()
            self.reply(200, body, "application/json")
        else:
            self.reply(500, b"unknown mode", "text/plain")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
if TLS:
    import os
    import ssl
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tls")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(here, "server.pem"), os.path.join(here, "server.key"))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
print("PORT", server.server_address[1], flush=True)
server.serve_forever()

#!/usr/bin/env python3
"""A Streamable HTTP MCP server whose authorization server is Authlib's (a real OAuth 2.0
library, pinned in scripts/peers through fastmcp's venv): its token endpoint, grants and client
authentication, not ours. Run with MCP_PEER_FASTMCP_PYTHON.

    oauth_authlib.py PORT TOKEN_FILE

Serves on 127.0.0.1:PORT:
  /.well-known/oauth-protected-resource/mcp   protected-resource metadata
  /.well-known/oauth-authorization-server     authorization-server metadata
  POST /token                                 Authlib's token endpoint:
      client_credentials as `svc-basic` (secret `basic-secret`, client_secret_basic) or as
      `svc-jwt` (Authlib's JWTBearerClientAssertion: an ES256 JWT verified with the public key
      below; `aud` the issuer, RFC 7523bis), and Authlib's JWTBearerGrant (RFC 7523) for
      workload tokens of the issuer `https://workload-issuer.example`
  POST /mcp                                   MCP (JSON answers) for a token Authlib issued
  GET  /admin/stats                           which grants and client authentications succeeded

At start it makes the workload's own P-256 key and writes a workload token (a JWT that issuer
signed, audience this authorization server, ten minutes) to TOKEN_FILE, as a platform would.
"""

import json
import os
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Plain http on 127.0.0.1 (the test's loopback): Authlib refuses it otherwise.
os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"

from authlib.oauth2 import AuthorizationServer  # noqa: E402
from authlib.oauth2.rfc6749 import ClientMixin, OAuth2Request, grants  # noqa: E402
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload  # noqa: E402
from authlib.oauth2.rfc6750 import BearerTokenGenerator  # noqa: E402
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion, JWTBearerGrant  # noqa: E402
from joserfc import jwt  # noqa: E402
from joserfc.jwk import ECKey  # noqa: E402

PORT = int(sys.argv[1])
TOKEN_FILE = sys.argv[2]
BASE = f"http://127.0.0.1:{PORT}"
RESOURCE = f"{BASE}/mcp"
WORKLOAD_ISSUER = "https://workload-issuer.example"

# The public half of the test's P-256 key for `svc-jwt` (tests/it/oauth.rs, a fixture).
SVC_JWT_PUBLIC = """-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEpINwhEQtlcrhPzL5T4SbpnB/w7zY
zwoz5rx2oltyoirQswxdUzrmOtalAXLOMW/ucSGOurPx0M4h4eJhEOWOHg==
-----END PUBLIC KEY-----
"""
WORKLOAD_KEY = ECKey.generate_key("P-256")

lock = threading.Lock()
tokens = {}  # access token -> expires_at
stats = {"client_secret_basic": 0, "client_assertion_jwt": 0, "jwt_bearer": 0, "refused": []}


class Client(ClientMixin):
    def __init__(self, client_id, auth_method, grant, secret=None, key=None):
        self.client_id, self.auth_method, self.grant, self.secret, self.key = client_id, auth_method, grant, secret, key

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        return scope or ""

    def check_redirect_uri(self, redirect_uri):
        return False

    def check_client_secret(self, client_secret):
        return self.secret is not None and secrets.compare_digest(self.secret, client_secret)

    def check_endpoint_auth_method(self, method, endpoint):
        return method == self.auth_method

    def check_response_type(self, response_type):
        return False

    def check_grant_type(self, grant_type):
        return grant_type == self.grant


CLIENTS = {
    "svc-basic": Client("svc-basic", "client_secret_basic", "client_credentials", secret="basic-secret"),
    "svc-jwt": Client("svc-jwt", JWTBearerClientAssertion.CLIENT_AUTH_METHOD, "client_credentials",
                      key=ECKey.import_key(SVC_JWT_PUBLIC)),
    "workload": Client("workload", "none", JWTBearerGrant.GRANT_TYPE, key=WORKLOAD_KEY),
}


class ClientAssertion(JWTBearerClientAssertion):
    def get_audiences(self):
        return [BASE]

    def resolve_client_public_key(self, client):
        return client.key

    def validate_jti(self, claims, jti):
        return True


class ClientCredentials(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", JWTBearerClientAssertion.CLIENT_AUTH_METHOD]


class WorkloadGrant(JWTBearerGrant):
    def resolve_issuer_client(self, issuer):
        return CLIENTS["workload"] if issuer == WORKLOAD_ISSUER else None

    def resolve_client_public_key(self, client):
        return client.key

    def authenticate_user(self, subject):
        return subject if subject.startswith("system:serviceaccount:") else None

    def get_audiences(self):
        return [BASE]

    def has_granted_permission(self, client, user):
        return True


class TokenRequest(OAuth2Request):
    """A token request: the form as it came (Authlib's framework integrations supply this)."""

    form = None


class Server(AuthorizationServer):
    def query_client(self, client_id):
        return CLIENTS.get(client_id)

    def save_token(self, token, request):
        with lock:
            tokens[token["access_token"]] = time.time() + token.get("expires_in", 3600)
            method = request.auth_method or "none"
            key = "jwt_bearer" if request.payload.grant_type == JWTBearerGrant.GRANT_TYPE else method
            stats[key] = stats.get(key, 0) + 1

    def create_oauth2_request(self, request):
        method, headers, form = request
        req = TokenRequest(method, f"{BASE}/token", headers=headers)
        req.payload = BasicOAuth2Payload(form)
        req.form = form
        return req

    def handle_response(self, status, body, headers):
        return status, body, headers

    def send_signal(self, name, *args, **kwargs):
        pass


server = Server()
server.register_token_generator("default", BearerTokenGenerator(lambda *args, **kwargs: "al-" + secrets.token_urlsafe(24)))
server.register_grant(ClientCredentials)
server.register_grant(WorkloadGrant)
server.register_client_auth_method(JWTBearerClientAssertion.CLIENT_AUTH_METHOD, ClientAssertion())


def workload_token():
    now = int(time.time())
    claims = {"iss": WORKLOAD_ISSUER, "sub": "system:serviceaccount:agents:reports", "aud": BASE,
              "iat": now, "exp": now + 600, "jti": secrets.token_hex(8)}
    return jwt.encode({"alg": "ES256"}, claims, WORKLOAD_KEY)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, status, body, headers=None):
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            if k.lower() not in ("content-type", "content-length"):
                self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        if url.path == "/.well-known/oauth-protected-resource/mcp":
            return self.send_json(200, {"resource": RESOURCE, "authorization_servers": [BASE]})
        if url.path == "/.well-known/oauth-authorization-server":
            return self.send_json(200, {
                "issuer": BASE,
                "authorization_endpoint": f"{BASE}/authorize",
                "token_endpoint": f"{BASE}/token",
                "response_types_supported": ["code"],
                "grant_types_supported": ["client_credentials", JWTBearerGrant.GRANT_TYPE],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "private_key_jwt"],
                "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
            })
        if url.path == "/admin/stats":
            with lock:
                return self.send_json(200, stats)
        if url.path == "/mcp":
            return self.send_json(405, {"error": "no GET stream"})
        self.send_json(404, {"error": "not found"})

    def do_POST(self):
        url = urllib.parse.urlparse(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if url.path == "/token":
            form = dict(urllib.parse.parse_qsl(raw.decode()))
            # The request's headers as they came (case-insensitive names: clients differ).
            status, body, headers = server.create_token_response((self.command, self.headers, form))
            if status != 200:
                with lock:
                    stats["refused"].append(json.loads(body).get("error") if isinstance(body, str) else body.get("error"))
            return self.send_json(status, body, dict(headers))
        if url.path == "/mcp":
            auth = self.headers.get("Authorization", "")
            tok = auth[7:] if auth.startswith("Bearer ") else ""
            with lock:
                valid = tokens.get(tok, 0) > time.time()
            if not valid:
                return self.send_json(401, {"error": "invalid_token"}, {
                    "WWW-Authenticate": f'Bearer error="invalid_token", resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"'})
            msg = json.loads(raw)
            if "id" not in msg:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            method = msg.get("method")
            if method == "initialize":
                result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                          "serverInfo": {"name": "oauth-authlib", "version": "1"}}
            elif method == "tools/list":
                result = {"tools": [{"name": "whoami", "description": "Says who is signed in",
                                     "inputSchema": {"type": "object", "properties": {}}}]}
            elif method == "tools/call":
                result = {"content": [{"type": "text", "text": "signed in"}]}
            elif method == "ping":
                result = {}
            else:
                return self.send_json(200, {"jsonrpc": "2.0", "id": msg["id"],
                                            "error": {"code": -32601, "message": "method not found"}})
            return self.send_json(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result})
        self.send_json(404, {"error": "not found"})


with open(TOKEN_FILE, "w") as f:
    f.write(workload_token())
ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()

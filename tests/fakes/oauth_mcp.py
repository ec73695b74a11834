#!/usr/bin/env python3
"""A Streamable HTTP MCP server behind OAuth, with its own authorization server (stdlib only).

    oauth_mcp.py PORT [FIRST_EXPIRES_IN [nodcr|refusecode]]

Serves on 127.0.0.1:PORT:
  /.well-known/oauth-protected-resource/mcp   protected-resource metadata
  /.well-known/oauth-authorization-server     authorization-server metadata
  POST /register                              dynamic client registration (public clients)
  GET  /authorize                             approves at once: redirects with a code
  POST /token                                 authorization_code (PKCE S256 and resource
                                              checked) and refresh_token grants; without a
                                              person (no refresh tokens): client_credentials
                                              for the client `svc` (secret `svc-secret`, HTTP
                                              Basic) and for `svc-jwt` (private_key_jwt, ES256
                                              verified with the key below), the JWT-bearer
                                              grant for the workload token `workload.jwt.token`
                                              and, as `svc`, for the identity assertion grant
                                              `jag-alice`
  POST /idp/token                             an enterprise identity provider: token exchange
                                              of the ID token `id-token-of-alice` (client
                                              `gosling-at-idp`) for `jag-alice`, an identity
                                              assertion grant for this server
  POST /mcp                                   MCP (JSON answers) for a valid bearer token,
                                              else 401 with a resource_metadata challenge
  GET  /admin/stats                           counts, and every token issued (for the test
                                              to look for in logs)
  POST /admin/expire                          every access token issued so far expires

The first access token lives FIRST_EXPIRES_IN seconds (default 3600); later ones an hour.
With `nodcr` the authorization server offers no registration endpoint. With `refusecode` the
token endpoint refuses every authorization code with `invalid_grant` and an `error_description`
that repeats the code and holds a terminal escape.
"""

import base64
import hashlib
import json
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])
FIRST_EXPIRES_IN = int(sys.argv[2]) if len(sys.argv) > 2 else 3600
NO_DCR = len(sys.argv) > 3 and sys.argv[3] == "nodcr"
REFUSE_CODE = len(sys.argv) > 3 and sys.argv[3] == "refusecode"
BASE = f"http://127.0.0.1:{PORT}"
RESOURCE = f"{BASE}/mcp"

lock = threading.Lock()
clients = {}
codes = {}  # code -> (client_id, challenge, redirect_uri, resource)
access = {}  # token -> expires_at
refresh = {}  # refresh token -> client_id
stats = {"registrations": 0, "authorizations": 0, "authorization_code": 0, "refresh_token": 0,
         "client_credentials": 0, "jwt_bearer": 0, "refused": [], "mcp_unauthorized": 0, "tokens": []}
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
stats.update({"private_key_jwt": 0, "token_exchange": 0, "enterprise": 0})

# The public half of the P-256 key tests/it/oauth.rs stores for `svc-jwt` (a test fixture).
SVC_JWT_KEY = (0xa4837084442d95cae13f32f94f849ba6707fc3bcd8cf0a33e6bc76a25b72a22a,
               0xd0b30c5d533ae63ad6a50172ce316fee71218ebab3f1d0ce21e1e26110e58e1e)

# ECDSA P-256 verification (FIPS 186-4), affine coordinates: enough for a test server.
P = 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffff
N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551
G = (0x6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296,
     0x4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5)


def ec_add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    if a[0] == b[0] and (a[1] + b[1]) % P == 0:
        return None
    if a == b:
        m = (3 * a[0] * a[0] - 3) * pow(2 * a[1], -1, P) % P
    else:
        m = (b[1] - a[1]) * pow(b[0] - a[0], -1, P) % P
    x = (m * m - a[0] - b[0]) % P
    return (x, (m * (a[0] - x) - a[1]) % P)


def ec_mul(k, pt):
    out = None
    while k:
        if k & 1:
            out = ec_add(out, pt)
        pt = ec_add(pt, pt)
        k >>= 1
    return out


def b64url(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def es256_claims(jwt, key):
    """The claims of an ES256 compact JWS signed by `key`, else None."""
    try:
        h, c, sig = jwt.split(".")
        if json.loads(b64url(h)).get("alg") != "ES256":
            return None
        raw = b64url(sig)
        r, s_ = int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")
        if len(raw) != 64 or not (0 < r < N and 0 < s_ < N):
            return None
        e = int.from_bytes(hashlib.sha256(f"{h}.{c}".encode()).digest(), "big")
        w = pow(s_, -1, N)
        x = ec_add(ec_mul(e * w % N, G), ec_mul(r * w % N, key))
        return json.loads(b64url(c)) if x is not None and x[0] % N == r else None
    except (ValueError, KeyError, TypeError):
        return None


def s256(verifier):
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        if url.path == "/.well-known/oauth-protected-resource/mcp":
            return self.send_json(200, {"resource": RESOURCE, "authorization_servers": [BASE],
                                        "scopes_supported": ["mcp:tools"]})
        if url.path == "/.well-known/oauth-authorization-server":
            meta = {
                "issuer": BASE,
                "authorization_endpoint": f"{BASE}/authorize",
                "token_endpoint": f"{BASE}/token",
                "registration_endpoint": f"{BASE}/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials",
                                          JWT_BEARER],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
                "scopes_supported": ["mcp:tools"],
            }
            if NO_DCR:
                del meta["registration_endpoint"]
            return self.send_json(200, meta)
        if url.path == "/authorize":
            q = dict(urllib.parse.parse_qsl(url.query))
            ok = (q.get("response_type") == "code" and q.get("client_id") in clients
                  and q.get("code_challenge_method") == "S256" and q.get("resource") == RESOURCE
                  and q.get("redirect_uri", "").startswith("http://127.0.0.1:"))
            if not ok:
                return self.send_json(400, {"error": "invalid_request", "got": q})
            code = secrets.token_urlsafe(16)
            with lock:
                stats["authorizations"] += 1
                codes[code] = (q["client_id"], q["code_challenge"], q["redirect_uri"], q["resource"])
            target = q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": q.get("state", "")})
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if url.path == "/admin/stats":
            with lock:
                return self.send_json(200, stats)
        if url.path == "/mcp":
            return self.send_json(405, {"error": "no GET stream"})
        self.send_json(404, {"error": "not found"})

    def do_POST(self):
        url = urllib.parse.urlparse(self.path)
        raw = self.body()
        if url.path == "/register":
            meta = json.loads(raw or b"{}")
            cid = "client-" + secrets.token_hex(4)
            with lock:
                clients[cid] = meta
                stats["registrations"] += 1
            return self.send_json(201, {"client_id": cid, "token_endpoint_auth_method": "none",
                                        "redirect_uris": meta.get("redirect_uris", [])})
        if url.path == "/token":
            f = dict(urllib.parse.parse_qsl(raw.decode()))
            grant = f.get("grant_type")
            with lock:
                if grant == "authorization_code" and REFUSE_CODE:
                    return self.send_json(400, {"error": "invalid_grant", "error_description":
                                                f"authorization code {f.get('code', '')} expired\x1b[2J; sign in again"})
                if grant == "authorization_code":
                    entry = codes.pop(f.get("code", ""), None)
                    if (entry is None or entry[0] != f.get("client_id") or s256(f.get("code_verifier", "")) != entry[1]
                            or entry[2] != f.get("redirect_uri") or f.get("resource") != RESOURCE):
                        return self.send_json(400, {"error": "invalid_grant"})
                    expires_in = FIRST_EXPIRES_IN if stats["authorization_code"] == 0 else 3600
                elif grant == "refresh_token":
                    if f.get("refresh_token") not in refresh or f.get("resource") != RESOURCE:
                        return self.send_json(400, {"error": "invalid_grant"})
                    del refresh[f["refresh_token"]]
                    expires_in = 3600
                elif grant in ("client_credentials", JWT_BEARER):
                    svc = self.headers.get("Authorization", "") == "Basic " + base64.b64encode(b"svc:svc-secret").decode()
                    key = None
                    if grant == "client_credentials" and f.get("client_assertion_type") == \
                            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
                        claims = es256_claims(f.get("client_assertion", ""), SVC_JWT_KEY) or {}
                        if (claims.get("iss") == claims.get("sub") == f.get("client_id") == "svc-jwt"
                                and claims.get("aud") == BASE and claims.get("exp", 0) > time.time()):
                            key = "private_key_jwt"
                    elif grant == "client_credentials":
                        key = "client_credentials" if svc else None
                    elif f.get("assertion") == "workload.jwt.token":
                        key = "jwt_bearer"
                    elif f.get("assertion") == "jag-alice" and svc:
                        key = "enterprise"
                    if key is None or f.get("resource") != RESOURCE:
                        stats["refused"].append(grant)
                        return self.send_json(401 if grant == "client_credentials" else 400,
                                              {"error": "invalid_client" if grant == "client_credentials" else "invalid_grant"})
                    stats[key] += 1
                    tok = "at-" + secrets.token_urlsafe(24)
                    access[tok] = time.time() + 3600
                    stats["tokens"].append(tok)
                    return self.send_json(200, {"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
                else:
                    return self.send_json(400, {"error": "unsupported_grant_type"})
                stats[grant] += 1
                tok = "at-" + secrets.token_urlsafe(24)
                rt = "rt-" + secrets.token_urlsafe(24)
                access[tok] = time.time() + expires_in
                refresh[rt] = f.get("client_id")
                stats["tokens"] += [tok, rt]
            return self.send_json(200, {"access_token": tok, "token_type": "Bearer", "expires_in": expires_in,
                                        "refresh_token": rt, "scope": "mcp:tools"})
        if url.path == "/idp/token":
            f = dict(urllib.parse.parse_qsl(raw.decode()))
            ok = (f.get("grant_type") == TOKEN_EXCHANGE and f.get("subject_token") == "id-token-of-alice"
                  and f.get("subject_token_type") == "urn:ietf:params:oauth:token-type:id_token"
                  and f.get("requested_token_type") == "urn:ietf:params:oauth:token-type:id-jag"
                  and f.get("audience") == BASE and f.get("resource") == RESOURCE
                  and f.get("client_id") == "gosling-at-idp")
            with lock:
                if not ok:
                    stats["refused"].append("token_exchange")
                    return self.send_json(400, {"error": "invalid_request"})
                stats["token_exchange"] += 1
            return self.send_json(200, {"access_token": "jag-alice", "token_type": "N_A",
                                        "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"})
        if url.path == "/admin/expire":
            with lock:
                for k in access:
                    access[k] = 0
            return self.send_json(200, {})
        if url.path == "/mcp":
            auth = self.headers.get("Authorization", "")
            tok = auth[7:] if auth.startswith("Bearer ") else ""
            with lock:
                valid = access.get(tok, 0) > time.time()
                if not valid:
                    stats["mcp_unauthorized"] += 1
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
                          "serverInfo": {"name": "oauth-fake", "version": "1"}}
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


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()

"""An MCP server behind OAuth, built from the Python SDK's own auth classes the way the SDK's
`simple-auth` example is (the example is not shipped in the wheel): an authorization server
(`create_auth_routes`: metadata, dynamic registration, authorize, token, revoke) with a login
page a person fills in, and a separate resource server (`MCPServer` with `AuthSettings` and a
token verifier) on its own port.

  python py_auth_server.py AS_PORT RS_PORT [TOKEN_SECONDS]

  http://127.0.0.1:AS_PORT   authorization server; GET /login shows the form, POST /login
                             (username demo, password demo) approves and redirects back
                             POST /admin/revoke   revokes every access and refresh token
                             POST /admin/forget   forgets every registered client (a restart)
                             GET  /admin/stats    registrations, authorizations, refreshes
  http://127.0.0.1:RS_PORT/mcp   the MCP server (tool `whoami`), bearer tokens required

Access tokens live TOKEN_SECONDS (default 3600); refresh tokens are issued and rotated.
The client authenticates as it registered: the SDK registers confidential clients
(client_secret_post / client_secret_basic) and, with Basic, still wants `client_id` in the body.
"""
import asyncio
import secrets
import sys
import time
from urllib.parse import urlencode

import uvicorn
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse
from starlette.routing import Route

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    ProviderTokenVerifier,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

AS_PORT, RS_PORT = int(sys.argv[1]), int(sys.argv[2])
TOKEN_SECONDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3600
ISSUER = f"http://127.0.0.1:{AS_PORT}"
RESOURCE = f"http://127.0.0.1:{RS_PORT}/mcp"
SCOPE = "user"

stats = {"registrations": 0, "authorizations": 0, "refreshes": 0, "revocations": 0}


class Provider:
    """In memory: clients, pending logins, codes, access and refresh tokens."""

    def __init__(self):
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.pending: dict[str, tuple[str, AuthorizationParams]] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id):
        return self.clients.get(client_id)

    async def register_client(self, client_info):
        stats["registrations"] += 1
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client, params):
        login = secrets.token_urlsafe(16)
        self.pending[login] = (client.client_id, params)
        return f"{ISSUER}/login?{urlencode({'login': login})}"

    def approve(self, login):
        client_id, params = self.pending.pop(login)
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject="demo",
        )
        stats["authorizations"] += 1
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    def issue(self, client_id, scopes, resource):
        token, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        expires = int(time.time()) + TOKEN_SECONDS
        self.access[token] = AccessToken(token=token, client_id=client_id, scopes=scopes, expires_at=expires,
                                         resource=resource, subject="demo")
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource,
                                             subject="demo")
        return OAuthToken(access_token=token, token_type="Bearer", expires_in=TOKEN_SECONDS,
                          scope=" ".join(scopes), refresh_token=refresh)

    async def load_authorization_code(self, client, authorization_code):
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(self, client, authorization_code):
        self.codes.pop(authorization_code.code, None)
        return self.issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client, refresh_token):
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client, refresh_token, scopes):
        self.refresh.pop(refresh_token.token, None)
        stats["refreshes"] += 1
        return self.issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token):
        t = self.access.get(token)
        if t is None or (t.expires_at and t.expires_at < time.time()):
            return None
        return t

    async def revoke_token(self, token):
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


provider = Provider()


async def login_page(request: Request):
    login = request.query_params.get("login", "")
    return HTMLResponse(
        f"""<!doctype html><title>Sign in</title><form method="post" action="/login">
<input type="hidden" name="login" value="{login}"><input name="username"><input type="password" name="password">
<button>Sign in</button></form>"""
    )


async def login_submit(request: Request):
    form = await request.form()
    if form.get("username") != "demo" or form.get("password") != "demo":
        return HTMLResponse("wrong username or password", status_code=401)
    login = str(form.get("login", ""))
    if login not in provider.pending:
        return HTMLResponse("unknown or used login", status_code=400)
    return RedirectResponse(provider.approve(login), status_code=302)


async def admin_revoke(request: Request):
    stats["revocations"] += 1
    provider.access.clear()
    provider.refresh.clear()
    return JSONResponse({"ok": True})


async def admin_forget(request: Request):
    provider.clients.clear()
    return JSONResponse({"ok": True})


async def admin_stats(request: Request):
    return JSONResponse(stats)


auth_routes = create_auth_routes(
    provider=provider,
    issuer_url=AnyHttpUrl(ISSUER),
    client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE]),
    revocation_options=RevocationOptions(enabled=True),
)
as_app = Starlette(routes=auth_routes + [
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login_submit, methods=["POST"]),
    Route("/admin/revoke", admin_revoke, methods=["POST"]),
    Route("/admin/forget", admin_forget, methods=["POST"]),
    Route("/admin/stats", admin_stats, methods=["GET"]),
])

mcp = MCPServer(
    "py-auth-peer",
    token_verifier=ProviderTokenVerifier(provider),
    auth=AuthSettings(issuer_url=AnyHttpUrl(ISSUER), required_scopes=[SCOPE], resource_server_url=AnyHttpUrl(RESOURCE)),
)


@mcp.tool()
def whoami(ctx: Context) -> str:
    """Who the bearer token belongs to."""
    return "demo (signed in)"


async def main():
    servers = [
        uvicorn.Server(uvicorn.Config(as_app, host="127.0.0.1", port=AS_PORT, log_level="warning")),
        uvicorn.Server(uvicorn.Config(mcp.streamable_http_app(), host="127.0.0.1", port=RS_PORT, log_level="warning")),
    ]
    await asyncio.gather(*(s.serve() for s in servers))


if __name__ == "__main__":
    asyncio.run(main())

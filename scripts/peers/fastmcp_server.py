"""A fastmcp server (Streamable HTTP) behind fastmcp's in-memory OAuth provider, which registers
clients dynamically and approves every authorization at once (no person).

  python fastmcp_server.py PORT [TOKEN_SECONDS]

  http://127.0.0.1:PORT/mcp          the MCP server: `whoami`, `hello` (asks with ctx.elicit())
  POST /admin/revoke                 revokes every access and refresh token
  GET  /admin/stats                  {"clients": registered clients}
"""
import os
import sys

# No network: fastmcp checks for a newer release when it starts, unless told not to.
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")
os.environ.setdefault("FASTMCP_SHOW_SERVER_BANNER", "false")

from pydantic import BaseModel
from starlette.responses import JSONResponse

from fastmcp import Context, FastMCP
from fastmcp.server.auth.providers import in_memory
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions

PORT = int(sys.argv[1])
# The provider reads this module constant each time it issues a token.
in_memory.DEFAULT_ACCESS_TOKEN_EXPIRY_SECONDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3600

auth = in_memory.InMemoryOAuthProvider(
    base_url=f"http://127.0.0.1:{PORT}",
    client_registration_options=ClientRegistrationOptions(enabled=True),
    revocation_options=RevocationOptions(enabled=True),
)
mcp = FastMCP("fastmcp-peer", auth=auth)


@mcp.tool
def whoami() -> str:
    """Answers only with a valid bearer token."""
    return "signed in (fastmcp)"


class Who(BaseModel):
    name: str = "Ada"


@mcp.tool
async def hello(ctx: Context) -> str:
    """Asks the person's name with ctx.elicit()."""
    try:
        answer = await ctx.elicit("What is your name?", response_type=Who)
    except Exception as e:
        return f"Hello Unknown! ({type(e).__name__})"
    return f"Hello {answer.data.name}!" if answer.action == "accept" else f"Hello Unknown! ({answer.action})"


@mcp.custom_route("/admin/revoke", methods=["POST"])
async def revoke(request):
    auth.access_tokens.clear()
    auth.refresh_tokens.clear()
    return JSONResponse({"ok": True})


@mcp.custom_route("/admin/stats", methods=["GET"])
async def stats(request):
    return JSONResponse({"clients": len(auth.clients)})


if __name__ == "__main__":
    mcp.run(transport="http", host="127.0.0.1", port=PORT, log_level="warning")

"""The /acp WebSocket driven by Python's `websockets` (pinned in scripts/peers): an independent
client library's view of gosling's handshake, token and origin checks, text frames, ping/pong
and close. Usage: python py_client.py BASE_WS_URL SECRET [PIN]  (PIN for wss://). Prints JSON."""
import asyncio
import hashlib
import json
import ssl
import sys

from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

base, secret = sys.argv[1], sys.argv[2]
pin = sys.argv[3] if len(sys.argv) > 3 else None
ctx = None
if pin:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE


async def refused(url, **kw):
    try:
        async with connect(url, ssl=ctx, **kw):
            return 101
    except InvalidStatus as e:
        return e.response.status_code


async def session(url):
    r = {}
    async with connect(url, ssl=ctx, origin="file://", max_size=None) as ws:
        r["connectionId"] = ws.response.headers.get("Acp-Connection-Id")
        if pin:
            der = ws.transport.get_extra_info("ssl_object").getpeercert(binary_form=True)
            r["pinned"] = ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest()) == pin

        async def call(i, method, params):
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}))
            while True:
                m = json.loads(await ws.recv())
                if m.get("id") == i:
                    return m

        r["protocolVersion"] = (await call(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}}))["result"]["protocolVersion"]
        r["unknownCode"] = (await call(2, "session/stop", {}))["error"]["code"]
        big = await call(3, "y" * (1 << 20), {})
        r["bigCode"] = big["error"]["code"]
        r["bigAnswerBytes"] = len(json.dumps(big))
        # A fragmented message (the library splits an iterable into frames).
        msg = json.dumps({"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {"protocolVersion": 1}})
        await ws.send([msg[:7], msg[7:20], msg[20:]])
        while True:
            m = json.loads(await ws.recv())
            if m.get("id") == 4:
                r["fragmented"] = m["result"]["protocolVersion"]
                break
        latency = await (await ws.ping(b"ping!"))
        r["pongSeconds"] = latency
        await ws.close(1000, "done")
        r["closeCode"] = ws.close_code
        r["closeReason"] = ws.close_reason
    return r


async def main():
    url = f"{base}/acp?token={secret}"
    out = {
        "wrongToken": await refused(f"{base}/acp?token=wrong"),
        "noToken": await refused(f"{base}/acp"),
        "headerToken": await refused(f"{base}/acp", additional_headers={"X-Secret-Key": secret}),
        "foreignOrigin": await refused(url, origin="https://evil.example"),
        "nullOrigin": await refused(url, origin="null"),
    }
    out["session"] = await session(url)
    print(json.dumps(out))


asyncio.run(main())

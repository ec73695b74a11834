// The /acp WebSocket driven by Node's `ws` (pinned in scripts/peers): an independent client
// library's view of gosling's handshake, token and origin checks, text frames, ping/pong and
// close. Usage: node node_client.mjs BASE_WS_URL SECRET [PIN]
// (PIN: the certificate's SHA-256 as AA:BB:…, for wss://). Prints one JSON object.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { WebSocket } = require(process.env.WS_DIR);
const [base, secret, pin] = process.argv.slice(2);
const tls = pin ? { rejectUnauthorized: false } : {};
const out = {};

/** The status an upgrade is refused with. */
function refused(url, options) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { ...tls, ...options });
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    });
    ws.on("open", () => {
      ws.close(1000);
      resolve({ status: 101 });
    });
    ws.on("error", () => {});
  });
}

function session(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { ...tls, origin: "file://", maxPayload: 256 << 20 });
    const waiting = new Map();
    const result = {};
    const call = (id, method, params) =>
      new Promise((res) => {
        waiting.set(id, res);
        ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
      });
    ws.on("upgrade", (res) => (result.connectionId = res.headers["acp-connection-id"]));
    ws.on("message", (data, isBinary) => {
      const m = JSON.parse(data.toString());
      result.binaryFrames = (result.binaryFrames || 0) + (isBinary ? 1 : 0);
      const r = waiting.get(m.id);
      if (r) { waiting.delete(m.id); r(m); }
    });
    ws.on("error", reject);
    ws.on("open", async () => {
      if (pin) {
        const fp = ws._socket.getPeerCertificate().fingerprint256;
        result.pinned = fp === pin;
      }
      const init = await call(1, "initialize", { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "ws", version: "8" } });
      result.protocolVersion = init.result?.protocolVersion;
      const unknown = await call(2, "session/stop", {});
      result.unknownCode = unknown.error?.code;
      // A 1 MiB message each way.
      const big = await call(3, "x".repeat(1 << 20), {});
      result.bigAnswerBytes = JSON.stringify(big).length;
      result.bigCode = big.error?.code;
      ws.send(Buffer.from([1, 2, 3]), { binary: true });
      const again = await call(4, "initialize", { protocolVersion: 1 });
      result.afterBinary = again.result?.protocolVersion;
      ws.ping(Buffer.from("are you there"));
      ws.once("pong", (p) => {
        result.pong = p.toString();
        ws.close(1000, "done");
      });
    });
    ws.on("close", (code, reason) => {
      result.closeCode = code;
      result.closeReason = reason.toString();
      resolve(result);
    });
  });
}

const url = `${base}/acp?token=${encodeURIComponent(secret)}`;
out.wrongToken = (await refused(`${base}/acp?token=wrong`)).status;
out.noToken = (await refused(`${base}/acp`)).status;
out.headerToken = (await refused(`${base}/acp`, { headers: { "X-Secret-Key": secret } })).status;
out.foreignOrigin = (await refused(url, { origin: "https://evil.example" })).status;
out.devOrigin = (await refused(url, { origin: "http://localhost:5173" })).status;
out.session = await session(url);
console.log(JSON.stringify(out));

// A small MCP server on stdio in Node for the sandbox tests (tests/it/sandbox.rs): its one
// tool `fetch {url}` GETs the URL with Node's own `fetch` and answers "DONE <status> <body>",
// or "REFUSED <error and its cause>" when the request failed. Node's fetch goes through the
// proxy the environment names only with NODE_USE_ENV_PROXY=1 (Node 22.21+, 24.5+); `env`
// answers that variable and the proxy's, so a test can say what was missing. No packages.
import { createInterface } from "node:readline";

const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
const text = (id, t) => send({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: t }] } });

async function fetchTool(id, url) {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(10000) });
    text(id, `DONE ${r.status} ${await r.text()}`);
  } catch (e) {
    const cause = e.cause ? ` (${e.cause.code || ""} ${e.cause.message || e.cause})` : "";
    text(id, `REFUSED ${e.name}: ${e.message}${cause}`);
  }
}

const tools = [
  { name: "fetch", description: "GET a URL with Node's fetch", inputSchema: { type: "object", properties: { url: { type: "string" } }, required: ["url"] } },
  { name: "env", description: "the proxy variables and Node's version", inputSchema: { type: "object" } },
];

createInterface({ input: process.stdin }).on("line", (line) => {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m.id === undefined) return;
  switch (m.method) {
    case "initialize":
      send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "node-fetch", version: "1" } } });
      break;
    case "tools/list":
      send({ jsonrpc: "2.0", id: m.id, result: { tools } });
      break;
    case "tools/call":
      if (m.params.name === "fetch") fetchTool(m.id, m.params.arguments.url);
      else {
        const e = process.env;
        text(m.id, `node ${process.versions.node} NODE_USE_ENV_PROXY=${e.NODE_USE_ENV_PROXY} HTTPS_PROXY=${e.HTTPS_PROXY} npm_config_https_proxy=${e.npm_config_https_proxy}`);
      }
      break;
    case "ping":
      send({ jsonrpc: "2.0", id: m.id, result: {} });
      break;
    default:
      send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: `no method ${m.method}` } });
  }
});

// An ACP client for the integration tests, built on the official TypeScript SDK
// (@agentclientprotocol/sdk, pinned in scripts/peers). It starts `gosling acp`, runs a script
// of steps, and prints one JSON transcript on stdout: every response, error, session/update
// and client-side request (permission, fs) in order.
//
//   node driver.mjs SCRIPT_JSON
//   env: ACP_SDK_DIR (the SDK package), GOSLING (the binary); the agent inherits the rest.
//
// SCRIPT_JSON: {"fs": bool, "buffers": {path: text}, "permission": "allow_once" |
//   "allow_always" | "reject_once" | "cancel", "elicitation": {action, content?} (declares form
//   elicitation and answers every elicitation/create with it), "notices": bool (advertises
//   ACP's `session.notices`), "steps": [...]}. Steps:
//   {"do": "initialize"} | {"do": "new", "cwd", "mcpServers"} | {"do": "load", "sessionId"?,
//   "cwd", "mcpServers"} | {"do": "resume", "sessionId"?, "cwd", "mcpServers"} | {"do": "set_mode", "modeId"} | {"do": "prompt", "text",
//   "permission"?, "cancelWhen"?: "permission" | "tool_call" | {"llmockRequests": URL, "above": N}} | {"do": "raw", "method", "params"}
// "sessionId" defaults to the last session created or loaded. A failing request is recorded
// as {"error": {code, message, data?}} and the script goes on.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const sdk = await import(pathToFileURL(`${process.env.ACP_SDK_DIR}/dist/v1/stable/acp.js`).href);
const script = JSON.parse(process.argv[2]);
const transcript = [];
const log = (entry) => transcript.push({ t: Date.now(), ...entry });
const buffers = new Map(Object.entries(script.buffers ?? {}));

const child = spawn(process.env.GOSLING, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
const stream = sdk.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

let sessionId = null;
let onPermission = null; // set by a prompt that cancels when the permission question comes
let onToolCall = null; // set by a prompt that cancels when a tool call starts
let permission = script.permission ?? "allow_once"; // a prompt step's "permission" overrides it

const app = sdk
  .client({ name: "gosling-test-driver" })
  .onNotification(sdk.methods.client.session.update, async ({ params }) => {
    log({ kind: "update", sessionId: params.sessionId, update: params.update });
    if (onToolCall && params.update.sessionUpdate === "tool_call") {
      const f = onToolCall;
      onToolCall = null;
      await f();
    }
  })
  .onRequest(sdk.methods.client.session.requestPermission, async ({ params }) => {
    log({ kind: "permission", params });
    if (onPermission) {
      await onPermission();
      return { outcome: { outcome: "cancelled" } };
    }
    if (permission === "cancel") return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId: permission } };
  })
  .onRequest(sdk.methods.client.elicitation.create, ({ params }) => {
    log({ kind: "elicitation", params });
    return script.elicitation ?? { action: "cancel" };
  })
  .onRequest(sdk.methods.client.fs.readTextFile, ({ params }) => {
    log({ kind: "fs_read", path: params.path });
    if (!buffers.has(params.path)) {
      throw new sdk.RequestError(-32002, `no buffer for ${params.path}`);
    }
    return { content: buffers.get(params.path) };
  })
  .onRequest(sdk.methods.client.fs.writeTextFile, ({ params }) => {
    log({ kind: "fs_write", path: params.path, content: params.content });
    buffers.set(params.path, params.content);
    return {};
  });

async function waitForLlmockRequests(url, above) {
  for (let i = 0; i < 600; i++) {
    const r = await fetch(`${url}/_llmock/requests`).then((x) => x.json());
    const n = Array.isArray(r) ? r.length : (r.requests ?? []).length;
    if (n > above) return;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error("llmock saw no new request within 30 s");
}


async function call(ctx, method, params) {
  const started = Date.now();
  try {
    const result = await ctx.request(method, params);
    log({ kind: "response", method, result: result ?? null, ms: Date.now() - started });
    return result;
  } catch (e) {
    log({ kind: "response", method, error: { code: e.code, message: e.message, ...(e.data === undefined ? {} : { data: e.data }) }, ms: Date.now() - started });
    return undefined;
  }
}

await app.connectWith(stream, async (ctx) => {
  for (const step of script.steps) {
    const sid = step.sessionId ?? sessionId;
    switch (step.do) {
      case "initialize":
        await call(ctx, "initialize", {
          protocolVersion: step.protocolVersion ?? sdk.PROTOCOL_VERSION,
          clientCapabilities: {
            fs: { readTextFile: !!script.fs, writeTextFile: !!script.fs },
            terminal: false,
            ...(script.elicitation ? { elicitation: { form: {} } } : {}),
            ...(script.notices ? { session: { notices: {} } } : {}),
          },
          clientInfo: { name: "gosling-test-driver", version: "0" },
        });
        break;
      case "new": {
        const r = await call(ctx, "session/new", { cwd: step.cwd, mcpServers: step.mcpServers ?? [] });
        if (r) sessionId = r.sessionId;
        break;
      }
      case "load": {
        const r = await call(ctx, "session/load", { sessionId: sid, cwd: step.cwd, mcpServers: step.mcpServers ?? [] });
        if (r !== undefined) sessionId = sid;
        break;
      }
      case "resume": {
        // ACP's session/resume (advertised as sessionCapabilities.resume): no replay.
        const r = await call(ctx, "session/resume", { sessionId: sid, cwd: step.cwd, mcpServers: step.mcpServers ?? [] });
        if (r !== undefined) sessionId = sid;
        break;
      }
      case "set_mode":
        await call(ctx, "session/set_mode", { sessionId: sid, modeId: step.modeId });
        break;
      case "prompt": {
        permission = step.permission ?? script.permission ?? "allow_once";
        const prompt = call(ctx, "session/prompt", { sessionId: sid, prompt: [{ type: "text", text: step.text }] });
        if (step.cancelWhen === "tool_call") {
          onToolCall = async () => {
            log({ kind: "cancel" });
            await ctx.notify("session/cancel", { sessionId: sid });
          };
        } else if (step.cancelWhen === "permission") {
          onPermission = async () => {
            log({ kind: "cancel" });
            await ctx.notify("session/cancel", { sessionId: sid });
          };
        } else if (step.cancelWhen?.llmockRequests) {
          const url = step.cancelWhen.llmockRequests;
          await waitForLlmockRequests(url, step.cancelWhen.above ?? 0);
          log({ kind: "cancel" });
          await ctx.notify("session/cancel", { sessionId: sid });
        }
        await prompt;
        onPermission = null;
        break;
      }
      case "raw":
        await call(ctx, step.method, step.params);
        break;
      case "wait_update": {
        // Until `count` updates of `kind` have arrived (some come after a prompt's answer), or
        // `ms` (20 s) have passed; the test then says what was missing.
        const seen = () => transcript.filter((e) => e.kind === "update" && e.update.sessionUpdate === step.kind).length;
        const end = Date.now() + (step.ms ?? 20000);
        while (seen() < step.count && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
        break;
      }
      default:
        throw new Error(`unknown step ${JSON.stringify(step)}`);
    }
  }
});
child.stdin.end();
await new Promise((res) => child.on("exit", res));
process.stdout.write(JSON.stringify({ transcript, buffers: Object.fromEntries(buffers) }) + "\n");

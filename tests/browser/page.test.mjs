// Drives gosling's built-in page in headless Chromium against the real binary, llmock and a real
// MCP server (server-everything over stdio): enter the key, start a session, send a message that
// makes the model call a tool, see the answer; add an extension through the form; install a
// deep link with a missing secret and provide it. Screenshots of each step go to ARTIFACTS.
//   node page.test.mjs   (env: GOSLING_BIN, LLMOCK, MCP_PEER_NODE, MCP_PEER_EVERYTHING, ARTIFACTS)
import { chromium } from "playwright-core";
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

const SECRET = "browser-test-secret-0123456789";
const env = (k) => { const v = process.env[k]; if (!v) throw new Error(`set ${k}`); return v; };
const bin = env("GOSLING_BIN");
const artifacts = env("ARTIFACTS");
mkdirSync(artifacts, { recursive: true });
const children = [];
let passed = 0, failed = 0;

function freePort() {
  return new Promise((resolve) => { const s = createServer(); s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); }); });
}

async function waitHttp(url, ms = 60000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try { await fetch(url); return; } catch { await new Promise((r) => setTimeout(r, 100)); }
  }
  throw new Error(`${url} did not answer`);
}

async function startGosling(llmPort, home) {
  const child = spawn(bin, ["agent", "--port", "0"], {
    env: {
      ...process.env, GOOSE_SERVER__SECRET_KEY: SECRET, GOSLING_CONFIG_DIR: join(home, "config"), GOSLING_STATE_DIR: join(home, "state"),
      GOOSE_PROVIDER: "openai", GOOSE_MODEL: "mock-model", OPENAI_HOST: `http://127.0.0.1:${llmPort}`,
      PATH: `${dirname(bin)}:${process.env.PATH}`, RUST_LOG: "info",
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  const addr = await new Promise((resolve, reject) => {
    let buf = "";
    child.stdout.on("data", (d) => { buf += d; const m = buf.match(/listening on http:\/\/(\S+)/); if (m) resolve(m[1]); });
    child.on("exit", (c) => reject(new Error(`gosling exited ${c}`)));
  });
  return `http://${addr}`;
}

async function step(name, page, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.message}`);
  } finally {
    await page.screenshot({ path: join(artifacts, `${String(passed + failed).padStart(2, "0")}-${name.replace(/\W+/g, "-")}.png`), fullPage: true });
  }
}

const home = mkdtempSync(join(tmpdir(), "gosling-browser-"));
let browser;
try {
  const llmPort = await freePort();
  const llmock = spawn(env("LLMOCK"), ["serve", "--host", "127.0.0.1", "-p", String(llmPort), "--log-level", "warning"], { stdio: "ignore" });
  children.push(llmock);
  await waitHttp(`http://127.0.0.1:${llmPort}/`);
  const base = await startGosling(llmPort, home);
  // A real MCP server, persisted and enabled: new sessions start it. Only `echo` is offered.
  const r = await fetch(`${base}/config/extensions`, {
    method: "POST", headers: { "X-Secret-Key": SECRET, "Content-Type": "application/json" },
    body: JSON.stringify({ name: "everything", enabled: true, config: { type: "stdio", name: "everything", description: "", cmd: env("MCP_PEER_NODE"), args: [env("MCP_PEER_EVERYTHING"), "stdio"], available_tools: ["echo"], timeout: 60 } }),
  });
  if (!r.ok) throw new Error(`persisting server-everything: ${r.status}`);

  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
  page.setDefaultTimeout(30000);
  await page.goto(base + "/");

  await step("enter the key", page, async () => {
    await page.locator("#key").fill(SECRET);
    await page.getByRole("button", { name: "Use this key" }).click();
    await page.locator("#chat").waitFor({ state: "visible" });
  });
  await step("start a session", page, async () => {
    await page.locator("#working-dir").fill(home);
    await page.getByRole("button", { name: "Start a session" }).click();
    await page.locator("#session-info", { hasText: "Session" }).waitFor();
  });
  await step("a message that calls a tool", page, async () => {
    await page.locator("#prompt").fill("Please echo hello through the tool");
    await page.getByRole("button", { name: "Send" }).click();
    await page.locator("summary", { hasText: "Tool call: everything__echo" }).waitFor();
    await page.locator("summary", { hasText: "Tool result" }).waitFor();
    await page.locator("#status", { hasText: "Done." }).waitFor();
    const answers = await page.locator(".msg.assistant p.text").count();
    if (answers < 1) throw new Error("no answer text after the tool result");
  });
  await step("add an extension through the form", page, async () => {
    await page.locator("#add-name").fill("notes");
    await page.locator("#add-type").selectOption("stdio");
    await page.locator("#add-cmd").fill(bin);
    await page.locator("#add-args").fill("mcp\nmemory");
    await page.getByRole("button", { name: "Add", exact: true }).click();
    await page.locator("#add-result", { hasText: "Added notes." }).waitFor();
    await page.locator("#tools li", { hasText: "notes__remember_memory" }).waitFor();
  });
  await step("install a deep link and provide its secret", page, async () => {
    await page.locator("#link").fill("goose://extension?cmd=gosling&arg=mcp&arg=memory&name=Team%20Notes&env=TEAM_TOKEN%3DThe%20team%20token");
    await page.getByRole("button", { name: "Check" }).click();
    await page.locator("#install-plan summary", { hasText: "This will install Team Notes" }).waitFor();
    await page.getByRole("button", { name: "Install", exact: true }).click();
    await page.locator("#install-result", { hasText: "TEAM_TOKEN missing" }).waitFor();
    await page.locator("#secret-TEAM_TOKEN").fill("team-secret-value");
    await page.getByRole("button", { name: "Save secrets and enable" }).click();
    await page.locator("#install-result", { hasText: "is enabled" }).waitFor();
    const ext = await (await fetch(`${base}/config/extensions`, { headers: { "X-Secret-Key": SECRET } })).json();
    const entry = ext.extensions.find((e) => e.name === "Team Notes");
    if (!entry || !entry.enabled) throw new Error("Team Notes is not enabled: " + JSON.stringify(entry));
    await page.locator("#tools li", { hasText: "teamnotes__remember_memory" }).waitFor();
  });
} catch (e) {
  failed++;
  console.log(`FAIL setup: ${e.message}`);
} finally {
  if (browser) await browser.close();
  for (const c of children) c.kill("SIGTERM");
  rmSync(home, { recursive: true, force: true });
}
console.log(`browser: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);

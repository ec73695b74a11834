// Browser test of the built-in web page (issue 10 "Must show"): the real gosling binary, llmock
// as the OpenAI provider, the Python SDK's MCP server over stdio as a real MCP server (its tools
// need no network, whichever one llmock picks), and headless
// Chromium driven by playwright-core. Run through scripts/browser-test, which sets
// GOSLING_BIN, PEERS_ENV, CHROMIUM, NODE_PATH and ARTIFACTS.
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { chromium } = require("playwright-core");

const BIN = process.env.GOSLING_BIN;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const ART = process.env.ARTIFACTS;
const SECRET = "browser-test-secret-4242";
const TIMEOUT = 60_000;

function peers() {
  const env = {};
  for (const line of fs.readFileSync(process.env.PEERS_ENV, "utf8").split("\n")) {
    const m = /^(?:export\s+)?([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (m) env[m[1]] = m[2].replace(/^["']|["']$/g, "");
  }
  return env;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
    s.on("error", reject);
  });
}

const children = [];
function start(cmd, args, env, logFile) {
  const log = fs.openSync(logFile, "w");
  const c = spawn(cmd, args, { env, stdio: ["ignore", "pipe", log] });
  children.push(c);
  return c;
}
function cleanup() {
  for (const c of children) { try { c.kill("SIGTERM"); } catch (_) { /* gone */ } }
}
process.on("exit", cleanup);

async function waitHttp(url, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try { await fetch(url); return; } catch (_) { await new Promise((r) => setTimeout(r, 200)); }
  }
  throw new Error("not reachable in time: " + url);
}

function waitListening(child, ms) {
  return new Promise((resolve, reject) => {
    let buf = "";
    const t = setTimeout(() => reject(new Error("gosling did not print its listening line")), ms);
    child.stdout.on("data", (d) => {
      buf += d;
      const m = /listening on (http:\/\/[^\s/]+)/.exec(buf);
      if (m) { clearTimeout(t); resolve(m[1]); }
    });
    child.on("exit", (code) => reject(new Error("gosling exited early: " + code)));
  });
}

let step = 0;
let currentPage = null;
async function shot(page, name) {
  step += 1;
  const file = path.join(ART, String(step).padStart(2, "0") + "-" + name + ".png");
  await page.screenshot({ path: file, fullPage: true });
  console.log("screenshot " + file);
}

async function main() {
  const P = peers();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gosling-browser-"));
  const llmPort = await freePort();
  start(P.LLMOCK, ["serve", "-p", String(llmPort)], process.env, path.join(ART, "llmock.log"));
  await waitHttp("http://127.0.0.1:" + llmPort + "/", 30_000);

  const env = Object.assign({}, process.env, {
    GOSLING_CONFIG_DIR: path.join(tmp, "config"),
    GOSLING_STATE_DIR: path.join(tmp, "state"),
    HOME: tmp,
    GOOSE_SERVER__SECRET_KEY: SECRET,
    GOOSE_PROVIDER: "openai",
    GOOSE_MODEL: "any",
    OPENAI_HOST: "http://127.0.0.1:" + llmPort,
    OPENAI_API_KEY: "sk-llmock",
    RUST_LOG: "info",
    GOSLING_PRINT_LOGIN_LINK: "1",
    // Plain HTTP: headless Chromium would refuse the self-signed certificate of the default.
    GOOSE_TLS: "false",
  });
  const srv = start(BIN, ["agent", "--port", "0"], env, path.join(ART, "gosling.log"));
  const base = await waitListening(srv, 30_000);
  const workdir = path.join(tmp, "work");
  fs.mkdirSync(workdir);

  const ctx = await chromium.launchPersistentContext(path.join(tmp, "chromium-profile"), {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
    viewport: { width: 1000, height: 900 },
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  page.setDefaultTimeout(TIMEOUT);
  currentPage = page;
  const consoleErrors = [];
  // Chromium logs every non-2xx fetch: exactly one 401 (the wrong key) and one 400 (the
  // validation step) are expected; anything else (a CSP violation, a stray 401) fails.
  const expected = { "401 (Unauthorized)": 1, "400 (Bad Request)": 1 };
  page.on("console", (m) => {
    if (m.type() !== "error") return;
    const st = /status of (\d{3} \([^)]*\))/.exec(m.text());
    if (st && expected[st[1]] > 0) expected[st[1]] -= 1;
    else consoleErrors.push(m.text());
  });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  page.on("dialog", (d) => d.accept());

  // 1. The one-time login link the server printed signs the page in; then forget the key and
  //    enter it by hand.
  let loginLine;
  for (let i = 0; i < 100 && !loginLine; i++) {
    loginLine = fs.readFileSync(path.join(ART, "gosling.log"), "utf8").split("\n").find((l) => l.includes("#login="));
    if (!loginLine) await new Promise((r) => setTimeout(r, 100));
  }
  if (!loginLine) throw new Error("gosling printed no login link");
  const loginUrl = /(http:\/\/\S+#login=\w+)/.exec(loginLine)[1];
  await page.goto(loginUrl);
  await page.waitForSelector("#status:text('Key set.')");
  if (page.url().includes("#")) throw new Error("the login token stays in the URL: " + page.url());
  await page.click("#key-forget");
  await page.goto(base + "/");
  await page.waitForSelector("text=Enter the secret key");
  await shot(page, "page-no-key");
  await page.fill("#key-input", "not-the-key");
  await page.press("#key-input", "Enter");
  await page.waitForSelector("#status:has-text('wrong X-Secret-Key')");
  await page.fill("#key-input", SECRET);
  await page.press("#key-input", "Enter");
  await page.waitForSelector("#status:text('Key set.')");
  await shot(page, "key-entered");

  // 2. Install a deep link that needs a secret; provide it; then remove the extension again
  //    (its npx command must not run in the chat session below).
  const link = "goose://extension?cmd=npx&arg=-y&arg=%40modelcontextprotocol%2Fserver-everything" +
    "&name=Linked%20Demo&description=Demo&env=DEMO_TOKEN%3DA%20demo%20token";
  await page.fill("#install-link", link);
  await page.click("#install-form button[type=submit]");
  await page.waitForSelector("#install-plan >> text=This link will install");
  const plan = await page.textContent("#install-plan");
  if (!plan.includes("npx -y @modelcontextprotocol/server-everything")) throw new Error("dry run does not show the command: " + plan);
  if (!plan.includes("DEMO_TOKEN")) throw new Error("dry run does not name the missing secret: " + plan);
  if (!plan.includes("Reads stored secrets") || !plan.includes("env DEMO_TOKEN")) throw new Error("dry run does not say which stored secret is read: " + plan);
  await shot(page, "install-dry-run");
  await page.click("#install-plan button:text('Install Linked Demo')");
  await page.waitForSelector("label:has-text('DEMO_TOKEN')");
  await shot(page, "install-needs-secret");
  await page.fill("#secret-DEMO_TOKEN", "demo-secret-value");
  await page.click("#install-plan button:text('Save secrets and enable')");
  await page.waitForSelector("#install-plan >> text=Secrets saved");
  await page.waitForSelector("#ext-table tr:has-text('Linked Demo'):has-text('yes')");
  await shot(page, "install-done");
  const secretRead = await fetch(base + "/config/read", { method: "POST",
    headers: { "X-Secret-Key": SECRET, "Content-Type": "application/json" },
    body: JSON.stringify({ key: "DEMO_TOKEN", is_secret: true }) });
  if (!secretRead.ok) throw new Error("the secret was not stored: " + secretRead.status + " " + await secretRead.text());
  await page.click("#ext-table tr:has-text('Linked Demo') button:text('Remove')");
  await page.waitForSelector("#ext-table tr:has-text('Linked Demo')", { state: "detached" });

  // 3. The server's validation message shows for a bad entry; then add the Python SDK server.
  await page.fill("#ext-name", "broken");
  await page.check("input[name=ext-type][value=streamable_http]");
  await page.click("#ext-form button[type=submit]");
  await page.waitForFunction(() => document.getElementById("ext-error").textContent.length > 0);
  await shot(page, "extension-validation-error");
  if (await page.locator("#ext-table tr:has-text('broken')").count()) throw new Error("an invalid extension was saved");
  await page.fill("#ext-name", "pyserver");
  await page.check("input[name=ext-type][value=stdio]");
  await page.fill("#ext-cmd", P.MCP_PEER_PYTHON);
  await page.fill("#ext-args", P.MCP_PEER_PY_SERVER);
  await page.click("#ext-form button[type=submit]");
  await page.waitForSelector("#ext-table tr:has-text('pyserver'):has-text('yes')");
  await shot(page, "extension-added");

  // 4. A session, a message that makes llmock call a tool, and the answer.
  await page.fill("#workdir", workdir);
  await page.click("#start-form button[type=submit]");
  await page.waitForSelector("#session-id:not(:text('none'))");
  await page.waitForSelector("#extension-results >> text=pyserver: loaded");
  await page.waitForSelector("#tools-list code:text('pyserver__')");
  await page.waitForSelector("#ext-table tr:has-text('pyserver') summary:text('running')");
  await shot(page, "session-started");
  await page.fill("#message-input", "Please use a tool to echo hello.");
  await page.click("#send-btn");
  await page.waitForSelector("#messages details.tool summary:text('Tool call')");
  await page.waitForSelector("#status:text('Done')", { timeout: 120_000 });
  await page.waitForSelector("#messages li.assistant .text");
  const lastText = await page.locator("#messages li.assistant .text").last().textContent();
  if (!lastText.trim()) throw new Error("empty assistant answer");
  await page.locator("#messages details.tool").first().evaluate((d) => { d.open = true; });
  await page.locator("#messages details.tool details").first().evaluate((d) => { d.open = true; }).catch(() => {});
  await shot(page, "chat-answered");
  const resultSummary = await page.locator("#messages details.tool details summary").first().textContent();
  const resultText = await page.locator("#messages details.tool details pre").first().textContent();
  if (resultSummary.includes("(error)") || !resultText.trim()) throw new Error("the tool did not answer: " + resultSummary + " " + resultText);
  if (await page.locator("#messages li.error").count()) throw new Error("the chat shows an error: " + await page.textContent("#messages"));

  // 5. Approval: GOOSE_MODE=approve through the settings form; the tool call waits for "Allow once".
  await page.selectOption("#set-mode", "approve");
  await page.click("#settings-form button[type=submit]");
  await page.waitForSelector("#settings-msg:text('Settings saved.')");
  const before = await page.locator("#messages details.tool").count();
  await page.fill("#message-input", "Use a tool again, please.");
  await page.click("#send-btn");
  await page.waitForSelector("#messages .confirm button:text('Allow once')");
  await shot(page, "approval-asked");
  await page.click("#messages .confirm button:text('Allow once')");
  await page.waitForSelector("#messages .confirm >> text=Allowed.");
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("Done")
    && !document.getElementById("send-btn").disabled, null, { timeout: 120_000 });
  if (await page.locator("#messages details.tool").count() <= before) throw new Error("no tool ran after approval");
  await shot(page, "approval-allowed");

  // 6. Stop: a turn waiting for approval is cancelled by closing the stream; the next turn works.
  await page.fill("#message-input", "And once more.");
  await page.click("#send-btn");
  await page.waitForSelector("#messages .confirm >> nth=1");
  await page.click("#stop-btn");
  await page.waitForSelector("#status:text('Stopped.')");
  await shot(page, "stopped");
  await page.selectOption("#set-mode", "auto");
  await page.click("#settings-form button[type=submit]");
  await page.waitForFunction(() => document.getElementById("settings-msg").textContent === "Settings saved.");
  await page.fill("#message-input", "Last one.");
  await page.click("#send-btn");
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("Done")
    && !document.getElementById("send-btn").disabled, null, { timeout: 120_000 });
  await shot(page, "after-stop");
  if (await page.locator("#messages li.error").count()) throw new Error("the chat shows an error: " + await page.textContent("#messages"));

  // 7. Reload (the key stays for this tab) and resume the session from the list.
  const sid = (await page.textContent("#session-id")).split(" ")[0];
  await page.reload();
  await page.waitForSelector("#status:text('Key set.')");
  await page.click("#sessions-refresh");
  await page.waitForSelector("#session-select option[value='" + sid + "']", { state: "attached" });
  await page.selectOption("#session-select", sid);
  await page.click("#resume-form button[type=submit]");
  await page.waitForSelector("#messages li.user:has-text('Please use a tool to echo hello.')");
  await page.waitForSelector("#messages details.tool");
  await shot(page, "resumed");

  // 8. Narrow window.
  await page.setViewportSize({ width: 380, height: 800 });
  await shot(page, "narrow");

  if (consoleErrors.length) throw new Error("console errors (CSP violations?): " + consoleErrors.join("\n"));
  await ctx.close();
  console.log("browser test: ok");
}

main().then(() => { cleanup(); process.exit(0); }, async (e) => {
  console.error("browser test FAILED:", e);
  if (currentPage) await shot(currentPage, "FAILED").catch(() => {});
  cleanup();
  process.exit(1);
});

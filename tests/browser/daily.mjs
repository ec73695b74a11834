// Browser test of issue 38 ("a daily driver"): the page as a new user finds it, on a fresh home
// with no key and no model set — the real gosling binary, headless Chromium (playwright-core),
// the developer builtin as the tools, and a small scripted OpenAI-compatible server below (it
// answers with the tool-call ids the test names, which llmock cannot: item 4 needs a provider
// that repeats one). Run through scripts/browser-test after web.mjs; screenshots in ARTIFACTS.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { chromium } = require("playwright-core");

const BIN = process.env.GOSLING_BIN;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const ART = process.env.ARTIFACTS;
const TIMEOUT = 60_000;
const PYTHON = "/usr/bin/python3";

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
    s.on("error", reject);
  });
}

// ---- the scripted model: each request takes the next scripted answer (a text, or one tool call
// with a given id); with none left it answers "ok". Streams as OpenAI's chat completions do.
const script = [];
const seen = [];
function chunk(delta, finish) {
  return "data: " + JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "fake",
    choices: [{ index: 0, delta, finish_reason: finish || null }] }) + "\n\n";
}
function startModel(port) {
  const srv = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => { body += d; });
    req.on("end", () => {
      let j = {};
      try { j = JSON.parse(body); } catch (_) { /* not JSON */ }
      seen.push(j);
      const next = script.shift() || { text: "ok" };
      if (j.stream === false) {
        const message = next.tool ? { role: "assistant", content: null, tool_calls: [{ id: next.id, type: "function",
          function: { name: next.tool, arguments: JSON.stringify(next.args || {}) } }] } : { role: "assistant", content: next.text };
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ id: "c", object: "chat.completion", created: 1, model: "fake",
          choices: [{ index: 0, message, finish_reason: next.tool ? "tool_calls" : "stop" }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
        return;
      }
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write(chunk({ role: "assistant", content: "" }));
      if (next.tool) {
        res.write(chunk({ tool_calls: [{ index: 0, id: next.id, type: "function", function: { name: next.tool, arguments: JSON.stringify(next.args || {}) } }] }));
        res.write(chunk({}, "tool_calls"));
      } else {
        res.write(chunk({ content: next.text }));
        res.write(chunk({}, "stop"));
      }
      res.end("data: [DONE]\n\n");
    });
  });
  srv.listen(port, "127.0.0.1");
  return srv;
}

const children = [];
function start(cmd, args, env, logFile) {
  const log = fs.openSync(logFile, "w");
  const c = spawn(cmd, args, { env, stdio: ["ignore", "pipe", log] });
  children.push(c);
  return c;
}
process.on("exit", () => { for (const c of children) { try { c.kill("SIGTERM"); } catch (_) { /* gone */ } } });

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
  const vp = page.viewportSize();
  const file = path.join(ART, "daily-" + String(step).padStart(2, "0") + "-" + name + "-" + vp.width + "x" + vp.height + ".png");
  await page.screenshot({ path: file });
  console.log("screenshot " + file);
}
async function idle(page) { await page.waitForSelector("#stop-btn", { state: "hidden", timeout: 120_000 }); }
async function sendMessage(page, text) {
  await page.fill("#message-input", text);
  await page.press("#message-input", "Enter");
}
function must(cond, what) { if (!cond) throw new Error(what); }

async function main() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gosling-daily-"));
  const modelPort = await freePort();
  startModel(modelPort);
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(GOOSE_|OPENAI_|ANTHROPIC_|OLLAMA_|GOSLING_)/.test(k)) env[k] = v;
  }
  Object.assign(env, {
    GOSLING_CONFIG_DIR: path.join(tmp, "config"),
    GOSLING_STATE_DIR: path.join(tmp, "state"),
    HOME: tmp,
    RUST_LOG: "info",
    GOSLING_PRINT_LOGIN_LINK: "1",
    GOSLING_SESSION_TITLES: "first_message",
    // Plain HTTP: headless Chromium would refuse the self-signed certificate of the default.
    GOOSE_TLS: "false",
    // The slow extension of item 1 (python sleeping before it fails).
    GOSLING_ALLOWED_COMMANDS: PYTHON,
  });
  const srv = start(BIN, ["agent", "--port", "0"], env, path.join(ART, "daily-gosling.log"));
  const base = await waitListening(srv, 30_000);
  const key = fs.readFileSync(path.join(tmp, "state", "secret-key"), "utf8").trim();
  const gosling = (method, p, body) => fetch(base + p, { method, headers: { "X-Secret-Key": key, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body) }).then(async (r) => { const t = await r.text(); return { status: r.status, json: t ? JSON.parse(t) : null }; });
  const workdir = path.join(tmp, "work");
  fs.mkdirSync(workdir);
  const log = () => fs.readFileSync(path.join(ART, "daily-gosling.log"), "utf8");
  must(/generated a secret key in/.test(log()), "the first start does not say it generated the key: " + log());

  const ctx = await chromium.launchPersistentContext(path.join(tmp, "chromium-profile"), {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height: 800 },
    colorScheme: "light",
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  page.setDefaultTimeout(TIMEOUT);
  currentPage = page;
  const errors = [];
  const watch = (p) => {
    p.on("pageerror", (e) => errors.push(String(e)));
    p.on("console", (m) => { if (m.type() === "error" && !/status of 4\d\d/.test(m.text())) errors.push(m.text()); });
    p.on("dialog", (d) => d.accept());
  };
  watch(page);

  // 1. First run (items 5 and 8): the sign-in dialog says where the link and the key are; the
  //    login link signs the browser in with a cookie; the page says no model is set and leads to
  //    Settings.
  await page.goto(base + "/");
  await page.waitForSelector("#key-dialog[open]");
  const dialog = await page.textContent("#key-dialog");
  must(dialog.includes("login-link-PORT") && dialog.includes("secret-key"), "the sign-in dialog does not say where the link and key are: " + dialog);
  await shot(page, "first-run-sign-in");
  let loginLine;
  for (let i = 0; i < 100 && !loginLine; i++) {
    loginLine = log().split("\n").find((l) => l.includes("#login="));
    if (!loginLine) await new Promise((r) => setTimeout(r, 100));
  }
  const loginUrl = /(http:\/\/\S+#login=\w+)/.exec(loginLine)[1];
  await page.goto(loginUrl);
  await page.waitForSelector("#key-dialog", { state: "hidden" });
  await page.waitForSelector("#first-run button:text('Open Settings')");
  const stored = await page.evaluate(() => JSON.stringify(sessionStorage) + JSON.stringify(localStorage) + document.cookie);
  must(!stored.includes(key), "the key is in the page's storage");
  must(!stored.includes("gosling_login"), "the sign-in cookie is readable by the page (not HttpOnly)");
  const cookies = await ctx.cookies(base);
  const login = cookies.find((c) => c.name.startsWith("gosling_login_"));
  must(login && login.httpOnly && login.sameSite === "Strict" && login.expires > Date.now() / 1000 + 3600, "the sign-in cookie: " + JSON.stringify(cookies));
  await shot(page, "first-run");
  //    Another tab of the browser is signed in too (the cookie), without the key or the link.
  const tab2 = await ctx.newPage();
  watch(tab2);
  await tab2.goto(base + "/");
  await tab2.waitForSelector("#first-run");
  must(!await tab2.locator("#key-dialog[open]").count(), "a second tab asked for the key again");
  await tab2.close();

  // 2. Settings from the first-run note (item 8): a host example, the base path, the modes
  //    described, the stored secrets named; "Settings saved." where it is seen; the note goes.
  await page.click("#first-run button:text('Open Settings')");
  await page.waitForSelector("#settings-dialog[open]");
  must((await page.getAttribute("#set-host", "placeholder")).includes("api.openai.com"), "no host example");
  must(await page.locator("#set-basepath").count(), "no base path field");
  must((await page.textContent("#set-mode option[value=smart_approve]")).includes("ask only before tools that may change things"), "smart_approve is not described");
  await page.selectOption("#set-provider", "openai");
  await page.fill("#set-model", "fake-model");
  await page.fill("#set-host", "http://127.0.0.1:" + modelPort);
  await page.fill("#set-apikey", "sk-fake-daily");
  await page.click("#settings-form button[type=submit]");
  await page.waitForSelector("#settings-msg:text('Settings saved.')");
  must(await page.locator("#settings-msg").evaluate((n) => { const r = n.getBoundingClientRect(); const d = n.closest("dialog").getBoundingClientRect(); return r.top >= d.top && r.bottom <= Math.min(d.bottom, innerHeight); }), "'Settings saved.' is not in view");
  await page.waitForSelector("#secret-names:text('OPENAI_API_KEY')");
  await shot(page, "settings-saved");
  await page.click("#settings-dialog button.close");
  await page.waitForSelector("#first-run", { state: "detached" });

  // 3. Tools out of the box (item 2): the developer builtin is on after the first start, and a
  //    builtin is added from the form, which shows only the fields of the chosen type.
  await page.click("#open-extensions");
  await page.waitForSelector("#ext-list li[data-name=developer] input[role=switch]:checked");
  await page.check("input[name=ext-type][value=builtin]");
  must(await page.locator("#ext-cmd").isHidden() && await page.locator("#ext-uri").isHidden(), "the builtin form shows the command and URL fields");
  await page.selectOption("#ext-builtin", "memory");
  await page.click("#ext-form button[type=submit]");
  await page.waitForSelector("#ext-list li[data-name=memory] input[role=switch]:checked");
  await page.check("input[name=ext-type][value=stdio]");
  must(await page.locator("#ext-uri").isHidden() && await page.locator("#ext-cmd").isVisible(), "the stdio form shows the URL field");
  await shot(page, "builtins");
  await page.click("#ext-dialog button.close");

  // 4. A first session: its header chips say the model; they follow a change made elsewhere.
  await page.click("#new-session");
  await page.fill("#workdir", workdir);
  await page.click("#start-form button[type=submit]");
  await page.waitForSelector("#session-dir:text('" + workdir + "')");
  await page.waitForSelector("#message-input:not([disabled])");
  const first = await page.evaluate(() => localStorage.getItem("gosling-last-session"));
  await page.waitForSelector("#session-model .model:text-is('fake-model')");
  must((await gosling("POST", "/config/upsert", { key: "GOOSE_MODEL", value: "fake-model-2", is_secret: false })).status === 200, "upsert");
  await page.evaluate(() => window.dispatchEvent(new Event("focus")));
  await page.waitForSelector("#session-model .model:text-is('fake-model-2')");
  script.push({ text: "HELLO-FIRST" });
  await sendMessage(page, "Hello, first session.");
  await page.waitForSelector(".msg.assistant >> text=HELLO-FIRST");
  await idle(page);

  // 5. Item 1: while a new session opens (a slow extension: ~3 s), the page shows no session —
  //    the composer is off, no Stop — so nothing typed lands in the previous one.
  const slowScript = path.join(tmp, "slow.py");
  fs.writeFileSync(slowScript, "import time\ntime.sleep(3)\n");
  const slow = { type: "stdio", name: "slowpoke", description: "", cmd: PYTHON, args: [slowScript], envs: {}, env_keys: [], timeout: 10 };
  const added = await gosling("POST", "/config/extensions", { name: "slowpoke", config: slow, enabled: true });
  must(added.status === 200, "slow extension: " + JSON.stringify(added));
  await page.click("#new-session");
  await page.fill("#workdir", workdir);
  await page.click("#start-form button[type=submit]");
  await page.waitForSelector("#log :text-matches('Starting a new session…|Opening session…')");
  must(await page.locator("#message-input").isDisabled(), "the composer is enabled while the new session opens");
  must(await page.locator("#stop-btn").isHidden(), "a Stop is shown while the new session opens");
  must(!(await page.textContent("#log")).includes("HELLO-FIRST"), "the previous session is still shown while the new one opens");
  await shot(page, "opening-session");
  await page.waitForSelector("#message-input:not([disabled])");
  await page.waitForSelector("#ext-results :text('slowpoke')");
  const second = await page.evaluate(() => localStorage.getItem("gosling-last-session"));
  must(second && second !== first, "a new session was not opened");
  //    (item 10) A new session asked for while this one is still empty reuses it.
  const count = (await gosling("GET", "/sessions")).json.sessions.length;
  await page.click("#new-session");
  await page.fill("#workdir", workdir);
  await page.click("#start-form button[type=submit]");
  await page.waitForSelector("#status:text('This session is still empty: it is your new chat.')");
  must((await gosling("GET", "/sessions")).json.sessions.length === count, "an empty session was not reused");
  must((await gosling("DELETE", "/config/extensions/slowpoke")).status === 200, "remove the slow extension");

  // 6. Item 4: a provider that repeats a tool-call id: both calls get a card, live and after a
  //    reload.
  script.push({ tool: "developer__shell", id: "call_same", args: { command: "echo RUN-ONE" } }, { text: "ONE-DONE" });
  await sendMessage(page, "Run the first command.");
  await page.waitForSelector(".msg.assistant >> text=ONE-DONE");
  await idle(page);
  script.push({ tool: "developer__shell", id: "call_same", args: { command: "echo RUN-TWO" } }, { text: "TWO-DONE" });
  await sendMessage(page, "Run the second command.");
  await page.waitForSelector(".msg.assistant >> text=TWO-DONE");
  await idle(page);
  const cardsOf = async () => page.$$eval(".tool", (cs) => cs.map((c) => c.dataset.state + " " + c.textContent));
  let shown = await cardsOf();
  must(shown.length === 2 && shown[0].includes("RUN-ONE") && shown[1].includes("RUN-TWO") && shown.every((c) => c.startsWith("done")), "live cards: " + JSON.stringify(shown));
  await page.reload();
  await page.waitForSelector(".msg.assistant >> text=TWO-DONE");
  shown = await cardsOf();
  must(shown.length === 2 && shown[0].includes("RUN-ONE") && shown[1].includes("RUN-TWO"), "cards after reload: " + JSON.stringify(shown));
  const ownSession = (await gosling("GET", "/sessions/" + second)).json;
  must(JSON.stringify(ownSession.conversation).includes("Run the first command.") && !JSON.stringify((await gosling("GET", "/sessions/" + first)).json.conversation).includes("Run the first command."), "a message landed in the wrong session");

  // 7. Item 6: the session's own mode in the header, and "Always allow" on an approval: the
  //    next call of that tool in this session runs without asking (kept with the session).
  await page.selectOption("#session-mode", "approve");
  await page.waitForSelector("#session-model .mode:text-is('mode: approve')");
  script.push({ tool: "developer__shell", id: "call_a1", args: { command: "echo ALLOWED-ONCE-ASKED" } }, { text: "ASKED-DONE" });
  await sendMessage(page, "Run it with approval.");
  await page.waitForSelector(".ask button:text('Always allow'):not([disabled])");
  await shot(page, "always-allow-asked");
  await page.click(".ask button:text('Always allow'):not([disabled])");
  await page.waitForSelector(".ask :text('runs without asking for the rest of this session')");
  await page.waitForSelector(".msg.assistant >> text=ASKED-DONE");
  await idle(page);
  const asksBefore = await page.locator(".ask").count();
  script.push({ tool: "developer__shell", id: "call_a2", args: { command: "echo NOT-ASKED-AGAIN" } }, { text: "NOT-ASKED-DONE" });
  await sendMessage(page, "Run it again.");
  await page.waitForSelector(".msg.assistant >> text=NOT-ASKED-DONE");
  await idle(page);
  must(await page.locator(".ask").count() === asksBefore, "asked again after Always allow");
  must((await page.textContent("#log")).includes("NOT-ASKED-AGAIN"), "the second call did not run");
  const meta = (await gosling("GET", "/sessions/" + second)).json;
  must(meta.goose_mode === "approve" && JSON.stringify(meta.gosling_always_allowed || "").includes("developer__shell"), "not kept with the session: " + JSON.stringify({ mode: meta.goose_mode, always: meta.gosling_always_allowed }));
  await page.locator(".ask").last().evaluate((n) => n.scrollIntoView({ block: "center" }));
  await shot(page, "always-allow");
  //    Per tool, for every session: the Extensions dialog's tool list sets goose's permission.
  await page.click("#open-extensions");
  await page.click("#ext-list li[data-name=developer] summary");
  //    Another tab sets another tool's level meanwhile (after this page read the levels): the
  //    page sets only its own tool's, through POST /config/permissions, and both stay.
  must((await gosling("POST", "/config/permissions", { tool_permissions: [{ tool_name: "other__tool", permission: "never_allow" }] })).status === 200, "the other tab's change");
  const sent = page.waitForRequest((r) => r.url().endsWith("/config/permissions") && r.method() === "POST");
  await page.selectOption("#ext-list select[data-tool=developer__shell]", "always_allow");
  must(JSON.parse((await sent).postData()).tool_permissions[0].tool_name === "developer__shell", "the page did not set one tool's level");
  await page.waitForSelector("#ext-error:text('developer__shell: always allow.')");
  const perms = (await gosling("GET", "/config")).json.config.tool_permissions;
  must(perms && perms.developer__shell === "always_allow", "tool permission not stored: " + JSON.stringify(perms));
  must(perms.other__tool === "never_allow", "the other tab's level was overwritten: " + JSON.stringify(perms));
  await shot(page, "tool-permission");
  await page.click("#ext-dialog button.close");

  // 8. Item 3: a damaged session (a line that is not JSON added to its file) stays listed and
  //    opens with its good messages, marked; its file is left as it is.
  const file = path.join(tmp, "state", "sessions", first + ".jsonl");
  fs.appendFileSync(file, "this line is not JSON\n");
  const before = fs.readFileSync(file);
  await page.click("#session-list button:has(.name:text-is('Hello, first session.'))");
  await page.waitForSelector("#ext-results :text('This session is damaged')");
  await page.waitForSelector(".msg.assistant >> text=HELLO-FIRST");
  await page.waitForSelector("#session-list .badge:text('damaged')");
  must(await page.locator("#message-input").isDisabled(), "a damaged session takes messages (its file would be written)");
  must(Buffer.compare(before, fs.readFileSync(file)) === 0, "the damaged session's file was changed");
  await shot(page, "damaged-session");

  // 9. Item 7: the secret CLI on the same config (the value from standard input, never shown),
  //    and the page's Settings then names the secret.
  const cli = (args, input) => spawnSync(BIN, args, { env, input: input || "", encoding: "utf8" });
  const set = cli(["secret", "set", "DEMO_TOKEN"], "demo-value-never-shown\n");
  const list = cli(["secret", "list"]);
  const exts = cli(["extensions", "list"]);
  must(set.status === 0 && list.status === 0 && exts.status === 0, "CLI: " + set.stderr + list.stderr + exts.stderr);
  const transcript = "$ printf %s \"$TOKEN\" | gosling secret set DEMO_TOKEN\n" + set.stdout + set.stderr +
    "$ gosling secret list\n" + list.stdout + "$ gosling extensions list\n" + exts.stdout;
  must(!transcript.includes("demo-value-never-shown") && list.stdout.includes("DEMO_TOKEN") && exts.stdout.includes("developer\tbuiltin\ton"), "CLI transcript: " + transcript);
  const term = await ctx.newPage();
  await term.setContent("<body style='margin:0;background:#111;color:#ddd'><pre style='font:15px monospace;padding:16px;white-space:pre-wrap'></pre></body>");
  await term.$eval("pre", (p, t) => { p.textContent = t; }, transcript);
  await term.setViewportSize({ width: 1000, height: 360 });
  await shot(term, "secret-cli");
  await term.close();
  await page.click("#open-settings");
  await page.waitForSelector("#secret-names:text('DEMO_TOKEN')");
  await page.click("#settings-dialog button.close");

  // 10. Sign out ends this browser's sign-in (every tab); a restart would too.
  await page.click("#key-forget");
  await page.waitForSelector("#key-dialog[open]");
  const tab3 = await ctx.newPage();
  await tab3.goto(base + "/");
  await tab3.waitForSelector("#key-dialog[open]");
  await tab3.close();
  //    The key typed once signs in again.
  await page.fill("#key-input", key);
  await page.press("#key-input", "Enter");
  await page.waitForSelector("#key-dialog", { state: "hidden" });

  if (errors.length) throw new Error("page errors: " + errors.join("\n"));
  await ctx.close();
  console.log("daily browser test: ok");
}

main().then(() => process.exit(0), async (e) => {
  console.error("daily browser test FAILED:", e);
  if (currentPage) await shot(currentPage, "FAILED").catch(() => {});
  process.exit(1);
});

// gosling's built-in page: a plain client of the same HTTP API Goose Desktop uses.
// No build step, no inline script (the CSP forbids it). Untrusted text is only ever set via
// textContent, never as HTML. The secret key lives in sessionStorage (this tab only).
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_STORE = "gosling-secret-key";
let sessionId = null;
let turn = null; // AbortController of the running /reply
let lastTools = null; // the session's tools (GET /agent/tools), null without a session
const loadResults = new Map(); // extension name -> ExtensionLoadResult of the last resume
const nameToKey = (n) => n.replace(/\s/g, "").toLowerCase();

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v;
    else if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

function status(msg) { $("status").textContent = msg; }
function key() { return sessionStorage.getItem(KEY_STORE) || ""; }

// `#key=K` (the key itself) or `#login=T` (the one-time token `gosling agent` prints, traded
// once via POST /auth/login). Fragments never reach the server; we drop it from the URL.
async function takeKeyFromFragment() {
  const frag = new URLSearchParams(location.hash.replace(/^#/, ""));
  const k = frag.get("key");
  const login = frag.get("login");
  if (k === null && login === null) return;
  history.replaceState(null, "", location.pathname + location.search);
  if (k !== null) { sessionStorage.setItem(KEY_STORE, k); return; }
  try {
    const r = await fetch("/auth/login", { method: "POST", credentials: "omit", cache: "no-store",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify({ token: login }) });
    const j = await r.json();
    if (r.ok && j.secret_key) sessionStorage.setItem(KEY_STORE, j.secret_key);
    else status(j.message || "The login link did not work; enter the secret key.");
  } catch (e) { status("The login link did not work: " + e.message); }
}

async function api(method, path, body, signal) {
  const headers = { "X-Secret-Key": key() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, {
    method, headers, signal, credentials: "omit", cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!resp.ok) {
    let msg = resp.status + " " + resp.statusText;
    try {
      const t = await resp.text();
      try { const j = JSON.parse(t); msg = j.message || j.error || t; } catch (_) { if (t) msg = t; }
    } catch (_) { /* body unreadable */ }
    const err = new Error(msg);
    err.status = resp.status;
    throw err;
  }
  return resp;
}
async function apiJson(method, path, body) {
  const r = await api(method, path, body);
  const t = await r.text();
  return t ? JSON.parse(t) : null;
}

function showKeyState() {
  $("key-section").className = key() ? "done" : "";
  status(key() ? "Key set." : "Enter the secret key to begin.");
}

// ---------- chat ----------
const msgNodes = new Map(); // message id -> <li>
const toolNodes = new Map(); // tool request id -> <details>

function messageItem(message) {
  const id = message.id;
  if (id && msgNodes.has(id)) return msgNodes.get(id);
  const li = el("li", { class: "msg " + (message.role || "") },
    el("strong", { text: message.role === "assistant" ? "Assistant" : "You" }), ": ");
  if (id) msgNodes.set(id, li);
  $("messages").append(li);
  return li;
}

function toolText(result) {
  if (!result) return "";
  if (result.status === "error") return "Error: " + result.error;
  const v = result.value;
  const content = Array.isArray(v) ? v : (v && v.content) || [];
  return content.map((c) => c.type === "text" ? c.text : "[" + c.type + "]").join("\n");
}

function renderContent(li, message, c) {
  switch (c.type) {
    case "text": {
      let last = li.lastChild;
      if (!(last && last.nodeType === 1 && last.classList.contains("text"))) {
        last = el("span", { class: "text" });
        li.append(last);
      }
      last.textContent += c.text;
      break;
    }
    case "toolRequest": {
      const call = c.toolCall || {};
      const name = call.status === "success" ? call.value.name : "(invalid tool call)";
      const args = call.status === "success" ? JSON.stringify(call.value.arguments || {}, null, 2) : call.error;
      const d = el("details", { class: "tool" },
        el("summary", { text: "Tool call: " + name }),
        el("pre", { text: args }));
      toolNodes.set(c.id, d);
      li.append(d);
      break;
    }
    case "toolResponse": {
      const d = el("details", { class: "tool" },
        el("summary", { text: "Tool result" + (c.toolResult && c.toolResult.status === "error" ? " (error)" : "") }),
        el("pre", { text: toolText(c.toolResult) }));
      const req = toolNodes.get(c.id);
      if (req) { req.append(d); li.remove(); msgNodes.delete(message.id); } else li.append(d);
      break;
    }
    case "actionRequired":
    case "toolConfirmationRequest": {
      const data = c.type === "actionRequired" ? c.data : Object.assign({ actionType: "toolConfirmation" }, c);
      if (data.actionType !== "toolConfirmation") {
        li.append(el("p", { text: "Action required (" + data.actionType + "): not supported in this page." }));
        break;
      }
      li.append(confirmBox(data));
      break;
    }
    case "thinking":
      li.append(el("details", {}, el("summary", { text: "Thinking" }), el("pre", { text: c.thinking })));
      break;
    case "systemNotification":
      li.append(el("p", { class: "note", text: c.msg || "" }));
      break;
    default:
      li.append(el("p", { class: "note", text: "[" + c.type + "]" }));
  }
}

function confirmBox(data) {
  const box = el("div", { class: "confirm", role: "group", "aria-label": "Tool approval" },
    el("p", { text: data.prompt || "Allow tool " + data.toolName + " to run with these arguments?" }),
    el("pre", { text: JSON.stringify(data.arguments || {}, null, 2) }));
  const answer = async (action) => {
    for (const b of box.querySelectorAll("button")) b.disabled = true;
    try {
      const r = await apiJson("POST", "/action-required/tool-confirmation", { id: data.id, action, sessionId });
      if (r && r.status === "unknown") {
        box.append(el("p", { class: "error", text: "Too late: this tool call is no longer waiting (the turn ended or was stopped)." }));
      } else {
        box.append(el("p", { text: action === "allow_once" ? "Allowed." : "Denied." }));
      }
    } catch (e) { box.append(el("p", { class: "error", text: e.message })); }
  };
  const allow = el("button", { type: "button", text: "Allow once" });
  const deny = el("button", { type: "button", text: "Deny" });
  allow.addEventListener("click", () => answer("allow_once"));
  deny.addEventListener("click", () => answer("deny_once"));
  box.append(allow, " ", deny);
  return box;
}

function renderMessage(message) {
  const li = messageItem(message);
  for (const c of message.content || []) renderContent(li, message, c);
}

function handleEvent(ev) {
  switch (ev.type) {
    case "Message": renderMessage(ev.message); break;
    case "Notification": {
      const m = ev.message || {};
      const p = m.params || {};
      let text = m.method || "notification";
      if (p.progress !== undefined) text = "progress " + p.progress + (p.total ? "/" + p.total : "") + (p.message ? " " + p.message : "");
      else if (p.data !== undefined) text = (p.level ? p.level + ": " : "") + (typeof p.data === "string" ? p.data : JSON.stringify(p.data));
      const target = toolNodes.get(ev.request_id);
      const n = el("p", { class: "note", text });
      if (target) target.append(n); else $("messages").append(el("li", { class: "note" }, n));
      break;
    }
    case "Error": $("messages").append(el("li", { class: "msg error", role: "alert", text: "Error: " + ev.error })); break;
    case "Finish": status("Done (" + ev.reason + ")."); break;
    case "UpdateConversation":
      $("messages").replaceChildren(); msgNodes.clear(); toolNodes.clear();
      for (const m of ev.conversation || []) renderMessage(m);
      break;
    default: break; // Ping and unknown types
  }
}

async function readSse(resp) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
      const frame = buf.slice(0, cut);
      buf = buf.slice(cut).replace(/^\r?\n\r?\n/, "");
      const data = frame.split(/\r?\n/).filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      if (!data) continue;
      let ev;
      try { ev = JSON.parse(data); } catch (_) { continue; }
      handleEvent(ev);
      const list = $("messages");
      list.scrollTop = list.scrollHeight;
    }
  }
}

async function send(text) {
  if (!sessionId) { status("Start or resume a session first."); return; }
  const user = { role: "user", created: Math.floor(Date.now() / 1000),
    content: [{ type: "text", text }], metadata: { userVisible: true, agentVisible: true } };
  renderMessage(user);
  turn = new AbortController();
  $("send-btn").disabled = true; $("stop-btn").disabled = false;
  status("Waiting for the reply…");
  try {
    const resp = await api("POST", "/reply", { session_id: sessionId, user_message: user }, turn.signal);
    await readSse(resp);
    if (!$("status").textContent.startsWith("Done")) status("Reply ended.");
  } catch (e) {
    if (e.name === "AbortError") status("Stopped.");
    else $("messages").append(el("li", { class: "msg error", role: "alert", text: "Error: " + e.message }));
  } finally {
    turn = null;
    $("send-btn").disabled = false; $("stop-btn").disabled = true;
    // A prompt left unanswered belongs to a turn that is over now.
    for (const b of $("messages").querySelectorAll(".confirm button:not([disabled])")) b.disabled = true;
  }
}

function setSession(session, results) {
  sessionId = session.id;
  $("session-id").textContent = session.id + " (" + session.working_dir + ")";
  $("messages").replaceChildren(); msgNodes.clear(); toolNodes.clear();
  for (const m of session.conversation || []) renderMessage(m);
  // Prompts in the history belong to turns that are over.
  for (const b of $("messages").querySelectorAll(".confirm button")) b.disabled = true;
  $("messages").scrollTop = $("messages").scrollHeight;
  const box = $("extension-results");
  box.replaceChildren();
  loadResults.clear();
  for (const r of results || []) {
    loadResults.set(r.name, r);
    box.append(el("p", { class: r.success ? "" : "error",
      text: "Extension " + r.name + ": " + (r.success ? "loaded" : "failed: " + (r.error || "")) }));
  }
  refreshTools();
}

async function resume(id) {
  const r = await apiJson("POST", "/agent/resume", { session_id: id, load_model_and_extensions: true });
  setSession(r.session, r.extension_results);
  status("Session " + id + " ready.");
  loadSessions().then(() => { $("session-select").value = id; }, () => {});
}

async function loadSessions() {
  const r = await apiJson("GET", "/sessions");
  const sel = $("session-select");
  sel.replaceChildren();
  for (const s of r.sessions || []) {
    sel.append(el("option", { value: s.id, text: s.id + " — " + s.name + " (" + s.message_count + " messages)" }));
  }
  if (!sel.options.length) sel.append(el("option", { value: "", text: "(no sessions)" }));
}

// ---------- extensions ----------
async function refreshExtensions() {
  const r = await apiJson("GET", "/config/extensions");
  const w = $("ext-warnings");
  w.replaceChildren(...(r.warnings || []).map((t) => el("li", { text: t })));
  const body = $("ext-table").tBodies[0];
  body.replaceChildren();
  for (const ext of r.extensions || []) {
    const toggle = el("button", { type: "button", text: ext.enabled ? "Disable" : "Enable" });
    const remove = el("button", { type: "button", text: "Remove" });
    toggle.addEventListener("click", () => guard(async () => {
      const config = Object.assign({}, ext); delete config.enabled;
      await apiJson("POST", "/config/extensions", { name: ext.name, config, enabled: !ext.enabled });
      if (sessionId) {
        if (!ext.enabled) await api("POST", "/agent/add_extension", { session_id: sessionId, config });
        else await api("POST", "/agent/remove_extension", { session_id: sessionId, name: ext.name });
      }
      await refreshTools();
    }));
    remove.addEventListener("click", () => guard(async () => {
      if (!confirm("Remove extension " + ext.name + "?")) return;
      await api("DELETE", "/config/extensions/" + encodeURIComponent(ext.name));
      if (sessionId) await api("POST", "/agent/remove_extension", { session_id: sessionId, name: ext.name });
      await refreshTools();
    }));
    body.append(el("tr", {},
      el("td", { text: ext.name }), el("td", { text: ext.type }),
      el("td", { text: ext.enabled ? "yes" : "no" }), el("td", {}, sessionCell(ext)), el("td", {}, toggle, " ", remove)));
  }
}

// Whether the extension runs in the current session, its load error, and its tools.
function sessionCell(ext) {
  if (!sessionId || !lastTools) return "no session";
  const prefix = nameToKey(ext.name) + "__";
  const tools = lastTools.filter((t) => t.name.startsWith(prefix));
  const r = loadResults.get(ext.name);
  if (r && !r.success) return el("span", { class: "error", text: "failed: " + (r.error || "") });
  if (!tools.length) return "not running";
  return el("details", {}, el("summary", { text: "running, " + tools.length + " tools" }),
    el("ul", {}, ...tools.map((t) => el("li", {}, el("code", { text: t.name.slice(prefix.length) }), t.description ? " — " + t.description : ""))));
}

async function refreshTools() {
  const list = $("tools-list");
  lastTools = null;
  if (!sessionId) {
    list.replaceChildren(el("li", { text: "(no session)" }));
  } else {
    try {
      const tools = await apiJson("GET", "/agent/tools?session_id=" + encodeURIComponent(sessionId));
      lastTools = tools;
      list.replaceChildren(...tools.map((t) => el("li", {}, el("code", { text: t.name }), " — " + (t.description || ""))));
      if (!tools.length) list.append(el("li", { text: "(no tools)" }));
    } catch (e) { list.replaceChildren(el("li", { class: "error", text: e.message })); }
  }
  await refreshExtensions();
}

function extFormConfig() {
  const name = $("ext-name").value.trim();
  const type = document.querySelector("input[name=ext-type]:checked").value;
  const envKeys = $("ext-envkeys").value.split(",").map((s) => s.trim()).filter(Boolean);
  const timeout = parseInt($("ext-timeout").value, 10) || 300;
  const config = { type, name, description: "", env_keys: envKeys, timeout };
  if (type === "stdio") {
    config.cmd = $("ext-cmd").value.trim();
    config.args = $("ext-args").value.split("\n").map((s) => s.trim()).filter(Boolean);
    config.envs = {};
  } else {
    config.uri = $("ext-uri").value.trim();
    config.headers = {};
    config.envs = {};
  }
  return config;
}

// ---------- install ----------
function describePlan(plan) {
  const sm = plan.summary || {};
  const dl = el("dl", { class: "plan" });
  const row = (k, v) => { if (v !== undefined && v !== null && v !== "") dl.append(el("dt", { text: k }), el("dd", {}, v)); };
  row("Name", plan.name + " (key " + plan.key + ")");
  row("Type", sm.type);
  row("Description", sm.description);
  if (sm.command !== undefined) {
    row("Runs", el("code", { text: [sm.command].concat(sm.args || []).join(" ") }));
    row("Exact argv", el("pre", { text: JSON.stringify([sm.command].concat(sm.args || [])) }));
  }
  row("Connects to", sm.url);
  if ((sm.headers || []).length) row("Sends headers", sm.headers.join(", "));
  if ((sm.env || []).length) {
    row("Environment", el("ul", {}, ...sm.env.map((e) => el("li", {}, el("code", { text: e.name }), e.description ? " — " + e.description : ""))));
  }
  if ((sm.reads || []).length) {
    row("Reads stored secrets", el("ul", {}, ...sm.reads.map((r) => el("li", {}, r.where + " \u2190 ", el("code", { text: r.secret }), r.refused ? " (refused: one of gosling's own secrets)" : r.stored ? " (stored)" : " (not stored yet)"))));
  }
  row("Timeout", sm.timeout !== undefined ? sm.timeout + " s" : undefined);
  row("Installation notes", sm.installation_notes);
  if ((plan.missing_secrets || []).length) row("Missing secrets", plan.missing_secrets.join(", "));
  if ((plan.refused_secrets || []).length) row("Refused (gosling's own secrets, never sent)", plan.refused_secrets.join(", "));
  const box = el("div", {}, dl);
  if ((plan.warnings || []).length) box.append(el("ul", { class: "warnings" }, ...plan.warnings.map((w) => el("li", { text: "Warning: " + w }))));
  box.append(el("details", {}, el("summary", { text: "Full configuration" }), el("pre", { text: JSON.stringify(plan.config, null, 2) })));
  return box;
}

async function checkInstall(link) {
  const out = $("install-plan");
  $("install-error").textContent = "";
  const plan = await apiJson("POST", "/extensions/install", { link, dry_run: true });
  const go = el("button", { type: "button", text: "Install " + plan.name });
  const cancel = el("button", { type: "button", text: "Cancel" });
  out.replaceChildren(el("h3", { text: "This link will install:" }), describePlan(plan), go, " ", cancel);
  cancel.addEventListener("click", () => out.replaceChildren());
  go.addEventListener("click", () => guard(async () => {
    go.disabled = true;
    const done = await apiJson("POST", "/extensions/install", { link, dry_run: false });
    out.replaceChildren(el("p", { text: "Saved " + done.name + (done.enabled ? " (enabled)." : " (disabled until its secrets are set).") }));
    if ((done.refused_secrets || []).length) out.append(el("p", { text: "It stays disabled: " + done.next }));
    else if ((done.missing_secrets || []).length) out.append(secretsForm(done));
    else await afterInstall(done);
  }, $("install-error")));
}

function secretsForm(done) {
  const form = el("form", { class: "secrets" }, el("p", { text: "Provide the missing secrets (write-only):" }));
  const inputs = done.missing_secrets.map((name) => {
    const id = "secret-" + name.replace(/[^A-Za-z0-9_]/g, "_");
    const input = el("input", { id, type: "password", autocomplete: "off", required: "" });
    input.dataset.name = name;
    const about = ((done.summary || {}).env || []).find((e) => e.name === name);
    form.append(el("label", { for: id, text: name + (about && about.description ? " — " + about.description : "") }), input);
    return input;
  });
  form.append(el("button", { type: "submit", text: "Save secrets and enable" }));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    guard(async () => {
      for (const i of inputs) {
        await apiJson("POST", "/config/upsert", { key: i.dataset.name, value: i.value, is_secret: true });
        i.value = "";
      }
      await apiJson("POST", "/config/extensions", { name: done.config.name, config: done.config, enabled: true });
      form.replaceChildren(el("p", { text: "Secrets saved; " + done.name + " enabled." }));
      await afterInstall(done);
    }, $("install-error"));
  });
  return form;
}

async function afterInstall(done) {
  if (sessionId) {
    try { await api("POST", "/agent/add_extension", { session_id: sessionId, config: done.config }); }
    catch (e) { $("install-error").textContent = "Saved, but activating in this session failed: " + e.message; }
  }
  await refreshTools();
}

// ---------- settings ----------
const HOST_KEYS = { openai: "OPENAI_HOST", anthropic: "ANTHROPIC_HOST", ollama: "OLLAMA_HOST" };
const API_KEYS = { openai: "OPENAI_API_KEY", anthropic: "ANTHROPIC_API_KEY" };

async function upsert(k, value, isSecret) {
  await apiJson("POST", "/config/upsert", { key: k, value, is_secret: isSecret });
}

// ---------- wiring ----------
async function guard(f, errEl) {
  try { await f(); }
  catch (e) {
    if (e.status === 401) { status("The secret key was refused; enter it again."); $("key-section").className = ""; }
    (errEl || $("status")).textContent = e.message;
  }
}

function on(id, ev, f) { $(id).addEventListener(ev, f); }
function onSubmit(id, f, errEl) {
  on(id, "submit", (e) => { e.preventDefault(); guard(f, errEl); });
}

async function init() {
  await takeKeyFromFragment();
  if (key()) showKeyState();
  else if (!$("status").textContent) showKeyState();
  onSubmit("key-form", async () => {
    sessionStorage.setItem(KEY_STORE, $("key-input").value);
    $("key-input").value = "";
    try {
      await apiJson("GET", "/config/extensions"); // checks the key
    } catch (e) {
      if (e.status === 401) sessionStorage.removeItem(KEY_STORE);
      throw e;
    }
    showKeyState();
    await Promise.all([refreshExtensions(), loadSessions()]);
  });
  on("key-forget", "click", () => { sessionStorage.removeItem(KEY_STORE); showKeyState(); });
  onSubmit("start-form", async () => {
    const s = await apiJson("POST", "/agent/start", { working_dir: $("workdir").value.trim() });
    status("Loading extensions…");
    await resume(s.id);
  });
  onSubmit("resume-form", async () => {
    const id = $("session-select").value;
    if (id) await resume(id);
  });
  on("sessions-refresh", "click", () => guard(loadSessions));
  onSubmit("send-form", async () => {
    const t = $("message-input").value;
    if (!t.trim() || turn) return;
    $("message-input").value = "";
    await send(t);
  });
  on("message-input", "keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); $("send-form").requestSubmit(); }
  });
  on("stop-btn", "click", () => { if (turn) turn.abort(); });
  on("ext-refresh", "click", () => guard(refreshTools));
  on("tools-refresh", "click", () => guard(refreshTools));
  onSubmit("ext-form", async () => {
    $("ext-error").textContent = "";
    const config = extFormConfig();
    await apiJson("POST", "/config/extensions", { name: config.name, config, enabled: true });
    if (sessionId && $("ext-session").checked) await api("POST", "/agent/add_extension", { session_id: sessionId, config });
    $("ext-form").reset();
    status("Added extension " + config.name + ".");
    await refreshTools();
  }, $("ext-error"));
  onSubmit("install-form", () => checkInstall($("install-link").value.trim()), $("install-error"));
  onSubmit("settings-form", async () => {
    $("settings-msg").textContent = "Saving…";
    const provider = $("set-provider").value;
    const model = $("set-model").value.trim();
    const host = $("set-host").value.trim();
    const apiKey = $("set-apikey").value;
    const mode = $("set-mode").value;
    if (mode) await upsert("GOOSE_MODE", mode, false);
    if (host && !HOST_KEYS[provider]) throw new Error("Choose a provider to set its host.");
    if (apiKey && !API_KEYS[provider]) throw new Error("Choose openai or anthropic to set an API key.");
    if (provider) await upsert("GOOSE_PROVIDER", provider, false);
    if (model) await upsert("GOOSE_MODEL", model, false);
    if (host) {
      if (!HOST_KEYS[provider]) throw new Error("Choose a provider to set its host.");
      await upsert(HOST_KEYS[provider], host, false);
    }
    if (apiKey) {
      if (!API_KEYS[provider]) throw new Error("Choose openai or anthropic to set an API key.");
      await upsert(API_KEYS[provider], apiKey, true);
      $("set-apikey").value = "";
    }
    $("settings-form").reset();
    $("settings-msg").textContent = "Settings saved.";
  }, $("settings-msg"));
  onSubmit("secret-form", async () => {
    const name = $("secret-name").value.trim();
    if (!name) throw new Error("Give the secret a name.");
    await upsert(name, $("secret-value").value, true);
    $("secret-value").value = "";
    $("settings-msg").textContent = "Secret " + name + " saved.";
  }, $("settings-msg"));
  if (key()) guard(async () => { await refreshExtensions(); await loadSessions(); });
}

document.addEventListener("DOMContentLoaded", init);

// gosling's web page: plain DOM, no build step, talks only to this server's API with the
// secret key in the X-Secret-Key header. The key lives in sessionStorage (this tab only).
"use strict";

const $ = (id) => document.getElementById(id);
let key = sessionStorage.getItem("gosling-key") || "";
let sessionId = null;
let abort = null;

function say(text) { $("status").textContent = text; }

async function api(method, path, body) {
  const init = { method, headers: { "X-Secret-Key": key } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = text; }
  if (!r.ok) {
    const msg = data && data.message ? data.message : r.status + " " + r.statusText;
    throw new Error(msg);
  }
  return data;
}

function show(loggedIn) {
  $("login").hidden = loggedIn;
  for (const id of ["chat", "extensions", "install", "settings"]) $(id).hidden = !loggedIn;
}

async function login(candidate) {
  key = candidate;
  try {
    await api("GET", "/config/extensions");
    sessionStorage.setItem("gosling-key", key);
    show(true);
    say("Connected.");
    await Promise.all([loadSessions(), loadExtensions()]);
  } catch (e) {
    key = "";
    show(false);
    say("That key did not work: " + e.message);
  }
}

// A one-time login link (#login=TOKEN) is traded for the key once; the fragment never
// reaches the server's logs and is removed from the address bar.
async function fromLink() {
  const m = location.hash.match(/login=([0-9a-f]+)/);
  if (!m) return false;
  history.replaceState(null, "", location.pathname);
  const r = await fetch("/auth/login", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ token: m[1] }) });
  if (!r.ok) { say("The login link was already used or has expired; enter the key."); return false; }
  await login((await r.json()).secret_key);
  return true;
}

// ---- sessions and chat ----

async function loadSessions() {
  const data = await api("GET", "/sessions");
  const sel = $("sessions");
  sel.textContent = "";
  sel.append(new Option("—", ""));
  for (const s of data.sessions) sel.append(new Option(s.id + " · " + s.name + " · " + s.working_dir, s.id));
}

async function useSession(id) {
  const r = await api("POST", "/agent/resume", { session_id: id, load_model_and_extensions: true });
  sessionId = id;
  const failed = (r.extension_results || []).filter((x) => !x.success);
  $("session-info").textContent = "Session " + id + " in " + r.session.working_dir + (failed.length ? " — failed to start: " + failed.map((f) => f.name + ": " + f.error).join("; ") : "");
  $("messages").textContent = "";
  for (const m of r.session.conversation || []) render(m);
  await loadTools();
}

function bubble(msg) {
  let el = msg.id ? document.querySelector('[data-id="' + CSS.escape(msg.id) + '"]') : null;
  if (!el) {
    el = document.createElement("article");
    el.className = "msg " + msg.role;
    if (msg.id) el.dataset.id = msg.id;
    const who = document.createElement("h3");
    who.textContent = msg.role === "assistant" ? "gosling" : "you";
    el.append(who);
    $("messages").append(el);
  }
  return el;
}

function details(summary, body) {
  const d = document.createElement("details");
  const s = document.createElement("summary");
  s.textContent = summary;
  const pre = document.createElement("pre");
  pre.textContent = typeof body === "string" ? body : JSON.stringify(body, null, 2);
  d.append(s, pre);
  return d;
}

function render(msg) {
  const el = bubble(msg);
  for (const c of msg.content || []) {
    if (c.type === "text") {
      let p = el.querySelector("p.text:last-of-type");
      if (!p || el.lastElementChild !== p) { p = document.createElement("p"); p.className = "text"; el.append(p); }
      p.textContent += c.text;
    } else if (c.type === "toolRequest" || c.type === "frontendToolRequest") {
      const call = c.toolCall && c.toolCall.value ? c.toolCall.value : c.toolCall;
      el.append(details("Tool call: " + (call && call.name ? call.name : "?"), call));
    } else if (c.type === "toolResponse") {
      const r = c.toolResult || {};
      const body = r.status === "success" ? (r.value.content || []).map((x) => x.text || JSON.stringify(x)).join("\n") : r.error;
      el.append(details("Tool result" + (r.status === "success" ? "" : " (error)"), body));
    } else if (c.type === "actionRequired" && c.data && c.data.actionType === "toolConfirmation") {
      el.append(confirmPrompt(c.data));
    }
  }
}

function confirmPrompt(data) {
  const box = document.createElement("div");
  box.className = "confirm";
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", "Allow " + data.toolName + "?");
  const p = document.createElement("p");
  p.textContent = "Allow " + data.toolName + " to run with " + JSON.stringify(data.arguments) + "?";
  box.append(p);
  for (const [label, action] of [["Allow", "allow_once"], ["Deny", "deny_once"]]) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.addEventListener("click", async () => {
      box.querySelectorAll("button").forEach((x) => { x.disabled = true; });
      try { await api("POST", "/action-required/tool-confirmation", { id: data.id, action, sessionId }); p.textContent += " → " + label.toLowerCase(); }
      catch (e) { p.textContent += " (" + e.message + ")"; }
    });
    box.append(b);
  }
  return box;
}

async function send(text) {
  const user = { role: "user", created: Math.floor(Date.now() / 1000), content: [{ type: "text", text }], metadata: { userVisible: true, agentVisible: true } };
  render(Object.assign({ id: "local-" + Date.now() }, user));
  abort = new AbortController();
  $("stop").disabled = false;
  $("send").disabled = true;
  try {
    const r = await fetch("/reply", { method: "POST", signal: abort.signal, headers: { "X-Secret-Key": key, "Content-Type": "application/json" }, body: JSON.stringify({ session_id: sessionId, user_message: user }) });
    if (!r.ok) throw new Error((await r.text()) || r.statusText);
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (frame.startsWith("data: ")) event(JSON.parse(frame.slice(6)));
      }
    }
  } catch (e) {
    if (e.name !== "AbortError") say("Reply failed: " + e.message);
    else say("Stopped.");
  } finally {
    abort = null;
    $("stop").disabled = true;
    $("send").disabled = false;
  }
}

function event(ev) {
  if (ev.type === "Message") render(ev.message);
  else if (ev.type === "Error") { const p = document.createElement("p"); p.className = "error"; p.textContent = "Error: " + ev.error; $("messages").append(p); }
  else if (ev.type === "Notification") say("Progress: " + JSON.stringify(ev.message.params));
  else if (ev.type === "Finish") say("Done.");
}

async function loadTools() {
  const list = $("tools");
  list.textContent = "";
  if (!sessionId) return;
  try {
    for (const t of await api("GET", "/agent/tools?session_id=" + encodeURIComponent(sessionId))) {
      const li = document.createElement("li");
      li.textContent = t.name + (t.description ? " — " + t.description : "");
      list.append(li);
    }
  } catch (e) { say("Tools: " + e.message); }
}

// ---- extensions ----

async function loadExtensions() {
  const data = await api("GET", "/config/extensions");
  const w = $("warnings");
  w.textContent = "";
  for (const text of data.warnings || []) { const li = document.createElement("li"); li.textContent = text; w.append(li); }
  const body = $("ext-list");
  body.textContent = "";
  for (const e of data.extensions) {
    const tr = document.createElement("tr");
    const runs = e.cmd ? [e.cmd].concat(e.args || []).join(" ") : (e.uri || "");
    for (const v of [e.name, e.type, runs, e.enabled ? "yes" : "no"]) { const td = document.createElement("td"); td.textContent = v; tr.append(td); }
    const td = document.createElement("td");
    const toggle = document.createElement("button");
    toggle.type = "button";
    toggle.textContent = e.enabled ? "Disable" : "Enable";
    toggle.addEventListener("click", () => setEnabled(e, !e.enabled));
    const rm = document.createElement("button");
    rm.type = "button";
    rm.textContent = "Remove";
    rm.addEventListener("click", async () => { await api("DELETE", "/config/extensions/" + encodeURIComponent(e.name)); await loadExtensions(); });
    td.append(toggle, rm);
    tr.append(td);
    body.append(tr);
  }
}

async function setEnabled(entry, enabled) {
  const config = Object.assign({}, entry);
  delete config.enabled;
  try {
    await api("POST", "/config/extensions", { name: entry.name, enabled, config });
    if (enabled && sessionId) await api("POST", "/agent/add_extension", { session_id: sessionId, config });
    say(entry.name + (enabled ? " enabled." : " disabled."));
  } catch (e) { say(entry.name + ": " + e.message); }
  await loadExtensions();
  await loadTools();
}

// ---- wiring ----

document.addEventListener("DOMContentLoaded", async () => {
  $("login-form").addEventListener("submit", (e) => { e.preventDefault(); login($("key").value); });
  $("session-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const s = await api("POST", "/agent/start", { working_dir: $("working-dir").value });
      await useSession(s.id);
      await loadSessions();
    } catch (err) { say("Start failed: " + err.message); }
  });
  $("resume").addEventListener("click", async () => { const id = $("sessions").value; if (id) { try { await useSession(id); } catch (err) { say(err.message); } } });
  $("send-form").addEventListener("submit", (e) => {
    e.preventDefault();
    if (!sessionId) { say("Start or resume a session first."); return; }
    const text = $("prompt").value;
    $("prompt").value = "";
    send(text);
  });
  $("stop").addEventListener("click", () => { if (abort) abort.abort(); });
  $("add-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const type = $("add-type").value;
    const name = $("add-name").value;
    const config = type === "stdio"
      ? { type, name, description: "", cmd: $("add-cmd").value, args: $("add-args").value.split("\n").filter((x) => x) }
      : { type, name, description: "", uri: $("add-cmd").value };
    try {
      await api("POST", "/config/extensions", { name, enabled: true, config });
      $("add-result").textContent = "Added " + name + ".";
      if (sessionId) await api("POST", "/agent/add_extension", { session_id: sessionId, config });
    } catch (err) { $("add-result").textContent = "Not added: " + err.message; }
    await loadExtensions();
    await loadTools();
  });
  let plan = null;
  $("install-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    $("install-result").textContent = "";
    $("secrets-form").hidden = true;
    try {
      plan = await api("POST", "/extensions/install", { link: $("link").value, dry_run: true });
      $("install-plan").textContent = "";
      $("install-plan").append(details("This will install " + plan.name + " (" + plan.config.type + ")", plan.summary));
      $("install-plan").querySelector("details").open = true;
      $("install-confirm").hidden = false;
    } catch (err) { $("install-plan").textContent = "Refused: " + err.message; $("install-confirm").hidden = true; }
  });
  $("install-confirm").addEventListener("click", async () => {
    try {
      const r = await api("POST", "/extensions/install", { link: $("link").value, dry_run: false });
      $("install-confirm").hidden = true;
      plan = r;
      if (r.missing_secrets.length) {
        const box = $("secret-fields");
        box.textContent = "";
        for (const name of r.missing_secrets) {
          const label = document.createElement("label");
          label.textContent = name;
          label.htmlFor = "secret-" + name;
          const input = document.createElement("input");
          input.type = "password";
          input.id = "secret-" + name;
          input.dataset.secret = name;
          input.autocomplete = "off";
          input.required = true;
          box.append(label, input);
        }
        $("secrets-form").hidden = false;
        $("install-result").textContent = "Saved, not enabled yet: " + r.missing_secrets.join(", ") + " missing.";
      } else {
        $("install-result").textContent = "Installed " + r.name + ".";
      }
      await loadExtensions();
    } catch (err) { $("install-result").textContent = "Not installed: " + err.message; }
  });
  $("secrets-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      for (const input of document.querySelectorAll("#secret-fields input")) {
        await api("POST", "/config/upsert", { key: input.dataset.secret, value: input.value, is_secret: true });
        input.value = "";
      }
      await api("POST", "/config/extensions", { name: plan.name, enabled: true, config: plan.config });
      if (sessionId) await api("POST", "/agent/add_extension", { session_id: sessionId, config: plan.config });
      $("secrets-form").hidden = true;
      $("install-result").textContent = "Secrets saved; " + plan.name + " is enabled.";
    } catch (err) { $("install-result").textContent = "Could not enable: " + err.message; }
    await loadExtensions();
    await loadTools();
  });
  $("settings-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const provider = $("provider").value;
    const hostVar = { openai: "OPENAI_HOST", ollama: "OLLAMA_HOST", anthropic: "ANTHROPIC_HOST" }[provider];
    const keyVar = { openai: "OPENAI_API_KEY", anthropic: "ANTHROPIC_API_KEY" }[provider];
    try {
      await api("POST", "/config/upsert", { key: "GOOSE_PROVIDER", value: provider, is_secret: false });
      if ($("model").value) await api("POST", "/config/upsert", { key: "GOOSE_MODEL", value: $("model").value, is_secret: false });
      if ($("host").value) await api("POST", "/config/upsert", { key: hostVar, value: $("host").value, is_secret: false });
      if ($("api-key").value && keyVar) { await api("POST", "/config/upsert", { key: keyVar, value: $("api-key").value, is_secret: true }); $("api-key").value = ""; }
      $("settings-result").textContent = "Saved.";
    } catch (err) { $("settings-result").textContent = "Not saved: " + err.message; }
  });
  if (!(await fromLink())) {
    if (key) await login(key);
    else show(false);
  }
});

// gosling's page: a client of Desktop's session API. No build step, no inline script (CSP);
// outside text only becomes text nodes. Sign-in: an HttpOnly cookie (POST /auth/login).
"use strict";

const $ = (id) => document.getElementById(id);
const DIRS_STORE = "gosling-recent-dirs";
const LONG_RESULT = 1200;
const md = () => window.goslingMarkdown;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
}
// "… needs sign-in: open URL …" becomes a "Sign in" link (http(s) only, new tab).
function signInLink(error) {
  const m = /needs sign-in: open (\S+) in a browser/.exec(String(error || ""));
  if (!m || !/^https?:\/\//i.test(m[1])) return null;
  return el("a", { class: "sign-in", href: m[1], target: "_blank", rel: "noopener noreferrer", text: "Sign in" });
}
function button(text, f, attrs) {
  const b = el("button", Object.assign({ type: "button", text }, attrs || {}));
  b.addEventListener("click", f);
  return b;
}
function status(msg) { $("status").textContent = msg || ""; }
let signedInNow = false;
function uuid() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40; b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, "0")).join("");
  return x.slice(0, 8) + "-" + x.slice(8, 12) + "-" + x.slice(12, 16) + "-" + x.slice(16, 20) + "-" + x.slice(20);
}

// -- HTTP
async function api(method, path, body, signal, extraHeaders) {
  // The cookie goes along; the header marks the page's own requests.
  const headers = Object.assign({ "X-Gosling-Page": "1" }, extraHeaders || {});
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, signal, credentials: "same-origin", cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body) });
  if (!resp.ok) {
    let msg = resp.status + " " + resp.statusText;
    try {
      const t = await resp.text();
      try { const j = JSON.parse(t); msg = j.message || j.error || t; } catch (_) { if (t) msg = t; }
    } catch (_) { /* body unreadable */ }
    const err = new Error(msg);
    err.status = resp.status;
    if (resp.status === 401) askKey("Not signed in (the server restarted, or the sign-in ended or was signed out): open the sign-in link gosling printed, or enter the secret key.");
    throw err;
  }
  return resp;
}
async function apiJson(method, path, body) {
  const t = await (await api(method, path, body)).text();
  return t ? JSON.parse(t) : null;
}
async function guard(f, errEl) {
  if (errEl) errEl.textContent = "";
  try { await f(); } catch (e) { (errEl || $("status")).textContent = e.message; }
}

// -- sign in
// `#key=K` or `#login=T` (the printed one-time token) → POST /auth/login; dropped from the URL.
async function login(body) {
  const r = await fetch("/auth/login", { method: "POST", credentials: "same-origin", cache: "no-store",
    headers: { "Content-Type": "application/json", "X-Gosling-Page": "1" }, body: JSON.stringify(body) });
  let j = {};
  try { j = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) throw new Error(j.message || r.status + " " + r.statusText);
  signedInNow = true;
}
async function takeKeyFromFragment() {
  const frag = new URLSearchParams(location.hash.replace(/^#/, ""));
  const k = frag.get("key");
  const token = frag.get("login");
  if (k === null && token === null) return;
  history.replaceState(null, "", location.pathname + location.search);
  try { await login(k !== null ? { secret_key: k } : { token }); } catch (e) {
    $("key-error").textContent = (k !== null ? "The key in the link did not work: " : "The login link did not work: ") + e.message;
  }
}
// Whether this browser is signed in (its cookie), without a failed request.
async function checkSignedIn() {
  try {
    const r = await fetch("/auth/login", { credentials: "same-origin", cache: "no-store", headers: { "X-Gosling-Page": "1" } });
    signedInNow = r.ok && (await r.json()).signed_in === true;
  } catch (_) { signedInNow = false; }
  return signedInNow;
}
function askKey(msg) {
  signedInNow = false;
  if (msg) $("key-error").textContent = msg;
  if (!$("key-dialog").open) $("key-dialog").showModal();
}

// -- sessions
let sessions = [];
let cur = null; // { id, working_dir, name }
// Sessions whose messages say the search box's text (GET /sessions/search).
let said = {}, searchT;
function searchSaid() {
  clearTimeout(searchT);
  const q = $("session-search").value.trim();
  if (q) searchT = setTimeout(() => guard(async () => {
    const r = await api("GET", "/sessions/search?limit=50&query=" + encodeURIComponent(q));
    said = { q: q.toLowerCase(), ids: new Set((await r.json()).map((x) => x.id)), part: r.headers.get("X-Search-Complete") === "false" };
    renderSessions();
  }), 200);
}
function renderSessions() {
  const q = $("session-search").value.trim().toLowerCase();
  const list = $("session-list");
  list.replaceChildren();
  const shown = sessions.filter((s) => !q || (s.name || "").toLowerCase().includes(q) || s.id.includes(q) || (said.q === q && said.ids.has(s.id)));
  for (const s of shown) {
    const when = s.updated_at ? new Date(s.updated_at) : null;
    const b = button("", () => guard(() => openSession(s.id)), { "aria-current": cur && cur.id === s.id ? "true" : "false" });
    b.append(el("span", { class: "name", text: s.name || s.id }, s.gosling_damaged ? el("span", { class: "badge failed", text: "damaged" }) : null),
      el("span", { class: "meta", text: (when && !isNaN(when) ? when.toLocaleString() + " · " : "") + (s.message_count || 0) + " messages · " + (s.working_dir || "") }));
    list.append(el("li", {}, b));
  }
  if (!shown.length) list.append(el("li", { class: "muted note", text: q ? "No session matches." : "No sessions yet." }));
  if (said.q === q && said.part) list.append(el("li", { class: "muted note", text: "Only the newest were searched; search again for more." }));
}
async function loadSessions() {
  const r = await apiJson("GET", "/sessions");
  sessions = (r.sessions || []).slice().sort((a, b) => String(b.updated_at || "").localeCompare(String(a.updated_at || "")));
  renderSessions();
}

function recentDirs() { try { return JSON.parse(localStorage.getItem(DIRS_STORE)) || []; } catch (_) { return []; } }
function rememberDir(d) { localStorage.setItem(DIRS_STORE, JSON.stringify([d].concat(recentDirs().filter((x) => x !== d)).slice(0, 8))); }
function openNewDialog() {
  const dirs = recentDirs();
  $("recent-dirs").replaceChildren(...dirs.map((d) => el("option", { value: d })));
  $("recent-list").replaceChildren(...dirs.map((d) => el("li", {}, button(d, () => { $("workdir").value = d; $("workdir").focus(); }))));
  if (!$("workdir").value && dirs.length) $("workdir").value = dirs[0];
  $("start-error").textContent = "";
  $("new-dialog").showModal();
}

// -- conversation state
let stored = new Set(); // message ids loaded from the saved conversation
let streamed = new Set(); // message ids rebuilt from the event stream in this page
const msgs = new Map(); // message id -> { node, segs: [{text, el}] }
const cards = new Map(); // tool request id -> card
const asks = new Map(); // action id -> { box, rid }
let active = new Set(); // request ids running in this session
let lastSeq = 0;
let follower = null; // AbortController of the event stream
let replaying = false; // true from a fresh connect until its second ping (the replay burst)
let stick = true; // keep the log scrolled to the end while the user has not scrolled up
let streamCtl = null; // AbortController of the current events request
let wake = null; // ends the reconnect wait early (back online)

function resetLog() {
  $("log").replaceChildren();
  stored = new Set(); streamed = new Set();
  msgs.clear(); cards.clear(); asks.clear();
}
function scrollDown() {
  const log = $("log");
  if (stick) log.scrollTop = log.scrollHeight;
}

function msgEntry(message) {
  const id = message.id || uuid();
  let m = msgs.get(id);
  if (!m) {
    m = { node: el("article", { class: "msg " + (message.role === "user" ? "user" : "assistant"),
      "aria-label": message.role === "user" ? "You" : "gosling" }), segs: [], pending: false, created: message.created, role: message.role };
    msgs.set(id, m);
    $("log").append(m.node);
  }
  return m;
}
function drawSeg(seg, plain) {
  if (plain) { seg.el.textContent = seg.text; return; }
  seg.el.replaceChildren(md().render(seg.text));
}
function appendText(message, text) {
  const m = msgEntry(message);
  const user = message.role === "user";
  let seg = m.segs[m.segs.length - 1];
  if (!seg || seg.el !== m.node.lastChild) {
    seg = { text: "", el: el("div", { class: user ? "" : "md" }) };
    m.segs.push(seg);
    m.node.append(seg.el);
  }
  seg.text += text;
  if (user) { drawSeg(seg, true); return; }
  // At most once a frame while text streams (a timer in a hidden tab).
  if (!seg.queued) {
    seg.queued = true;
    const draw = () => { if (!seg.queued) return; seg.queued = false; drawSeg(seg); scrollDown(); };
    if (document.hidden) setTimeout(draw, 50); else { requestAnimationFrame(draw); setTimeout(draw, 250); }
  }
}

function toolResultParts(result) {
  if (!result) return { text: "", images: [], failed: false };
  if (result.status === "error") return { text: String(result.error || "error"), images: [], failed: true };
  const v = result.value;
  const content = Array.isArray(v) ? v : (v && v.content) || [];
  const images = [];
  const texts = [];
  for (const c of content) {
    if (c.type === "text") texts.push(c.text);
    else if (c.type === "image" && /^image\/(png|jpeg|gif|webp)$/.test(c.mimeType || "") && typeof c.data === "string") images.push(c);
    else if (c.type === "resource" && c.resource) texts.push(c.resource.text || "[resource " + (c.resource.uri || "") + "]");
    else texts.push("[" + c.type + "]");
  }
  return { text: texts.join("\n"), images, failed: !!(v && v.isError) };
}

// A reused tool-call id: each message gets its own card; the map points at the newest.
function toolCard(id, call, parent) {
  let card = cards.get(id);
  if (card && parent.contains(card)) return card;
  const ok = call && call.status === "success";
  const name = ok ? call.value.name : "(invalid tool call)";
  const [ext, tool] = name.includes("__") ? [name.split("__")[0], name.split("__").slice(1).join("__")] : ["", name];
  const state = el("span", { class: "state", text: "running" });
  const body = el("div", { class: "body" },
    el("div", { class: "note", text: "Arguments" }),
    el("pre", { class: "args", text: ok ? JSON.stringify(call.value.arguments || {}, null, 2) : String(call && call.error) }));
  card = el("details", { class: "tool", "data-state": ok ? "running" : "failed", "data-id": id },
    el("summary", {}, el("span", { class: "tname", text: tool }), ext ? el("span", { class: "muted", text: ext }) : null, state), body);
  if (!ok) state.textContent = "failed";
  card.stateEl = state; card.body = body;
  cards.set(id, card);
  parent.append(card);
  return card;
}
function setCardState(card, s) { card.dataset.state = s; card.stateEl.textContent = s; }
function toolResult(id, result) {
  const card = cards.get(id);
  if (!card) return false;
  const r = toolResultParts(result);
  setCardState(card, r.failed ? "failed" : "done");
  const old = card.body.querySelector(".result");
  if (old) old.remove();
  const box = el("div", { class: "result" });
  const pre = el("pre", { text: r.text || "(no text)" });
  if (r.text.length > LONG_RESULT || r.text.split("\n").length > 16) {
    box.append(el("details", {}, el("summary", { text: "Result (" + r.text.length + " characters)" }), pre));
  } else box.append(el("div", { class: "note", text: r.failed ? "Error" : "Result" }), pre);
  for (const img of r.images) box.append(el("img", { src: "data:" + img.mimeType + ";base64," + img.data, alt: "Image from " + card.querySelector(".tname").textContent }));
  card.body.append(box);
  return true;
}

function confirmBox(data, rid) {
  const box = el("div", { class: "ask", role: "group", "aria-label": "Tool approval" },
    el("p", { text: data.prompt || "Allow " + data.toolName + " to run with these arguments?" }),
    el("pre", { text: JSON.stringify(data.arguments || {}, null, 2) }));
  const card = cards.get(data.id);
  if (card) setCardState(card, "waiting");
  const answer = (action) => guard(async () => {
    for (const b of box.querySelectorAll("button")) b.disabled = true;
    const r = await apiJson("POST", "/action-required/tool-confirmation", { id: data.id, action, sessionId: cur.id, principalType: "Tool" });
    if (r && r.status === "unknown") box.append(el("p", { class: "error", text: "Too late: " + (r.message || "this tool call is no longer waiting.") }));
    else {
      const allowed = action === "allow_once" || action === "always_allow";
      box.append(el("p", { class: "note", text: action === "always_allow" ? "Allowed; " + data.toolName + " runs without asking for the rest of this session." : allowed ? "Allowed." : "Denied." }));
      if (card && card.dataset.state === "waiting") setCardState(card, allowed ? "running" : "failed");
    }
  }, null);
  const acts = el("div", { class: "actions" },
    button("Allow once", () => answer("allow_once"), { class: "primary" }),
    button("Always allow", () => answer("always_allow"), { title: "Allow " + (data.toolName || "this tool") + " without asking again in this session" }),
    button("Deny", () => answer("deny_once")));
  box.append(acts);
  asks.set(data.id, { box, rid });
  return box;
}

function elicitForm(data, rid) {
  const schema = data.requested_schema || {};
  const props = schema.properties || {};
  const required = new Set(schema.required || []);
  const form = el("form", { class: "ask", "aria-label": "Request for information" }, el("p", { text: data.message || "An extension asks for information." }));
  const fields = [];
  for (const [name, p] of Object.entries(props)) {
    const id = "el-" + data.id + "-" + name;
    let label = el("label", { for: id, text: (p.title || name) + (required.has(name) ? " *" : "") });
    let input;
    const choices = Array.isArray(p.enum) ? p.enum.map((v, k) => [String(v), (p.enumNames && p.enumNames[k]) || String(v)])
      : Array.isArray(p.oneOf) ? p.oneOf.filter((o) => o && o.const !== undefined).map((o) => [String(o.const), o.title || String(o.const)]) : null;
    const items = p.type === "array" && p.items ? (p.items.enum ? p.items.enum.map((v) => [String(v), String(v)])
      : (p.items.anyOf || p.items.oneOf || []).filter((o) => o && o.const !== undefined).map((o) => [String(o.const), o.title || String(o.const)])) : null;
    if (items) {
      input = el("fieldset", { id, class: "multi" }, el("legend", { class: "sr-only", text: p.title || name }),
        ...items.map(([v, t]) => {
          const box = el("input", { type: "checkbox", value: v });
          box.checked = Array.isArray(p.default) && p.default.map(String).includes(v);
          return el("label", { class: "inline" }, box, t);
        }));
      label = el("p", { class: "label", text: (p.title || name) + (required.has(name) ? " *" : "") });
    } else if (choices) {
      input = el("select", { id }, ...choices.map(([v, t]) => el("option", { value: v, text: t })));
      if (p.default !== undefined) input.value = String(p.default);
    } else if (p.type === "boolean") {
      input = el("input", { id, type: "checkbox" });
      if (p.default === true) input.checked = true;
      label = el("label", { class: "inline" }, input, (p.title || name) + (required.has(name) ? " *" : ""));
    } else {
      const t = p.type === "number" || p.type === "integer" ? "number" : p.format === "email" ? "email" : p.format === "uri" ? "url" : p.format === "date" ? "date" : "text";
      input = el("input", { id, type: t, required: required.has(name), min: p.minimum, max: p.maximum,
        step: p.type === "number" ? "any" : undefined, minlength: p.minLength, maxlength: p.maxLength });
      if (p.default !== undefined) input.value = String(p.default);
    }
    form.append(label);
    if (!label.contains(input)) form.append(input);
    if (p.description) form.append(el("div", { class: "note", text: p.description }));
    fields.push({ name, p, input });
  }
  const send = (userData) => guard(async () => {
    for (const b of form.querySelectorAll("button, input, select")) b.disabled = true;
    await apiJson("POST", "/sessions/" + cur.id + "/reply", { request_id: uuid(), user_message: {
      role: "user", created: Math.floor(Date.now() / 1000), id: uuid(),
      content: [{ type: "actionRequired", data: { actionType: "elicitationResponse", id: data.id, user_data: userData } }],
      metadata: { userVisible: false, agentVisible: false } } });
    form.append(el("p", { class: "note", text: userData ? "Sent." : "Declined." }));
  }, null);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const out = {};
    for (const f of fields) {
      if (f.input.tagName === "FIELDSET") out[f.name] = [...f.input.querySelectorAll("input:checked")].map((b) => b.value);
      else if (f.p.type === "boolean") out[f.name] = f.input.checked;
      else if (f.input.value === "") continue;
      else if (f.p.type === "number" || f.p.type === "integer") out[f.name] = Number(f.input.value);
      else out[f.name] = f.input.value;
    }
    send(out);
  });
  form.append(el("div", { class: "actions" }, el("button", { type: "submit", class: "primary", text: "Send" }), button("Decline", () => send(null))));
  asks.set(data.id, { box: form, rid });
  return form;
}

function renderContent(message, c, rid, live) {
  switch (c.type) {
    case "text": if (c.text) appendText(message, c.text); break;
    case "toolRequest": toolCard(c.id, c.toolCall, msgEntry(message).node); break;
    case "toolResponse":
      if (!toolResult(c.id, c.toolResult)) {
        const card = toolCard(c.id, { status: "success", value: { name: "tool", arguments: {} } }, msgEntry(message).node);
        toolResult(c.id, c.toolResult);
        card.dataset.orphan = "1";
      }
      break;
    case "actionRequired":
    case "toolConfirmationRequest": {
      const data = c.type === "actionRequired" ? c.data || {} : Object.assign({ actionType: "toolConfirmation" }, c);
      if (data.actionType === "elicitationResponse") {
        const a = asks.get(data.id);
        if (a) for (const b of a.box.querySelectorAll("button, input, select")) b.disabled = true;
        break;
      }
      const node = msgEntry(message).node;
      if (asks.has(data.id) && node.contains(asks.get(data.id).box)) break;
      const box = data.actionType === "elicitation" ? elicitForm(data, rid) : data.actionType === "toolConfirmation" ? confirmBox(data, rid) : null;
      if (!box) { node.append(el("p", { class: "note", text: "Action required: " + data.actionType })); break; }
      node.append(box);
      if (!live) for (const b of box.querySelectorAll("button, input, select")) b.disabled = true;
      break;
    }
    case "thinking": case "reasoning":
      msgEntry(message).node.append(el("details", { class: "note" }, el("summary", { text: "Thinking" }), el("pre", { text: c.thinking || c.text || "" })));
      break;
    case "image":
      if (/^image\/(png|jpeg|gif|webp)$/.test(c.mimeType || "")) msgEntry(message).node.append(el("img", { src: "data:" + c.mimeType + ";base64," + c.data, alt: "image" }));
      break;
    case "systemNotification": msgEntry(message).node.append(el("p", { class: "note", text: c.msg || "" })); break;
    default: break;
  }
}
// A turn's error, live or saved; one about the model leads to Settings.
function errorEntry(text) {
  return el("div", { class: "msg error", role: "alert" }, "Error: " + text,
    /GOOSE_PROVIDER|GOOSE_MODEL|API_KEY|provider|model/i.test(String(text)) ? button("Open Settings", () => guard(openSettings, $("settings-msg"))) : null);
}
// "Fork from here" (a new session up to it); the person's "Edit" (resent in its place).
function messageActions(m) {
  const e = msgs.get(m.id);
  if (typeof m.created !== "number" || !cur || !e || e.node.querySelector(".msg-actions")) return;
  const bar = el("div", { class: "msg-actions" }, button("Fork from here", () => guard(async () => {
    const r = await apiJson("POST", "/sessions/" + cur.id + "/fork", { before: m.created + 1 });
    await loadSessions(); await openSession(r.session.id);
    status("Forked: this is a new session.");
  }), { class: "link" }));
  if (m.role === "user") bar.append(button("Edit", () => {
    editing = m.created;
    $("message-input").value = m.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
    autosize(); $("message-input").focus(); $("edit-note").hidden = false;
  }, { class: "link" }));
  e.node.append(bar);
}
let editing = null; // `created` of the message being edited
function stopEditing() { editing = null; $("edit-note").hidden = true; }
function renderMessage(message, rid, live) {
  const meta = message.metadata || {};
  if (meta.userVisible === false) return;
  // A failed turn's error, kept in the conversation: shown as it was live.
  if (meta.goslingError) {
    const note = (message.content || []).find((c) => c.type === "systemNotification");
    $("log").append(errorEntry(note ? note.msg : ""));
    return;
  }
  for (const c of message.content || []) renderContent(message, c, rid, live);
  // An answer saved as far as it got when it was stopped.
  if (meta.goslingStopped) {
    const m = msgEntry(message);
    if (!m.node.querySelector(".stopped")) m.node.append(el("span", { class: "stopped", text: "stopped" }));
  }
  if (!live || message.role === "user") messageActions(message); // a live answer's: at Finish
}

function showConversation(conv) {
  resetLog();
  for (const m of conv || []) { if (m.id) stored.add(m.id); renderMessage(m, null, false); }
  for (const card of cards.values()) if (card.dataset.state === "running") setCardState(card, "interrupted");
  stick = true;
  $("log").scrollTop = $("log").scrollHeight;
  if (!(conv || []).length) $("log").append(el("div", { class: "empty", text: "Say hello: the conversation starts here." }));
}

function setBusy() {
  const busy = active.size > 0;
  $("stop-btn").hidden = !busy;
  const steering = busy && !!runId;
  $("send-btn").hidden = busy && !steering;
  $("send-btn").textContent = steering ? "Steer" : "Send";
  // A damaged session is read-only until its files are fixed.
  const closed = !cur || !!(cur.session && cur.session.gosling_damaged);
  $("send-btn").disabled = (busy && !steering) || closed;
  $("message-input").disabled = closed;
}

// -- header: title, provider, model, mode
let inForce = { values: {}, from_environment: [], secrets_set: {} };
async function loadInForce() {
  const c = await apiJson("GET", "/config");
  inForce = (c && c.in_force) || inForce;
  return inForce;
}
function showTitle() {
  $("session-title").textContent = cur ? cur.name || "Session " + cur.id : "No session";
  $("rename-btn").hidden = !cur;
  if (!cur) $("session-mode-row").hidden = true;
}
// What a turn uses: the session's provider, model and mode, else the settings in force.
function showModel() {
  const box = $("session-model");
  box.replaceChildren();
  if (!cur) return;
  const s = cur.session || {};
  const v = inForce.values || {};
  const provider = s.provider_name || v.GOOSE_PROVIDER;
  const model = (s.model_config && s.model_config.model_name) || v.GOOSE_MODEL;
  const mode = s.goose_mode || v.GOOSE_MODE || "auto";
  box.append(el("span", { class: "provider", title: "Provider", text: provider || "no provider set" }),
    el("span", { class: "model", title: "Model", text: model || "no model set" }),
    el("span", { class: "mode", title: "Tool approval mode", text: "mode: " + mode }));
  $("session-mode-row").hidden = false;
  $("session-mode").value = mode;
}
// The header follows what is in force now.
async function refreshInForce() {
  try { await loadInForce(); } catch (_) { return; }
  showModel();
  firstRun();
}
// No model yet: say so, and lead to Settings.
function firstRun() {
  const none = !(inForce.values || {}).GOOSE_PROVIDER;
  let note = $("first-run");
  if (!none) { if (note) note.remove(); return; }
  if (note) return;
  note = el("div", { id: "first-run", class: "msg error", role: "alert" },
    el("p", { text: "No model is set up yet: choose a provider, a model and its API key in Settings, and gosling can answer." }),
    button("Open Settings", () => guard(openSettings, $("settings-msg")), { class: "primary" }));
  $("main").insertBefore(note, $("log"));
}
async function setSessionMode() {
  if (!cur) return;
  const mode = $("session-mode").value;
  await api("POST", "/agent/update_session", { session_id: cur.id, goose_mode: mode });
  cur.session.goose_mode = mode;
  showModel();
  status("This session's tool approval: " + mode + ".");
}
// Titles come after the first exchange: the list and the header follow.
async function refreshTitles() {
  await loadSessions();
  const mine = cur && sessions.find((s) => s.id === cur.id);
  if (mine && mine.name && mine.name !== cur.name && $("title-form").hidden) { cur.name = mine.name; showTitle(); }
}
function editTitle() {
  if (!cur) return;
  $("title-input").value = cur.name || "";
  $("title-row").hidden = true;
  $("title-form").hidden = false;
  $("title-input").focus();
  $("title-input").select();
}
function closeTitle() { $("title-form").hidden = true; $("title-row").hidden = false; }
async function saveTitle() {
  const name = $("title-input").value.trim();
  await api("PUT", "/sessions/" + cur.id + "/name", { name });
  cur.name = name;
  closeTitle(); showTitle();
  await loadSessions();
}

// -- event stream
// An unknown request's events wait out a fresh connect's replay (to its second ping): one that
// Finished is dropped if saved; the rest are shown.
const pending = new Map(); // request id -> [event]
function endReplay() {
  replaying = false;
  for (const [rid, evs] of pending) { active.add(rid); setBusy(); for (const ev of evs) handleEvent(ev); }
  pending.clear();
}
// Another process's messages (agent::follow): shown, no request marked running.
const OTHER_PROCESS = "other-process";
function handleEvent(ev) {
  const rid = ev.chat_request_id === OTHER_PROCESS ? undefined : ev.chat_request_id || ev.request_id;
  if (rid && ev.type !== "ActiveRequests" && !active.has(rid)) {
    if (replaying) {
      if (ev.type === "Finish") {
        // Ended: old, unless it said what the saved conversation lacks.
        const evs = pending.get(rid) || [];
        pending.delete(rid);
        const fresh = (e) => e.type === "Message" && e.message && e.message.id && !stored.has(e.message.id)
          && (e.message.content || []).some((c) => c.type === "text" || c.type === "toolRequest");
        if (evs.some(fresh)) { active.add(rid); for (const e of evs) handleEvent(e); handleEvent(ev); }
      } else { if (!pending.has(rid)) pending.set(rid, []); pending.get(rid).push(ev); }
      return;
    }
    if (ev.type !== "Message" && ev.type !== "UpdateConversation") return; // the tail of a request we never saw
    active.add(rid); setBusy();
  }
  switch (ev.type) {
    case "ActiveRequests":
      active = new Set(ev.request_ids || []);
      setBusy();
      if (active.size) status("A reply is running…");
      break;
    case "Message": {
      const m = ev.message || {};
      if (m.id && stored.has(m.id) && !streamed.has(m.id)) {
        if (!active.has(rid)) break; // an old request's message, already shown from the saved conversation
        const e = msgs.get(m.id);
        if (e) {
          for (const [k, c] of cards) if (e.node.contains(c)) cards.delete(k);
          for (const [k, a] of asks) if (e.node.contains(a.box)) asks.delete(k);
          e.node.replaceChildren(); e.segs = [];
        }
      }
      if (m.role === "user" && m.id && msgs.has(m.id) && streamed.has(m.id)) break; // our own message, echoed
      if (m.id) streamed.add(m.id);
      $("empty") && $("empty").remove();
      for (const x of $("log").querySelectorAll(".empty")) x.remove();
      renderMessage(m, rid, true);
      scrollDown();
      break;
    }
    case "Notification": {
      if (!active.has(ev.chat_request_id)) break;
      const card = cards.get(ev.request_id);
      const p = (ev.message || {}).params || {};
      let text = (ev.message || {}).method || "notification";
      if (p.progress !== undefined) text = "Progress " + p.progress + (p.total ? " / " + p.total : "") + (p.message ? ": " + p.message : "");
      else if (p.data !== undefined) text = (p.level ? p.level + ": " : "") + (typeof p.data === "string" ? p.data : JSON.stringify(p.data));
      if (card) {
        let n = card.body.querySelector(".progress");
        if (!n) { n = el("p", { class: "note progress" }); card.body.prepend(n); }
        n.textContent = text;
      }
      break;
    }
    case "Error":
      if (!active.has(rid)) break;
      $("log").append(errorEntry(ev.error));
      scrollDown();
      break;
    case "Finish":
      if (!active.has(rid)) break;
      active.delete(rid);
      if (!active.size) {
        runId = null;
        for (const [id, m] of msgs) if (m.role !== "user") messageActions({ id, created: m.created });
      }
      for (const [, a] of asks) if (a.rid === rid) for (const b of a.box.querySelectorAll("button:not([disabled]), input, select")) b.disabled = true;
      for (const card of cards.values()) if (card.dataset.state === "running" || card.dataset.state === "waiting") setCardState(card, "interrupted");
      setBusy();
      status("Done.");
      refreshInForce();
      refreshTitles().catch(() => {});
      for (const ms of [1500, 5000]) setTimeout(() => refreshTitles().catch(() => {}), ms);
      break;
    case "UpdateConversation":
      showConversation(ev.conversation);
      for (const m of ev.conversation || []) if (m.id) streamed.add(m.id);
      break;
    default: break;
  }
}

// A fetch()-based SSE reader: EventSource cannot send X-Secret-Key.
async function readSse(resp, onFrame, onAlive, onComment) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    onAlive();
    buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const frame = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let id = null;
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith(":")) onComment(line.slice(1).trim());
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        else if (line.startsWith("id:")) id = line.slice(3).trim();
      }
      if (data.length) onFrame(id, data.join("\n"));
    }
  }
}

async function follow(sid) {
  if (follower) follower.abort();
  const ctl = new AbortController();
  follower = ctl;
  let backoff = 500;
  while (!ctl.signal.aborted && cur && cur.id === sid) {
    let watchdog = null;
    const alive = () => { clearTimeout(watchdog); watchdog = setTimeout(() => inner.abort(), 5000); };
    const inner = new AbortController();
    streamCtl = inner;
    ctl.signal.addEventListener("abort", () => inner.abort(), { once: true });
    let reload = false;
    try {
      const resp = await api("GET", "/sessions/" + sid + "/events", undefined, inner.signal,
        lastSeq > 0 ? { "Last-Event-ID": String(lastSeq) } : undefined);
      if ($("conn").textContent) refreshInForce(); // back after a drop: the server may have restarted
      $("conn").textContent = "";
      replaying = lastSeq === 0;
      pending.clear();
      backoff = 500;
      alive();
      await readSse(resp, (id, data) => {
        if (id === "0") { reload = true; return; }
        if (id !== null) lastSeq = Math.max(lastSeq, parseInt(id, 10) || 0);
        let ev;
        try { ev = JSON.parse(data); } catch (_) { return; }
        handleEvent(ev);
      }, alive, (c) => { if (replaying && /^ping [1-9]/.test(c)) endReplay(); });
    } catch (e) {
      if (ctl.signal.aborted) return;
      if (e.status === 404 || e.status === 401) return;
    } finally { clearTimeout(watchdog); }
    if (ctl.signal.aborted) return;
    if (reload) {
      // Too far behind: the saved conversation, then the stream from its start.
      const s = await apiJson("GET", "/sessions/" + sid).catch(() => null);
      if (s) showConversation(s.conversation);
      lastSeq = 0;
      continue;
    }
    $("conn").textContent = "Reconnecting…";
    await new Promise((r) => { wake = r; setTimeout(r, backoff); });
    wake = null;
    backoff = Math.min(backoff * 2, 10000);
  }
}

// While a session opens none is shown; the last open wins.
let opening = 0;
function leaveSession(note) {
  if (follower) follower.abort();
  follower = null;
  cur = null; active = new Set(); lastSeq = 0; pending.clear(); runId = null; stopEditing();
  resetLog();
  $("log").append(el("div", { class: "empty", text: note }));
  showTitle(); showModel();
  $("session-title").textContent = note;
  $("session-dir").textContent = "";
  $("ext-results").replaceChildren();
  setBusy();
  renderSessions();
}
async function openSession(id, results) {
  const mine = ++opening;
  status("Opening session…");
  leaveSession("Opening session…");
  let s = null;
  if (!results) {
    const r = await apiJson("POST", "/agent/resume", { session_id: id, load_model_and_extensions: true });
    s = r.session; results = r.extension_results;
  } else s = await apiJson("GET", "/sessions/" + id);
  if (mine !== opening) return;
  cur = { id, working_dir: s.working_dir, name: s.name, session: s };
  localStorage.setItem("gosling-last-session", id);
  showTitle();
  $("session-dir").textContent = s.working_dir || "";
  showModel();
  showConversation(s.conversation);
  const box = $("ext-results");
  box.replaceChildren();
  if (s.gosling_damaged) {
    box.append(el("p", { class: "error", role: "alert", text: "This session is damaged: its readable messages are shown, and nothing is written to it until its file is fixed or moved. " + s.gosling_damaged }));
  }
  loadResults = new Map();
  for (const r of results || []) {
    loadResults.set(r.name, r);
    if (!r.success) {
      box.append(el("p", { class: "error", text: "Extension " + r.name + " failed to start: " + (r.error || "") + " " }, signInLink(r.error)));
    }
  }
  setBusy();
  renderSessions();
  follow(id);
  status("");
  $("sidebar").classList.remove("open");
  $("message-input").focus();
}

let runId = null; // X-Gosling-Run-Id of this page's turn: Send steers it
async function send() {
  const input = $("message-input");
  const text = input.value;
  if (!text.trim() || !cur) return;
  if (active.size) {
    if (!runId) return;
    const ok = await apiJson("POST", "/sessions/" + cur.id + "/steer", { run_id: runId, text });
    input.value = ""; autosize();
    if (!msgs.has(ok.message_id)) { streamed.add(ok.message_id); renderMessage({ id: ok.message_id, role: "user", content: [{ type: "text", text }] }, null, true); }
    return status("Steered: the agent takes it before its next step.");
  }
  if (editing !== null) {
    await apiJson("POST", "/sessions/" + cur.id + "/truncate", { from: editing });
    stopEditing();
    showConversation((await apiJson("GET", "/sessions/" + cur.id)).conversation);
  }
  const rid = uuid();
  const user = { id: uuid(), role: "user", created: Math.floor(Date.now() / 1000),
    content: [{ type: "text", text }], metadata: { userVisible: true, agentVisible: true } };
  for (const x of $("log").querySelectorAll(".empty")) x.remove();
  renderMessage(user, rid, true);
  streamed.add(user.id);
  stick = true; scrollDown();
  input.value = ""; autosize();
  active.add(rid); setBusy();
  status("Thinking…");
  try {
    const r = await api("POST", "/sessions/" + cur.id + "/reply", { request_id: rid, user_message: user });
    runId = r.headers.get("X-Gosling-Run-Id"); setBusy();
  } catch (e) {
    active.delete(rid); setBusy();
    $("log").append(el("div", { class: "msg error", role: "alert", text: "Not sent: " + e.message }));
    status("");
  }
}
async function stop() {
  if (!cur) return;
  for (const rid of [...active]) await api("POST", "/sessions/" + cur.id + "/cancel", { request_id: rid }).catch(() => {});
  status("Stopping…");
}
function autosize() {
  const t = $("message-input");
  t.style.height = "auto";
  t.style.height = Math.min(t.scrollHeight + 2, 192) + "px";
}

// -- extensions
let loadResults = new Map();
const nameToKey = (n) => n.replace(/\s/g, "").toLowerCase();
async function refreshExtensions() {
  const c = await apiJson("GET", "/config").catch(() => null);
  toolPermissions = ((c && c.config) || {}).tool_permissions || {};
  const [r, tools] = await Promise.all([apiJson("GET", "/config/extensions"),
    cur ? apiJson("GET", "/agent/tools?session_id=" + encodeURIComponent(cur.id)).catch(() => null) : null]);
  const inSession = cur ? ((await apiJson("GET", "/sessions/" + cur.id + "/extensions").catch(() => ({}))).extensions || []).map((e) => e.name) : [];
  $("ext-warnings").replaceChildren(...(r.warnings || []).map((t) => el("li", { text: t })));
  const signedIn = r.signed_in || [];
  const list = $("ext-list");
  list.replaceChildren();
  for (const ext of r.extensions || []) {
    const prefix = nameToKey(ext.name) + "__";
    const mine = (tools || []).filter((t) => t.name.startsWith(prefix));
    const lr = loadResults.get(ext.name);
    let state = "not in this session", cls = "idle";
    if (!ext.enabled) { state = "disabled"; cls = "off"; }
    else if (!cur) { state = "enabled"; cls = "idle"; }
    else if (lr && !lr.success) { state = "failed"; cls = "failed"; }
    else if (mine.length || inSession.includes(ext.name)) { state = "running"; cls = "running"; }
    const toggle = el("input", { type: "checkbox", role: "switch", "aria-label": "Enable " + ext.name });
    toggle.checked = !!ext.enabled;
    toggle.addEventListener("change", () => guard(async () => {
      const config = Object.assign({}, ext); delete config.enabled;
      await apiJson("POST", "/config/extensions", { name: ext.name, config, enabled: toggle.checked });
      if (cur) {
        if (toggle.checked) await addToSession(config);
        else await api("POST", "/agent/remove_extension", { session_id: cur.id, name: ext.name });
      }
      await refreshExtensions();
    }, $("ext-error")));
    const item = el("li", { "data-name": ext.name },
      el("div", { class: "ext-row" }, el("span", { class: "ename", text: ext.name }), el("span", { class: "muted", text: ext.type }),
        el("span", { class: "badge " + cls, text: state }),
        el("label", { class: "switch" }, toggle, "on"),
        button("Remove", () => guard(async () => {
          if (!confirm("Remove extension " + ext.name + "?")) return;
          await api("DELETE", "/config/extensions/" + encodeURIComponent(ext.name));
          if (cur) await api("POST", "/agent/remove_extension", { session_id: cur.id, name: ext.name }).catch(() => {});
          await refreshExtensions();
        }, $("ext-error")), { "aria-label": "Remove " + ext.name })));
    if (ext.type === "streamable_http" && signedIn.includes(ext.name)) {
      // Forgets the stored sign-in (`signed_in` lists them).
      item.querySelector(".ext-row").append(button("Sign out", () => guard(async () => {
        const r = await apiJson("POST", "/config/extensions/" + encodeURIComponent(ext.name) + "/sign_out", {});
        $("ext-error").textContent = ext.name + ": signed out" + (r.forgotten ? "" : " (no stored sign-in)") + ".";
        await refreshExtensions();
      }, $("ext-error")), { "aria-label": "Sign out of " + ext.name }));
    }
    if (cur && ext.enabled && state === "not in this session") {
      item.querySelector(".ext-row").append(button("Add to this session", () => guard(async () => {
        const config = Object.assign({}, ext); delete config.enabled;
        await addToSession(config);
        await refreshExtensions();
      }, $("ext-error")), { "aria-label": "Add " + ext.name + " to this session" }));
    }
    if (lr && !lr.success) item.append(el("pre", { class: "error", text: lr.error || "" }), signInLink(lr.error) || "");
    if (mine.length) {
      item.append(el("details", {}, el("summary", { text: mine.length + " tools" }),
        el("ul", {}, ...mine.map((t) => el("li", { class: "tool-row" }, el("code", { text: t.name.slice(prefix.length) }), t.description ? " — " + t.description : "", permissionSelect(t.name))))));
    }
    list.append(item);
  }
  if (!list.children.length) list.append(el("li", { class: "muted", text: "No extensions configured." }));
}
// goose's per-tool permission (tool_permissions, {tool: level}); "mode": the session's mode.
let toolPermissions = {};
function permissionSelect(tool) {
  const sel = el("select", { "aria-label": "Permission for " + tool, "data-tool": tool },
    el("option", { value: "", text: "as the mode says" }), el("option", { value: "always_allow", text: "always allow" }),
    el("option", { value: "ask_before", text: "ask before" }), el("option", { value: "never_allow", text: "never allow" }));
  sel.value = toolPermissions[tool] || "";
  sel.addEventListener("change", () => guard(async () => {
    // One tool's level, in one locked update; null: the mode.
    await apiJson("POST", "/config/permissions", { tool_permissions: [{ tool_name: tool, permission: sel.value || null }] });
    if (sel.value) toolPermissions[tool] = sel.value; else delete toolPermissions[tool];
    $("ext-error").textContent = tool + ": " + (sel.value ? sel.value.replace("_", " ") : "as the mode says") + ".";
  }, $("ext-error")));
  return sel;
}
async function addToSession(config) {
  if (!cur) return;
  try { await api("POST", "/agent/add_extension", { session_id: cur.id, config }); loadResults.delete(config.name); }
  catch (e) { loadResults.set(config.name, { name: config.name, success: false, error: e.message }); }
}
function selectTab(name) {
  for (const t of ["form", "link", "json"]) {
    const on = t === name;
    $("tab-" + t).setAttribute("aria-selected", String(on));
    $("tab-" + t).tabIndex = on ? 0 : -1;
    $("pane-" + t).hidden = !on;
  }
}
// Only the fields of the chosen type are shown.
function showTypeFields() {
  const type = document.querySelector("input[name=ext-type]:checked").value;
  for (const d of document.querySelectorAll("#ext-form [data-for]")) d.hidden = !d.dataset.for.split(" ").includes(type);
  $("ext-name").required = type !== "builtin";
  $("ext-name").parentElement.querySelector("label[for=ext-name]").hidden = type === "builtin";
  $("ext-name").hidden = type === "builtin";
}
function extFormConfig() {
  const type = document.querySelector("input[name=ext-type]:checked").value;
  if (type === "builtin") {
    const b = $("ext-builtin").value;
    return { type, name: b, description: "", display_name: b.charAt(0).toUpperCase() + b.slice(1), timeout: 300, bundled: true, available_tools: [] };
  }
  const name = $("ext-name").value.trim();
  const config = { type, name, description: "", timeout: parseInt($("ext-timeout").value, 10) || 300,
    env_keys: $("ext-envkeys").value.split(",").map((s) => s.trim()).filter(Boolean), envs: {} };
  if (type === "stdio") {
    config.cmd = $("ext-cmd").value.trim();
    config.args = $("ext-args").value.split("\n").map((s) => s.trim()).filter(Boolean);
  } else { config.uri = $("ext-uri").value.trim(); config.headers = {}; }
  return config;
}

// `given`: secrets the pasted snippet itself provides (saved when added): not missing.
function describePlan(plan, given) {
  given = new Set(given || []);
  const nameOf = (m) => typeof m === "string" ? m : m.name || m.key;
  const sm = plan.summary || {};
  const dl = el("dl", { class: "plan" });
  const row = (k, v) => { if (v !== undefined && v !== null && v !== "") dl.append(el("dt", { text: k }), el("dd", {}, v)); };
  row("Name", plan.name + (plan.key ? " (key " + plan.key + ")" : ""));
  row("Type", sm.type);
  row("Description", sm.description);
  if (sm.command !== undefined) row("Runs", el("code", { text: [sm.command].concat(sm.args || []).join(" ") }));
  row("Connects to", sm.url);
  if ((sm.headers || []).length) row("Sends headers", sm.headers.map((x) => typeof x === "string" ? x : JSON.stringify(x)).join(", "));
  if ((sm.env || []).length) row("Environment", el("ul", {}, ...sm.env.map((e) => el("li", {}, el("code", { text: e.name || String(e) }), e.description ? " — " + e.description : ""))));
  if ((sm.reads || []).length) {
    row("Reads stored secrets", el("ul", {}, ...sm.reads.map((r) => el("li", {}, r.where + " \u2190 ", el("code", { text: r.secret }),
      r.refused ? " (refused: one of gosling's own secrets)" : r.stored ? " (stored)" : " (not stored yet)"))));
  }
  // `…` in a risk line is code: shown as such, not as backticks.
  const codeSpans = (x) => String(x).split("`").map((part, i) => i % 2 ? el("code", { text: part }) : part);
  if ((sm.risks || []).length) row("Risks", el("ul", { class: "warnings" }, ...sm.risks.map((x) => el("li", {}, ...codeSpans(x)))));
  row("Timeout", sm.timeout !== undefined ? sm.timeout + " s" : undefined);
  row("Installation notes", sm.installation_notes);
  const missing = (plan.missing_secrets || []).map(nameOf).filter((n) => !given.has(n));
  const fromSnippet = (plan.missing_secrets || []).map(nameOf).filter((n) => given.has(n));
  if (fromSnippet.length) row("Secrets from the snippet", fromSnippet.join(", ") + " (saved as secrets when added)");
  if (missing.length) row("Missing secrets", missing.join(", ") + " (Settings → Other secrets, or gosling secret set NAME)");
  if ((plan.refused_secrets || []).length) row("Refused (gosling's own secrets, never sent)", plan.refused_secrets.join(", "));
  if (missing.length && (plan.how_to_provide || []).length) row("How to provide", el("ul", {}, ...plan.how_to_provide.map((x) => el("li", { text: typeof x === "string" ? x : JSON.stringify(x) }))));
  const box = el("div", { class: "plan-box" }, dl);
  if ((plan.warnings || []).length) box.append(el("ul", { class: "warnings" }, ...plan.warnings.map((w) => el("li", { text: "Warning: " + w }))));
  box.append(el("details", {}, el("summary", { text: "Full configuration" }), el("pre", { text: JSON.stringify(plan.config, null, 2) })));
  return box;
}
async function checkInstall(link) {
  const out = $("install-plan");
  out.replaceChildren();
  const plan = await apiJson("POST", "/extensions/install", { link, dry_run: true });
  const go = button("Install " + plan.name, () => guard(async () => {
    go.disabled = true;
    const done = await apiJson("POST", "/extensions/install", { link, dry_run: false, approve: plan.digest });
    out.replaceChildren(el("p", { text: "Saved " + done.name + (done.enabled ? " (enabled)." : " (disabled until its secrets are set).") }));
    if ((done.refused_secrets || []).length) out.append(el("p", { text: "It stays disabled: " + done.next }));
    else if ((done.missing_secrets || []).length) out.append(secretsForm(done));
    else { if (done.enabled) await addToSession(done.config); await refreshExtensions(); }
  }, $("ext-error")), { class: "primary" });
  out.replaceChildren(el("h3", { text: "This link will install:" }), describePlan(plan),
    el("div", { class: "actions" }, button("Cancel", () => out.replaceChildren()), go));
}
function secretsForm(done) {
  const form = el("form", { class: "plan-box" }, el("p", { text: "Provide the missing secrets (write-only):" }));
  const inputs = done.missing_secrets.map((s) => {
    const name = typeof s === "string" ? s : s.name || s.key;
    const id = "secret-" + name.replace(/[^A-Za-z0-9_]/g, "_");
    const input = el("input", { id, type: "password", autocomplete: "off", required: true });
    input.dataset.name = name;
    const about = ((done.summary || {}).env || []).find((e) => e.name === name);
    form.append(el("label", { for: id, text: name + (about && about.description ? " — " + about.description : "") }), input);
    return input;
  });
  form.append(el("div", { class: "actions" }, el("button", { type: "submit", class: "primary", text: "Save secrets and enable" })));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    guard(async () => {
      for (const i of inputs) { await apiJson("POST", "/config/upsert", { key: i.dataset.name, value: i.value, is_secret: true }); i.value = ""; }
      await apiJson("POST", "/config/extensions", { name: done.config.name, config: done.config, enabled: true });
      form.replaceChildren(el("p", { text: "Secrets saved; " + done.name + " enabled." }));
      await addToSession(done.config);
      await refreshExtensions();
    }, $("ext-error"));
  });
  return form;
}

// mcpServers JSON: each server becomes its goose:// link (POST /extensions/install: one policy).
function parseMcpServers(text) {
  let j;
  try { j = JSON.parse(text); } catch (e) { throw new Error("Not JSON: " + e.message); }
  const servers = j && typeof j === "object" ? (j.mcpServers || j.servers || j) : null;
  if (!servers || typeof servers !== "object" || Array.isArray(servers)) throw new Error("Expected {\"mcpServers\": {\"name\": {\"command\": …}}}.");
  const out = [];
  for (const [name, s] of Object.entries(servers)) {
    if (!s || typeof s !== "object") throw new Error("Server " + name + " is not an object.");
    const env = s.env && typeof s.env === "object" ? s.env : {};
    const q = new URLSearchParams();
    if (s.command) {
      q.append("cmd", String(s.command));
      for (const a of Array.isArray(s.args) ? s.args : []) q.append("arg", String(a));
    } else if (s.url) {
      q.append("url", String(s.url));
      for (const [k, v] of Object.entries(s.headers || {})) q.append("header", k + "=" + v);
    } else throw new Error("Server " + name + " has neither command nor url.");
    q.append("name", name);
    for (const k of Object.keys(env)) q.append("env", k + "=from the pasted mcpServers snippet");
    out.push({ name, link: "goose://extension?" + q.toString(), values: env });
  }
  if (!out.length) throw new Error("The snippet names no servers.");
  return out;
}
async function checkJson() {
  const out = $("json-plan");
  out.replaceChildren();
  const items = parseMcpServers($("json-input").value);
  const ok = [];
  for (const it of items) {
    try {
      const plan = await apiJson("POST", "/extensions/install", { link: it.link, dry_run: true });
      out.append(el("h3", { text: it.name }), describePlan(plan, Object.keys(it.values)));
      ok.push(Object.assign(it, { digest: plan.digest }));
    } catch (e) {
      out.append(el("h3", { text: it.name }), el("p", { class: "error", role: "alert", text: e.message }));
    }
  }
  if (!ok.length) return;
  const res = el("ul", { "aria-label": "Results" });
  const go = button("Add " + ok.length + (ok.length === 1 ? " extension" : " extensions"), () => guard(async () => {
    go.disabled = true;
    for (const it of ok) {
      try {
        const done = await apiJson("POST", "/extensions/install", { link: it.link, dry_run: false, approve: it.digest, origin: "import" });
        const still = [];
        for (const m of done.missing_secrets || []) {
          const k = typeof m === "string" ? m : m.name || m.key;
          const v = it.values[k];
          if (v !== undefined && String(v) !== "") await apiJson("POST", "/config/upsert", { key: k, value: String(v), is_secret: true });
          else still.push(m);
        }
        if (still.length) {
          res.append(el("li", {}, it.name + ": saved, disabled until its secrets are set", secretsForm(Object.assign({}, done, { missing_secrets: still }))));
          continue;
        }
        if (!done.enabled) await apiJson("POST", "/config/extensions", { name: done.config.name, config: done.config, enabled: true });
        await addToSession(done.config);
        res.append(el("li", { text: it.name + ": added" }));
      } catch (e) { res.append(el("li", { class: "error", text: it.name + ": " + e.message })); }
    }
    await refreshExtensions();
  }, $("ext-error")), { class: "primary" });
  out.append(el("p", { class: "note", text: "Environment values in the snippet are saved as secrets (write-only)." }),
    el("div", { class: "actions" }, go), res);
}

// -- settings
const HOST_KEYS = { openai: "OPENAI_HOST", anthropic: "ANTHROPIC_HOST", ollama: "OLLAMA_HOST" };
const API_KEYS = { openai: "OPENAI_API_KEY", anthropic: "ANTHROPIC_API_KEY" };
const upsert = (k, value, isSecret) => apiJson("POST", "/config/upsert", { key: k, value, is_secret: isSecret });
// The values in force (`in_force`), the environment's marked; saves what changed.
let shownSettings = {};
async function openSettings() {
  $("settings-msg").textContent = "";
  $("settings-dialog").showModal();
  await loadInForce();
  fillSettings();
}
function fillSettings() {
  const v = inForce.values || {};
  const env = new Set(inForce.from_environment || []);
  const provider = v.GOOSE_PROVIDER || "";
  const shown = { provider, model: v.GOOSE_MODEL || "", mode: v.GOOSE_MODE || "", host: (HOST_KEYS[provider] && v[HOST_KEYS[provider]]) || "" };
  $("set-provider").value = shown.provider; $("set-model").value = shown.model;
  $("set-mode").value = shown.mode; $("set-host").value = shown.host;
  shown.basePath = v.OPENAI_BASE_PATH || "";
  $("set-basepath").value = shown.basePath;
  $("secret-names").textContent = (inForce.secret_names || []).join(", ") || "none";
  $("set-apikey").value = "";
  const keyName = API_KEYS[provider];
  $("set-apikey").placeholder = keyName && (inForce.secrets_set || {})[keyName] ? keyName + " is set (type to replace)" : "";
  const envOf = { GOOSE_PROVIDER: "GOOSE_PROVIDER", GOOSE_MODEL: "GOOSE_MODEL", GOOSE_MODE: "GOOSE_MODE", HOST: HOST_KEYS[provider], API_KEY: keyName, BASE_PATH: "OPENAI_BASE_PATH" };
  for (const n of document.querySelectorAll("#settings-form .env-note")) {
    const k = envOf[n.dataset.env];
    n.textContent = k && env.has(k) ? "set by the environment (" + k + "): a saved value does not apply while it is set" : "";
  }
  shownSettings = shown;
}
async function saveSettings() {
  $("settings-msg").textContent = "Saving…";
  const provider = $("set-provider").value;
  const model = $("set-model").value.trim();
  const host = $("set-host").value.trim();
  const apiKey = $("set-apikey").value;
  const mode = $("set-mode").value;
  const basePath = $("set-basepath").value.trim();
  if (host && !HOST_KEYS[provider]) throw new Error("Choose a provider to set its host.");
  if (apiKey && !API_KEYS[provider]) throw new Error("Choose openai or anthropic to set an API key.");
  const was = shownSettings;
  if (mode && mode !== was.mode) await upsert("GOOSE_MODE", mode, false);
  if (provider && provider !== was.provider) await upsert("GOOSE_PROVIDER", provider, false);
  if (model && model !== was.model) await upsert("GOOSE_MODEL", model, false);
  if (host && (host !== was.host || provider !== was.provider)) await upsert(HOST_KEYS[provider], host, false);
  if (basePath !== (was.basePath || "")) {
    if (basePath) await upsert("OPENAI_BASE_PATH", basePath, false);
    else await apiJson("POST", "/config/remove", { key: "OPENAI_BASE_PATH", is_secret: false });
  }
  if (apiKey) await upsert(API_KEYS[provider], apiKey, true);
  await loadInForce();
  fillSettings();
  showModel();
  firstRun();
  $("settings-msg").textContent = "Settings saved.";
  $("settings-msg").scrollIntoView({ block: "nearest" });
}

// -- wiring
function on(id, ev, f) { $(id).addEventListener(ev, f); }
function onSubmit(id, f, errEl) { on(id, "submit", (e) => { e.preventDefault(); guard(f, errEl); }); }
function signedIn() {
  $("key-dialog").close();
  guard(async () => {
    await Promise.all([loadSessions(), loadInForce()]);
    firstRun();
    const last = localStorage.getItem("gosling-last-session");
    if (!cur && last && sessions.some((s) => s.id === last)) await openSession(last);
  });
}

async function init() {
  for (const d of document.querySelectorAll("dialog")) {
    for (const b of d.querySelectorAll("button.close")) b.addEventListener("click", () => d.close());
  }
  onSubmit("key-form", async () => {
    const typed = $("key-input").value;
    $("key-input").value = "";
    await login({ secret_key: typed });
    $("key-error").textContent = "";
    signedIn();
  }, $("key-error"));
  on("key-forget", "click", async () => {
    await fetch("/auth/logout", { method: "POST", credentials: "same-origin", cache: "no-store",
      headers: { "Content-Type": "application/json", "X-Gosling-Page": "1" }, body: "{}" }).catch(() => {});
    if (follower) follower.abort();
    cur = null; sessions = []; active = new Set();
    resetLog(); renderSessions(); setBusy();
    showTitle(); showModel(); $("session-dir").textContent = "";
    askKey("");
  });
  // Esc does not close the sign-in dialog (nothing to go back to).
  on("key-dialog", "cancel", (e) => { if (!signedInNow) e.preventDefault(); });
  on("new-session", "click", openNewDialog);
  onSubmit("start-form", async () => {
    const dir = $("workdir").value.trim();
    // An empty "New Chat" in this directory is the new chat (no pile of empty sessions).
    if (cur && cur.working_dir === dir && cur.name === "New Chat" && !$("log").querySelector(".msg")) {
      $("new-dialog").close();
      status("This session is still empty: it is your new chat.");
      return;
    }
    const mine = ++opening;
    $("new-dialog").close();
    leaveSession("Starting a new session…");
    status("Starting extensions…");
    let s;
    try { s = await apiJson("POST", "/agent/start", { working_dir: dir }); } catch (e) {
      $("new-dialog").showModal();
      throw e;
    }
    rememberDir(s.working_dir || dir); // as the server stored it (~ expanded)
    if (mine === opening) await openSession(s.id);
    await loadSessions();
  }, $("start-error"));
  on("session-search", "input", () => { renderSessions(); searchSaid(); });
  on("edit-cancel", "click", () => { stopEditing(); $("message-input").value = ""; autosize(); });
  on("side-open", "click", () => { $("sidebar").classList.add("open"); $("session-search").focus(); });
  on("side-close", "click", () => { $("sidebar").classList.remove("open"); $("side-open").focus(); });
  on("open-extensions", "click", () => { $("ext-error").textContent = ""; $("ext-dialog").showModal(); guard(refreshExtensions, $("ext-error")); });
  on("open-settings", "click", () => guard(openSettings, $("settings-msg")));
  on("rename-btn", "click", editTitle);
  on("title-cancel", "click", closeTitle);
  on("title-input", "keydown", (e) => { if (e.key === "Escape") { e.preventDefault(); closeTitle(); } });
  onSubmit("title-form", saveTitle);
  onSubmit("composer", send);
  on("message-input", "keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); guard(send); }
    else if (e.key === "Escape" && active.size) { e.preventDefault(); guard(stop); }
  });
  on("message-input", "input", autosize);
  window.addEventListener("resize", scrollDown);
  // Offline: drop the stream now; come back when online.
  window.addEventListener("offline", () => { if (streamCtl) streamCtl.abort(); });
  window.addEventListener("online", () => { if (wake) wake(); });
  on("log", "scroll", () => { const l = $("log"); stick = l.scrollHeight - l.scrollTop - l.clientHeight < 80; });
  on("stop-btn", "click", () => guard(stop));
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && active.size && !document.querySelector("dialog[open]")) guard(stop);
  });
  for (const t of ["form", "link", "json"]) on("tab-" + t, "click", () => selectTab(t));
  $("tab-form").parentElement.addEventListener("keydown", (e) => {
    const order = ["form", "link", "json"];
    const i = order.findIndex((t) => $("tab-" + t).getAttribute("aria-selected") === "true");
    const d = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
    if (d) { const t = order[(i + d + 3) % 3]; selectTab(t); $("tab-" + t).focus(); }
  });
  onSubmit("ext-form", async () => {
    const config = extFormConfig();
    await apiJson("POST", "/config/extensions", { name: config.name, config, enabled: true });
    if ($("ext-session").checked) await addToSession(config);
    $("ext-form").reset();
    showTypeFields();
    await refreshExtensions();
  }, $("ext-error"));
  for (const r of document.querySelectorAll("input[name=ext-type]")) r.addEventListener("change", showTypeFields);
  showTypeFields();
  on("session-mode", "change", () => guard(setSessionMode));
  window.addEventListener("focus", () => { if (signedInNow) refreshInForce(); });
  onSubmit("install-form", () => checkInstall($("install-link").value.trim()), $("ext-error"));
  onSubmit("json-form", async () => checkJson(), $("ext-error"));
  onSubmit("settings-form", saveSettings, $("settings-msg"));
  onSubmit("secret-form", async () => {
    const name = $("secret-name").value.trim();
    if (!name) throw new Error("Give the secret a name.");
    await upsert(name, $("secret-value").value, true);
    $("secret-value").value = "";
    await loadInForce();
    $("secret-names").textContent = (inForce.secret_names || []).join(", ") || "none";
    $("settings-msg").textContent = "Secret " + name + " saved.";
    $("settings-msg").scrollIntoView({ block: "nearest" });
  }, $("settings-msg"));
  setBusy();
  window.addEventListener("hashchange", async () => { await takeKeyFromFragment(); if (signedInNow) signedIn(); });
  await takeKeyFromFragment();
  if (signedInNow || await checkSignedIn()) signedIn(); else askKey();
}

document.addEventListener("DOMContentLoaded", init);

//! The agent turn loop behind `POST /reply`: model → tool calls → MCP → model, streamed.
//!
//! The loop runs on its own thread and sends finished SSE frames into a bounded channel;
//! the HTTP side writes them (and a Ping when nothing else was sent for 500 ms). A failed
//! write means the client is gone: the HTTP side drops the receiver and fires the turn's
//! cancel channel, the provider stream is dropped at its next chunk, and in-flight tool calls
//! are cancelled with `notifications/cancelled`. Every message is saved to the session as it
//! is produced, so a crash loses at most the message being streamed.

use crate::agent::messages::{self as msg, Tokens};
use crate::extensions::runtime::SessionRuntime;
use crate::llm::{self, ChatRequest, Delta, Provider, ToolSpec};
use crate::mcp::client::CallContext;
use crate::store::sessions::SessionStore;
use crossbeam_channel::{bounded, select, Receiver, Sender};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// goose's heartbeat interval.
pub const PING_INTERVAL: Duration = Duration::from_millis(500);

/// goose's permission modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Auto,
    Approve,
    SmartApprove,
    Chat,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "auto" => Some(Mode::Auto),
            "approve" => Some(Mode::Approve),
            "smart_approve" => Some(Mode::SmartApprove),
            "chat" => Some(Mode::Chat),
            _ => None,
        }
    }
}

/// Tool confirmations awaited by running turns, keyed by tool request id.
#[derive(Default)]
pub struct Confirmations {
    waiting: Mutex<HashMap<String, Sender<String>>>,
}

impl Confirmations {
    fn wait_for(&self, id: &str) -> Receiver<String> {
        let (tx, rx) = bounded(1);
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).insert(id.to_string(), tx);
        rx
    }

    fn forget(&self, id: &str) {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
    }

    /// Delivers the user's decision; false when no turn waits for this id.
    pub fn answer(&self, id: &str, action: &str) -> bool {
        match self.waiting.lock().unwrap_or_else(|e| e.into_inner()).remove(id) {
            Some(tx) => tx.try_send(action.to_string()).is_ok(),
            None => false,
        }
    }
}

pub struct Turn {
    pub session_id: String,
    pub runtime: Arc<SessionRuntime>,
    pub provider: Box<dyn Provider>,
    pub sessions: Arc<SessionStore>,
    pub confirmations: Arc<Confirmations>,
    pub mode: Mode,
    pub max_turns: usize,
    /// The conversation before this turn (already including the new user message).
    pub conversation: Vec<Value>,
}

/// The turn's cancel signal is the HTTP side dropping (or sending on) its sender.
fn is_cancelled(cancel: &Receiver<()>) -> bool {
    !matches!(cancel.try_recv(), Err(crossbeam_channel::TryRecvError::Empty))
}

/// Sends frames to the HTTP side; false once the client is gone.
struct Out {
    tx: Sender<String>,
    tokens: Tokens,
}

impl Out {
    fn send(&self, ev: &Value) -> bool {
        self.tx.send(crate::wire::sse::encode_data(&ev.to_string())).is_ok()
    }
}

const SYSTEM_PROMPT: &str = "You are a general-purpose AI agent called goose, running in gosling. \
You can use the tools of the extensions listed below. Call tools when they help; answer plainly when done.";

impl Turn {
    fn save(&self, m: &Value) {
        let r = self.sessions.append_message(&self.session_id, m);
        if let Err(e) = r {
            log::error!("reply: cannot save a message of session {}: {e}", self.session_id);
        }
    }

    fn system_prompt(&self) -> String {
        let mut s = SYSTEM_PROMPT.to_string();
        for (ext, instructions) in self.runtime.instructions() {
            s.push_str(&format!("\n\n## {ext}\n{instructions}"));
        }
        s
    }

    fn tool_specs(&self) -> Vec<ToolSpec> {
        if self.mode == Mode::Chat {
            return Vec::new();
        }
        self.runtime
            .tools(None)
            .into_iter()
            .map(|t| ToolSpec {
                name: t.name.clone(),
                description: t.tool.get("description").and_then(Value::as_str).unwrap_or("").to_string(),
                input_schema: t.tool.get("inputSchema").cloned().unwrap_or_else(|| json!({"type": "object"})),
            })
            .collect()
    }

    /// Runs the loop; every failure ends as an Error event.
    pub fn run(mut self, tx: Sender<String>, cancel: Receiver<()>) {
        let mut out = Out { tx, tokens: Tokens::default() };
        match self.run_inner(&mut out, &cancel) {
            Ok(()) => {
                out.send(&msg::ev_finish(&out.tokens));
            }
            Err(e) => {
                log::warn!("reply: session {}: {e}", self.session_id);
                out.send(&msg::ev_error(&e));
            }
        }
        self.record_tokens(&out.tokens);
    }

    fn record_tokens(&self, t: &Tokens) {
        let _ = self.sessions.update_meta(&self.session_id, |s| {
            s.input_tokens = Some(t.input);
            s.output_tokens = Some(t.output);
            s.total_tokens = Some(t.input + t.output);
            s.accumulated_input_tokens = Some(s.accumulated_input_tokens.unwrap_or(0) + t.acc_input);
            s.accumulated_output_tokens = Some(s.accumulated_output_tokens.unwrap_or(0) + t.acc_output);
            s.accumulated_total_tokens =
                Some(s.accumulated_input_tokens.unwrap_or(0) + s.accumulated_output_tokens.unwrap_or(0));
        });
    }

    fn run_inner(&mut self, out: &mut Out, cancel: &Receiver<()>) -> Result<(), String> {
        let tools = self.tool_specs();
        let system = self.system_prompt();
        for _ in 0..self.max_turns {
            let request =
                ChatRequest { system: system.clone(), messages: msg::to_llm(&self.conversation), tools: tools.clone() };
            let reply_id = format!("msg_{}", crate::util::random_hex(8));
            let mut client_gone = false;
            let completion = {
                let mut on_delta = |d: Delta| -> bool {
                    if client_gone || is_cancelled(cancel) {
                        client_gone = true;
                        return false;
                    }
                    match d {
                        Delta::Text(t) => {
                            let m = msg::message(&reply_id, "assistant", vec![msg::text(t)]);
                            if !out.send(&msg::ev_message(&m, &out.tokens)) {
                                client_gone = true;
                                return false;
                            }
                        }
                    }
                    true
                };
                // The cancel check also runs while the model is silent (waiting for the
                // first byte, between chunks, during a retry wait).
                self.provider.complete_cancellable(&request, &mut on_delta, &|| is_cancelled(cancel))
            };
            let completion = match completion {
                Ok(c) => c,
                Err(llm::Error::Cancelled) => return Ok(()),
                Err(e) => return Err(e.to_string()),
            };
            if let Some(u) = &completion.usage {
                out.tokens.input = u.input_tokens as i64;
                out.tokens.output = u.output_tokens as i64;
                out.tokens.acc_input += u.input_tokens as i64;
                out.tokens.acc_output += u.output_tokens as i64;
            }
            // The assistant message as stored: all its text, then its tool requests.
            let mut content = Vec::new();
            if !completion.text.is_empty() {
                content.push(msg::text(&completion.text));
            }
            let mut frontend = Vec::new();
            for call in &completion.tool_calls {
                let is_frontend = self.runtime.is_frontend_tool(&call.name);
                let c = match (&call.arguments, is_frontend) {
                    (Ok(args), true) => {
                        frontend.push(call.id.clone());
                        msg::frontend_tool_request(&call.id, &call.name, args)
                    }
                    _ => msg::tool_request(&call.id, &call.name, &call.arguments),
                };
                // Stream each request (the text was streamed already).
                let m = msg::message(&reply_id, "assistant", vec![c.clone()]);
                if !out.send(&msg::ev_message(&m, &out.tokens)) {
                    return Ok(());
                }
                content.push(c);
            }
            let assistant = msg::message(&reply_id, "assistant", content);
            self.save(&assistant);
            self.conversation.push(assistant);
            if completion.tool_calls.is_empty() || !frontend.is_empty() {
                // Done, or the client must run a frontend tool and send its result in the next /reply.
                return Ok(());
            }
            let responses = self.run_tools(&completion.tool_calls, out, cancel);
            if is_cancelled(cancel) {
                return Ok(());
            }
            let m = msg::message(&format!("msg_{}", crate::util::random_hex(8)), "user", responses);
            self.save(&m);
            if !out.send(&msg::ev_message(&m, &out.tokens)) {
                return Ok(());
            }
            self.conversation.push(m);
        }
        Err(format!("stopped after {} model turns without a final answer (GOSLING_MAX_TURNS)", self.max_turns))
    }

    /// Asks the user in approve modes; true when the call may run.
    fn approved(&self, call: &llm::ToolCallOut, out: &Out, cancel: &Receiver<()>) -> Result<bool, ()> {
        let needs = match self.mode {
            Mode::Auto | Mode::Chat => false,
            Mode::Approve => true,
            Mode::SmartApprove => !self.read_only(&call.name),
        };
        if !needs {
            return Ok(true);
        }
        let args = call.arguments.clone().unwrap_or_else(|_| json!({}));
        let rx = self.confirmations.wait_for(&call.id);
        let m = msg::message(
            &format!("msg_{}", crate::util::random_hex(8)),
            "assistant",
            vec![msg::tool_confirmation(&call.id, &call.name, &args)],
        );
        if !out.send(&msg::ev_message(&m, &out.tokens)) {
            self.confirmations.forget(&call.id);
            return Err(());
        }
        let decision = loop {
            select! {
                recv(rx) -> a => break a.unwrap_or_default(),
                recv(cancel) -> _ => { self.confirmations.forget(&call.id); return Err(()); },
                default(PING_INTERVAL) => {
                    if !out.send(&json!({"type": "Ping"})) {
                        self.confirmations.forget(&call.id);
                        return Err(());
                    }
                }
            }
        };
        Ok(matches!(decision.as_str(), "allow_once" | "always_allow"))
    }

    fn read_only(&self, prefixed: &str) -> bool {
        self.runtime
            .tools(None)
            .iter()
            .find(|t| t.name == prefixed)
            .and_then(|t| t.tool.pointer("/annotations/readOnlyHint").and_then(Value::as_bool))
            .unwrap_or(false)
    }

    /// Runs the calls (in parallel), forwarding progress as Notification events.
    fn run_tools(&self, calls: &[llm::ToolCallOut], out: &Out, cancel: &Receiver<()>) -> Vec<Value> {
        let mut slots: Vec<Option<Value>> = vec![None; calls.len()];
        let mut running = Vec::new();
        // Cancel fan-out: each call gets its own receiver, closed when the turn is cancelled.
        let mut cancel_senders = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            let args = match &call.arguments {
                Ok(a) => a.clone(),
                Err(raw) => {
                    slots[i] = Some(msg::tool_response(
                        &call.id,
                        Err(&format!("-32602: the arguments are not valid JSON: {raw}")),
                    ));
                    continue;
                }
            };
            match self.approved(call, out, cancel) {
                Ok(true) => {}
                Ok(false) => {
                    slots[i] = Some(msg::tool_response(&call.id, Err("the user declined to run this tool")));
                    continue;
                }
                Err(()) => return Vec::new(),
            }
            let (ctx_cancel_tx, ctx_cancel_rx) = bounded::<()>(1);
            cancel_senders.push(ctx_cancel_tx);
            let (ptx, prx) = bounded::<Value>(64);
            let rt = self.runtime.clone();
            let name = call.name.clone();
            let args = if args.is_object() { Some(args) } else { None };
            let h = std::thread::spawn(move || {
                let ctx = CallContext { progress: Some(ptx), cancel: Some(ctx_cancel_rx) };
                rt.call_tool(&name, args, &ctx)
            });
            running.push((i, call.id.clone(), h, prx));
        }
        // Forward progress until every call finished; on cancel, tell the calls.
        loop {
            let mut busy = false;
            for (_, id, h, prx) in &running {
                while let Ok(p) = prx.try_recv() {
                    let method =
                        p.get("method").and_then(Value::as_str).unwrap_or("notifications/progress").to_string();
                    let params = p.get("params").cloned().unwrap_or(p.clone());
                    out.send(&msg::ev_notification(id, &method, &params));
                }
                busy |= !h.is_finished();
            }
            if !busy {
                break;
            }
            if is_cancelled(cancel) {
                // Dropping the senders disconnects each call's cancel receiver.
                cancel_senders.clear();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        for (i, id, h, _) in running {
            let r = h.join().unwrap_or_else(|_| {
                Err(crate::extensions::runtime::CallError::UnknownTool("tool call panicked".into()))
            });
            slots[i] = Some(match r {
                Ok(v) => msg::tool_response(&id, Ok(&crate::http::agent_routes::call_tool_response(&v))),
                Err(e) => msg::tool_response(&id, Err(&format!("-32603: {e}"))),
            });
        }
        slots.into_iter().flatten().collect()
    }
}

/// Writes the turn's frames to the client, with a Ping after each quiet interval. Returns
/// when the turn is over or the client is gone (then `cancel` fires).
pub fn pump(frames: Receiver<String>, cancel: Sender<()>, w: &mut dyn Write) -> io::Result<()> {
    let ping = crate::wire::sse::encode_data(&json!({"type": "Ping"}).to_string());
    loop {
        let frame = match frames.recv_timeout(PING_INTERVAL) {
            Ok(f) => f,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => ping.clone(),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return Ok(()),
        };
        if let Err(e) = w.write_all(frame.as_bytes()) {
            log::info!("reply: client hung up ({e}); cancelling the turn");
            drop(cancel);
            return Err(e);
        }
    }
}

//! A deterministic fake LLM server: each request gets the next scripted reply — a status,
//! headers and a body written step by step (bytes, pauses, an abrupt cut) — and is recorded.
//!
//! Plain `std::net` rather than tiny_http: tiny_http buffers chunked bodies up to 8 KiB and
//! always writes the terminating chunk, so it can neither trickle chunks with pauses nor cut a
//! stream mid-body. Here every step is written and flushed as it comes, bodies are chunked by
//! hand, and `Step::Cut` closes the socket without the last chunk. Every reply carries
//! `Connection: close`, so each request is a new connection.

#![allow(dead_code)] // each test uses its own subset

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub enum Step {
    /// Written as one HTTP chunk and flushed.
    Send(Vec<u8>),
    Sleep(Duration),
    /// Close the connection here, without the terminating chunk.
    Cut,
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub steps: Vec<Step>,
}

impl Reply {
    /// 200 `text/event-stream`, each string written as its own chunk.
    pub fn sse<S: AsRef<str>>(chunks: &[S]) -> Reply {
        Reply {
            status: 200,
            headers: vec![("Content-Type".into(), "text/event-stream".into())],
            steps: chunks.iter().map(|c| Step::Send(c.as_ref().as_bytes().to_vec())).collect(),
        }
    }

    /// A JSON error body with this status.
    pub fn error(status: u16, body: Value) -> Reply {
        Reply {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            steps: vec![Step::Send(body.to_string().into_bytes())],
        }
    }

    pub fn header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.into(), v.into()));
        self
    }

    pub fn then(mut self, step: Step) -> Reply {
        self.steps.push(step);
        self
    }
}

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    /// Names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Value,
    /// With `watch_dir`: the `.jsonl` files of that directory as they were when the request
    /// arrived (name and content), before it was answered.
    pub seen: Vec<(String, String)>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<Reply>,
    requests: Vec<Recorded>,
    /// A write to a client failed: the client closed its side.
    client_gone: bool,
    /// Requests are answered but not kept (long runs whose bodies would fill memory).
    forget: bool,
    /// Read when a request arrives (see `Recorded::seen`).
    watch: Option<std::path::PathBuf>,
}

pub struct FakeLlm {
    pub port: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

impl FakeLlm {
    /// Listens on 127.0.0.1:0 and answers requests with `script` in order; requests beyond
    /// the script get 500 "fake llm: script exhausted".
    pub fn start(script: Vec<Reply>) -> FakeLlm {
        FakeLlm::start_keeping(script, true)
    }

    /// Like `start`, but the requests are not kept (`requests()` stays empty): for runs of
    /// thousands of turns whose bodies carry a growing conversation.
    pub fn start_forgetting(script: Vec<Reply>) -> FakeLlm {
        FakeLlm::start_keeping(script, false)
    }

    fn start_keeping(script: Vec<Reply>, keep: bool) -> FakeLlm {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State { script: script.into(), forget: !keep, ..Default::default() }));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let st = st.clone();
                std::thread::spawn(move || serve(conn, &st));
            }
        });
        FakeLlm { port, state, stop }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment that points gosling at this fake: provider `openai`, `model`, and
    /// `OPENAI_HOST` here.
    pub fn env(&self, model: &str) -> Vec<(String, String)> {
        vec![
            ("GOOSE_PROVIDER".into(), "openai".into()),
            ("GOOSE_MODEL".into(), model.into()),
            ("OPENAI_HOST".into(), self.url()),
        ]
    }

    /// Reads the `.jsonl` files of `dir` when each request arrives, before answering it (what
    /// the server had written before it asked the model).
    pub fn watch_dir(&self, dir: &std::path::Path) {
        self.state.lock().unwrap().watch = Some(dir.to_path_buf());
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn client_gone(&self) -> bool {
        self.state.lock().unwrap().client_gone
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(conn: TcpStream, state: &Mutex<State>) {
    conn.set_read_timeout(Some(Duration::from_secs(30))).ok();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let len: usize = headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0u8; len.min(16 << 20)];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let reply = {
        let mut s = state.lock().unwrap();
        let mut seen = Vec::new();
        if let Some(dir) = &s.watch {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with(".jsonl") {
                    seen.push((name, std::fs::read_to_string(e.path()).unwrap_or_default()));
                }
            }
        }
        if !s.forget {
            let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
            s.requests.push(Recorded { path, headers, body, seen });
        }
        s.script.pop_front()
    };
    let reply = reply.unwrap_or_else(|| Reply::error(500, json!({"error": {"message": "fake llm: script exhausted"}})));
    let mut w = conn;
    let mut head = format!("HTTP/1.1 {} Fake\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n", reply.status);
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let gone = |state: &Mutex<State>| state.lock().unwrap().client_gone = true;
    if w.write_all(head.as_bytes()).and_then(|_| w.flush()).is_err() {
        return gone(state);
    }
    for step in reply.steps {
        match step {
            Step::Send(b) => {
                if b.is_empty() {
                    continue;
                }
                let mut chunk = format!("{:x}\r\n", b.len()).into_bytes();
                chunk.extend_from_slice(&b);
                chunk.extend_from_slice(b"\r\n");
                if w.write_all(&chunk).and_then(|_| w.flush()).is_err() {
                    return gone(state);
                }
            }
            Step::Sleep(d) => std::thread::sleep(d),
            Step::Cut => {
                let _ = w.shutdown(Shutdown::Both);
                return;
            }
        }
    }
    let _ = w.write_all(b"0\r\n\r\n");
    let _ = w.flush();
    // Wait for the client to close first, so a reply is never cut by our own reset.
    let _ = w.shutdown(Shutdown::Write);
    let mut sink = [0u8; 256];
    w.set_read_timeout(Some(Duration::from_secs(5))).ok();
    while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
}

// ---------------------------------------------------------------------------------------------
// OpenAI chunks

pub fn oa(v: Value) -> String {
    format!("data: {v}\n\n")
}

pub fn oa_text(t: &str) -> String {
    oa(
        json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": t}, "finish_reason": null}]}),
    )
}

/// A tool-call delta; `id`/`name` only in the first fragment, as OpenAI does.
pub fn oa_tool(index: u64, id_name: Option<(&str, &str)>, args: &str) -> String {
    let mut tc = json!({"index": index, "function": {"arguments": args}});
    if let Some((id, name)) = id_name {
        tc["id"] = id.into();
        tc["type"] = "function".into();
        tc["function"]["name"] = name.into();
    }
    oa(
        json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [tc]}, "finish_reason": null}]}),
    )
}

/// An OpenAI model turn that answers `t` and stops.
pub fn text_turn(t: &str) -> Reply {
    Reply::sse(&[oa_text(t), oa_finish("stop"), OA_DONE.to_string()])
}

/// An OpenAI model turn that calls one tool, `name`, with the JSON `args`; the call's id is `id`.
pub fn tool_turn(id: &str, name: &str, args: &str) -> Reply {
    Reply::sse(&[oa_tool(0, Some((id, name)), args), oa_finish("tool_calls"), OA_DONE.to_string()])
}

pub fn oa_finish(reason: &str) -> String {
    oa(json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}))
}

pub fn oa_usage(prompt: u64, completion: u64) -> String {
    oa(
        json!({"object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}),
    )
}

pub const OA_DONE: &str = "data: [DONE]\n\n";

// ---------------------------------------------------------------------------------------------
// Anthropic events

pub fn an(event: &str, v: Value) -> String {
    format!("event: {event}\ndata: {v}\n\n")
}

pub fn an_start(input_tokens: u64) -> String {
    an(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
    )
}

pub fn an_text_block(index: u64) -> String {
    an(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
    )
}

pub fn an_text(index: u64, t: &str) -> String {
    an(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": t}}),
    )
}

pub fn an_tool_block(index: u64, id: &str, name: &str) -> String {
    an(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
    )
}

pub fn an_json(index: u64, partial: &str) -> String {
    an(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": partial}}),
    )
}

pub fn an_block_stop(index: u64) -> String {
    an("content_block_stop", json!({"type": "content_block_stop", "index": index}))
}

pub fn an_delta(stop_reason: &str, output_tokens: u64) -> String {
    an(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": output_tokens}}),
    )
}

pub fn an_stop() -> String {
    an("message_stop", json!({"type": "message_stop"}))
}

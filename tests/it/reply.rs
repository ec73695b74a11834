//! `POST /reply`: the turn loop against a scripted fake LLM and against llmock, with a real
//! MCP server behind the tools. Every frame is checked to be `data: <one JSON line>\n\n` and a
//! valid goose MessageEvent.

use crate::contract;
use crate::fake_llm::*;
use crate::llmock::Llmock;
use crate::require_peers;
use crate::support::*;
use serde_json::{json, Value};
use std::io::Read;
use std::time::{Duration, Instant};

/// A /reply response read frame by frame.
pub struct ReplyStream {
    reader: Box<dyn Read + Send>,
    buf: Vec<u8>,
}

impl ReplyStream {
    pub fn open(s: &Server, session: &str, user_message: Value) -> ReplyStream {
        ReplyStream::open_body(s, json!({ "session_id": session, "user_message": user_message }))
    }

    /// `POST /reply` with `body` as it is (`override_conversation` and the like).
    pub fn open_body(s: &Server, body: Value) -> ReplyStream {
        let req = ureq::http::Request::builder()
            .method("POST")
            .uri(s.url("/reply"))
            .header("X-Secret-Key", SECRET)
            .header("Content-Type", "application/json")
            .body(body.to_string().into_bytes())
            .unwrap();
        let resp = agent().run(req).unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(resp.headers().get("content-type").unwrap().to_str().unwrap(), "text/event-stream");
        ReplyStream { reader: Box::new(resp.into_body().into_reader()), buf: Vec::new() }
    }

    /// The next event (Pings included); None when the server closed the stream.
    pub fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let frame: Vec<u8> = self.buf.drain(..pos + 2).collect();
                let text = String::from_utf8(frame).expect("frames are UTF-8");
                let line = text.strip_suffix("\n\n").unwrap();
                assert!(!line.contains('\n'), "one data line per frame: {text:?}");
                let json = line.strip_prefix("data: ").unwrap_or_else(|| panic!("frame is not `data: ...`: {text:?}"));
                let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("frame is not JSON ({e}): {json}"));
                let errs = contract::validate(&json!({"$ref": "#/components/schemas/MessageEvent"}), &v, "$");
                assert!(errs.is_empty(), "not a goose MessageEvent: {errs:?}\n{v}");
                return Some(v);
            }
            let mut chunk = [0u8; 8192];
            match self.reader.read(&mut chunk) {
                Ok(0) | Err(_) => {
                    assert!(
                        self.buf.is_empty(),
                        "stream ended inside a frame: {:?}",
                        String::from_utf8_lossy(&self.buf)
                    );
                    return None;
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Every event until the server closes the stream, Pings dropped.
    pub fn all(mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(e) = self.next() {
            if e["type"] != "Ping" {
                out.push(e);
            }
        }
        out
    }

    /// Reads until `pred` matches an event; returns it.
    pub fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let e = self.next().expect("stream ended before the expected event");
            if pred(&e) {
                return e;
            }
        }
    }
}

pub fn user_text(t: &str) -> Value {
    json!({"role": "user", "created": 1735725600, "content": [{"type": "text", "text": t}], "metadata": {"userVisible": true, "agentVisible": true}})
}

fn contents(events: &[Value], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "Message")
        .flat_map(|e| e["message"]["content"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["type"] == kind)
        .collect()
}

fn texts(events: &[Value]) -> String {
    contents(events, "text").iter().map(|c| c["text"].as_str().unwrap().to_string()).collect()
}

fn server_with_llm(host: &str, provider: &str, extra: &[(&str, &str)]) -> Server {
    let host_var = if provider == "anthropic" { "ANTHROPIC_HOST" } else { "OPENAI_HOST" };
    let mut env = vec![
        ("GOOSE_PROVIDER".to_string(), provider.to_string()),
        ("GOOSE_MODEL".to_string(), "mock-model".to_string()),
        (host_var.to_string(), host.to_string()),
        ("GOSLING_LLM_MAX_RETRY_WAIT_SECS".to_string(), "5".to_string()),
    ];
    if provider == "anthropic" {
        env.push(("ANTHROPIC_API_KEY".into(), "test-anthropic-key".into()));
    }
    for (k, v) in extra {
        env.push((k.to_string(), v.to_string()));
    }
    Server::start_with(ServerOpts { env, ..Default::default() })
}

/// A session with server-everything exposing `tools`.
fn session(s: &Server, peers: &Peers, tools: &[&str], more: Vec<Value>) -> String {
    let work = std::env::temp_dir();
    let mut ext = everything_stdio_config(peers, "everything");
    ext["available_tools"] = json!(tools);
    let mut exts = vec![ext];
    exts.extend(more);
    let id = start_session(s, &work, Some(exts));
    let res = resume(s, &id);
    assert!(res["extension_results"].as_array().unwrap().iter().all(|r| r["success"] == true), "{res}");
    id
}

fn assert_finished(events: &[Value]) {
    let last = events.last().expect("some events");
    assert_eq!(last["type"], "Finish", "last event: {last}");
    assert_eq!(last["reason"], "stop");
    assert!(!events.iter().any(|e| e["type"] == "Error"), "no Error: {events:?}");
}

fn full_turn_with_llmock(provider: &str) {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let host = if provider == "anthropic" { mock.anthropic_host() } else { mock.openai_host() };
    let s = server_with_llm(&host, provider, &[]);
    let id = session(&s, peers, &["echo"], vec![]);
    let events = ReplyStream::open(&s, &id, user_text("Please echo hello through the tool")).all();
    let requests = contents(&events, "toolRequest");
    assert!(!requests.is_empty(), "llmock called a tool: {events:?}");
    assert_eq!(requests[0]["toolCall"]["value"]["name"], "everything__echo");
    let responses = contents(&events, "toolResponse");
    assert_eq!(responses.len(), requests.len());
    assert_eq!(responses[0]["toolResult"]["status"], "success", "{}", responses[0]);
    assert!(responses[0]["toolResult"]["value"]["content"][0]["text"].as_str().unwrap().contains("Echo"));
    assert!(!texts(&events).is_empty(), "the model answered in text after the tool result");
    assert_finished(&events);
    let saved = s.get(&format!("/sessions/{id}")).json();
    assert!(saved["message_count"].as_u64().unwrap() >= 4, "{saved}");
    contract::check("GET", "/sessions/{session_id}", 200, &saved);
}

#[test]
fn llmock_openai_full_turn_calls_a_real_mcp_tool() {
    full_turn_with_llmock("openai");
}

#[test]
fn llmock_anthropic_full_turn_calls_a_real_mcp_tool() {
    full_turn_with_llmock("anthropic");
}

#[test]
fn streamed_text_and_usage() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![Reply::sse(&[
        oa_text("Hel"),
        oa_text("lo, "),
        oa_text("world"),
        oa_finish("stop"),
        oa_usage(12, 3),
        OA_DONE.to_string(),
    ])]);
    let s = server_with_llm(&llm.url(), "openai", &[]);
    let id = session(&s, peers, &["echo"], vec![]);
    let events = ReplyStream::open(&s, &id, user_text("hi")).all();
    let msgs: Vec<&Value> = events.iter().filter(|e| e["type"] == "Message").collect();
    assert_eq!(msgs.len(), 3, "one event per delta: {events:?}");
    assert!(msgs.iter().all(|m| m["message"]["id"] == msgs[0]["message"]["id"]), "chunks share the message id");
    assert_eq!(texts(&events), "Hello, world");
    assert_finished(&events);
    assert_eq!(events.last().unwrap()["token_state"]["inputTokens"], 12);
    assert_eq!(events.last().unwrap()["token_state"]["accumulatedTotalTokens"], 15);
    // The model saw the system prompt and the offered tool.
    let req: Value = llm.requests()[0].body.clone();
    assert_eq!(req["tools"][0]["function"]["name"], "everything__echo");
    assert_eq!(req["stream"], true);
}

#[test]
fn split_tool_arguments_and_parallel_calls_run_the_real_tool() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![
        Reply::sse(&[
            oa_tool(0, Some(("call_a", "everything__echo")), "{\"mes"),
            oa_tool(1, Some(("call_b", "everything__echo")), "{\"message\""),
            oa_tool(0, None, "sage\":\"fir"),
            oa_tool(1, None, ":\"second\"}"),
            oa_tool(0, None, "st\"}"),
            oa_finish("tool_calls"),
            OA_DONE.to_string(),
        ]),
        text_turn("both done"),
    ]);
    let s = server_with_llm(&llm.url(), "openai", &[]);
    let id = session(&s, peers, &["echo"], vec![]);
    let events = ReplyStream::open(&s, &id, user_text("echo twice")).all();
    let responses = contents(&events, "toolResponse");
    assert_eq!(responses.len(), 2, "{events:?}");
    let by_id = |i: &str| {
        responses.iter().find(|r| r["id"] == i).unwrap()["toolResult"]["value"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(by_id("call_a").contains("first"));
    assert!(by_id("call_b").contains("second"));
    assert_eq!(texts(&events), "both done");
    assert_finished(&events);
    // The tool results went back to the model.
    let second: Value = llm.requests()[1].body.clone();
    let tool_msgs: Vec<&Value> =
        second["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_msgs.len(), 2);
}

#[test]
fn bad_tool_calls_go_back_to_the_model() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![
        Reply::sse(&[
            oa_tool(0, Some(("c1", "nope__missing")), "{}"),
            oa_tool(1, Some(("c2", "everything__echo")), "{not json"),
            oa_finish("tool_calls"),
            OA_DONE.to_string(),
        ]),
        text_turn("sorry"),
    ]);
    let s = server_with_llm(&llm.url(), "openai", &[]);
    let id = session(&s, peers, &["echo"], vec![]);
    let events = ReplyStream::open(&s, &id, user_text("go")).all();
    let responses = contents(&events, "toolResponse");
    assert_eq!(responses.len(), 2);
    assert!(responses.iter().all(|r| r["toolResult"]["status"] == "error"), "{responses:?}");
    assert!(responses.iter().any(|r| r["toolResult"]["error"].as_str().unwrap().contains("not found")));
    assert!(responses.iter().any(|r| r["toolResult"]["error"].as_str().unwrap().contains("not valid JSON")));
    assert_finished(&events);
    assert_eq!(llm.requests().len(), 2, "the turn went on after the bad calls");
}

#[test]
fn rate_limit_is_retried_and_server_errors_reported() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![
        Reply::error(429, json!({"error": {"message": "slow down"}})).header("Retry-After", "0"),
        text_turn("after retry"),
        Reply::error(500, json!({"error": {"message": "boom"}})),
        Reply::error(500, json!({"error": {"message": "boom"}})),
        Reply::error(500, json!({"error": {"message": "boom"}})),
    ]);
    let s = server_with_llm(&llm.url(), "openai", &[]);
    let id = session(&s, peers, &["echo"], vec![]);
    let ok = ReplyStream::open(&s, &id, user_text("one")).all();
    assert_eq!(texts(&ok), "after retry");
    assert_finished(&ok);
    let failed = ReplyStream::open(&s, &id, user_text("two")).all();
    let last = failed.last().unwrap();
    assert_eq!(last["type"], "Error", "{failed:?}");
    assert!(last["error"].as_str().unwrap().contains("500"), "{last}");
    assert_eq!(s.get("/config").status, 200, "still serving");
}

#[test]
fn broken_streams_end_in_an_error_event() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![
        Reply::sse(&[oa_text("partial ")]).then(Step::Cut),
        Reply::sse(&[oa_text("x"), "data: {\"choices\": [oops\n\n".to_string()]),
        Reply::sse(&[oa_text("slow")]).then(Step::Sleep(Duration::from_secs(10))),
    ]);
    let s =
        server_with_llm(&llm.url(), "openai", &[("GOSLING_LLM_STALL_SECS", "1"), ("GOSLING_LLM_MAX_ATTEMPTS", "1")]);
    let id = session(&s, peers, &["echo"], vec![]);
    // Each error names its cause: the stall is seen after 1 s, not as the stream's end 10 s on.
    for (prompt, needle) in [("cut", "ended"), ("malformed", "malformed"), ("stall", "stalled")] {
        let events = ReplyStream::open(&s, &id, user_text(prompt)).all();
        let last = events.last().unwrap();
        assert_eq!(last["type"], "Error", "{prompt}: {events:?}");
        assert!(last["error"].as_str().unwrap().to_lowercase().contains(needle), "{prompt}: {last}");
        assert!(!texts(&events).is_empty(), "text streamed before the failure stays streamed");
    }
}

#[test]
fn no_provider_is_an_error_event_naming_the_settings() {
    let peers = require_peers!();
    let s = Server::start();
    let id = session(&s, peers, &["echo"], vec![]);
    let events = ReplyStream::open(&s, &id, user_text("hi")).all();
    assert_eq!(events.len(), 1);
    let e = events[0]["error"].as_str().unwrap();
    assert!(e.contains("GOOSE_PROVIDER"), "{e}");
    // The fix for each front end: the page's Settings, Desktop's and ACP's config call.
    assert!(e.contains("Settings") && e.contains("_goose/unstable/config/upsert"), "{e}");
    let none = ReplyStream::open(&s, "no-such-session", user_text("hi")).all();
    assert!(none[0]["error"].as_str().unwrap().contains("Failed to read session"));
}

#[test]
fn client_disconnect_cancels_the_tool_call() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![tool_turn(
        "long",
        "everything__trigger-long-running-operation",
        "{\"duration\": 30, \"steps\": 30}",
    )]);
    let s = server_with_llm(&llm.url(), "openai", &[]);
    let id = session(&s, peers, &["trigger-long-running-operation"], vec![]);
    let mut stream = ReplyStream::open(&s, &id, user_text("run the long thing"));
    stream.until(|e| contents(std::slice::from_ref(e), "toolRequest").len() == 1);
    // Log messages may come first; progress arrives as the operation runs.
    let progress = stream.until(|e| e["type"] == "Notification" && e["message"]["method"] == "notifications/progress");
    assert_eq!(progress["request_id"], "long");
    assert!(progress["message"]["params"]["progress"].is_number(), "{progress}");
    let t = Instant::now();
    drop(stream);
    let cancelled =
        wait_for(Duration::from_secs(30), || s.stderr().contains("abandoned (operation cancelled)").then_some(()));
    assert!(cancelled.is_some(), "the tool call was cancelled after the client left");
    assert_well_under(
        t.elapsed(),
        Duration::from_secs(30),
        "cancelled when the client left, not at the operation's end",
    );
    assert_eq!(s.get("/config").status, 200, "still serving");
    assert_eq!(llm.requests().len(), 1, "no further model turn");
}

fn approve_flow(action: &str) -> Option<Vec<Value>> {
    let Some(peers) = peers() else {
        crate::support::say_skipped("needs the test peers");
        return None;
    };
    let llm =
        FakeLlm::start(vec![tool_turn("ask1", "everything__echo", "{\"message\":\"approved?\"}"), text_turn("ok")]);
    let s = server_with_llm(&llm.url(), "openai", &[("GOOSE_MODE", "approve")]);
    let id = session(&s, peers, &["echo"], vec![]);
    let tools = s.get(&format!("/agent/tools?session_id={id}")).json();
    assert_eq!(tools[0]["permission"], "ask_before");
    let mut stream = ReplyStream::open(&s, &id, user_text("echo, with permission"));
    let ask = stream.until(|e| !contents(std::slice::from_ref(e), "actionRequired").is_empty());
    let data = &contents(std::slice::from_ref(&ask), "actionRequired")[0]["data"];
    assert_eq!(data["actionType"], "toolConfirmation");
    assert_eq!(data["toolName"], "everything__echo");
    // The turn waits for the answer: the stream goes quiet but for a Ping that keeps it alive.
    stream.until(|e| e["type"] == "Ping");
    let r = s.post("/action-required/tool-confirmation", json!({"id": data["id"], "action": action, "sessionId": id}));
    assert_eq!(r.status, 200, "{}", r.text());
    contract::check_resp("POST", "/action-required/tool-confirmation", &r);
    let rest = stream.all();
    assert_finished(&rest);
    assert_eq!(r.json()["status"], "delivered");
    let again =
        s.post("/action-required/tool-confirmation", json!({"id": data["id"], "action": action, "sessionId": id}));
    assert_eq!(again.status, 200, "goose documents only 200 here");
    contract::check_resp("POST", "/action-required/tool-confirmation", &again);
    assert_eq!(again.json()["status"], "unknown", "nothing waits any more");
    assert!(again.json()["message"].as_str().unwrap().contains("no tool call"));
    Some(contents(&rest, "toolResponse"))
}

#[test]
fn approve_mode_runs_the_tool_after_allow() {
    let Some(responses) = approve_flow("allow_once") else { return };
    assert_eq!(responses[0]["toolResult"]["status"], "success");
}

#[test]
fn approve_mode_declines_the_tool_after_deny() {
    let Some(responses) = approve_flow("deny_once") else { return };
    assert_eq!(responses[0]["toolResult"]["status"], "error");
    assert!(responses[0]["toolResult"]["error"].as_str().unwrap().contains("declined"));
}

#[test]
fn frontend_tools_are_handed_to_the_client() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![tool_turn("fe1", "ui__pick_file", "{}"), text_turn("you picked a.txt")]);
    let s = server_with_llm(&llm.url(), "openai", &[]);
    let ui = json!({"type":"frontend","name":"ui","description":"","tools":[{"name":"pick_file","description":"Ask the user for a file","inputSchema":{"type":"object","properties":{}}}]});
    let id = session(&s, peers, &["echo"], vec![ui]);
    let tools = s.get(&format!("/agent/tools?session_id={id}&extension_name=ui")).json();
    assert_eq!(tools[0]["name"], "ui__pick_file");
    let call = s.post("/agent/call_tool", json!({"session_id": id, "name": "ui__pick_file", "arguments": {}}));
    assert_eq!(call.status, 424);
    let events = ReplyStream::open(&s, &id, user_text("pick a file")).all();
    let fe = contents(&events, "frontendToolRequest");
    assert_eq!(fe.len(), 1, "{events:?}");
    assert_eq!(fe[0]["toolCall"]["value"]["name"], "ui__pick_file");
    assert_finished(&events);
    // The client ran it and sends the result as the next user message.
    let result = json!({"role":"user","created":1735725601,"content":[{"type":"toolResponse","id":"fe1","toolResult":{"status":"success","value":{"content":[{"type":"text","text":"a.txt"}],"isError":false}}}],"metadata":{"userVisible":true,"agentVisible":true}});
    let events = ReplyStream::open(&s, &id, result).all();
    assert_eq!(texts(&events), "you picked a.txt");
    let second: Value = llm.requests()[1].body.clone();
    assert!(second["messages"].as_array().unwrap().iter().any(|m| m["role"] == "tool" && m["tool_call_id"] == "fe1"));
}

#[test]
fn client_disconnect_drops_the_llm_stream() {
    let peers = require_peers!();
    // A slow stream: a token every 200 ms for 20 s.
    let mut slow = Reply::sse(&[oa_text("thinking")]);
    for _ in 0..100 {
        slow = slow.then(Step::Sleep(Duration::from_millis(200))).then(Step::Send(oa_text(".").into_bytes()));
    }
    let llm = FakeLlm::start(vec![slow]);
    let s = server_with_llm(&llm.url(), "openai", &[]);
    let id = session(&s, peers, &["echo"], vec![]);
    let mut stream = ReplyStream::open(&s, &id, user_text("think hard"));
    stream.until(|e| e["type"] == "Message");
    drop(stream);
    let t = Instant::now();
    let gone = wait_for(Duration::from_secs(10), || llm.client_gone().then_some(()));
    assert!(gone.is_some(), "the LLM connection was dropped after the client left");
    assert_well_under(t.elapsed(), Duration::from_secs(20), "dropped when the client left, not at the stream's end");
    assert_eq!(s.get("/config").status, 200);
}

/// A power loss (or a kill) can leave a request for tools without its result, or — lines of
/// one turn reaching the disk out of order — a result without its request: the conversation
/// still goes to the model in pairs, as the providers require (an unpaired call or result is
/// refused with a 400), the lost result answered as interrupted and the stray one left out.
#[test]
fn a_tool_call_whose_result_was_lost_is_answered_as_interrupted_on_the_next_turn() {
    let llm = FakeLlm::start(vec![text_turn("picked up")]);
    let s = Server::start_with(ServerOpts { env: llm.env("m"), ..Default::default() });
    let work = TempDir::new("lost-result");
    let id = start_session(&s, work.path(), Some(vec![]));
    resume(&s, &id);
    // What the crashed turn left in the conversation file: the person's message, the model's
    // request for a tool, no result; then a result whose request is not there.
    let line = |v: Value| format!("{v}\n");
    let meta = json!({"userVisible": true, "agentVisible": true});
    let planted = [
        json!({"id": "m1", "role": "user", "created": 1, "content": [{"type": "text", "text": "run it"}], "metadata": meta}),
        json!({"id": "m2", "role": "assistant", "created": 2, "content": [{"type": "toolRequest", "id": "call_lost",
            "toolCall": {"status": "success", "value": {"name": "dev__shell", "arguments": {"command": "make"}}}}], "metadata": meta}),
        json!({"id": "m3", "role": "user", "created": 3, "content": [{"type": "toolResponse", "id": "call_stray",
            "toolResult": {"status": "success", "value": {"content": [{"type": "text", "text": "stale"}], "isError": false}}}], "metadata": meta}),
    ];
    let file = s.home.join("state/sessions").join(format!("{id}.jsonl"));
    let mut f = std::fs::OpenOptions::new().append(true).create(true).open(&file).unwrap();
    for m in planted {
        std::io::Write::write_all(&mut f, line(m).as_bytes()).unwrap();
    }
    drop(f);
    let events = ReplyStream::open(&s, &id, user_text("again")).all();
    assert_finished(&events);
    let body = llm.requests()[0].body.clone();
    let msgs: Vec<Value> =
        body["messages"].as_array().unwrap().iter().filter(|m| m["role"] != "system").cloned().collect();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user"], "{msgs:#?}");
    assert_eq!(msgs[1]["tool_calls"][0]["id"], "call_lost");
    assert_eq!(msgs[2]["tool_call_id"], "call_lost", "the lost result is answered: {msgs:#?}");
    let said = msgs[2]["content"].to_string();
    assert!(said.contains("no result was saved") && said.contains("may or may not have run"), "{said}");
    assert!(!body.to_string().contains("call_stray"), "the stray result is left out: {body}");
    assert_eq!(msgs[3]["content"], "again");
    // The conversation on disk is left as it was: the pairing is the model's view only.
    let kept = std::fs::read_to_string(&file).unwrap();
    assert!(kept.contains("call_stray") && !kept.contains("no result was saved"), "{kept}");
}

/// The tools offered to the model are made once per tool list (`SessionRuntime::tools_shared`)
/// and follow the list when the server changes it: a tool the server adds between two turns
/// (`notifications/tools/list_changed`) is offered on the next.
#[test]
fn a_tool_the_server_adds_between_turns_is_offered_on_the_next() {
    let llm = FakeLlm::start(vec![
        tool_turn("call_1", "t__echo", r#"{"message":"hi"}"#),
        text_turn("done"),
        text_turn("again"),
    ]);
    let s = Server::start_with(ServerOpts { env: llm.env("m"), ..Default::default() });
    let work = TempDir::new("late-tool");
    let fake = manifest_dir().join("tests/fakes/bad_mcp_stdio.py");
    let t = json!({"type":"stdio","name":"t","description":"","cmd":"python3",
                   "args":[fake.display().to_string(), "trickle"],"timeout":60});
    let id = start_session(&s, work.path(), Some(vec![t]));
    resume(&s, &id);
    let events = ReplyStream::open(&s, &id, user_text("call it")).all();
    assert_finished(&events);
    // 300 ms after its first call the server adds `late` and says so.
    let listed = || s.get(&format!("/agent/tools?session_id={id}")).text();
    let late = wait_for(Duration::from_secs(20), || listed().contains("t__late").then_some(()));
    assert!(late.is_some(), "the server's new tool is listed: {}", listed());
    let events = ReplyStream::open(&s, &id, user_text("and now?")).all();
    assert_finished(&events);
    let offered = |i: usize| -> Vec<String> {
        let body = &llm.requests()[i].body;
        body["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(offered(0), ["t__echo", "t__slow"]);
    assert_eq!(offered(1), offered(0), "the same list within the turn");
    assert_eq!(offered(2), ["t__echo", "t__late", "t__slow"], "the new tool on the next turn");
}

/// A turn converts only what was stored since the session's last turn (the conversion of the
/// rest is kept while the conversation only grew): what the model is sent is the whole stored
/// conversation all the same — after a rewrite (`override_conversation`), after a message
/// another process appended, turn after turn.
#[test]
fn each_turn_sends_the_model_the_whole_stored_conversation_after_rewrites_and_appends_from_elsewhere() {
    let llm = FakeLlm::start(["a1", "a2", "a3", "a4", "a5"].into_iter().map(text_turn).collect());
    let s = Server::start_with(ServerOpts { env: llm.env("m"), ..Default::default() });
    let work = TempDir::new("kept-conversion");
    let id = start_session(&s, work.path(), Some(vec![]));
    resume(&s, &id);
    let said = |i: usize| -> Vec<String> {
        let body = &llm.requests()[i].body;
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] != "system")
            .map(|m| format!("{}: {}", m["role"].as_str().unwrap(), m["content"].as_str().unwrap_or("?")))
            .collect()
    };
    for q in ["one", "two"] {
        assert_finished(&ReplyStream::open(&s, &id, user_text(q)).all());
    }
    assert_eq!(said(1), ["user: one", "assistant: a1", "user: two"]);
    // A rewrite of the conversation with the next message (goose's override_conversation).
    let meta = json!({"userVisible": true, "agentVisible": true});
    let edited = json!([
        {"id": "e1", "role": "user", "created": 1, "content": [{"type": "text", "text": "edited one"}], "metadata": meta},
        {"id": "e2", "role": "assistant", "created": 2, "content": [{"type": "text", "text": "edited a1"}], "metadata": meta},
    ]);
    let body = json!({"session_id": id, "user_message": user_text("three"), "override_conversation": edited});
    let events = ReplyStream::open_body(&s, body).all();
    assert_finished(&events);
    assert_eq!(said(2), ["user: edited one", "assistant: edited a1", "user: three"]);
    assert_finished(&ReplyStream::open(&s, &id, user_text("four")).all());
    assert_eq!(
        said(3),
        ["user: edited one", "assistant: edited a1", "user: three", "assistant: a3", "user: four"],
        "the rewritten conversation, not the one converted before it"
    );
    // A message another process appended between two turns.
    let file = s.home.join("state/sessions").join(format!("{id}.jsonl"));
    let other = json!({"id": "o1", "role": "user", "created": 9, "content": [{"type": "text", "text": "from elsewhere"}], "metadata": meta});
    let mut f = std::fs::OpenOptions::new().append(true).open(&file).unwrap();
    std::io::Write::write_all(&mut f, format!("{other}\n").as_bytes()).unwrap();
    drop(f);
    assert_finished(&ReplyStream::open(&s, &id, user_text("five")).all());
    assert_eq!(
        said(4),
        [
            "user: edited one",
            "assistant: edited a1",
            "user: three",
            "assistant: a3",
            "user: four",
            "assistant: a4",
            "user: from elsewhere",
            "user: five"
        ]
    );
}

//! `gosling acp` driven by real ACP clients: the official TypeScript SDK's client side
//! (`tests/acp/driver.mjs`) and the headless `acpx` CLI, both pinned in scripts/peers, with
//! llmock as the model and server-everything as the editor's MCP server. Bad input is sent
//! as raw lines.

use crate::llmock::Llmock;
use crate::require_peers;
use crate::support::{bin, everything_stdio_config, manifest_dir, work_dir, Peers, Server, ServerOpts, TempDir};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The environment `gosling acp` runs in: isolated dirs, llmock as the model (if any).
fn acp_env(cmd: &mut Command, home: &TempDir, mock: Option<&Llmock>, extra: &[(&str, &str)]) {
    cmd.env("GOSLING_CONFIG_DIR", home.join("config"))
        .env("GOSLING_STATE_DIR", home.join("state"))
        // Titles from the first message only: no title request takes a scripted model reply.
        .env("GOSLING_SESSION_TITLES", "first_message")
        .env("HOME", home.path())
        .env("GOSLING", bin())
        .env("RUST_LOG", "warn");
    for k in [
        "GOOSE_SERVER__SECRET_KEY",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GOOSE_PROVIDER",
        "GOOSE_MODEL",
        "GOOSE_MODE",
    ] {
        cmd.env_remove(k);
    }
    if let Some(m) = mock {
        cmd.env("GOOSE_PROVIDER", "openai").env("GOOSE_MODEL", "mock-model").env("OPENAI_HOST", m.openai_host());
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
}

/// Runs the SDK driver with `script`; returns its transcript and the final buffers.
fn drive(
    peers: &Peers,
    home: &TempDir,
    mock: Option<&Llmock>,
    extra: &[(&str, &str)],
    script: Value,
) -> (Vec<Value>, Value) {
    let mut cmd = Command::new(peers.node());
    cmd.arg(manifest_dir().join("tests/acp/driver.mjs"))
        .arg(script.to_string())
        .env("ACP_SDK_DIR", peers.get("ACP_SDK_DIR"));
    acp_env(&mut cmd, home, mock, extra);
    let out = cmd.stderr(Stdio::inherit()).output().expect("run the ACP driver");
    assert!(out.status.success(), "driver failed: {}", String::from_utf8_lossy(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("driver output ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (v["transcript"].as_array().unwrap().clone(), v["buffers"].clone())
}

fn responses<'a>(t: &'a [Value], method: &str) -> Vec<&'a Value> {
    t.iter().filter(|e| e["kind"] == "response" && e["method"] == method).collect()
}

fn updates<'a>(t: &'a [Value], kind: &str) -> Vec<&'a Value> {
    t.iter().filter(|e| e["kind"] == "update" && e["update"]["sessionUpdate"] == kind).map(|e| &e["update"]).collect()
}

fn agent_text(t: &[Value]) -> String {
    updates(t, "agent_message_chunk").iter().map(|u| u["content"]["text"].as_str().unwrap_or("")).collect()
}

fn echo_then(text: &str) -> Value {
    json!([
        {"type": "reply", "tool_calls": [{"name": "everything__echo", "arguments": {"message": "hello"}}]},
        {"type": "reply", "text": text},
    ])
}

/// server-everything as the editor passes it (ACP McpServer, stdio).
fn everything(peers: &Peers) -> Value {
    let c = everything_stdio_config(peers, "everything");
    json!({ "name": "everything", "command": c["cmd"], "args": c["args"], "env": [] })
}

#[test]
fn sdk_initialize_without_a_provider_offers_an_auth_method_with_what_to_set() {
    let peers = require_peers!();
    let home = TempDir::new("acp-auth");
    let cwd = work_dir(&home);
    let script = json!({"steps": [
        {"do": "initialize"},
        {"do": "raw", "method": "authenticate", "params": {"methodId": "gosling-provider"}},
        {"do": "raw", "method": "authenticate", "params": {"methodId": "oauth"}},
        {"do": "new", "cwd": cwd},
        {"do": "prompt", "text": "hi"},
    ]});
    let (t, _) = drive(peers, &home, None, &[], script);
    let init = &responses(&t, "initialize")[0]["result"];
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(init["agentCapabilities"]["mcpCapabilities"], json!({"http": true, "sse": false}));
    assert_eq!(init["agentCapabilities"]["promptCapabilities"]["embeddedContext"], true);
    let method = &init["authMethods"][0];
    assert_eq!(method["id"], "gosling-provider");
    assert!(method["description"].as_str().unwrap().contains("GOOSE_PROVIDER"), "{method}");
    let auth = responses(&t, "authenticate");
    assert_eq!(auth[0]["error"]["code"], -32000, "{}", auth[0]);
    assert!(auth[0]["error"]["message"].as_str().unwrap().contains("set these in the agent's environment"));
    assert!(auth[1]["error"]["message"].as_str().unwrap().contains("unknown auth method \"oauth\""), "{}", auth[1]);
    let prompt = &responses(&t, "session/prompt")[0];
    assert_eq!(prompt["error"]["code"], -32000, "a prompt without a model asks for auth: {prompt}");
    // ACP's auth_required as the SDK's RequestError.authRequired writes it (acpx and Zed read
    // the code and this message), with the method that helps in `data.authMethods`.
    for e in [&prompt["error"], &auth[0]["error"]] {
        let message = e["message"].as_str().unwrap();
        assert!(message.starts_with("Authentication required: ") && message.contains("GOOSE_PROVIDER"), "{e}");
        assert_eq!(e["data"]["authMethods"][0]["id"], "gosling-provider", "{e}");
        assert!(e["data"]["authMethods"][0]["description"].as_str().unwrap().contains("GOOSE_PROVIDER"), "{e}");
    }
    // session/new is not refused (goose 1.52 answers -32603 there): the editor may still set
    // the session's provider and model with session/set_config_option.
    assert!(responses(&t, "session/new")[0]["result"]["sessionId"].is_string());
}

#[test]
fn sdk_prompt_calls_the_editors_mcp_servers_streams_text_and_a_plan() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let home = TempDir::new("acp-prompt");
    let cwd = work_dir(&home);
    // The editor passes server-everything twice: over stdio and over Streamable HTTP.
    let remote = crate::support::everything_http(peers);
    let both = json!([{"name": "everything__echo", "arguments": {"message": "hello"}}, {"name": "remote__echo", "arguments": {"message": "far"}}]);
    let plan = "Plan:\n- [x] read the request\n- [ ] echo it twice\n";
    mock.script(
        json!([{"type": "reply", "text": plan, "tool_calls": both}, {"type": "reply", "text": "the tools said hello"}]),
    );
    let http =
        json!({"type": "http", "name": "remote", "url": remote.url, "headers": [{"name": "X-Test", "value": "1"}]});
    let script = json!({"steps": [
        {"do": "initialize"},
        {"do": "new", "cwd": cwd, "mcpServers": [everything(peers), http]},
        {"do": "prompt", "text": "Please echo hello"},
    ]});
    let (t, _) = drive(peers, &home, Some(&mock), &[], script);
    let methods = &responses(&t, "initialize")[0]["result"]["authMethods"];
    assert_eq!(methods[0]["id"], "gosling-provider", "one method always (registries require one): {methods}");
    assert!(methods[0]["description"].as_str().unwrap().contains("is configured"), "a model is configured: {methods}");
    let new = &responses(&t, "session/new")[0]["result"];
    assert_eq!(new["modes"]["currentModeId"], "auto");
    let calls = updates(&t, "tool_call");
    let titles: Vec<_> = calls.iter().map(|c| c["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["everything__echo", "remote__echo"], "{t:?}");
    assert_eq!(calls[0]["rawInput"], json!({"message": "hello"}));
    assert_eq!(calls[0]["status"], "in_progress", "auto mode runs at once");
    for (call, said) in calls.iter().zip(["Echo: hello", "Echo: far"]) {
        let done = updates(&t, "tool_call_update").into_iter().find(|u| u["toolCallId"] == call["toolCallId"]).unwrap();
        assert_eq!(done["status"], "completed", "{done}");
        assert!(done["content"][0]["content"]["text"].as_str().unwrap().contains(said), "{done}");
    }
    assert_eq!(agent_text(&t), format!("{plan}the tools said hello"));
    assert!(updates(&t, "agent_message_chunk").len() > 1, "the text streams in chunks");
    // The task list in the model's text is also sent as ACP's plan, before the tool calls.
    let plans = updates(&t, "plan");
    assert_eq!(plans.len(), 1, "{plans:?}");
    assert_eq!(plans[0]["entries"][1], json!({"content": "echo it twice", "priority": "medium", "status": "pending"}));
    let plan_at = t.iter().position(|e| e["update"]["sessionUpdate"] == "plan").unwrap();
    assert!(plan_at < t.iter().position(|e| e["update"]["sessionUpdate"] == "tool_call").unwrap());
    let answer = &responses(&t, "session/prompt")[0]["result"];
    assert_eq!(answer["stopReason"], "end_turn", "{answer}");
    // The turn's tokens (ACP's PromptResponse.usage): what llmock reported, added up.
    assert!(answer["usage"]["totalTokens"].as_u64().is_some_and(|n| n > 0), "{answer}");
    // The session is the HTTP API's: the editor's servers are stored with it.
    let id = new["sessionId"].as_str().unwrap();
    let web = Server::start_in(home, ServerOpts::default());
    let r = web.get(&format!("/sessions/{id}"));
    assert_eq!(r.status, 200, "{}", r.text());
    let stored = r.json();
    assert_eq!(stored["working_dir"], cwd);
    let exts = &stored["extension_data"]["enabled_extensions.v0"]["extensions"];
    assert_eq!(
        (exts[0]["type"].as_str(), exts[1]["type"].as_str()),
        (Some("stdio"), Some("streamable_http")),
        "{stored}"
    );
    assert_eq!(exts[1]["headers"]["X-Test"], "1");
}

#[test]
fn sdk_approve_mode_asks_the_editor_allow_always_and_reject() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let home = TempDir::new("acp-perm");
    let cwd = work_dir(&home);
    let mut behaviors = echo_then("first").as_array().unwrap().clone();
    behaviors.extend(echo_then("second").as_array().unwrap().clone());
    behaviors.extend(echo_then("third").as_array().unwrap().clone());
    mock.script(Value::Array(behaviors));
    let script = json!({"steps": [
        {"do": "initialize"},
        {"do": "new", "cwd": cwd, "mcpServers": [everything(peers)]},
        {"do": "set_mode", "modeId": "approve"},
        {"do": "raw", "method": "session/set_mode", "params": {"sessionId": "x", "modeId": "yolo"}},
        {"do": "prompt", "text": "one", "permission": "reject_once"},
        {"do": "prompt", "text": "two", "permission": "allow_always"},
        {"do": "prompt", "text": "three", "permission": "reject_once"},
    ]});
    let (t, _) = drive(peers, &home, Some(&mock), &[], script);
    let bad_mode = &responses(&t, "session/set_mode")[1];
    assert!(bad_mode["error"]["message"].as_str().unwrap().contains("unknown mode \"yolo\""), "{bad_mode}");
    let asks: Vec<_> = t.iter().filter(|e| e["kind"] == "permission").collect();
    assert_eq!(asks.len(), 2, "asked for prompts one and two; three is allowed always: {asks:?}");
    let kinds: Vec<_> =
        asks[0]["params"]["options"].as_array().unwrap().iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["allow_once", "allow_always", "reject_once", "reject_always"]);
    assert_eq!(asks[0]["params"]["toolCall"]["title"], "everything__echo");
    let closed: Vec<_> = updates(&t, "tool_call_update").into_iter().filter(|u| u.get("content").is_some()).collect();
    let statuses: Vec<_> = closed.iter().map(|u| u["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["failed", "completed", "completed"], "{closed:?}");
    assert!(closed[0]["content"][0]["content"]["text"].as_str().unwrap().contains("declined"));
    assert_eq!(updates(&t, "tool_call")[0]["status"], "pending", "approve mode: pending until allowed");
    let stops: Vec<_> = responses(&t, "session/prompt").iter().map(|r| r["result"]["stopReason"].clone()).collect();
    assert_eq!(stops, [json!("end_turn"), json!("end_turn"), json!("end_turn")]);
}

#[test]
fn sdk_cancel_stops_the_model_stream_a_permission_wait_and_a_running_tool() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let home = TempDir::new("acp-cancel");
    let cwd = work_dir(&home);
    // The first answer takes a minute to start; the cancel must not wait for it. The second
    // asks for a tool (declined by the cancel), the third starts a minute-long tool call.
    let long = json!({"type": "reply", "tool_calls": [{"name": "everything__trigger-long-running-operation", "arguments": {"duration": 60, "steps": 60}}]});
    mock.script(json!([{"type": "slow_first_token", "seconds": 60}, long, long]));
    let script = json!({"steps": [
        {"do": "initialize"},
        {"do": "new", "cwd": cwd, "mcpServers": [everything(peers)]},
        {"do": "prompt", "text": "slow", "cancelWhen": {"llmockRequests": mock.openai_host(), "above": 0}},
        {"do": "set_mode", "modeId": "approve"},
        {"do": "prompt", "text": "ask me", "cancelWhen": "permission"},
        {"do": "set_mode", "modeId": "auto"},
        {"do": "prompt", "text": "run long", "cancelWhen": "tool_call"},
        {"do": "prompt", "text": "and now answer"},
    ]});
    let (t, _) = drive(peers, &home, Some(&mock), &[], script);
    let prompts = responses(&t, "session/prompt");
    let took = |p: &Value| Duration::from_millis(p["ms"].as_u64().unwrap());
    assert_eq!(prompts[0]["result"]["stopReason"], "cancelled", "{t:?}");
    crate::support::assert_well_under(
        took(prompts[0]),
        Duration::from_secs(60),
        "cancelled before the model's first token",
    );
    assert_eq!(prompts[1]["result"]["stopReason"], "cancelled", "cancel while the editor is asked");
    assert_eq!(prompts[2]["result"]["stopReason"], "cancelled", "cancel while a tool runs");
    crate::support::assert_well_under(took(prompts[2]), Duration::from_secs(60), "the running tool call was stopped");
    assert_eq!(prompts[3]["result"]["stopReason"], "end_turn", "the session serves after cancels");
}

#[test]
fn sdk_load_after_restart_replays_and_sessions_cross_to_the_web_api_and_back() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let home = TempDir::new("acp-load");
    let cwd = work_dir(&home);
    mock.script(echo_then("remembered"));
    let first = json!({"steps": [
        {"do": "initialize"},
        {"do": "new", "cwd": cwd, "mcpServers": [everything(peers)]},
        {"do": "prompt", "text": "Please echo hello"},
    ]});
    let (t, _) = drive(peers, &home, Some(&mock), &[], first);
    let id = responses(&t, "session/new")[0]["result"]["sessionId"].as_str().unwrap().to_string();
    // A second session in the store, never opened by the next process.
    let other = {
        let s = json!({"steps": [{"do": "initialize"}, {"do": "new", "cwd": cwd}]});
        let (t, _) = drive(peers, &home, Some(&mock), &[], s);
        responses(&t, "session/new")[0]["result"]["sessionId"].as_str().unwrap().to_string()
    };
    // A new `gosling acp` process: load replays the conversation, then the session goes on.
    mock.script(json!([{"type": "reply", "text": "still here"}]));
    let second = json!({"steps": [
        {"do": "initialize"},
        {"do": "load", "sessionId": id, "cwd": cwd},
        {"do": "prompt", "text": "again"},
        {"do": "load", "sessionId": "20000101_9", "cwd": cwd},
        {"do": "raw", "method": "session/prompt", "params": {"sessionId": other, "prompt": [{"type": "text", "text": "x"}]}},
    ]});
    let (t, _) = drive(peers, &home, Some(&mock), &[], second);
    let load = &responses(&t, "session/load")[0];
    assert!(load.get("error").is_none(), "{load}");
    let before_load = t.iter().position(|e| e["kind"] == "response" && e["method"] == "session/load").unwrap();
    let replayed: Vec<_> = t[..before_load]
        .iter()
        .filter(|e| e["kind"] == "update")
        .map(|e| e["update"]["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(replayed.first(), Some(&"user_message_chunk"), "{replayed:?}");
    assert!(replayed.contains(&"tool_call") && replayed.contains(&"tool_call_update"), "{replayed:?}");
    assert_eq!(updates(&t[..before_load], "user_message_chunk")[0]["content"]["text"], "Please echo hello");
    assert!(agent_text(&t[..before_load]).contains("remembered"));
    assert_eq!(responses(&t, "session/prompt")[0]["result"]["stopReason"], "end_turn");
    let missing = &responses(&t, "session/load")[1];
    assert_eq!(missing["error"]["code"], -32002, "{missing}");
    // An unknown id: no session has it, and how to list them (not "open it with session/load").
    let said = missing["error"]["message"].as_str().unwrap();
    assert!(said.contains("no session has this id") && said.contains("session/list"), "{missing}");
    assert!(!said.contains("session/load"), "{missing}");
    let not_open = &responses(&t, "session/prompt")[1];
    assert!(not_open["error"]["message"].as_str().unwrap().contains("open it with session/load first"), "{not_open}");
    // The web page's API reads the same store: resume there, and the conversation is whole.
    let s = Server::start_in(home, ServerOpts::default());
    let r = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": false}));
    assert_eq!(r.status, 200, "{}", r.text());
    let conv = r.json()["session"]["conversation"].as_array().unwrap().clone();
    let texts: Vec<_> = conv
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap().clone())
        .filter_map(|c| c["text"].as_str().map(str::to_string))
        .collect();
    assert!(texts.contains(&"again".to_string()) && texts.contains(&"still here".to_string()), "{texts:?}");
    // And back: a session started from the web API opens in the editor.
    let r = s.post("/agent/start", json!({"working_dir": cwd}));
    assert_eq!(r.status, 200, "{}", r.text());
    let web_id = r.json()["id"].as_str().unwrap().to_string();
    let home = s.kill();
    mock.script(json!([{"type": "reply", "text": "hello from the editor"}]));
    let third = json!({"steps": [
        {"do": "initialize"},
        {"do": "load", "sessionId": web_id, "cwd": cwd},
        {"do": "prompt", "text": "hi"},
    ]});
    let (t, _) = drive(peers, &home, Some(&mock), &[], third);
    assert!(responses(&t, "session/load")[0].get("error").is_none(), "{t:?}");
    assert_eq!(agent_text(&t), "hello from the editor");
}

fn enable_developer(home: &TempDir) {
    let dir = home.join("config");
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = json!({"extensions": {"developer": {"enabled": true, "type": "builtin", "name": "developer", "description": "", "timeout": 300, "bundled": true, "available_tools": []}}});
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("config.json"), std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn sdk_developer_file_tools_go_through_the_editor_when_it_offers_fs() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let home = TempDir::new("acp-fs");
    enable_developer(&home);
    let cwd = work_dir(&home);
    let file = format!("{cwd}/notes.txt");
    std::fs::write(&file, "on disk\n").unwrap();
    let edits = |text: &str| {
        json!([
            {"type": "reply", "tool_calls": [{"name": "developer__text_editor", "arguments": {"command": "view", "path": "notes.txt"}}]},
            {"type": "reply", "tool_calls": [{"name": "developer__text_editor", "arguments": {"command": "str_replace", "path": "notes.txt", "old_str": "editor", "new_str": "EDITOR"}}]},
            {"type": "reply", "text": text},
        ])
    };
    mock.script(edits("edited"));
    let script = json!({"fs": true, "buffers": {file.clone(): "unsaved editor buffer\n"}, "steps": [
        {"do": "initialize"},
        {"do": "new", "cwd": cwd},
        {"do": "prompt", "text": "edit notes"},
    ]});
    let (t, buffers) = drive(peers, &home, Some(&mock), &[], script);
    let results: Vec<_> = updates(&t, "tool_call_update").into_iter().filter(|u| u.get("content").is_some()).collect();
    assert_eq!(results.len(), 2, "{t:?}");
    assert!(
        results[0]["content"][0]["content"]["text"].as_str().unwrap().contains("unsaved editor buffer"),
        "view read the buffer: {}",
        results[0]
    );
    assert_eq!(results[1]["status"], "completed", "{}", results[1]);
    assert!(t.iter().any(|e| e["kind"] == "fs_read" && e["path"] == file));
    let writes: Vec<_> = t.iter().filter(|e| e["kind"] == "fs_write").collect();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0]["content"], "unsaved EDITOR buffer\n");
    assert_eq!(buffers[&file], "unsaved EDITOR buffer\n");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "on disk\n", "the disk is the editor's business");
    assert_eq!(updates(&t, "tool_call")[0]["kind"], "read");
    assert_eq!(updates(&t, "tool_call")[1]["kind"], "edit");
    assert_eq!(updates(&t, "tool_call")[0]["locations"][0]["path"], file);
    // Without fs in the client capabilities, the builtin uses the disk as always.
    mock.script(edits("edited on disk"));
    let script = json!({"fs": false, "steps": [{"do": "initialize"}, {"do": "new", "cwd": cwd}, {"do": "prompt", "text": "edit notes"}]});
    let (t, _) = drive(peers, &home, Some(&mock), &[], script);
    assert!(!t.iter().any(|e| e["kind"] == "fs_read" || e["kind"] == "fs_write"));
    let results: Vec<_> = updates(&t, "tool_call_update").into_iter().filter(|u| u.get("content").is_some()).collect();
    assert!(results[0]["content"][0]["content"]["text"].as_str().unwrap().contains("on disk"), "{}", results[0]);
    assert!(
        results[1]["content"][0]["content"]["text"].as_str().unwrap().contains("old_str was not found"),
        "{}",
        results[1]
    );
}

/// A raw line-level session with `gosling acp`.
struct Raw {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Raw {
    fn start(home: &TempDir, mock: Option<&Llmock>) -> Raw {
        let mut cmd = Command::new(bin());
        cmd.arg("acp").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        acp_env(&mut cmd, home, mock, &[]);
        let mut child = cmd.spawn().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Raw { child, out }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
    }

    /// The next message with this id (notifications and agent requests are skipped).
    fn answer(&mut self, id: Value) -> Value {
        loop {
            let mut line = String::new();
            assert!(self.out.read_line(&mut line).unwrap() > 0, "gosling acp closed stdout");
            let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"));
            if v.get("method").is_none() && v["id"] == id {
                return v;
            }
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn bad_input_gets_json_rpc_errors_and_the_agent_keeps_serving() {
    let _peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    mock.script(json!([{"type": "slow_first_token", "seconds": 60}]));
    let home = TempDir::new("acp-bad");
    let cwd = work_dir(&home);
    let mut a = Raw::start(&home, Some(&mock));
    a.send("{not json");
    let e = a.answer(Value::Null);
    assert_eq!(e["error"]["code"], -32700, "{e}");
    a.send(r#"{"jsonrpc":"2.0","id":1,"method":"session/stop","params":{}}"#);
    let e = a.answer(json!(1));
    assert_eq!(e["error"]["code"], -32601);
    assert!(e["error"]["message"].as_str().unwrap().contains("gosling acp serves initialize"), "{e}");
    a.send(r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"1"}}"#);
    assert!(a.answer(json!(2))["error"]["message"].as_str().unwrap().contains("protocolVersion"));
    a.send(r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":7}}"#);
    assert_eq!(a.answer(json!(3))["result"]["protocolVersion"], 1, "an unknown version is answered with ours");
    a.send(r#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"x"}]}}"#);
    let e = a.answer(json!(4));
    assert_eq!(e["error"]["code"], -32002);
    assert!(e["error"]["message"].as_str().unwrap().contains("Session nope not found"), "{e}");
    let sse = json!({"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd": cwd, "mcpServers":[{"type":"sse","name":"old","url":"http://127.0.0.1:1/sse","headers":[]}]}});
    a.send(&sse.to_string());
    let e = a.answer(json!(5));
    assert_eq!(e["error"]["code"], -32602);
    assert!(e["error"]["message"].as_str().unwrap().contains("SSE is unsupported, migrate to streamable_http"), "{e}");
    a.send(r#"{"jsonrpc":"2.0","id":6,"method":"session/new","params":{"cwd":"relative/dir","mcpServers":[]}}"#);
    assert!(a.answer(json!(6))["error"]["message"].as_str().unwrap().contains("absolute path"));
    // The same rule as /agent/start: a missing directory is named as such.
    a.send(r#"{"jsonrpc":"2.0","id":66,"method":"session/new","params":{"cwd":"/nonexistent/dir","mcpServers":[]}}"#);
    let e = a.answer(json!(66));
    assert!(e["error"]["message"].as_str().unwrap().contains("does not exist"), "{e}");
    a.send(&json!({"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd": cwd, "mcpServers":[]}}).to_string());
    let sid = a.answer(json!(7))["result"]["sessionId"].as_str().unwrap().to_string();
    let prompt = |id: u64, p: Value| {
        json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{"sessionId": sid, "prompt": p}}).to_string()
    };
    a.send(&prompt(8, json!([{"type":"image","data":"","mimeType":"image/png"}])));
    // An image is taken by this provider (openai), but not an empty one.
    assert!(a.answer(json!(8))["error"]["message"].as_str().unwrap().contains("base64"));
    a.send(&prompt(9, json!([{"type":"text","text":"slow one"}])));
    // Wait until the model was asked, then a second prompt is refused while the first runs.
    let asked = crate::support::wait_for(Duration::from_secs(30), || (mock.request_count() > 0).then_some(()));
    assert!(asked.is_some(), "the first prompt reached the model");
    a.send(&prompt(10, json!([{"type":"text","text":"too soon"}])));
    let e = a.answer(json!(10));
    assert!(e["error"]["message"].as_str().unwrap().contains("already running"), "{e}");
    a.send(&json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId": sid}}).to_string());
    assert_eq!(a.answer(json!(9))["result"]["stopReason"], "cancelled");
    a.send(r#"{"jsonrpc":"2.0","id":11,"method":"initialize","params":{"protocolVersion":1}}"#);
    assert_eq!(a.answer(json!(11))["result"]["protocolVersion"], 1, "still serving");
}

/// The client's requests go through the one JSON-RPC peer: at most 64 per connection are
/// answered later at once (each holds a thread), an id still being answered is refused, requests
/// answered at once still are, `$/cancel_request` stops a prompt, and a slot given back is taken
/// again.
#[test]
fn requests_answered_later_are_bounded_per_connection_and_their_ids_unique() {
    let _peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    mock.script(Value::Array(vec![json!({"type": "slow_first_token", "seconds": 120}); 64]));
    let home = TempDir::new("acp-inflight");
    let cwd = work_dir(&home);
    let mut a = Raw::start(&home, Some(&mock));
    let new_session = |id: u64| {
        json!({"jsonrpc":"2.0","id":id,"method":"session/new","params":{"cwd": cwd, "mcpServers":[]}}).to_string()
    };
    let mut sids = Vec::new();
    for id in 100..164 {
        a.send(&new_session(id));
        let r = a.answer(json!(id));
        sids.push(r["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{r}")).to_string());
    }
    // 64 prompts, each waiting for the model: every slot taken.
    for (i, sid) in sids.iter().enumerate() {
        let p = json!({"jsonrpc":"2.0","id":200 + i,"method":"session/prompt","params":{"sessionId": sid, "prompt":[{"type":"text","text":"wait"}]}});
        a.send(&p.to_string());
    }
    a.send(&new_session(200));
    let e = a.answer(json!(200));
    assert_eq!(e["error"]["code"], -32600, "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("request id 200 is still being answered"), "{e}");
    a.send(&new_session(300));
    let e = a.answer(json!(300));
    assert!(
        e["error"]["message"].as_str().unwrap().contains("64 requests of this connection are being answered already"),
        "{e}"
    );
    a.send(r#"{"jsonrpc":"2.0","id":301,"method":"initialize","params":{"protocolVersion":1}}"#);
    assert_eq!(a.answer(json!(301))["result"]["protocolVersion"], 1, "answered at once, needing no slot");
    // One prompt ends, cancelled by its request id (ACP's `$/cancel_request`): it answers
    // `cancelled`, and its slot is given back once that answer is written.
    a.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":200}}"#);
    assert_eq!(a.answer(json!(200))["result"]["stopReason"], "cancelled");
    let mut id = 400;
    let mut last = Value::Null;
    let given_back = crate::support::wait_for(Duration::from_secs(30), || {
        id += 1;
        a.send(&new_session(id));
        last = a.answer(json!(id));
        let busy = last["error"]["message"].as_str().is_some_and(|m| m.contains("being answered already"));
        (!busy).then_some(())
    });
    assert!(given_back.is_some(), "the slot was never given back: {last}");
    assert!(last["result"]["sessionId"].is_string(), "{last}");
}

/// acpx (headless ACP CLI) runs `gosling acp` as a custom agent.
fn acpx(peers: &Peers, home: &TempDir, mock: &Llmock, args: &[&str], extra: &[(&str, &str)], exit: i32) -> String {
    let cwd = work_dir(home);
    let agent_cmd = format!("{} acp", bin().display());
    let mut cmd = Command::new(peers.node());
    cmd.arg(peers.get("ACPX"))
        .args(["--agent", &agent_cmd, "--format", "json", "--timeout", "60"])
        .args(args)
        .current_dir(Path::new(&cwd));
    acp_env(&mut cmd, home, Some(mock), extra);
    let out = cmd.output().expect("run acpx");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(exit), "acpx: {text}\n{}", String::from_utf8_lossy(&out.stderr));
    text
}

fn acpx_messages(out: &str) -> Vec<Value> {
    out.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[test]
fn acpx_exec_runs_a_prompt_and_answers_permissions() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let home = TempDir::new("acp-acpx");
    enable_developer(&home);
    mock.script(json!([
        {"type": "reply", "tool_calls": [{"name": "developer__list_directory", "arguments": {"path": "."}}]},
        {"type": "reply", "text": "listed it"},
    ]));
    let m = acpx_messages(&acpx(
        peers,
        &home,
        &mock,
        &["--approve-all", "exec", "list the files"],
        &[("GOOSE_MODE", "approve")],
        0,
    ));
    let result = m.iter().find(|v| v["result"]["stopReason"].is_string()).expect("a prompt result");
    assert_eq!(result["result"]["stopReason"], "end_turn");
    assert!(m.iter().any(|v| v["method"] == "session/request_permission"), "approve mode asked acpx");
    let done = m.iter().rfind(|v| v["params"]["update"]["sessionUpdate"] == "tool_call_update").unwrap();
    assert_eq!(done["params"]["update"]["status"], "completed", "{done}");
    let text: String = m
        .iter()
        .filter(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|v| v["params"]["update"]["content"]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(text, "listed it");
    // --deny-all: the same call is declined and the turn still ends normally.
    mock.script(json!([
        {"type": "reply", "tool_calls": [{"name": "developer__list_directory", "arguments": {"path": "."}}]},
        {"type": "reply", "text": "could not"},
    ]));
    // acpx exits 5 (its PERMISSION_DENIED) when every permission request was denied.
    let m = acpx_messages(&acpx(
        peers,
        &home,
        &mock,
        &["--deny-all", "exec", "list the files"],
        &[("GOOSE_MODE", "approve")],
        5,
    ));
    let done = m.iter().rfind(|v| v["params"]["update"]["sessionUpdate"] == "tool_call_update").unwrap();
    assert_eq!(done["params"]["update"]["status"], "failed", "{done}");
    assert!(m.iter().any(|v| v["result"]["stopReason"] == "end_turn"));
}

/// A prompt whose one tool call (server-everything) asks the person for a form: the editor
/// answers with `elicitation` (declaring form elicitation), or takes no forms (`None`).
/// Returns the transcript and the content of the tool call's closing update.
fn prompt_with_an_elicitation(
    peers: &Peers,
    name: &str,
    elicitation: Option<Value>,
    env: &[(&str, &str)],
) -> (Vec<Value>, Value) {
    let Some(mock) = Llmock::start(&[]) else { panic!("llmock is a pinned peer") };
    let home = TempDir::new(name);
    let cwd = work_dir(&home);
    let ask =
        json!({"type": "reply", "tool_calls": [{"name": "everything__trigger-elicitation-request", "arguments": {}}]});
    mock.script(json!([ask, {"type": "reply", "text": "asked"}]));
    let mut script = json!({"steps": [
        {"do": "initialize"},
        {"do": "new", "cwd": cwd, "mcpServers": [everything(peers)]},
        {"do": "prompt", "text": "ask me something"},
    ]});
    if let Some(e) = elicitation {
        script["elicitation"] = e;
    }
    let (t, _) = drive(peers, &home, Some(&mock), env, script);
    let prompt = &responses(&t, "session/prompt")[0];
    assert_eq!(prompt["result"]["stopReason"], "end_turn", "{t:?}");
    let done = updates(&t, "tool_call_update").into_iter().find(|u| u.get("content").is_some()).unwrap().clone();
    (t, done)
}

#[test]
fn sdk_an_extensions_elicitation_is_cancelled_at_once_not_left_waiting() {
    let peers = require_peers!();
    let (t, done) =
        prompt_with_an_elicitation(peers, "acp-elicit", None, &[("GOSLING_ELICITATION_TIMEOUT_SECS", "120")]);
    let prompt = &responses(&t, "session/prompt")[0];
    assert!(prompt["ms"].as_u64().unwrap() < 30_000, "not the 120 s elicitation timeout: {prompt}");
    assert!(done.to_string().contains("cancel"), "the extension heard cancel: {done}");
}

/// An editor that takes forms gets the extension's elicitation as ACP's `elicitation/create`,
/// and its answer reaches the extension.
#[test]
fn sdk_an_extensions_elicitation_is_relayed_to_an_editor_that_takes_forms() {
    let peers = require_peers!();
    let answer = json!({"action": "accept", "content": {"name": "Ada Lovelace", "check": true}});
    let (t, done) = prompt_with_an_elicitation(peers, "acp-elicit-relay", Some(answer), &[]);
    let asked: Vec<&Value> = t.iter().filter(|e| e["kind"] == "elicitation").collect();
    assert_eq!(asked.len(), 1, "{t:?}");
    let p = &asked[0]["params"];
    assert_eq!(p["mode"], "form", "{p}");
    assert!(p["message"].as_str().unwrap().contains("Please provide"), "{p}");
    assert_eq!(p["requestedSchema"]["required"], json!(["name"]), "{p}");
    assert!(p["sessionId"].is_string(), "{p}");
    assert!(done.to_string().contains("Ada Lovelace"), "the extension got the answer: {done}");
}

/// A tool's MCP progress reaches the editor as `tool_call_update`s of the running call.
#[test]
fn sdk_a_tools_progress_is_shown_on_its_tool_call() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let home = TempDir::new("acp-progress");
    let cwd = work_dir(&home);
    let long = json!({"type": "reply", "tool_calls": [{"name": "everything__trigger-long-running-operation", "arguments": {"duration": 2, "steps": 2}}]});
    mock.script(json!([long, {"type": "reply", "text": "done"}]));
    let script = json!({"steps": [
        {"do": "initialize"},
        {"do": "new", "cwd": cwd, "mcpServers": [everything(peers)]},
        {"do": "prompt", "text": "run it"},
    ]});
    let (t, _) = drive(peers, &home, Some(&mock), &[], script);
    let calls = updates(&t, "tool_call_update");
    let progress: Vec<&&Value> =
        calls.iter().filter(|u| u["status"] == "in_progress" && u.get("content").is_some()).collect();
    assert!(!progress.is_empty(), "{calls:?}");
    let last = progress.last().unwrap();
    assert!(last["content"][0]["content"]["text"].as_str().unwrap().contains("2/2"), "{last}");
    let closing = calls.iter().rposition(|u| u["status"] == "completed").expect("the call completes");
    let first_progress = calls.iter().position(|u| u["status"] == "in_progress" && u.get("content").is_some()).unwrap();
    assert!(first_progress < closing, "progress comes before the result: {calls:?}");
}

#[test]
fn sdk_a_turn_over_gosling_max_turns_stops_with_max_turn_requests() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let home = TempDir::new("acp-maxturns");
    let cwd = work_dir(&home);
    mock.script(echo_then("never said"));
    let script = json!({"steps": [
        {"do": "initialize"},
        {"do": "new", "cwd": cwd, "mcpServers": [everything(peers)]},
        {"do": "prompt", "text": "Please echo hello"},
    ]});
    let (t, _) = drive(peers, &home, Some(&mock), &[("GOSLING_MAX_TURNS", "1")], script);
    assert_eq!(responses(&t, "session/prompt")[0]["result"]["stopReason"], "max_turn_requests", "{t:?}");
    assert_eq!(updates(&t, "tool_call_update").last().unwrap()["status"], "completed", "the one turn's tool ran");
}

/// Issue 29: the session is named from its first message at once, and again when the model's
/// short title replaces that name after the first exchange — both announced to the editor as
/// `session_info_update`, the second after the prompt's answer.
#[test]
fn the_models_title_reaches_the_editor_after_the_first_exchange() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let home = TempDir::new("acp-title");
    let cwd = work_dir(&home);
    mock.script(
        json!([{"type": "reply", "text": "Paris is lovely in May."}, {"type": "reply", "text": "Trip to Paris"}]),
    );
    let script = json!({"steps": [
        {"do": "initialize"},
        {"do": "new", "cwd": cwd},
        {"do": "prompt", "text": "Where should I go in May?"},
        // The run announced and ended (`activeRunId`), the two titles.
        {"do": "wait_update", "kind": "session_info_update", "count": 4},
    ]});
    let (t, _) = drive(peers, &home, Some(&mock), &[("GOSLING_SESSION_TITLES", "model")], script);
    let titles: Vec<&str> = updates(&t, "session_info_update").iter().filter_map(|u| u["title"].as_str()).collect();
    assert_eq!(titles, ["Where should I go in May?", "Trip to Paris"], "{t:?}");
    // With the messages the session held then (goose's `_meta.messageCount`): the question,
    // then the question and its answer.
    let counts: Vec<&Value> = updates(&t, "session_info_update")
        .iter()
        .filter(|u| u["title"].is_string())
        .map(|u| &u["_meta"]["messageCount"])
        .collect();
    assert_eq!(counts, [&json!(1), &json!(2)], "{t:?}");
    let answered = t.iter().position(|e| e["kind"] == "response" && e["method"] == "session/prompt").unwrap();
    let retitled = t.iter().rposition(|e| e["update"]["sessionUpdate"] == "session_info_update").unwrap();
    assert!(retitled > answered, "the model's title comes after the answer");
}

/// ACP's `session/resume` with the SDK client, in a new `gosling acp` process: advertised,
/// the session reopens without its conversation replayed, and its next prompt goes on with
/// the history (the model gets it). After `session/new`, `load` and `resume` the session's
/// commands follow the answer (`available_commands_update`: none, since gosling runs no slash
/// commands). An unknown session and a missing `cwd` are refused with what to do.
#[test]
fn sdk_resume_reopens_without_replay_and_commands_follow_each_open() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let home = TempDir::new("acp-resume");
    let cwd = work_dir(&home);
    mock.script(json!([{"type": "reply", "text": "noted the zebra"}]));
    let first = json!({"steps": [
        {"do": "initialize"},
        {"do": "new", "cwd": cwd},
        {"do": "prompt", "text": "remember the zebra"},
        {"do": "wait_update", "kind": "available_commands_update", "count": 1},
    ]});
    let (t, _) = drive(peers, &home, Some(&mock), &[], first);
    let init = &responses(&t, "initialize")[0]["result"];
    assert_eq!(init["agentCapabilities"]["sessionCapabilities"]["resume"], json!({}), "{init}");
    let id = responses(&t, "session/new")[0]["result"]["sessionId"].as_str().unwrap().to_string();
    let commands = |t: &[Value]| -> Vec<usize> {
        t.iter()
            .enumerate()
            .filter(|(_, e)| e["update"]["sessionUpdate"] == "available_commands_update")
            .map(|(i, _)| i)
            .collect()
    };
    let answered =
        |t: &[Value], method: &str| t.iter().position(|e| e["kind"] == "response" && e["method"] == method).unwrap();
    let after_new = commands(&t);
    assert_eq!(after_new.len(), 1, "{t:?}");
    assert!(after_new[0] > answered(&t, "session/new"), "the commands follow the answer: {t:?}");
    assert_eq!(t[after_new[0]]["sessionId"], id);
    assert_eq!(updates(&t, "available_commands_update")[0]["availableCommands"], json!([]));

    mock.script(json!([{"type": "reply", "text": "still the zebra"}]));
    let second = json!({"steps": [
        {"do": "initialize"},
        {"do": "resume", "sessionId": id, "cwd": cwd},
        {"do": "wait_update", "kind": "available_commands_update", "count": 1},
        {"do": "prompt", "text": "what animal?"},
        {"do": "resume", "sessionId": "20000101_9", "cwd": cwd},
        {"do": "raw", "method": "session/resume", "params": {"sessionId": id}},
    ]});
    let (t, _) = drive(peers, &home, Some(&mock), &[], second);
    let resumed = &responses(&t, "session/resume")[0];
    assert!(resumed["result"]["modes"]["currentModeId"].is_string(), "{resumed}");
    let at = answered(&t, "session/resume");
    let between: Vec<&str> = t[..at]
        .iter()
        .filter(|e| e["kind"] == "update")
        .map(|e| e["update"]["sessionUpdate"].as_str().unwrap())
        .collect();
    assert!(
        !between.contains(&"user_message_chunk") && !between.contains(&"agent_message_chunk"),
        "no replay: {between:?}"
    );
    assert!(commands(&t)[0] > at, "the commands follow the resume's answer: {t:?}");
    assert_eq!(responses(&t, "session/prompt")[0]["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&t), "still the zebra");
    let sent = model_log(&mock);
    assert!(sent.contains("remember the zebra") && sent.contains("what animal?"), "the model has the history: {sent}");
    let unknown = &responses(&t, "session/resume")[1];
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
    assert!(unknown["error"]["message"].as_str().unwrap().contains("session/list"), "{unknown}");
    let no_cwd = &responses(&t, "session/resume")[2];
    assert_eq!(no_cwd["error"]["code"], -32602, "{no_cwd}");
    assert!(no_cwd["error"]["message"].as_str().unwrap().contains("`cwd`"), "{no_cwd}");

    // And load: the commands follow its answer too.
    let third = json!({"steps": [
        {"do": "initialize"},
        {"do": "load", "sessionId": id, "cwd": cwd},
        {"do": "wait_update", "kind": "available_commands_update", "count": 1},
    ]});
    let (t, _) = drive(peers, &home, Some(&mock), &[], third);
    assert!(commands(&t).first().is_some_and(|c| *c > answered(&t, "session/load")), "{t:?}");
}

/// acpx opens an ACP session the editor already has (`sessions new --resume-session ID`): on an
/// agent that advertises `sessionCapabilities.resume` it asks `session/resume` (else
/// `session/load`), and the conversation goes on from where the other client left it.
#[test]
fn acpx_resumes_a_session_started_elsewhere() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let home = TempDir::new("acp-acpx-resume");
    let cwd = work_dir(&home);
    mock.script(json!([{"type": "reply", "text": "noted the zebra"}]));
    let first = json!({"steps": [
        {"do": "initialize"},
        {"do": "new", "cwd": cwd},
        {"do": "prompt", "text": "remember the zebra"},
    ]});
    let (t, _) = drive(peers, &home, Some(&mock), &[], first);
    let id = responses(&t, "session/new")[0]["result"]["sessionId"].as_str().unwrap().to_string();
    mock.script(json!([{"type": "reply", "text": "it was a zebra"}]));
    acpx(peers, &home, &mock, &["sessions", "new", "--name", "again", "--resume-session", &id], &[], 0);
    let out = acpx(peers, &home, &mock, &["prompt", "-s", "again", "which animal?"], &[], 0);
    let m = acpx_messages(&out);
    assert!(m.iter().all(|v| v["params"]["sessionId"].as_str().is_none_or(|s| s == id)), "the same session: {out}");
    let methods: Vec<&str> = m.iter().filter_map(|v| v["method"].as_str()).collect();
    assert!(methods.contains(&"session/resume") && !methods.contains(&"session/load"), "{methods:?}");
    let text: String = m
        .iter()
        .filter(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|v| v["params"]["update"]["content"]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(text, "it was a zebra", "{out}");
    let sent = model_log(&mock);
    assert!(sent.contains("remember the zebra") && sent.contains("which animal?"), "the model has the history: {sent}");
}

/// What llmock has been sent so far (its request log, as text).
fn model_log(mock: &Llmock) -> String {
    crate::support::http("GET", &format!("{}/_llmock/requests", mock.openai_host()), None, None).text()
}

/// ACP's `notice` (an extension that did not start) reaches an editor that advertised
/// `clientCapabilities.session.notices`, through the SDK's own schema check; an editor that
/// did not advertise it gets none.
#[test]
fn sdk_notice_of_an_extension_that_did_not_start_only_when_advertised() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let broken = json!({ "name": "broken", "command": "/nonexistent/mcp-server-missing", "args": [], "env": [] });
    for advertised in [true, false] {
        let home = TempDir::new("acp-notice");
        let cwd = work_dir(&home);
        let script = json!({"notices": advertised, "steps": [
            {"do": "initialize"},
            {"do": "new", "cwd": cwd, "mcpServers": [broken]},
        ]});
        let (t, _) = drive(peers, &home, Some(&mock), &[], script);
        let new = &responses(&t, "session/new")[0]["result"];
        assert!(new["sessionId"].is_string(), "the session starts without the extension: {new}");
        let notices = updates(&t, "notice");
        if advertised {
            assert_eq!(notices.len(), 1, "one notice for the one extension: {t:?}");
            assert_eq!(notices[0]["severity"], "warning");
            assert_eq!(notices[0]["title"], "Extension broken did not start");
            assert!(notices[0]["description"].as_str().is_some_and(|d| !d.is_empty()), "{}", notices[0]);
        } else {
            assert!(notices.is_empty(), "no notice to a client that did not advertise them: {notices:?}");
        }
    }
}

/// A provider without its key: acpx's prompt gets ACP's `auth_required` (the message names the
/// variable to set) and acpx exits with its runtime failure (1).
#[test]
fn acpx_prompt_without_a_model_key_gets_auth_required() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let home = TempDir::new("acp-acpx-auth");
    let m = acpx_messages(&acpx(peers, &home, &mock, &["exec", "hi"], &[("GOOSE_PROVIDER", "anthropic")], 1));
    let e = &m.iter().find(|v| v["error"].is_object()).expect("an error answer")["error"];
    assert_eq!(e["code"], -32000, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.starts_with("Authentication required: ") && message.contains("set ANTHROPIC_API_KEY"), "{e}");
    assert_eq!(e["data"]["authMethods"][0]["id"], "gosling-provider", "{e}");
}

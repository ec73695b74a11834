//! LLM providers (src/llm) against the scripted fake LLM (fake_llm.rs) in both wire formats,
//! and against llmock as an independent partner.

use gosling::llm::{
    self, ChatMessage, ChatRequest, Completion, Delta, Error, Part, Provider, Role, Settings, ToolSpec,
};
use serde_json::json;
use std::time::Duration;

use crate::fake_llm::*;
use crate::llmock::Llmock;
use crate::support::wait_for;

fn settings(provider: &str, host: &str) -> Settings {
    let mut s = Settings::new(provider, "test-model", host);
    s.stall_timeout = Duration::from_secs(20);
    s.max_retry_wait = Duration::from_secs(10);
    s
}

fn openai(fake: &FakeLlm) -> Box<dyn Provider> {
    llm::from_settings(&settings("openai", &fake.url())).unwrap()
}

fn anthropic(fake: &FakeLlm) -> Box<dyn Provider> {
    llm::from_settings(&settings("anthropic", &fake.url())).unwrap()
}

/// A `provider` client of `fake` that gives up on a stream silent for a second.
fn giving_up_after_a_silent_second(provider: &str, fake: &FakeLlm) -> Box<dyn Provider> {
    let mut s = settings(provider, &fake.url());
    s.stall_timeout = Duration::from_secs(1);
    llm::from_settings(&s).unwrap()
}

fn echo_tool() -> ToolSpec {
    ToolSpec {
        name: "echo".into(),
        description: "Echoes the message".into(),
        input_schema: json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
    }
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        system: "You are terse.".into(),
        messages: vec![ChatMessage { role: Role::User, parts: vec![Part::Text(text.into())] }],
        tools: vec![echo_tool()].into(),
        max_tokens: None,
    }
}

/// Runs a completion, collecting the streamed deltas.
fn run(p: &dyn Provider, req: &ChatRequest) -> (Result<Completion, Error>, Vec<String>) {
    let mut deltas = Vec::new();
    let r = p.complete(req, &mut |d| {
        let Delta::Text(t) = d;
        deltas.push(t.to_string());
        true
    });
    (r, deltas)
}

// ---------------------------------------------------------------------------------------------
// OpenAI-compatible

#[test]
fn openai_text_split_across_chunks_with_usage() {
    // "héllo wörld" with the UTF-8 of "é" split between two TCP writes of the same line.
    let line = oa_text("héllo ");
    let cut = line.find('é').unwrap() + 1;
    let reply = Reply {
        status: 200,
        headers: vec![("Content-Type".into(), "text/event-stream".into())],
        steps: vec![
            Step::Send(line.as_bytes()[..cut].to_vec()),
            Step::Sleep(Duration::from_millis(50)),
            Step::Send(line.as_bytes()[cut..].to_vec()),
            Step::Send(oa_text("wör").into_bytes()),
            Step::Send(oa_text("ld").into_bytes()),
            Step::Send(oa_finish("stop").into_bytes()),
            Step::Send(oa_usage(12, 3).into_bytes()),
            Step::Send(OA_DONE.as_bytes().to_vec()),
        ],
    };
    let fake = FakeLlm::start(vec![reply]);
    let (r, deltas) = run(&*openai(&fake), &ask("hi"));
    let c = r.unwrap();
    assert_eq!(deltas, ["héllo ", "wör", "ld"]);
    assert_eq!(c.text, "héllo wörld");
    assert_eq!(c.stop_reason.as_deref(), Some("stop"));
    assert_eq!(c.usage, Some(llm::Usage { input_tokens: 12, output_tokens: 3 }));
    assert!(c.tool_calls.is_empty());

    let req = &fake.requests()[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.header("authorization"), None, "no Authorization header without a key");
    assert_eq!(req.body["stream"], json!(true));
    assert_eq!(req.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(req.body["model"], "test-model");
    assert_eq!(req.body["messages"][0], json!({"role": "system", "content": "You are terse."}));
    assert_eq!(req.body["messages"][1], json!({"role": "user", "content": "hi"}));
    assert_eq!(req.body["tools"][0]["function"]["name"], "echo");
    assert_eq!(req.body["tools"][0]["function"]["parameters"]["required"], json!(["message"]));
}

#[test]
fn openai_two_parallel_tool_calls_with_arguments_split_mid_token() {
    let fake = FakeLlm::start(vec![Reply::sse(&[
        oa_text("Calling."),
        oa_tool(0, Some(("call_a", "echo")), ""),
        oa_tool(0, None, "{\"mess"),
        oa_tool(1, Some(("call_b", "echo")), "{\"message\":"),
        oa_tool(0, None, "age\":\"hel"),
        oa_tool(1, None, " \"two\"}"),
        oa_tool(0, None, "lo\"}"),
        oa_finish("tool_calls"),
        oa_usage(5, 9),
        OA_DONE.to_string(),
    ])]);
    let (r, _) = run(&*openai(&fake), &ask("call it twice"));
    let c = r.unwrap();
    assert_eq!(c.text, "Calling.");
    assert_eq!(c.stop_reason.as_deref(), Some("tool_calls"));
    assert_eq!(c.tool_calls.len(), 2);
    assert_eq!((c.tool_calls[0].id.as_str(), c.tool_calls[0].name.as_str()), ("call_a", "echo"));
    assert_eq!(c.tool_calls[0].arguments, Ok(json!({"message": "hello"})));
    assert_eq!((c.tool_calls[1].id.as_str(), c.tool_calls[1].name.as_str()), ("call_b", "echo"));
    assert_eq!(c.tool_calls[1].arguments, Ok(json!({"message": "two"})));
}

#[test]
fn openai_invalid_tool_arguments_come_back_raw() {
    let fake = FakeLlm::start(vec![tool_turn("c1", "echo", "{\"message\": oops")]);
    let c = run(&*openai(&fake), &ask("x")).0.unwrap();
    assert_eq!(c.tool_calls[0].arguments, Err(gosling::llm::BadArguments { raw: "{\"message\": oops".to_string() }));
}

#[test]
fn openai_data_without_space_and_crlf_endings() {
    let chunks = [
        "data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\r\n\r\n",
        ": keep-alive comment\r\n\r\n",
        "data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\r",
        "\n\r\ndata:{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n",
        "data:[DONE]\r\n\r\n",
    ];
    let fake = FakeLlm::start(vec![Reply::sse(&chunks)]);
    let (r, deltas) = run(&*openai(&fake), &ask("x"));
    assert_eq!(r.unwrap().text, "ab");
    assert_eq!(deltas, ["a", "b"]);
}

#[test]
fn openai_429_with_retry_after_then_success() {
    let fake = FakeLlm::start(vec![
        Reply::error(429, json!({"error": {"message": "slow down"}})).header("Retry-After", "0"),
        Reply::error(429, json!({"error": {"message": "slow down"}})).header("Retry-After", "1"),
        text_turn("ok"),
    ]);
    let c = run(&*openai(&fake), &ask("x")).0.unwrap();
    assert_eq!(c.text, "ok");
    assert_eq!(fake.requests().len(), 3);
}

#[test]
fn openai_500_is_retried_a_bounded_number_of_times() {
    let fake = FakeLlm::start((0..5).map(|_| Reply::error(500, json!({"error": {"message": "boom"}}))).collect());
    let (r, deltas) = run(&*openai(&fake), &ask("x"));
    let e = r.unwrap_err();
    assert!(matches!(e, Error::Http { status: 500, .. }), "{e:?}");
    let m = e.to_string();
    assert!(m.starts_with("llm: ") && m.contains("after 3 attempts") && m.contains("boom"), "{m}");
    assert!(deltas.is_empty());
    assert_eq!(fake.requests().len(), 3, "max_attempts bounds the retries");
}

#[test]
fn openai_retry_after_beyond_the_budget_stops_retrying() {
    let fake = FakeLlm::start(vec![Reply::error(429, json!({"error": "busy"})).header("Retry-After", "3600")]);
    let e = run(&*openai(&fake), &ask("x")).0.unwrap_err();
    assert!(matches!(e, Error::Http { status: 429, .. }), "{e:?}");
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn openai_stream_cut_in_the_middle() {
    let reply = Reply::sse(&[oa_text("par"), oa_text("tial")])
        .then(Step::Send(b"data: {\"choices\":[{\"delta\":{\"cont".to_vec()))
        .then(Step::Cut);
    let fake = FakeLlm::start(vec![reply]);
    let (r, deltas) = run(&*openai(&fake), &ask("x"));
    assert_eq!(deltas, ["par", "tial"], "deltas already streamed stay streamed");
    let e = r.unwrap_err();
    assert!(matches!(e, Error::StreamCut { .. }), "{e:?}");
    assert!(e.to_string().contains("stream ended before completion"), "{e}");
}

#[test]
fn openai_clean_close_without_done_or_finish_is_a_cut() {
    let fake = FakeLlm::start(vec![Reply::sse(&[oa_text("a")])]);
    let e = run(&*openai(&fake), &ask("x")).0.unwrap_err();
    assert!(matches!(e, Error::StreamCut { after_bytes, source: None } if after_bytes > 0), "{e:?}");
    assert!(e.to_string().contains("stream ended before completion"), "{e}");
}

#[test]
fn openai_malformed_json_in_a_chunk() {
    let fake = FakeLlm::start(vec![Reply::sse(&[
        oa_text("a"),
        "data: {\"choices\": [nope\n\n".to_string(),
        oa_text("b"),
        OA_DONE.to_string(),
    ])]);
    let (r, deltas) = run(&*openai(&fake), &ask("x"));
    assert_eq!(deltas, ["a"]);
    let e = r.unwrap_err();
    assert!(matches!(e, Error::Protocol(_)), "{e:?}");
    let m = e.to_string();
    assert!(m.contains("malformed JSON") && m.contains("[nope"), "names the chunk: {m}");
}

#[test]
fn openai_stall_is_an_error() {
    let reply = Reply::sse(&[oa_text("slow")])
        .then(Step::Sleep(Duration::from_secs(8)))
        .then(Step::Send(OA_DONE.as_bytes().to_vec()));
    let fake = FakeLlm::start(vec![reply]);
    let p = giving_up_after_a_silent_second("openai", &fake);
    let (r, deltas) = run(&*p, &ask("x"));
    assert_eq!(deltas, ["slow"]);
    let e = r.unwrap_err();
    assert!(matches!(e, Error::Stalled { .. }), "{e:?}");
    assert!(e.to_string().contains("GOSLING_LLM_STALL_SECS"));
}

#[test]
fn openai_abort_from_on_delta_drops_the_stream() {
    let mut steps = vec![Step::Send(oa_text("first").into_bytes())];
    for _ in 0..100 {
        steps.push(Step::Sleep(Duration::from_millis(100)));
        steps.push(Step::Send(oa_text("more").into_bytes()));
    }
    let fake = FakeLlm::start(vec![Reply {
        status: 200,
        headers: vec![("Content-Type".into(), "text/event-stream".into())],
        steps,
    }]);
    let p = openai(&fake);
    let mut seen = 0;
    let r = p.complete(&ask("x"), &mut |_| {
        seen += 1;
        false
    });
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    assert_eq!(seen, 1);
    assert!(
        wait_for(Duration::from_secs(10), || fake.client_gone().then_some(())).is_some(),
        "the fake sees the connection closed"
    );
}

#[test]
fn openai_key_and_http_errors_are_actionable() {
    let fake = FakeLlm::start(vec![
        Reply::error(401, json!({"error": {"message": "Incorrect API key provided: sk-test-secret-key"}})),
        Reply::error(404, json!({"error": {"message": "The model `test-model` does not exist"}})),
        Reply::error(
            400,
            json!({"error": {"message": "This model's maximum context length is 8192 tokens", "code": "context_length_exceeded"}}),
        ),
    ]);
    let mut s = settings("openai", &fake.url());
    s.api_key = Some("sk-test-secret-key".into());
    let p = llm::from_settings(&s).unwrap();
    let e = run(&*p, &ask("x")).0.unwrap_err();
    let m = e.to_string();
    assert!(
        matches!(e, Error::Http { status: 401, .. }) && m.contains("OPENAI_API_KEY") && !m.contains("secret-key"),
        "{m}"
    );
    assert_eq!(fake.requests()[0].header("authorization"), Some("Bearer sk-test-secret-key"));
    let m = run(&*p, &ask("x")).0.unwrap_err().to_string();
    assert!(m.contains("GOOSE_MODEL") && m.contains("OPENAI_HOST"), "{m}");
    let e = run(&*p, &ask("x")).0.unwrap_err();
    assert!(matches!(e, Error::ContextTooLong { .. }), "{e:?}");
    assert_eq!(fake.requests().len(), 3, "4xx are not retried");
}

#[test]
fn unreachable_host_is_named() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let host = format!("http://127.0.0.1:{port}");
    let p = llm::from_settings(&settings("openai", &host)).unwrap();
    let e = run(&*p, &ask("x")).0.unwrap_err();
    assert!(matches!(e, Error::Unreachable { .. }), "{e:?}");
    assert!(e.to_string().contains(&host), "{e}");
}

#[test]
fn openai_conversation_with_tool_results() {
    let fake = FakeLlm::start(vec![text_turn("done")]);
    let req = ChatRequest {
        system: String::new(),
        messages: vec![
            ChatMessage { role: Role::User, parts: vec![Part::Text("echo hi".into())] },
            ChatMessage {
                role: Role::Assistant,
                parts: vec![Part::ToolCall {
                    id: "c1".into(),
                    name: "echo".into(),
                    arguments: json!({"message": "hi"}),
                }],
            },
            ChatMessage {
                role: Role::User,
                parts: vec![Part::ToolResult {
                    id: "c1".into(),
                    content: vec![json!({"type": "text", "text": "Echo: hi"})],
                    is_error: false,
                }],
            },
        ],
        tools: Default::default(),
        max_tokens: None,
    };
    assert_eq!(run(&*openai(&fake), &req).0.unwrap().text, "done");
    let body = &fake.requests()[0].body;
    let msgs = body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "no system message when it is empty: {msgs:?}");
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(msgs[1]["content"], json!(null));
    assert_eq!(
        msgs[1]["tool_calls"][0],
        json!({"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{\"message\":\"hi\"}"}})
    );
    assert_eq!(msgs[2], json!({"role": "tool", "tool_call_id": "c1", "content": "Echo: hi"}));
    assert!(body.get("tools").is_none(), "no tools key when none are offered");
}

// ---------------------------------------------------------------------------------------------
// Anthropic

fn an_tool_script() -> Vec<String> {
    vec![
        an_start(20),
        an_text_block(0),
        an_text(0, "Let me "),
        an_text(0, "check."),
        an_block_stop(0),
        an_tool_block(1, "toolu_a", "echo"),
        an_json(1, ""),
        an_json(1, "{\"mess"),
        an_json(1, "age\": \"h"),
        an_json(1, "i\"}"),
        an_block_stop(1),
        an_tool_block(2, "toolu_b", "echo"),
        an_json(2, "{\"message\":\"two\"}"),
        an_block_stop(2),
        an_delta("tool_use", 17),
        an_stop(),
    ]
}

#[test]
fn anthropic_text_and_two_tool_calls_split_mid_token_with_usage() {
    let fake = FakeLlm::start(vec![Reply::sse(&an_tool_script())]);
    let (r, deltas) = run(&*anthropic(&fake), &ask("hi"));
    let c = r.unwrap();
    assert_eq!(deltas, ["Let me ", "check."]);
    assert_eq!(c.text, "Let me check.");
    assert_eq!(c.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(c.usage, Some(llm::Usage { input_tokens: 20, output_tokens: 17 }));
    assert_eq!(c.tool_calls.len(), 2);
    assert_eq!((c.tool_calls[0].id.as_str(), c.tool_calls[0].name.as_str()), ("toolu_a", "echo"));
    assert_eq!(c.tool_calls[0].arguments, Ok(json!({"message": "hi"})));
    assert_eq!(c.tool_calls[1].arguments, Ok(json!({"message": "two"})));

    let req = &fake.requests()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(req.header("x-api-key"), None);
    assert_eq!(req.body["stream"], json!(true));
    assert_eq!(req.body["max_tokens"], json!(4096));
    assert_eq!(req.body["system"], "You are terse.");
    assert_eq!(req.body["messages"], json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]));
    assert_eq!(req.body["tools"][0]["input_schema"]["required"], json!(["message"]));
}

#[test]
fn anthropic_data_without_space_and_crlf_endings() {
    let script: Vec<String> = an_tool_script()
        .into_iter()
        .map(|c| c.replace("data: ", "data:").replace("event: ", "event:").replace('\n', "\r\n"))
        .collect();
    let fake = FakeLlm::start(vec![Reply::sse(&script)]);
    let c = run(&*anthropic(&fake), &ask("hi")).0.unwrap();
    assert_eq!(c.text, "Let me check.");
    assert_eq!(c.tool_calls[0].arguments, Ok(json!({"message": "hi"})));
}

#[test]
fn anthropic_429_then_success_and_500_bounded() {
    let fake = FakeLlm::start(vec![
        Reply::error(429, json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}))
            .header("Retry-After", "1"),
        Reply::sse(&[an_start(1), an_text_block(0), an_text(0, "ok"), an_delta("end_turn", 1), an_stop()]),
        Reply::error(529, json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
        Reply::error(500, json!({"type": "error", "error": {"type": "api_error", "message": "boom"}})),
        Reply::error(503, json!({"type": "error", "error": {"type": "api_error", "message": "boom"}})),
    ]);
    let p = anthropic(&fake);
    assert_eq!(run(&*p, &ask("x")).0.unwrap().text, "ok");
    let e = run(&*p, &ask("x")).0.unwrap_err();
    assert!(matches!(e, Error::Http { status: 503, .. }), "{e:?}");
    assert_eq!(fake.requests().len(), 5);
}

#[test]
fn anthropic_cut_malformed_stall_and_error_event() {
    let cut = Reply::sse(&[an_start(1), an_text_block(0), an_text(0, "par")]).then(Step::Cut);
    let malformed = Reply::sse(&[
        an_start(1),
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\n\n"
            .to_string(),
    ]);
    let stall =
        Reply::sse(&[an_start(1), an_text_block(0), an_text(0, "zz")]).then(Step::Sleep(Duration::from_secs(8)));
    let overloaded = Reply::sse(&[
        an_start(1),
        an("error", json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
    ]);
    let fake = FakeLlm::start(vec![cut, malformed, stall, overloaded]);
    let p = giving_up_after_a_silent_second("anthropic", &fake);

    let (r, deltas) = run(&*p, &ask("x"));
    assert_eq!(deltas, ["par"]);
    let e = r.unwrap_err();
    assert!(matches!(e, Error::StreamCut { .. }) && e.to_string().contains("stream ended before completion"), "{e:?}");

    let e = run(&*p, &ask("x")).0.unwrap_err();
    assert!(matches!(e, Error::Protocol(_)) && e.to_string().contains("malformed JSON"), "{e:?}");

    let (r, deltas) = run(&*p, &ask("x"));
    assert_eq!(deltas, ["zz"]);
    assert!(matches!(r, Err(Error::Stalled { .. })), "{r:?}");

    let e = run(&*p, &ask("x")).0.unwrap_err();
    assert!(matches!(e, Error::Remote(_)) && e.to_string().contains("overloaded_error"), "{e:?}");
}

#[test]
fn anthropic_abort_and_key_header() {
    let mut steps = vec![
        Step::Send(an_start(1).into_bytes()),
        Step::Send(an_text_block(0).into_bytes()),
        Step::Send(an_text(0, "a").into_bytes()),
    ];
    for _ in 0..100 {
        steps.push(Step::Sleep(Duration::from_millis(100)));
        steps.push(Step::Send(an_text(0, "b").into_bytes()));
    }
    let fake = FakeLlm::start(vec![
        Reply { status: 200, headers: vec![("Content-Type".into(), "text/event-stream".into())], steps },
        Reply::error(
            401,
            json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
        ),
    ]);
    let mut s = settings("anthropic", &fake.url());
    s.api_key = Some("ak-secret".into());
    let p = llm::from_settings(&s).unwrap();
    let r = p.complete(&ask("x"), &mut |_| false);
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    assert_eq!(fake.requests()[0].header("x-api-key"), Some("ak-secret"));
    assert!(wait_for(Duration::from_secs(10), || fake.client_gone().then_some(())).is_some());
    let m = run(&*p, &ask("x")).0.unwrap_err().to_string();
    assert!(m.contains("ANTHROPIC_API_KEY") && !m.contains("ak-secret"), "{m}");
}

#[test]
fn anthropic_conversation_with_tool_results() {
    let fake = FakeLlm::start(vec![Reply::sse(&[
        an_start(1),
        an_text_block(0),
        an_text(0, "done"),
        an_delta("end_turn", 1),
        an_stop(),
    ])]);
    let req = ChatRequest {
        system: String::new(),
        messages: vec![
            ChatMessage { role: Role::User, parts: vec![Part::Text("echo hi".into())] },
            ChatMessage {
                role: Role::Assistant,
                parts: vec![
                    Part::Text("Sure.".into()),
                    Part::ToolCall { id: "t1".into(), name: "echo".into(), arguments: json!({"message": "hi"}) },
                ],
            },
            ChatMessage {
                role: Role::User,
                parts: vec![Part::ToolResult {
                    id: "t1".into(),
                    content: vec![json!({"type": "text", "text": "no such thing"})],
                    is_error: true,
                }],
            },
        ],
        tools: vec![echo_tool()].into(),
        max_tokens: None,
    };
    assert_eq!(run(&*anthropic(&fake), &req).0.unwrap().text, "done");
    let body = &fake.requests()[0].body;
    assert!(body.get("system").is_none());
    assert_eq!(
        body["messages"][1]["content"][1],
        json!({"type": "tool_use", "id": "t1", "name": "echo", "input": {"message": "hi"}})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "no such thing"}], "is_error": true}]})
    );
}

// ---------------------------------------------------------------------------------------------
// llmock: a tool call for an offered tool, then text after the tool result.

fn llmock_turn(p: &dyn Provider) {
    let first = ask("Please echo something");
    let (r, _) = run(p, &first);
    let c = r.unwrap_or_else(|e| panic!("{}: {e}", p.name()));
    assert_eq!(c.tool_calls.len(), 1, "{c:?}");
    let call = &c.tool_calls[0];
    assert_eq!(call.name, "echo");
    let args = call.arguments.clone().expect("valid JSON arguments");
    assert!(args["message"].is_string(), "{args}");
    assert!(c.usage.is_some());

    let mut follow = first.clone();
    follow.messages.push(ChatMessage {
        role: Role::Assistant,
        parts: vec![Part::ToolCall { id: call.id.clone(), name: call.name.clone(), arguments: args.clone() }],
    });
    follow.messages.push(ChatMessage {
        role: Role::User,
        parts: vec![Part::ToolResult {
            id: call.id.clone(),
            content: vec![json!({"type": "text", "text": format!("Echo: {}", args["message"].as_str().unwrap())})],
            is_error: false,
        }],
    });
    let (r, deltas) = run(p, &follow);
    let c = r.unwrap_or_else(|e| panic!("{}: {e}", p.name()));
    assert!(c.tool_calls.is_empty(), "{c:?}");
    assert!(!c.text.is_empty());
    assert!(deltas.len() > 1, "the answer is streamed in pieces: {deltas:?}");
    assert_eq!(deltas.concat(), c.text);
}

#[test]
fn llmock_openai_tool_call_then_answer() {
    let Some(mock) = Llmock::start(&[]) else { return };
    let p = llm::from_settings(&settings("openai", &mock.openai_host())).unwrap();
    llmock_turn(&*p);
}

#[test]
fn llmock_anthropic_tool_call_then_answer() {
    let Some(mock) = Llmock::start(&[]) else { return };
    let p = llm::from_settings(&settings("anthropic", &mock.anthropic_host())).unwrap();
    llmock_turn(&*p);
}

#[test]
fn llmock_rate_limits_are_retried() {
    // Every request has a 30% chance of a 429; with 6 attempts nearly every completion gets
    // through, and those that do not must fail with the actionable 429 message.
    let Some(mock) = Llmock::start(&["--error-rate", "429=0.3", "--tool-mode", "off"]) else { return };
    let mut s = settings("openai", &mock.openai_host());
    s.max_attempts = 6;
    let p = llm::from_settings(&s).unwrap();
    let mut ok = 0;
    for _ in 0..5 {
        match run(&*p, &ask("hello")).0 {
            Ok(c) => {
                assert!(!c.text.is_empty());
                ok += 1;
            }
            Err(e) => assert!(matches!(e, Error::Http { status: 429, .. }), "{e:?}"),
        }
    }
    assert!(ok >= 1, "at least one completion survives the rate limiting");
}

#[test]
fn cancelled_is_polled_while_the_model_is_silent() {
    use std::sync::atomic::{AtomicBool, Ordering};
    // Headers, then 8 s of silence before any text; a retry that would wait 5 s; in both the
    // caller's cancel flag must end the call before anything else arrives.
    let silent = Reply::sse(&[oa(json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}))])
        .then(Step::Sleep(Duration::from_secs(8)))
        .then(Step::Send(oa_text("late").into_bytes()));
    let busy = Reply::error(503, json!({"error": "busy"})).header("Retry-After", "5");
    let fake = FakeLlm::start(vec![silent, busy, Reply::sse(&[oa_text("late"), OA_DONE.to_string()])]);
    let p = openai(&fake);
    for round in 1..=2 {
        // Cancel once the fake has this round's request: the model is then silent (round 1) or
        // the client is waiting out Retry-After (round 2).
        let flag = std::sync::Arc::new(AtomicBool::new(false));
        let seen = flag.clone();
        let (r, deltas) = std::thread::scope(|scope| {
            scope.spawn(|| {
                let sent = crate::support::wait_for(Duration::from_secs(10), || {
                    (fake.requests().len() >= round).then_some(())
                });
                flag.store(true, Ordering::SeqCst);
                assert!(sent.is_some(), "round {round}: the request reached the fake");
            });
            let mut deltas = Vec::new();
            let r = p.complete_cancellable(
                &ask("x"),
                &mut |Delta::Text(t)| {
                    deltas.push(t.to_string());
                    true
                },
                &llm::Cancel::new(move || seen.load(Ordering::SeqCst)),
            );
            (r, deltas)
        });
        assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
        assert!(deltas.is_empty(), "returned before the late text: {deltas:?}");
    }
    assert_eq!(fake.requests().len(), 2, "the cancelled retry was not sent");
}

#[test]
fn a_stream_cut_before_any_text_is_retried() {
    let cut = Reply::sse(&[oa_tool(0, Some(("c1", "echo")), "{\"mes")]).then(Step::Cut);
    let whole = tool_turn("c2", "echo", "{\"message\":\"x\"}");
    let fake = FakeLlm::start(vec![cut, whole]);
    let c = run(&*openai(&fake), &ask("x")).0.unwrap();
    assert_eq!(c.tool_calls.len(), 1, "the cut attempt's partial call is discarded: {c:?}");
    assert_eq!((c.tool_calls[0].id.as_str(), c.tool_calls[0].arguments.clone()), ("c2", Ok(json!({"message": "x"}))));
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn llmock_stream_faults_are_errors_not_half_answers() {
    for (fault, format) in
        [("truncate", "openai"), ("truncate", "anthropic"), ("malformed", "openai"), ("disconnect", "anthropic")]
    {
        let Some(mock) = Llmock::start(&["--stream-fault", &format!("{fault}=1.0"), "--tool-mode", "off"]) else {
            return;
        };
        let host = if format == "openai" { mock.openai_host() } else { mock.anthropic_host() };
        let p = llm::from_settings(&settings(format, &host)).unwrap();
        let (r, deltas) = run(&*p, &ask("hello"));
        // llmock cuts at a random point: a cut after the finish reason leaves a complete
        // answer, which is not a half answer. Anything cut earlier must be an error.
        if let (Ok(c), "truncate") = (&r, fault) {
            assert!(c.stop_reason.is_some(), "{fault}/{format}: a half answer was accepted: {c:?}");
            continue;
        }
        let e = r.expect_err(&format!("{fault} in {format} must fail"));
        assert!(matches!(e, Error::Protocol(_) | Error::StreamCut { .. }), "{fault}/{format}: {e:?}");
        eprintln!("{fault}/{format}: {} deltas, then: {e}", deltas.len());
    }
}

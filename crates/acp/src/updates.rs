//! goose messages ⇄ ACP: the `session/update` payloads a turn's messages become (live and on
//! `session/load`), and the goose user message an ACP prompt becomes. Pure: no I/O.

use crate::session_update::{
    text_content, Chunk, ChunkKind, GooseMeta, PlanEntry, SessionUpdate, ToolCall, ToolCallUpdate,
};
use gosling_agent::messages as msg;

use gosling_store::message::{Action, Content, Message, Role, ToolRequest, ToolResponse};
use gosling_wire::mcp_types::ContentBlock;
use serde_json::{json, Value};

/// What one goose message of a running turn asks the ACP side to do.
#[derive(Debug, PartialEq)]
pub enum Live {
    /// Send this update in a `session/update` notification.
    Update(SessionUpdate),
    /// Ask the client with `session/request_permission` (approve modes).
    Permission { id: String, tool: String, arguments: Value },
    /// An extension's MCP elicitation (a form for the person): relayed as ACP's
    /// `elicitation/create` when the client takes forms.
    Elicitation { id: String, message: String, schema: Value },
}

/// ACP's ToolKind for a prefixed tool name: lets editors pick an icon and group reads.
pub fn tool_kind(name: &str, args: &Value) -> &'static str {
    let tool = name.rsplit("__").next().unwrap_or(name);
    match tool {
        "shell" | "run" | "execute" | "bash" => "execute",
        "text_editor" => match args.get("command").and_then(Value::as_str) {
            Some("view") => "read",
            _ => "edit",
        },
        "list_directory" | "read_file" | "read_text_file" | "read" | "view" => "read",
        "write_file" | "edit_file" | "edit" => "edit",
        "search" | "search_files" | "grep" | "find" => "search",
        "fetch" => "fetch",
        "delete" | "delete_file" | "remove" => "delete",
        "move" | "move_file" | "rename" => "move",
        _ => "other",
    }
}

/// A short human title: the tool and the argument that says most about the call.
pub fn tool_title(name: &str, args: &Value) -> String {
    let detail = ["command", "path", "query", "url"]
        .iter()
        .filter_map(|k| args.get(*k).and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    let mut detail: String = detail.chars().take(80).collect();
    if detail.is_empty() {
        return name.to_string();
    }
    if detail.len() < args.to_string().len() && detail.chars().count() == 80 {
        detail.push('…');
    }
    format!("{name}: {detail}")
}

/// File locations a call touches (for editors that follow the agent).
fn locations(args: &Value, cwd: &str) -> Vec<String> {
    match args.get("path").and_then(Value::as_str) {
        Some(p) if p.starts_with('/') => vec![p.to_string()],
        Some(p) => vec![format!("{}/{p}", cwd.trim_end_matches('/'))],
        None => Vec::new(),
    }
}

/// The `tool_call` update announcing a call.
pub fn tool_call(id: &str, name: &str, args: &Value, status: &str, cwd: &str) -> ToolCall {
    ToolCall {
        id: id.to_string(),
        title: tool_title(name, args),
        kind: tool_kind(name, args),
        status: status.to_string(),
        raw_input: args.clone(),
        locations: locations(args, cwd),
        content: None,
        message: None,
    }
}

/// A call's new status, nothing else.
pub fn tool_status(id: &str, status: &str) -> ToolCallUpdate {
    ToolCallUpdate { id: id.to_string(), status: status.to_string(), content: None, raw_output: None, message: None }
}

/// A running call's MCP `notifications/progress` as a `tool_call_update` whose content says how
/// far it is (`message`, then `progress/total` or `progress`). The closing update replaces it.
pub fn tool_progress(id: &str, params: &Value) -> Option<SessionUpdate> {
    let progress = params.get("progress").and_then(Value::as_f64)?;
    let count = match params.get("total").and_then(Value::as_f64) {
        Some(total) => format!("{progress}/{total}"),
        None => format!("{progress}"),
    };
    let text = match params.get("message").and_then(Value::as_str).filter(|m| !m.is_empty()) {
        Some(m) => format!("{m} ({count})"),
        None => format!("progress {count}"),
    };
    let mut u = tool_status(id, "in_progress");
    u.content = Some(vec![text_content(&text)]);
    Some(SessionUpdate::ToolCallUpdate(u))
}

/// The `tool_call_update` closing a call, from goose's toolResponse content.
pub fn tool_result(r: &ToolResponse) -> ToolCallUpdate {
    let id = &r.id;
    let (status, blocks, raw) = match &r.result {
        Ok(t) => (
            if t.is_error() { "failed" } else { "completed" },
            t.content().iter().filter_map(content_block).collect(),
            t.to_value(),
        ),
        Err(e) => ("failed", vec![msg::text_item(e)], json!({ "error": e })),
    };
    let content: Vec<Value> = blocks.into_iter().map(|b| json!({"type": "content", "content": b})).collect();
    ToolCallUpdate {
        id: id.clone(),
        status: status.to_string(),
        content: Some(content),
        raw_output: Some(raw),
        message: None,
    }
}

/// An MCP content block as an ACP ContentBlock (the shapes are the same for text, image,
/// audio, resource_link and resource; a kind ACP does not have is left out of `content`, and
/// stays in `rawOutput`).
fn content_block(c: &ContentBlock) -> Option<Value> {
    match c {
        ContentBlock::Other(_) => None,
        c => Some(c.to_value()),
    }
}

/// The closing chunk of an assistant message the model stopped at its output limit (`id`,
/// `created`: the message's), flagged so (`GooseMeta::output_limit`).
pub fn output_limit_note(id: &str, created: i64) -> SessionUpdate {
    SessionUpdate::Chunk(Chunk {
        kind: ChunkKind::Agent,
        text: "\n\n(The model stopped at its output limit: this answer may be cut short.)".into(),
        image: None,
        message: Some(GooseMeta { message_id: id.to_string(), created, tool: None, steer: false, output_limit: true }),
    })
}

fn chunk(kind: ChunkKind, text: &str) -> SessionUpdate {
    SessionUpdate::Chunk(Chunk { kind, text: text.to_string(), image: None, message: None })
}

/// What a goose message streamed by a running turn becomes. `first_status` is the status of
/// a new tool call: `in_progress` when it runs at once, `pending` when it may wait for the
/// person.
pub fn live(message: &Message, first_status: &str, cwd: &str) -> Vec<Live> {
    let mut out = live_updates(message, first_status, cwd);
    for l in &mut out {
        if let Live::Update(u) = l {
            with_message_meta(u, message);
            // The person's text in a running turn was steered in (`agent::steer`): goose marks
            // it so, with the message id the steer was answered.
            if let SessionUpdate::Chunk(Chunk { kind: ChunkKind::User, message: Some(g), .. }) = u {
                g.steer = true;
            }
        }
    }
    out
}

/// goose's message identity on an update, as Goose Desktop reads it: every chunk of one message
/// carries the message's id (ACP's `messageId`, and `_meta.goose.messageId` with its
/// `created` time), so chunks of different messages are never merged; a tool call names its
/// tool and extension (`_meta.goose.toolCall`), since the title is for people.
pub fn with_message_meta(u: &mut SessionUpdate, message: &Message) {
    let Some(id) = &message.id else { return };
    let meta = |tool| {
        Some(GooseMeta { message_id: id.clone(), created: message.created, tool, steer: false, output_limit: false })
    };
    match u {
        SessionUpdate::Chunk(c) => c.message = meta(None),
        SessionUpdate::ToolCall(c) => {
            let name = message
                .content
                .iter()
                .find_map(|m| match m {
                    Content::ToolRequest(r) | Content::FrontendToolRequest(r) if r.id == c.id => {
                        r.call.as_ref().ok().map(|c| c.name.as_str())
                    }
                    _ => None,
                })
                .unwrap_or("");
            let extension = name.split_once("__").map_or("", |(e, _)| e);
            c.message = meta(Some((name.to_string(), extension.to_string())));
        }
        SessionUpdate::ToolCallUpdate(u) => u.message = meta(None),
        _ => {}
    }
}

fn live_updates(message: &Message, first_status: &str, cwd: &str) -> Vec<Live> {
    let mut out = Vec::new();
    for c in &message.content {
        match c {
            Content::Text(t) if message.role == Role::Assistant && !t.text.is_empty() => {
                out.push(Live::Update(chunk(ChunkKind::Agent, &t.text)));
            }
            // A turn streams no user text but what was steered into it.
            Content::Text(t) if message.role == Role::User && !t.text.is_empty() => {
                out.push(Live::Update(chunk(ChunkKind::User, &t.text)));
            }
            Content::ToolRequest(r) => out.push(Live::Update(request(r, first_status, cwd))),
            Content::ToolResponse(r) => out.push(Live::Update(SessionUpdate::ToolCallUpdate(tool_result(r)))),
            Content::ActionRequired(a) => match &a.data {
                Action::ToolConfirmation { id, tool_name, arguments, .. } => out.push(Live::Permission {
                    id: id.clone(),
                    tool: tool_name.clone(),
                    arguments: if arguments.is_null() { json!({}) } else { arguments.clone() },
                }),
                Action::Elicitation { id, message, requested_schema } => out.push(Live::Elicitation {
                    id: id.clone(),
                    message: message.clone(),
                    schema: if requested_schema.is_null() {
                        json!({"type": "object"})
                    } else {
                        requested_schema.clone()
                    },
                }),
                Action::ElicitationResponse { .. } => {}
            },
            _ => {}
        }
    }
    out
}

fn request(r: &ToolRequest, status: &str, cwd: &str) -> SessionUpdate {
    SessionUpdate::ToolCall(match &r.call {
        Ok(call) if call.arguments.is_null() => tool_call(&r.id, &call.name, &json!({}), status, cwd),
        Ok(call) => tool_call(&r.id, &call.name, &call.arguments, status, cwd),
        Err(e) => {
            let mut u = tool_call(&r.id, "invalid tool call", &json!({}), "failed", cwd);
            u.content = Some(vec![json!({ "type": "content", "content": msg::text_item(e) })]);
            u
        }
    })
}

/// A `plan` update when the model wrote its plan as a Markdown task list (`- [ ] step`,
/// `- [x] done`, `- [~] doing`): ACP's agent plan, which editors show as a checklist. `None`
/// when the text has no task list.
pub fn plan(text: &str) -> Option<SessionUpdate> {
    let entries: Vec<PlanEntry> = text
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix("- [").or_else(|| l.strip_prefix("* ["))?;
            let (mark, content) = rest.split_at_checked(1)?;
            let content = content.strip_prefix("] ")?.trim();
            let status = match mark {
                " " => "pending",
                "x" | "X" => "completed",
                "~" | "-" => "in_progress",
                _ => return None,
            };
            (!content.is_empty()).then(|| PlanEntry { content: content.to_string(), status })
        })
        .collect();
    (!entries.is_empty()).then_some(SessionUpdate::Plan(entries))
}

/// goose's `session_info_update` naming the turn's run (`_meta.goose.activeRunId`), which
/// Desktop steers into; `None` when the turn has ended.
pub fn active_run(run: Option<&str>) -> SessionUpdate {
    SessionUpdate::ActiveRun(run.map(str::to_string))
}

/// A stored conversation replayed for `session/load`: user and agent text as chunks, each
/// tool call announced, then closed with its result.
pub fn replay(conversation: &[Message], cwd: &str) -> Vec<SessionUpdate> {
    let mut out = Vec::new();
    for m in conversation.iter().filter(|m| m.metadata.user_visible) {
        let first = out.len();
        for c in &m.content {
            match c {
                Content::Text(t) => {
                    let kind = if m.role == Role::Assistant { ChunkKind::Agent } else { ChunkKind::User };
                    out.push(chunk(kind, &t.text));
                }
                // The person's image, as it was sent.
                Content::Image(i) if m.role == Role::User => out.push(SessionUpdate::Chunk(Chunk {
                    kind: ChunkKind::User,
                    text: String::new(),
                    image: Some((i.mime_type.clone(), i.data.clone())),
                    message: None,
                })),
                Content::ToolRequest(r) | Content::FrontendToolRequest(r) => out.push(request(r, "pending", cwd)),
                Content::ToolResponse(r) => out.push(SessionUpdate::ToolCallUpdate(tool_result(r))),
                _ => {}
            }
        }
        for u in &mut out[first..] {
            with_message_meta(u, m);
        }
    }
    out
}

/// The image types a prompt may carry (what OpenAI and Anthropic read).
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
/// The most bytes of one image's base64 data.
pub const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// The person's content refused when it holds an image and `images` says the session may not
/// send one (`agent::usage::images`), naming the block and the reason — for a prompt and a
/// steered message alike.
pub fn refuse_images(content: &[Content], images: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    match content.iter().position(|c| matches!(c, Content::Image(_))) {
        Some(i) => images().map_err(|why| format!("prompt[{i}]: image content is refused: {why}")),
        None => Ok(()),
    }
}

/// The goose MessageContent of an ACP prompt. Text and resource links are the baseline;
/// embedded resources (`embeddedContext`) come in as text naming their URI; images (PNG, JPEG,
/// GIF, WebP, base64; whether the session may send them is `refuse_images`'). Audio is refused:
/// gosling advertises none.
pub fn prompt_content(prompt: &[Value]) -> Result<Vec<Content>, String> {
    let mut out = Vec::new();
    for (i, b) in prompt.iter().enumerate() {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => out.push(Content::text(b.get("text").and_then(Value::as_str).unwrap_or(""))),
            Some("resource_link") => {
                let uri = b.get("uri").and_then(Value::as_str).unwrap_or("");
                let name = b.get("name").and_then(Value::as_str).unwrap_or(uri);
                out.push(Content::text(format!("[{name}]({uri})")));
            }
            Some("resource") => {
                let r = b.get("resource").cloned().unwrap_or(Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or("");
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => out.push(Content::text(format!("Content of {uri}:\n```\n{t}\n```"))),
                    None => {
                        return Err(format!(
                            "prompt[{i}]: the embedded resource {uri:?} has no text; gosling takes text resources only"
                        ))
                    }
                }
            }
            Some("image") => out.push(image(i, b)?),
            Some("audio") => {
                return Err(format!(
                    "prompt[{i}]: audio content is not supported (promptCapabilities.audio is false); send text"
                ))
            }
            other => {
                return Err(format!(
                    "prompt[{i}]: unknown content block type {other:?}; use text, resource_link or resource"
                ))
            }
        }
    }
    if out.is_empty() {
        return Err("prompt is empty; send at least one text block".into());
    }
    Ok(out)
}

/// An ACP image block as goose's image content: a known type, base64 data within the bound.
fn image(i: usize, b: &Value) -> Result<Content, String> {
    let mime = b.get("mimeType").and_then(Value::as_str).unwrap_or("");
    if !IMAGE_TYPES.contains(&mime) {
        return Err(format!("prompt[{i}]: image type {mime:?} is not taken; send one of {}", IMAGE_TYPES.join(", ")));
    }
    let data = b.get("data").and_then(Value::as_str).unwrap_or("");
    let base64 = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=');
    if data.is_empty() || data.len() > MAX_IMAGE_BYTES || !data.bytes().all(base64) {
        return Err(format!("prompt[{i}]: an image's `data` must be base64 of at most {} MiB", MAX_IMAGE_BYTES >> 20));
    }
    Ok(Content::Image(gosling_store::message::Image {
        data: data.to_string(),
        mime_type: mime.to_string(),
        extra: Default::default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gosling_wire::mcp_types::CallToolResult;

    #[test]
    fn kinds_and_titles() {
        assert_eq!(tool_kind("developer__shell", &json!({"command": "ls"})), "execute");
        assert_eq!(tool_kind("developer__text_editor", &json!({"command": "view"})), "read");
        assert_eq!(tool_kind("developer__text_editor", &json!({"command": "write"})), "edit");
        assert_eq!(tool_kind("everything__echo", &json!({})), "other");
        assert_eq!(tool_title("developer__shell", &json!({"command": "ls -l"})), "developer__shell: ls -l");
        assert_eq!(tool_title("x__y", &json!({"n": 1})), "x__y");
    }

    #[test]
    fn live_messages_become_updates() {
        let m = Message::new(
            "m1",
            Role::Assistant,
            vec![Content::text("hi"), msg::tool_request("t1", "developer__shell", &Ok(json!({"command": "ls"})))],
        );
        let l = live(&m, "in_progress", "/p");
        assert_eq!(l.len(), 2);
        let Live::Update(u) = &l[1] else { panic!("{l:?}") };
        let u = u.to_value();
        assert_eq!(
            (u["sessionUpdate"].as_str(), u["status"].as_str(), u["kind"].as_str()),
            (Some("tool_call"), Some("in_progress"), Some("execute"))
        );
        let r = Message::new("m2", Role::User, vec![msg::tool_response("t1", Ok(CallToolResult::text("a", true)))]);
        let Live::Update(u) = &live(&r, "pending", "/p")[0] else { panic!() };
        let u = u.to_value();
        assert_eq!(u["status"], "failed");
        assert_eq!(u["content"][0]["content"]["text"], "a");
        let c = Message::new("m3", Role::Assistant, vec![msg::tool_confirmation("t2", "x__y", &json!({"a": 1}))]);
        assert_eq!(
            live(&c, "pending", "/p"),
            vec![Live::Permission { id: "t2".into(), tool: "x__y".into(), arguments: json!({"a": 1}) }]
        );
    }

    #[test]
    fn task_lists_are_plans() {
        let p = plan("Plan:\n- [x] read the code\n  - [~] fix it\n- [ ] test\n- [?] no\n- [ ]\n").unwrap().to_value();
        let got: Vec<_> = p["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["content"].as_str().unwrap(), e["status"].as_str().unwrap()))
            .collect();
        assert_eq!(got, [("read the code", "completed"), ("fix it", "in_progress"), ("test", "pending")]);
        assert_eq!(plan("no list here\n- plain item"), None);
    }

    #[test]
    fn usage_shapes() {
        use crate::protocol::{Prompted, StopReason};
        use gosling_agent::usage::TurnUsage;
        let goose =
            SessionUpdate::Usage { used: 110, context_limit: 128_000, accumulated_input: 300, accumulated_output: 30 };
        assert_eq!(
            goose.to_value(),
            json!({"sessionUpdate": "usage_update", "used": 110, "contextLimit": 128_000,
                   "accumulatedInputTokens": 300, "accumulatedOutputTokens": 30})
        );
        let acp = SessionUpdate::ContextUsage { used: 110, size: 128_000 };
        assert_eq!(acp.to_value(), json!({"sessionUpdate": "usage_update", "used": 110, "size": 128_000}));
        assert_eq!(
            Prompted { stop: StopReason::EndTurn, usage: TurnUsage { input: 300, output: 30 } }.to_value(),
            json!({"stopReason": "end_turn", "usage": {"totalTokens": 330, "inputTokens": 300, "outputTokens": 30}})
        );
        assert_eq!(
            active_run(Some("r1")).to_value(),
            json!({"sessionUpdate": "session_info_update", "_meta": {"goose": {"activeRunId": "r1"}}})
        );
    }

    #[test]
    fn replay_and_prompts() {
        let conv = vec![
            Message::new("a", Role::User, vec![Content::text("q")]),
            Message::new(
                "b",
                Role::Assistant,
                vec![Content::text("r"), msg::tool_request("t", "x__y", &Ok(json!({"path": "f"})))],
            ),
            Message::new("c", Role::User, vec![msg::tool_response("t", Err("boom".into()))]),
        ];
        let u: Vec<Value> = replay(&conv, "/w").iter().map(SessionUpdate::to_value).collect();
        let kinds: Vec<_> = u.iter().map(|u| u["sessionUpdate"].as_str().unwrap_or("")).collect();
        assert_eq!(kinds, ["user_message_chunk", "agent_message_chunk", "tool_call", "tool_call_update"]);
        assert_eq!(u[2]["locations"][0]["path"], "/w/f");
        assert_eq!(u[3]["status"], "failed");
        let p = prompt_content(&[
            json!({"type": "text", "text": "a"}),
            json!({"type": "resource", "resource": {"uri": "file:///x", "text": "body"}}),
        ])
        .unwrap();
        assert!(matches!(&p[1], Content::Text(t) if t.text.contains("body")), "{p:?}");
        let png = json!({"type": "image", "data": "iVBORw0=", "mimeType": "image/png"});
        let taken = prompt_content(std::slice::from_ref(&png)).unwrap();
        assert!(matches!(&taken[0], Content::Image(i) if i.mime_type == "image/png" && i.data == "iVBORw0="));
        assert_eq!(refuse_images(&taken, || Ok(())), Ok(()));
        let refused = refuse_images(&taken, || Err("ollama is not sent images".into())).unwrap_err();
        assert!(refused.contains("prompt[0]") && refused.contains("ollama is not sent images"), "{refused}");
        assert_eq!(refuse_images(&p, || Err("never asked".into())), Ok(()), "no image: nothing to refuse");
        for (data, mime, says) in
            [("", "image/png", "base64"), ("a b", "image/png", "base64"), ("AAAA", "image/svg+xml", "image/png")]
        {
            let e = prompt_content(&[json!({"type": "image", "data": data, "mimeType": mime})]).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        assert!(prompt_content(&[json!({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"})])
            .unwrap_err()
            .contains("promptCapabilities.audio"));
        assert!(prompt_content(&[]).unwrap_err().contains("empty"));
    }
}

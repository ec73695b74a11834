//! goose's JSON shapes over ACP, shared by the standard methods (`session`) and goose's own
//! (`goose`): a session's listing entry with the `_meta` Desktop reads, and goose's extension
//! form (`GooseExtension`) to and from an extension config. Pure: no I/O.

use gosling_agent::prompts::Prompt;
use gosling_extensions::config::{ExtensionConfig, Kind};
use gosling_store::sessions::{Listed, Session};
use serde_json::{json, Map, Value};

/// ACP's SessionInfo with the `_meta` keys goose's Desktop reads (goose-serve.md §4.4).
pub fn session_info(s: &Session) -> Value {
    let model = s.model_config.as_ref().and_then(|m| m.get("model_name")).and_then(Value::as_str);
    info(Info {
        id: &s.id,
        cwd: &s.working_dir,
        title: &s.name,
        updated_at: &s.updated_at,
        created_at: &s.created_at,
        message_count: s.message_count,
        provider: s.provider_name.as_deref(),
        model,
        session_type: &s.session_type,
        user_set_name: s.user_set_name,
        has_recipe: s.recipe.is_some(),
    })
}

/// `session_info` of a session as the store's index lists it (`session/list`: nothing parsed).
pub fn listed_info(s: &Listed<'_>) -> Value {
    info(Info {
        id: s.id(),
        cwd: s.working_dir(),
        title: s.name(),
        updated_at: s.updated_at(),
        created_at: s.created_at(),
        message_count: s.message_count(),
        provider: s.provider(),
        model: s.model(),
        session_type: s.session_type(),
        user_set_name: s.user_set_name(),
        has_recipe: s.has_recipe(),
    })
}

/// What a SessionInfo says, from a session or its listing.
struct Info<'a> {
    id: &'a str,
    cwd: &'a str,
    title: &'a str,
    updated_at: &'a str,
    created_at: &'a str,
    message_count: u64,
    provider: Option<&'a str>,
    model: Option<&'a str>,
    session_type: &'a str,
    user_set_name: bool,
    has_recipe: bool,
}

fn info(s: Info<'_>) -> Value {
    json!({
        "sessionId": s.id,
        "cwd": s.cwd,
        "title": s.title,
        "updatedAt": s.updated_at,
        "_meta": {
            "messageCount": s.message_count,
            "createdAt": s.created_at,
            "lastMessageAt": s.updated_at,
            "archivedAt": null,
            "projectId": null,
            "providerId": s.provider,
            "modelId": s.model,
            "sessionType": s.session_type,
            "userSetName": s.user_set_name,
            "hasRecipe": s.has_recipe,
        },
    })
}

/// goose's GooseExtension for a config; `None` for the kinds Desktop cannot show (sse,
/// frontend, inline_python).
pub fn to_goose_extension(c: &ExtensionConfig) -> Option<Value> {
    let pairs = |m: &std::collections::BTreeMap<String, String>| -> Vec<Value> {
        m.iter().map(|(k, v)| json!({ "name": k, "value": v })).collect()
    };
    let mut v = match &c.kind {
        Kind::Builtin { display_name } => {
            json!({ "type": "builtin", "name": c.name, "description": c.description, "display_name": display_name, "timeout": c.timeout, "bundled": c.bundled })
        }
        Kind::Platform { display_name } => {
            json!({ "type": "platform", "name": c.name, "description": c.description, "display_name": display_name, "bundled": c.bundled })
        }
        Kind::Stdio { cmd, args, envs, env_keys } => json!({
            "type": "mcp", "server": { "name": c.name, "command": cmd, "args": args, "env": pairs(envs) },
            "envKeys": env_keys, "description": c.description, "timeout": c.timeout, "bundled": c.bundled,
        }),
        Kind::StreamableHttp { uri, env_keys, headers, .. } => json!({
            "type": "mcp", "server": { "type": "http", "name": c.name, "url": uri, "headers": pairs(headers) },
            "envKeys": env_keys, "description": c.description, "timeout": c.timeout, "bundled": c.bundled,
        }),
        Kind::Sse { .. } | Kind::Frontend { .. } | Kind::InlinePython { .. } => return None,
    };
    if !c.available_tools.is_empty() {
        v["available_tools"] = json!(c.available_tools);
    }
    // 1.5x's sign-in settings of an http server: gosling's `oauth` object.
    if let (Kind::StreamableHttp { .. }, Ok(o)) = (&c.kind, c.oauth()) {
        if let Some(id) = o.client_id {
            v["clientId"] = json!(id);
        }
        if let Some(k) = o.client_secret_key {
            v["clientSecretKey"] = json!(k);
        }
        if !o.scopes.is_empty() {
            v["scopes"] = json!(o.scopes);
        }
    }
    Some(v)
}

/// An entry of `session/extensions/list` that Desktop 1.41–1.45 and 1.5x both accept: 1.45's
/// schema wants a bare GooseExtension, 1.5x's `{extension, extensionKey}`; neither schema
/// forbids other keys (their zod objects drop them), so the entry is the GooseExtension with
/// the two 1.5x keys added. `extensionKey` is the key `session/extensions/remove` takes.
pub fn session_extension_entry(c: &ExtensionConfig) -> Option<Value> {
    let g = to_goose_extension(c)?;
    let mut entry = g.clone();
    entry["extension"] = g;
    entry["extensionKey"] = json!(gosling_extensions::config::runtime_key(c.name()));
    Some(entry)
}

/// A GooseExtension from the client as a goose extension config (checked by `validate`; the
/// caller applies the trust policy).
pub fn from_goose_extension(e: &Value) -> Result<ExtensionConfig, String> {
    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let opt = |k: &str| e.get(k).filter(|v| !v.is_null()).cloned();
    let mut v = match e.get("type").and_then(Value::as_str) {
        Some(t @ ("builtin" | "platform")) => {
            let mut v = json!({ "type": t, "name": s("name"), "description": s("description") });
            if let Some(d) = opt("display_name") {
                v["display_name"] = d;
            }
            v
        }
        Some("mcp") => {
            let server = e.get("server").ok_or("a `mcp` extension needs `server` (an ACP McpServer)")?;
            let name = server.get("name").and_then(Value::as_str).unwrap_or("");
            let pairs = |k: &str| -> Map<String, Value> {
                server
                    .get(k)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|p| Some((p.get("name")?.as_str()?.to_string(), p.get("value")?.clone())))
                    .collect()
            };
            let env_keys = e.get("envKeys").cloned().unwrap_or_else(|| json!([]));
            match server.get("type").and_then(Value::as_str) {
                None | Some("stdio") if sign_in(e, name)?.is_some() => {
                    return Err(format!(
                        "extension {name}: clientId, clientSecretKey and scopes are sign-in settings of an http server; a stdio server signs in to nothing, so leave them out"
                    ))
                }
                None | Some("stdio") => json!({
                    "type": "stdio", "name": name, "description": s("description"),
                    "cmd": server.get("command").and_then(Value::as_str).ok_or(format!("extension {name}: `server.command` is missing"))?,
                    "args": server.get("args").cloned().unwrap_or_else(|| json!([])), "envs": pairs("env"), "env_keys": env_keys,
                }),
                Some("http") => {
                    let mut v = json!({
                        "type": "streamable_http", "name": name, "description": s("description"),
                        "uri": server.get("url").and_then(Value::as_str).ok_or(format!("extension {name}: `server.url` is missing"))?,
                        "headers": pairs("headers"), "env_keys": env_keys,
                    });
                    if let Some(o) = sign_in(e, name)? {
                        v["oauth"] = o;
                    }
                    v
                }
                Some(other) => {
                    return Err(format!(
                    "extension {name}: MCP transport {other:?} is not supported; use stdio or http (Streamable HTTP)"
                ))
                }
            }
        }
        other => return Err(format!("unknown extension type {other:?}; use builtin, platform or mcp")),
    };
    for k in ["timeout", "bundled", "available_tools"] {
        if let Some(x) = opt(k) {
            v[k] = x;
        }
    }
    let c = ExtensionConfig::from_value(v).map_err(|e| e.to_string())?;
    c.validate().map_err(|e| e.to_string())?;
    c.oauth().map_err(|e| e.to_string())?;
    Ok(c)
}

/// Desktop 1.5x's sign-in settings of an `mcp` extension (`clientId`, `clientSecretKey` — the
/// name of a stored secret, not the secret — and `scopes`) as gosling's `oauth` object; `None`
/// when none is set (null, empty strings and an empty list are unset).
fn sign_in(e: &Value, name: &str) -> Result<Option<Value>, String> {
    let mut o = Map::new();
    for (goose, ours) in [("clientId", "client_id"), ("clientSecretKey", "client_secret_key")] {
        match e.get(goose) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s.is_empty() => {}
            Some(Value::String(s)) => {
                o.insert(ours.into(), json!(s));
            }
            Some(_) => return Err(format!("extension {name}: `{goose}` must be a string")),
        }
    }
    match e.get("scopes") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.iter().all(|s| s.as_str().is_some_and(|s| !s.is_empty())) => {
            if !a.is_empty() {
                o.insert("scopes".into(), json!(a));
            }
        }
        Some(_) => return Err(format!("extension {name}: `scopes` must be a list of non-empty strings")),
    }
    Ok((!o.is_empty()).then_some(Value::Object(o)))
}

/// goose's app entry (`apps/list`) for an MCP App an extension offers: its resource, its HTML
/// in `text`, the extension in `mcpServers`, and a window size (gosling's apps name none).
pub fn goose_app(a: &gosling_agent::apps::App) -> Value {
    let r = &a.resource;
    let mut v = json!({
        "uri": r.uri, "name": r.name,
        "mimeType": r.mime_type.as_deref().unwrap_or("text/html;profile=mcp-app"),
        "mcpServers": [a.extension], "width": 800, "height": 600, "resizable": true,
    });
    if let Some(d) = &r.description {
        v["description"] = json!(d);
    }
    if let Some(t) = &a.html {
        v["text"] = json!(t);
    }
    v
}

/// goose's PromptTemplateEntry (`config/prompts/list`): the person's version, when there is
/// one, as `userContent`.
pub fn goose_prompt_entry(p: &Prompt) -> Value {
    let mut v = json!({ "name": p.name, "description": p.description, "defaultContent": p.default_content,
                        "isCustomized": p.customized });
    if p.customized {
        v["userContent"] = json!(p.content);
    }
    v
}

/// goose's GetPromptResponse (`config/prompts/get`): what is sent, and the default.
pub fn goose_prompt(p: &Prompt) -> Value {
    json!({ "name": p.name, "content": p.content, "defaultContent": p.default_content, "isCustomized": p.customized })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(extra: Value) -> Value {
        let mut e = json!({"type":"mcp","server":{"type":"http","name":"remote","url":"https://mcp.example/mcp","headers":[]},"envKeys":[]});
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        e
    }

    #[test]
    fn sign_in_settings_of_an_http_server_round_trip() {
        let c = from_goose_extension(&http(
            json!({"clientId":"abc","clientSecretKey":"REMOTE_SECRET","scopes":["read","write"]}),
        ))
        .unwrap();
        let o = c.oauth().unwrap();
        assert_eq!((o.client_id.as_deref(), o.client_secret_key.as_deref()), (Some("abc"), Some("REMOTE_SECRET")));
        let g = to_goose_extension(&c).unwrap();
        assert_eq!(
            (&g["clientId"], &g["clientSecretKey"], &g["scopes"]),
            (&json!("abc"), &json!("REMOTE_SECRET"), &json!(["read", "write"]))
        );
        // Unset (null, empty) is no sign-in setting at all, and none is shown.
        let c = from_goose_extension(&http(json!({"clientId":null,"clientSecretKey":"","scopes":[]}))).unwrap();
        assert_eq!(c.oauth().unwrap(), Default::default());
        assert!(to_goose_extension(&c).unwrap().get("scopes").is_none());
    }

    #[test]
    fn bad_sign_in_settings_are_refused() {
        for (extra, says) in [
            (json!({"clientId": 5}), "`clientId` must be a string"),
            (json!({"scopes": "read"}), "`scopes` must be a list"),
            (json!({"scopes": ["", "x"]}), "non-empty"),
        ] {
            let e = from_goose_extension(&http(extra)).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        let stdio = json!({"type":"mcp","server":{"name":"local","command":"node","args":[],"env":[]},"envKeys":[],"clientId":"abc"});
        assert!(from_goose_extension(&stdio).unwrap_err().contains("http server"));
        let plain = json!({"type":"mcp","server":{"name":"local","command":"node","args":[],"env":[]},"envKeys":[],"scopes":[]});
        assert!(from_goose_extension(&plain).is_ok());
    }
}
